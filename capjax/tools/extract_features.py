"""Inception-ResNet-v2 features for a folder of images: 8×8×1536 grids, pooled vectors and logits in one .npz.

usage: python -m capjax.tools.extract_features --weights=DIR --images='photos/*.jpg' --output=features.npz
           [--batch_size=16] [--image_size=299]
Unreadable files are skipped and listed in the .npz (`skipped`, `skip_reasons`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import glob
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tqdm
from absl import flags, logging

from capjax import cli, files
from capjax.data import preprocess
from capjax.image import io as image_io

if TYPE_CHECKING:
  import jax

  from capjax.models import inception_resnet_v2 as irv2

# jax and the network are imported where they are used: --help answers without them (1.5 s). The two sizes are
# irv2's (tests/test_extract_features.py checks it), for the flags.
IMAGE_SIZE = 299      # irv2.IMAGE_SIZE
MIN_IMAGE_SIZE = 75   # irv2.MIN_IMAGE_SIZE

DEFAULT_BATCH_SIZE = 16
DECODE_WORKERS = 8


@dataclasses.dataclass
class Features:
  """Rows follow `names`; `skipped[i]` could not be read for `skip_reasons[i]`."""
  names: list[str]
  grid: np.ndarray  # (N, h, w, 1536) float32
  pooled: np.ndarray  # (N, 1536) float32
  logits: np.ndarray | None  # (N, num_classes) float32, None without a head
  skipped: list[str]
  skip_reasons: list[str]

  def arrays(self) -> dict[str, np.ndarray]:
    """What the .npz holds (string arrays are unicode, so `np.load` needs no pickle)."""
    arrays = {"names": np.array(self.names, dtype=str), "grid": self.grid, "pooled": self.pooled,
              "skipped": np.array(self.skipped, dtype=str), "skip_reasons": np.array(self.skip_reasons, dtype=str)}
    if self.logits is not None:
      arrays["logits"] = self.logits
    return arrays


def load_image(path: str, size: int = IMAGE_SIZE) -> np.ndarray:
  """RGB uint8 (size, size, 3), upright, resized with PIL's bilinear filter as Keras's `load_img(..., "bilinear")`.
  Raises capjax.image.io.ImageError (a ValueError) for files that are not readable images."""
  return preprocess.resize(image_io.load_rgb(path), size)


@dataclasses.dataclass(frozen=True)
class Decoded:
  """One input file: pixels when readable, else the reason it is skipped."""
  path: str
  pixels: np.ndarray | None
  reason: str | None = None


def decode(path: str, size: int) -> Decoded:
  try:
    return Decoded(path, load_image(path, size))
  except image_io.ImageError as error:  # its message starts with the reason: undecodable, truncated, ...
    return Decoded(path, None, str(error))


def read_images(paths: Sequence[str], size: int, workers: int = DECODE_WORKERS) -> Iterator[Decoded]:
  """Decodes in `workers` threads (PIL releases the GIL), in order, holding at most 4·workers images ahead."""
  chunk = 4 * workers
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    for start in range(0, len(paths), chunk):
      yield from pool.map(functools.partial(decode, size=size), paths[start:start + chunk])


def batches(images: Iterable[Decoded], batch_size: int,
            on_skip: Callable[[Decoded], None]) -> Iterator[tuple[list[str], np.ndarray]]:
  """Groups readable images into (names, uint8 (batch_size, H, W, 3)); the last batch is zero-padded."""
  readable: list[Decoded] = []
  for image in images:
    if image.pixels is None:
      on_skip(image)
      continue
    readable.append(image)
    if len(readable) == batch_size:
      yield [i.path for i in readable], np.stack([i.pixels for i in readable])
      readable = []
  if readable:
    padding = [np.zeros_like(readable[0].pixels)] * (batch_size - len(readable))
    yield [i.path for i in readable], np.stack([i.pixels for i in readable] + padding)


@functools.cache
def _encode():
  import jax  # noqa: PLC0415

  from capjax.models import inception_resnet_v2 as irv2  # noqa: PLC0415
  return jax.jit(lambda model, variables, images: model.apply(variables, irv2.preprocess(images)),
                 static_argnums=0)


def encode(model: irv2.InceptionResNetV2, variables: Any, images: jax.Array) -> dict[str, jax.Array]:
  """uint8 images → model outputs, batch norm in inference mode; compiled once per model and batch shape."""
  return _encode()(model, variables, images)


def extract(paths: Sequence[str], model: irv2.InceptionResNetV2, variables: Any,
            image_size: int = IMAGE_SIZE, batch_size: int = DEFAULT_BATCH_SIZE,
            progress: bool = False) -> Features:
  """Runs `model` over `paths`; unreadable files are recorded in `skipped`, never fatal.

  Batch i+1 is decoded while the device still computes batch i (jax dispatch is asynchronous).
  """
  import jax  # noqa: PLC0415
  variables = jax.device_put(variables)
  names: list[str] = []
  outputs: dict[str, list[np.ndarray]] = {"grid": [], "pooled": [], "logits": []}
  skipped: list[Decoded] = []
  bar = tqdm.tqdm(total=len(paths), unit="img", disable=not progress, file=sys.stderr)

  def on_skip(image: Decoded) -> None:
    skipped.append(image)
    (bar.write if progress else logging.warning)(f"skipped {image.path}: {image.reason}")
    bar.update(1)

  def collect(batch_names: list[str], result: dict[str, jax.Array]) -> None:
    for key, value in jax.device_get(result).items():
      outputs[key].append(np.asarray(value[:len(batch_names)], np.float32))
    names.extend(batch_names)
    bar.update(len(batch_names))

  pending = None
  for batch_names, pixels in batches(read_images(paths, image_size), batch_size, on_skip):
    result = encode(model, variables, pixels)
    if pending:
      collect(*pending)
    pending = (batch_names, result)
  if pending:
    collect(*pending)
  bar.close()
  no_images = jax.ShapeDtypeStruct((0, image_size, image_size, 3), np.uint8)
  shapes = jax.eval_shape(functools.partial(encode, model), variables, no_images)

  def stacked(key: str) -> np.ndarray:
    return np.concatenate(outputs[key]) if outputs[key] else np.zeros(shapes[key].shape, np.float32)
  return Features(names, stacked("grid"), stacked("pooled"), stacked("logits") if "logits" in shapes else None,
                  [i.path for i in skipped], [i.reason or "unreadable" for i in skipped])


FLAGS = flags.FlagValues()
_WEIGHTS = flags.DEFINE_string("weights", None, "directory written by capjax.tools.convert_weights",
                               flag_values=FLAGS, required=True)
_IMAGES = flags.DEFINE_string("images", None, "glob of image files, e.g. 'photos/**/*.jpg'", flag_values=FLAGS,
                              required=True)
_OUTPUT = flags.DEFINE_string("output", None, "the .npz to write", flag_values=FLAGS, required=True)
_BATCH_SIZE = flags.DEFINE_integer("batch_size", DEFAULT_BATCH_SIZE, "images per batch", lower_bound=1,
                                   flag_values=FLAGS)
_IMAGE_SIZE = flags.DEFINE_integer("image_size", IMAGE_SIZE, "square input size (299 gives the 8×8 grid)",
                                   lower_bound=MIN_IMAGE_SIZE, flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  from capjax.models import inception_resnet_v2 as irv2  # noqa: PLC0415
  if not _OUTPUT.value.endswith(".npz"):
    cli.fail(f"--output={_OUTPUT.value} is not a .npz file name — e.g. --output=features.npz")
  paths = sorted(glob.glob(_IMAGES.value, recursive=True))
  if not paths:
    cli.fail(f"no files match --images={_IMAGES.value!r} — give a glob of image files, e.g. 'photos/**/*.jpg'")
  files.refuse_special(paths, "--images", "image files")  # a FIFO would hang the read
  files.output_file(_OUTPUT.value, inputs={"--images": paths, "--weights": _WEIGHTS.value}, example="features.npz")
  try:
    metadata = irv2.read_metadata(_WEIGHTS.value)
    variables = irv2.load_converted(_WEIGHTS.value)
  except (FileNotFoundError, irv2.WeightsError) as error:
    cli.fail(str(error))
  if irv2.is_random(metadata):
    print(irv2.random_warning(_WEIGHTS.value), file=sys.stderr)
  model = irv2.InceptionResNetV2(num_classes=metadata["num_classes"])
  start = time.perf_counter()
  features = extract(paths, model, variables, _IMAGE_SIZE.value, _BATCH_SIZE.value, progress=True)
  seconds = time.perf_counter() - start
  with files.writing(_OUTPUT.value, "wb") as f:  # renamed when whole: a killed run leaves no .npz
    np.savez(f, **features.arrays())
  print(f"{len(features.names)} images in {seconds:.1f}s ({len(features.names) / max(seconds, 1e-9):.1f} images/s, "
        f"compilation included); {len(features.skipped)} skipped; wrote {_OUTPUT.value}", file=sys.stderr)


if __name__ == "__main__":
  cli.run(main)
