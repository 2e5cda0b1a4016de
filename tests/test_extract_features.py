"""Specification of capjax.tools.extract_features: a glob of images in, grids/pooled/logits per readable image out.

Weights are random (saved the way convert_weights saves them); images are small synthetic files.
"""

from __future__ import annotations

import io
import pathlib

import numpy as np
import PIL.Image
import pytest

from capjax.models import inception_resnet_v2 as irv2
from capjax.tools import extract_features as ef
from helpers import IRV2_NUM_CLASSES
from image_bytes import black_bilevel_png

IMAGE_SIZE = 139  # 3×3 grid; fast on 2 CPU cores (299 gives 8×8, checked in test_inception_resnet_v2.py)
# With IMAGE_SIZE and batch size 2, the compiled encoder is shared with the Keras parity test.
NUM_CLASSES = IRV2_NUM_CLASSES


@pytest.fixture(scope="module")
def weights_dir(irv2_weights: pathlib.Path) -> pathlib.Path:
  return irv2_weights


def _encoded(size: tuple[int, int], mode: str, image_format: str, seed: int) -> bytes:
  pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], len(mode)), dtype=np.uint8)
  buffer = io.BytesIO()
  PIL.Image.fromarray(pixels.squeeze(-1) if mode == "L" else pixels, mode).save(buffer, image_format)
  return buffer.getvalue()


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
  folder = tmp_path_factory.mktemp("images")
  (folder / "a.jpg").write_bytes(_encoded((200, 150), "RGB", "JPEG", 0))
  (folder / "b.png").write_bytes(_encoded((90, 120), "RGBA", "PNG", 1))
  (folder / "c.jpg").write_bytes(b"this is not an image")
  (folder / "d.jpg").write_bytes(_encoded((300, 300), "RGB", "JPEG", 2)[:2000])  # truncated download
  (folder / "e.gif").write_bytes(_encoded((64, 64), "L", "GIF", 3))
  return folder


@pytest.fixture(scope="module")
def variables(weights_dir: pathlib.Path) -> dict:
  return irv2.load_converted(weights_dir)


@pytest.fixture(scope="module")
def extracted(weights_dir, image_dir, tmp_path_factory) -> dict[str, np.ndarray]:
  output = tmp_path_factory.mktemp("out") / "features.npz"
  ef.main(["extract_features", f"--weights={weights_dir}", f"--images={image_dir}/*", f"--output={output}",
           f"--image_size={IMAGE_SIZE}", "--batch_size=2"])
  with np.load(output, allow_pickle=False) as npz:
    return dict(npz)


def test_readable_images_get_grid_pooled_and_logits_rows_in_name_order(extracted, image_dir):
  assert list(extracted["names"]) == [str(image_dir / n) for n in ("a.jpg", "b.png", "e.gif")]
  assert extracted["grid"].shape == (3, 3, 3, irv2.GRID_FEATURES)
  assert extracted["pooled"].shape == (3, irv2.GRID_FEATURES)
  assert extracted["logits"].shape == (3, NUM_CLASSES)
  assert all(a.dtype == np.float32 for a in (extracted["grid"], extracted["pooled"], extracted["logits"]))


def test_corrupt_and_truncated_files_are_recorded_as_skipped_with_reasons(extracted, image_dir):
  assert list(extracted["skipped"]) == [str(image_dir / "c.jpg"), str(image_dir / "d.jpg")]
  assert extracted["skip_reasons"][0].startswith("undecodable: ")
  assert extracted["skip_reasons"][1].startswith("truncated: ")


def test_pooled_is_the_grid_mean_and_logits_are_the_head_of_pooled(extracted, variables):
  np.testing.assert_allclose(extracted["pooled"], extracted["grid"].mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)
  head = variables["params"][irv2.HEAD_NAME]
  np.testing.assert_allclose(extracted["logits"], extracted["pooled"] @ head["kernel"] + head["bias"],
                             rtol=1e-4, atol=1e-4)


def test_rows_do_not_depend_on_batch_neighbours_or_padding(extracted, variables, image_dir):
  # e.gif was the padded last batch (next to a zero image); here it shares a full batch with a.jpg.
  model = irv2.InceptionResNetV2(num_classes=NUM_CLASSES)
  again = ef.extract([str(image_dir / "e.gif"), str(image_dir / "a.jpg")], model, variables,
                     IMAGE_SIZE, batch_size=2)
  np.testing.assert_allclose(again.grid[0], extracted["grid"][2], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(again.grid[1], extracted["grid"][0], rtol=1e-5, atol=1e-6)


def test_load_image_gives_square_rgb_uint8_for_any_mode(image_dir):
  for name in ("a.jpg", "b.png", "e.gif"):
    image = ef.load_image(str(image_dir / name), IMAGE_SIZE)
    assert (image.shape, image.dtype) == ((IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)


def test_images_over_the_decompression_bomb_limit_are_skipped_without_decoding(tmp_path):
  bomb = tmp_path / "bomb.png"
  bomb.write_bytes(black_bilevel_png(30_000, 30_000))  # 900M pixels in 110 KB, at the production pixel cap
  allocated = PIL.Image.core.get_stats()["new_count"]  # images Pillow has allocated pixel memory for
  decoded = ef.decode(str(bomb), IMAGE_SIZE)
  assert decoded.pixels is None and decoded.reason.startswith("too_many_pixels: ")
  assert PIL.Image.core.get_stats()["new_count"] == allocated


def test_no_matching_images_is_a_usage_error(weights_dir, tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    ef.main(["extract_features", f"--weights={weights_dir}", f"--images={tmp_path}/*.jpg",
             f"--output={tmp_path / 'f.npz'}"])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == (f"error: no files match --images='{tmp_path}/*.jpg' — give a glob of image "
                                     "files, e.g. 'photos/**/*.jpg'\n")

def test_the_commands_sizes_are_the_networks():
  # the command names them without importing the network (jax), so that --help answers fast
  assert (ef.IMAGE_SIZE, ef.MIN_IMAGE_SIZE) == (irv2.IMAGE_SIZE, irv2.MIN_IMAGE_SIZE)
