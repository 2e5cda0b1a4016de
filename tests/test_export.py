"""`python -m capjax.export` on the session's trained `:shapes,debug` run (tests/trained_models.py): the SavedModel
captions as `--mode=caption` does in a process that imports TensorFlow alone, for greedy and for beam search, at any
batch size; `load_jax` does the same with JAX alone, since the SavedModel decodes and resizes pictures to capjax's
pixels exactly; bad input is one line and writes nothing. Each search is exported once per module."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from capjax import config_util, inference
from capjax.data import preprocess, sources
from capjax.export import tf_graph
from capjax.image import io as image_io
import helpers
from trained_models import REPO, main_env

NUM_IMAGES = 5

def export_command(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "capjax.export", *args], cwd=REPO, env=main_env(),
                        capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def run(shapes_debug_run, tmp_path_factory):
  """(config, workdir, image paths): the trained run, and test-split pictures as PNG files, one also as a larger
  JPEG that the export must resize."""
  data_dir, workdir, _ = shapes_debug_run
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  source = sources.data_source(config.dataset, "test")
  folder = tmp_path_factory.mktemp("pictures")
  paths = []
  for i in range(NUM_IMAGES - 1):
    image = np.asarray(Image.open(io.BytesIO(source[i]["image"])).convert("RGB")) if isinstance(
        source[i]["image"], bytes) else np.asarray(source[i]["image"])
    paths.append(folder / f"{i}.png")
    Image.fromarray(image).save(paths[-1])
  Image.fromarray(image).resize((96, 96), Image.NEAREST).save(folder / "big.jpg", quality=95)
  paths.append(folder / "big.jpg")
  return config, workdir, sorted(paths)


@pytest.fixture(scope="module")
def greedy_export(run, tmp_path_factory):
  """The command's export of the run (its config.json: greedy)."""
  _, workdir, _ = run
  output = tmp_path_factory.mktemp("greedy") / "export"
  proc = export_command(f"--workdir={workdir}", f"--output={output}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return output


@pytest.fixture(scope="module")
def beam_export(run, tmp_path_factory):
  """(config, export) of the run exported with beam search of 3 (a --config file of the user's)."""
  config, workdir, _ = run
  folder = tmp_path_factory.mktemp("beam")
  helpers.beam_config(folder, config.dataset.data_dir)
  output = folder / "export"
  proc = export_command(f"--workdir={workdir}", f"--output={output}", f"--config={folder / 'beam.py'}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return config_util.load(f"{folder / 'beam.py'}"), output


def reference(config, workdir, paths) -> list[str]:
  """`--mode=caption`'s captions of `paths`, in their order."""
  captions = inference.caption_files(config, str(workdir), str(paths[0].parent / "*"))["captions"]
  return [captions[str(p)] for p in paths]


def test_the_saved_model_captions_as_mode_caption_with_tensorflow_alone(run, greedy_export):
  config, workdir, paths = run
  got = helpers.tf_only(greedy_export / "saved_model", paths)
  want = reference(config, workdir, paths)
  assert [row[0] for row in got["captions"]] == want
  assert len(set(want)) > 1  # the pictures get different captions: the comparison is not of constants
  assert got["dtypes"] == ["string", "float32"] and np.shape(got["scores"]) == (NUM_IMAGES, 1)
  assert np.all(np.asarray(got["scores"]) <= 0.0)  # greedy's score is the caption's log-probability
  assert got["first_alone"] == got["captions"][0]  # any batch size


def test_beam_export_gives_k_captions_best_first_the_first_as_mode_caption(run, beam_export):
  _, workdir, paths = run
  config, export = beam_export
  got = helpers.tf_only(export / "saved_model", paths)
  assert [row[0] for row in got["captions"]] == reference(config, workdir, paths)
  scores = np.asarray(got["scores"])
  assert scores.shape == (NUM_IMAGES, 3) and np.all(np.diff(scores, axis=1) <= 0)
  assert got["first_alone"] == got["captions"][0]
  assert json.loads((export / "export.json").read_text())["decode"] == {"method": "beam", "k": 3, "alpha": 0.6}


def test_load_jax_serves_the_same_captions_and_scores(run, beam_export):
  _, _, paths = run
  _, export = beam_export
  from capjax import export as export_lib
  caption = export_lib.load_jax(export)
  captions, scores = caption([p.read_bytes() for p in paths])
  tf_result = helpers.tf_only(export / "saved_model", paths)
  assert captions == tf_result["captions"]  # the same pixels on both sides, the JPEG resized too
  np.testing.assert_allclose(scores, np.asarray(tf_result["scores"]), rtol=0, atol=1e-5)  # float noise alone
  assert caption(paths[:1])[0] == captions[:1]  # paths too, and any batch size


@pytest.mark.parametrize("shape", [(64, 64), (200, 300), (139, 139), (97, 1234), (5000, 20), (33, 33, 1)])
@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_the_saved_models_pixels_are_capjax_loaders_and_resizes_exactly(shape, fmt):
  """What `--mode=caption` and `load_jax` decode with (Pillow): JPEGs with the accurate IDCT, bilinear resizing in
  Pillow's fixed point, down and up, across and down (down first when over 100 times taller than wide), grey."""
  pixels = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
  data = io.BytesIO()
  Image.fromarray(pixels.squeeze(-1) if len(shape) == 3 else pixels).save(data, format=fmt)
  for size in (139, 64):
    want = preprocess.resize(image_io.load_rgb(data.getvalue()), size)
    np.testing.assert_array_equal(tf_graph.decode_image(tf.constant(data.getvalue()), size).numpy(), want)


def test_an_existing_output_is_refused_then_replaced_with_overwrite(run, greedy_export, tmp_path):
  _, workdir, _ = run
  output = tmp_path / "export"
  shutil.copytree(greedy_export, output)
  before = sorted(p.name for p in tmp_path.iterdir())
  proc = export_command(f"--workdir={workdir}", f"--output={output}")
  assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "--overwrite" in proc.stderr
  assert len(proc.stderr.splitlines()) == 1 and sorted(p.name for p in tmp_path.iterdir()) == before
  (output / "stale.txt").write_text("from the old export")
  proc = export_command(f"--workdir={workdir}", f"--output={output}", "--overwrite")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert not (output / "stale.txt").exists() and (output / "export.json").is_file()
  assert sorted(p.name for p in tmp_path.iterdir()) == before  # no staging folder left beside it


def test_a_damaged_checkpoint_is_one_error_line_and_nothing_is_written(run, tmp_path):
  _, workdir, _ = run
  damaged = tmp_path / "w"
  shutil.copytree(workdir, damaged, ignore=shutil.ignore_patterns("eval", "compilation_cache", "plugins"))
  for path in (damaged / "checkpoints").rglob("*"):
    if path.is_file() and "state" in path.parts and path.stat().st_size > 64:
      path.write_bytes(b"\0" * path.stat().st_size)
  proc = export_command(f"--workdir={damaged}", f"--output={tmp_path / 'export'}")
  assert proc.returncode == 2, proc.stderr[-2000:]
  [line] = proc.stderr.strip().splitlines()
  assert line.startswith("error: checkpoint") and "cannot be restored" in line
  assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]
