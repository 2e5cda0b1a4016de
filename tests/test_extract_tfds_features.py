"""capjax.tools.extract_tfds_features: a TFDS dataset in, its Inception-ResNet-v2 feature variant out (sharded over
8 fake devices, resumable by shard, unreadable records skipped and counted), and training reads the variant; the run
captions files with the network, and so does its export with the network inside (TensorFlow alone, and JAX).

Weights are random (saved as convert_weights saves them); the source is synthetic_scenes/tiny at 139 px (3x3 grid).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import ml_collections
import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from capjax import config_util
from capjax.data import pipeline, sources
from capjax.models import inception_resnet_v2 as irv2
from capjax.tools import extract_features as ef
from capjax.tools import extract_tfds_features as etf
import helpers
from helpers import IRV2_NUM_CLASSES as NUM_CLASSES

REPO = pathlib.Path(__file__).resolve().parent.parent
IMAGE_SIZE = 139
PER_SHARD = 24
SPLITS = ("validation", "test")
NUM_PICTURES = 5  # PNGs that --mode=caption and the export caption, and one JPEG
TRAIN_STEPS = 200


def _dataset_config(data_dir: pathlib.Path, features: str = "") -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({"name": "synthetic_scenes", "builder_config": "tiny", "data_dir": str(data_dir),
                                    "auto_build": True, "features": features})


def _args(data_dir, weights, *extra) -> list[str]:
  """argv for `etf.main`, as app.run passes it (program name first)."""
  return ["extract_tfds_features", "--dataset=synthetic_scenes/tiny", f"--weights={weights}", f"--data_dir={data_dir}",
          f"--image_size={IMAGE_SIZE}", "--dtype=float32", "--batch_size=8", f"--examples_per_shard={PER_SHARD}",
          "--distributed=off", *extra]


@pytest.fixture(scope="module")
def weights(irv2_weights) -> pathlib.Path:
  return irv2_weights


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> pathlib.Path:
  directory = tmp_path_factory.mktemp("tfds")
  sources.prepare(_dataset_config(directory))
  return directory


@pytest.fixture(scope="module")
@helpers.slow_fixture  # an Inception-ResNet-v2 extraction job over 8 devices: its users run more
def extracted(data_dir, weights) -> pathlib.Path:
  assert len(jax.local_devices()) == 8
  etf.main(_args(data_dir, weights, f"--splits={','.join(SPLITS)}"))
  return data_dir / "synthetic_scenes_irv2" / "tiny" / "1.0.0"


def _rows(out_dir: pathlib.Path, split: str) -> list[dict]:
  builder = tfds.builder_from_directory(os.fspath(out_dir))
  source = builder.as_data_source(split=split)
  return [source[i] for i in range(len(source))]


def test_variant_is_a_tfds_dataset_beside_the_source_with_the_source_fields_and_features(data_dir, extracted):
  assert (extracted / "dataset_info.json").is_file()
  builder = tfds.builder("synthetic_scenes_irv2/tiny", data_dir=data_dir)
  assert builder.info.file_format.value == "array_record"
  assert {s: builder.info.splits[s].shard_lengths for s in builder.info.splits} == {
      "validation": [24, 24, 16], "test": [24, 24, 16]}
  assert set(builder.info.features) == {"id", "captions", "objects", "background", "grid", "pooled", "source_index"}
  assert builder.info.features["grid"].shape == (3, 3, 1536)
  assert json.loads((extracted / etf.SKIPPED).read_text()) == {"validation": [], "test": []}
  source = sources.data_source(_dataset_config(data_dir), "test")
  variant = builder.as_data_source(split="test")
  for i in (0, 23, 24, 63):
    original, row = source[i], variant[i]
    assert row["source_index"] == i and row["id"] == original["id"]
    assert list(row["captions"]) == list(original["captions"])
    assert row["background"] == original["background"]
    for key in original["objects"]:
      np.testing.assert_array_equal(row["objects"][key], original["objects"][key])


def test_sharded_features_equal_the_single_device_encoder_and_pooled_is_their_mean(data_dir, weights, extracted):
  rows = _rows(extracted, "validation")
  source = sources.data_source(_dataset_config(data_dir), "validation")
  model = irv2.InceptionResNetV2(num_classes=NUM_CLASSES)
  variables = irv2.load_converted(weights)
  for first in (0, 30):  # two rows of the first shard, two of the second
    pixels = np.stack([np.asarray(Image.fromarray(source[i]["image"]).resize((IMAGE_SIZE,) * 2, Image.BILINEAR))
                       for i in (first, first + 1)])
    want = jax.device_get(ef.encode(model, variables, pixels))
    for k, i in enumerate((first, first + 1)):
      np.testing.assert_allclose(rows[i]["grid"], want["grid"][k], rtol=1e-4, atol=1e-4)
      np.testing.assert_allclose(rows[i]["pooled"], want["pooled"][k], rtol=1e-4, atol=1e-4)
  grid = np.stack([r["grid"] for r in rows])
  np.testing.assert_allclose(np.stack([r["pooled"] for r in rows]), grid.mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)


def test_a_killed_job_resumes_at_the_first_missing_shard_and_gives_the_same_dataset(
    data_dir, weights, extracted, tmp_path, monkeypatch):
  out_root = tmp_path / "out"
  args = _args(data_dir, weights, "--splits=validation", f"--output_data_dir={out_root}")
  calls = []
  real_encode_shard = etf.encode_shard

  def dies_in_the_second_shard(source, start, stop, *rest):
    calls.append(start)
    if calls == [0, 24]:
      raise KeyboardInterrupt("killed")
    return real_encode_shard(source, start, stop, *rest)
  monkeypatch.setattr(etf, "encode_shard", dies_in_the_second_shard)
  with pytest.raises(KeyboardInterrupt):
    etf.main(args)
  out_dir = out_root / "synthetic_scenes_irv2" / "tiny" / "1.0.0"
  shards = sorted(p.name for p in out_dir.glob("synthetic_scenes_irv2-validation.array_record-*"))
  assert shards == ["synthetic_scenes_irv2-validation.array_record-00000-of-00003"]
  assert not (out_dir / "dataset_info.json").exists()
  (out_dir / f".{shards[0].replace('00000', '00001')}.tmp999").write_bytes(b"half a shard")  # a kill mid-write
  first = (out_dir / shards[0]).stat()

  calls.clear()
  etf.main(args)
  assert calls == [24, 48]  # only the missing shards are computed again
  assert (out_dir / shards[0]).stat().st_mtime_ns == first.st_mtime_ns
  assert not list(out_dir.glob(".*tmp*"))
  resumed, straight = _rows(out_dir, "validation"), _rows(extracted, "validation")
  assert [r["source_index"] for r in resumed] == list(range(64))
  for a, b in zip(resumed, straight):
    np.testing.assert_array_equal(a["grid"], b["grid"])


def test_resuming_with_other_settings_is_refused_with_what_changed(data_dir, weights, extracted, capsys):
  del extracted
  with pytest.raises(SystemExit) as exit_info:
    etf.main(_args(data_dir, weights, "--splits=validation", "--image_size=75"))
  assert exit_info.value.code == 2
  assert re.search(r"image_size: 139 -> 75.*same arguments to resume", capsys.readouterr().err)


def test_missing_weights_or_an_unknown_split_exit_with_what_to_do(data_dir, weights, tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    etf.main(_args(data_dir, tmp_path / "nothing", "--splits=validation"))
  assert exit_info.value.code == 2 and "python -m capjax.tools.convert_weights" in capsys.readouterr().err
  with pytest.raises(SystemExit) as exit_info:
    etf.main(_args(data_dir, weights, "--splits=valid", f"--output_data_dir={tmp_path}"))
  assert exit_info.value.code == 2 and "splits ['valid'] are not in synthetic_scenes" in capsys.readouterr().err


class _Unreadable:
  """A data source whose records `bad` fail to decode, as a corrupt image in a real dataset does."""

  def __init__(self, source, bad: set[int]):
    self.source, self.bad = source, bad

  def __len__(self) -> int:
    return len(self.source)

  def __getitem__(self, index: int):
    if index in self.bad:
      raise OSError(f"image file is truncated (record {index})")
    return self.source[index]


def test_unreadable_records_are_skipped_counted_and_reported_never_fatal(data_dir, weights, extracted, tmp_path):
  del extracted
  builder = sources.prepare(_dataset_config(data_dir))
  broken = _Unreadable(builder.as_data_source(split="validation"), {5, 30})
  out_dir = etf.extract_dataset(builder, weights, tmp_path, splits=["validation"], image_size=IMAGE_SIZE,
                                dtype="float32", batch_size=8, examples_per_shard=PER_SHARD,
                                sources={"validation": broken}, progress=False)
  skipped = json.loads((out_dir / etf.SKIPPED).read_text())["validation"]
  assert [index for index, _ in skipped] == [5, 30]
  assert all("image file is truncated" in reason for _, reason in skipped)
  info = tfds.builder_from_directory(os.fspath(out_dir)).info
  assert info.splits["validation"].shard_lengths == [23, 23, 16]
  assert [r["source_index"] for r in _rows(out_dir, "validation")] == [i for i in range(64) if i not in (5, 30)]


def test_a_shard_of_which_no_record_reads_stops_the_extraction_and_leaves_no_variant(data_dir, weights, extracted,
                                                                                   tmp_path):
  """Every record of a shard unreadable: a damaged source, not a few bad pictures."""
  del extracted
  builder = sources.prepare(_dataset_config(data_dir))
  broken = _Unreadable(builder.as_data_source(split="validation"), set(range(PER_SHARD)))
  with pytest.raises(etf.SourceError, match=r"none of the 24 records 0-23 of synthetic_scenes:validation could be "
                     r"read \(the first: OSError: image file is truncated \(record 0\)\), so no feature variant was "
                     r"written — the source dataset is damaged: build it again: `python -m capjax.data.build "
                     rf"--dataset=synthetic_scenes/tiny --data_dir={data_dir}`"):
    etf.extract_dataset(builder, weights, tmp_path / "out", splits=["validation"], image_size=IMAGE_SIZE,
                        dtype="float32", batch_size=8, examples_per_shard=PER_SHARD,
                        sources={"validation": broken}, progress=False)
  assert not (tmp_path / "out").exists()


def test_grey_and_rgba_pictures_become_rgb_and_other_shapes_are_skipped_with_the_reason():
  rng = np.random.default_rng(0)
  grey = rng.integers(0, 256, (5, 7), dtype=np.uint8)
  np.testing.assert_array_equal(etf.rgb(grey), np.stack([grey] * 3, axis=-1))
  np.testing.assert_array_equal(etf.rgb(grey[..., None]), np.stack([grey] * 3, axis=-1))
  rgba = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
  np.testing.assert_array_equal(etf.rgb(rgba), rgba[..., :3])
  source = [{"image": grey}, {"image": rgba[..., :2]}]
  record, pixels, reason = etf._read(source, 0, "image", 9)
  assert record is source[0] and pixels.shape == (9, 9, 3) and reason == ""
  assert etf._read(source, 1, "image", 9) == (
      None, None, "ValueError: an image of shape (5, 7, 2) is neither grey, RGB nor RGBA")


def test_the_1x1_models_read_the_pooled_vector_and_pixel_encoders_refuse_features(data_dir, extracted):
  del extracted
  from capjax.data.vocab import build_vocabulary
  config = config_util.load("configs/t2t.py:1x1")
  assert (config.dataset.features, config.dataset.feature_key) == ("irv2", "pooled")
  config.dataset.update(name="synthetic_scenes", builder_config="tiny", data_dir=str(data_dir))
  config.batch_size = 8
  source = sources.data_source(config.dataset, "validation")
  vocab = build_vocabulary(pipeline.split_captions(source), 1)
  inputs = sources.input_spec(config)
  assert inputs == sources.InputSpec("pooled", (1536,), "float32")
  batch = next(pipeline.train_iterator(config, source, vocab, inputs.key))
  assert batch["image"].shape == (8, 1536) and batch["image"].dtype == np.float32
  config.model.encoder.name = "irv2"
  with pytest.raises(ValueError, match="pixel encoders"):
    sources.input_spec(config)


def test_a_missing_variant_says_how_to_write_it(tmp_path):
  with pytest.raises(sources.DatasetNotBuiltError, match="extract_tfds_features --dataset=synthetic_scenes/tiny"):
    sources.data_source(_dataset_config(tmp_path, features="irv2"), "test")


@dataclasses.dataclass(frozen=True)
class FeatureRun:
  """A `:shapes,debug` run trained on the feature variant by `capjax.main`, and its `--mode=caption` of `images`."""
  workdir: pathlib.Path
  common: list[str]  # the flags of both commands: config, dataset, workdir
  env: dict[str, str]
  train_stdout: str
  images: list[pathlib.Path]  # test-split pictures: 64 px PNGs and a 96 px JPEG, all resized to 139 to caption
  captions: dict[str, str]  # --mode=caption's, by file name as its --images glob gave it


@pytest.fixture(scope="module")
@helpers.slow_fixture  # trains in a capjax.main subprocess and captions with another
def feature_run(data_dir, weights, extracted, tmp_path_factory) -> FeatureRun:
  del extracted
  root = tmp_path_factory.mktemp("feature_run")
  workdir = root / "work"
  common = ["--config=configs/t2t.py:shapes,debug", "--config.model.encoder.name=features",
            "--config.dataset.features=irv2", "--config.dataset.builder_config=tiny",
            f"--config.dataset.data_dir={data_dir}", "--config.dataset.train_split=validation",
            f"--config.dataset.image_size={IMAGE_SIZE}", f"--workdir={workdir}"]
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env["XLA_FLAGS"] = helpers.FAST_COMPILE  # and one CPU device
  # Enough steps for captions that depend on the picture (after 6 every one was empty); one checkpoint, the last.
  train = subprocess.run([sys.executable, "-m", "capjax.main", *common, f"--config.num_train_steps={TRAIN_STEPS}",
                          f"--config.checkpoint_every={TRAIN_STEPS}", "--config.optimizer.learning_rate=3e-3",
                          "--config.log_every=50", "--config.eval_every=1000", "--config.debug_nans=False"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
  assert train.returncode == 0, train.stderr[-3000:]
  images = root / "images"
  images.mkdir()
  source = sources.data_source(_dataset_config(data_dir), "test")
  for i in range(NUM_PICTURES):
    Image.fromarray(source[i]["image"]).save(images / f"{i}.png")
  Image.fromarray(source[NUM_PICTURES]["image"]).resize((96, 96), Image.BICUBIC).save(images / "big.jpg", quality=90)
  caption = subprocess.run([sys.executable, "-m", "capjax.main", *common, "--mode=caption",
                            f"--images={images}/*", f"--config.model.encoder.weights={weights}"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
  assert caption.returncode == 0, caption.stderr[-3000:]
  return FeatureRun(workdir, common, env, train.stdout, sorted(images.iterdir()),
                    json.loads((workdir / "captions.json").read_text())["captions"])


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_main_trains_evaluates_and_captions_files_from_the_feature_variant(feature_run):
  run = feature_run
  assert "test split: 64 images" in run.train_stdout
  out = next((run.workdir / "eval").glob(f"test_step{TRAIN_STEPS}"))
  assert len(json.loads((out / "predictions.json").read_text())) == 64
  assert (out / "gallery.png").exists()  # pictures found through source_index in synthetic_scenes/tiny
  assert sorted(run.captions) == [str(p) for p in run.images]
  no_weights = subprocess.run([sys.executable, "-m", "capjax.main", *run.common, "--mode=caption",
                               f"--images={run.images[0]}"], cwd=REPO, env=run.env, capture_output=True, text=True,
                              timeout=600)
  assert no_weights.returncode != 0 and "--config.model.encoder.weights" in no_weights.stderr


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_the_export_with_the_weights_captions_as_mode_caption_with_tensorflow_alone_and_with_jax(
    feature_run, weights, tmp_path):
  """Issue 43's requirement for a feature model: the Inception-ResNet-v2 of --weights inside the export, the
  SavedModel (TensorFlow alone) and `load_jax` caption the files as `--mode=caption` with those weights did."""
  run, export = feature_run, tmp_path / "export"
  proc = subprocess.run([sys.executable, "-m", "capjax.export", f"--workdir={run.workdir}", f"--output={export}",
                         f"--weights={weights}"], cwd=REPO, env=run.env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  want = [run.captions[str(p)] for p in run.images]
  assert len(set(want)) > 1  # the pictures get different captions: the comparison is not of constants
  # One batch: any batch size is tests/test_export.py's, and a second one costs TensorFlow another compile of IRv2.
  got = helpers.tf_only(export / "saved_model", run.images, alone=False)
  assert [row[0] for row in got["captions"]] == want
  from capjax import export as export_lib
  captions, scores = export_lib.load_jax(export)(run.images)
  assert captions == got["captions"]
  # Both sides read the same pixels, so the scores differ by float noise alone (2e-6 measured): the SavedModel's
  # former decoding and resizing (TF's fast JPEG IDCT, a float resize) moved them by 1e-5 to 4e-4.
  np.testing.assert_allclose(scores, np.asarray(got["scores"]), rtol=0, atol=1e-5)
  assert json.loads((export / "export.json").read_text())["image_size"] == IMAGE_SIZE


@pytest.mark.parametrize("spec", ["configs/t2t.py:8x8,debug", "configs/t2t.py:1x1,debug", "configs/rnn.py:8x8,debug",
                                  "configs/rnn.py:1x1,debug"])
@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_the_four_paper_models_train_resume_and_evaluate_on_features_over_a_data_and_model_mesh(
    spec, data_dir, extracted, tmp_path):
  """The paper configs (debug widths) on the feature variant, sharded (data=4, model=2) over 8 fake devices:
  2 steps, then a second run resumes from that checkpoint to step 4, and the test split is beam-searched."""
  del extracted
  from capjax.train import train_and_evaluate
  config = config_util.load(spec)
  assert config.model.encoder.name == "features" and config.decode.beam_size == 4
  # The paper configs score cc3m's validation split (it released no test split); synthetic_scenes has one.
  config.dataset.update(name="synthetic_scenes", builder_config="tiny", data_dir=str(data_dir),
                        train_split="validation", test_split="test")
  config.mesh.update(data=4, model=2)
  config.update(num_train_steps=2, checkpoint_every=2, eval_every=1000, log_every=1, debug_nans=False)
  config.eval.update(batch_size=32, num_examples=32, gallery_size=2, rating_sheet_size=0)
  workdir = tmp_path / "work"
  train_and_evaluate(config, os.fspath(workdir))
  config.num_train_steps = 4
  result = train_and_evaluate(config, os.fspath(workdir))
  history = [json.loads(line)["step"] for line in (workdir / "train_history.jsonl").read_text().splitlines()]
  assert history == [1, 2, 3, 4]  # the second run started from the step-2 checkpoint
  assert {"cider_d", "object_precision", "relation_accuracy"} <= set(result["metrics"])
  best = json.loads(pathlib.Path(result["outputs"]["metrics"]).read_text())
  assert best["split"] == "test" and best["examples"] == 64 and best["step"] in (2, 4)


def test_blind_study_sheets_of_feature_models_show_the_source_picture_of_each_variant_record(
    data_dir, extracted, tmp_path, capsys):
  from capjax.metrics import human_eval
  variant = tfds.builder_from_directory(os.fspath(extracted)).as_data_source(split="validation")
  pixels = sources.prepare(_dataset_config(data_dir)).as_data_source(split="validation")
  predictions = tmp_path / "p.json"
  predictions.write_text(json.dumps([{"image_id": i, "caption": f"caption {i}"} for i in (3, 7)]))
  assert human_eval.main(["human_eval", "sheets", f"--predictions=a={predictions}", "--features=irv2",
                          "--images=synthetic_scenes/tiny:validation", f"--data_dir={data_dir}",
                          f"--output={tmp_path / 'study'}", "--raters=1"]) == 0
  page = (tmp_path / "study" / "rater_1.html").read_text()
  for i in (3, 7):
    assert human_eval.picture_uri(pixels[int(variant[i]["source_index"])]["image"]) in page


def test_the_commands_names_are_the_libraries():
  # the command names them without importing capjax.features and capjax.distributed (jax): --help answers fast
  from capjax import distributed, features
  assert (etf.DEFAULT_VARIANT, etf.DISTRIBUTED_MODES) == (features.DEFAULT_VARIANT, distributed.MODES)
