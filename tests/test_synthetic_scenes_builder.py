"""Specification of the synthetic_scenes TFDS builder: the `tiny` config built as ArrayRecord, read back with
tfds.data_source, equal to the scenes module's examples and identical across builds."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

import tfds_builders.synthetic_scenes  # noqa: F401  (registers the builder)
from capjax import scenes
from capjax.scenes import render
from capjax.metrics.grounded import grounded_metrics
from tfds_builders.synthetic_scenes import synthetic_scenes_dataset_builder as builder_module

SIZES = {"train": 512, "validation": 64, "test": 64}


def build(data_dir) -> tfds.core.DatasetBuilder:
  builder = tfds.builder("synthetic_scenes/tiny", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record")
  return builder


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("tfds")
  build(directory)
  return directory


@pytest.fixture(scope="module")
def sources(data_dir):
  return {split: tfds.data_source("synthetic_scenes/tiny", split=split, data_dir=data_dir) for split in SIZES}


def test_builder_name_version_and_configs():
  builder = tfds.builder("synthetic_scenes", data_dir="/nonexistent")
  assert builder.name == "synthetic_scenes"
  assert builder.builder_config.name == "default"
  assert str(builder.version) == "1.0.0"
  assert {c.name: (c.num_train, c.num_validation, c.num_test) for c in builder.BUILDER_CONFIGS} == {
      "default": (20_000, 1_000, 1_000), "tiny": (512, 64, 64), "vivid": (20_000, 1_000, 1_000),
      "vivid_tiny": (512, 64, 64)}
  assert {c.name: c.domain for c in builder.BUILDER_CONFIGS}["default"] == "plain"
  assert "Synthetic scenes" in builder.info.description


def test_split_sizes(data_dir, sources):
  assert {split: len(source) for split, source in sources.items()} == SIZES
  info = tfds.builder("synthetic_scenes/tiny", data_dir=data_dir).info
  assert {split: info.splits[split].num_examples for split in SIZES} == SIZES


def test_record_format(sources):
  record = sources["validation"][3]
  assert set(record) == {"id", "image", "captions", "objects", "background"}
  assert record["id"] == 3
  assert record["image"].dtype == np.uint8 and record["image"].shape == (64, 64, 3)
  assert len(record["captions"]) == 4 and all(isinstance(c, bytes) for c in record["captions"])
  assert set(record["objects"]) == {"shape", "colour", "size", "x", "y"}
  num_objects = len(record["objects"]["shape"])
  assert 1 <= num_objects <= 3
  for key in ("shape", "colour", "size"):
    assert len(record["objects"][key]) == num_objects and all(isinstance(v, bytes) for v in record["objects"][key])
  for key in ("x", "y"):
    assert np.asarray(record["objects"][key]).dtype == np.float32 and len(record["objects"][key]) == num_objects
  assert isinstance(record["background"], bytes)


def test_record_i_is_example_i_of_its_split(sources):
  for split, split_index in (("train", 0), ("validation", 1), ("test", 2)):
    for index in (0, 7, SIZES[split] - 1):
      record = sources[split][index]
      expected = scenes.make_example(0, split_index, index)
      assert record["id"] == index
      np.testing.assert_array_equal(record["image"], render.render(expected.scene))
      assert [c.decode() for c in record["captions"]] == expected.captions
      assert [s.decode() for s in record["objects"]["shape"]] == [o.shape for o in expected.scene.objects]
      np.testing.assert_array_equal(record["objects"]["x"], np.float32([o.x for o in expected.scene.objects]))


def test_captions_parse_back_to_the_stored_objects(sources):
  predictions, objects = [], []
  for split in ("validation", "test"):
    for record in sources[split]:
      for caption in record["captions"]:
        predictions.append(caption)
        objects.append(record["objects"])
  result = grounded_metrics(predictions, objects)
  assert result["exact_match"] == 1.0
  assert result["relation_accuracy"] == 1.0


def test_as_data_source_reads_the_same_records(data_dir, sources):
  source = tfds.builder("synthetic_scenes/tiny", data_dir=data_dir).as_data_source("test")
  for index in (0, 63):
    np.testing.assert_array_equal(source[index]["image"], sources["test"][index]["image"])
    assert source[index]["captions"] == sources["test"][index]["captions"]


def test_a_second_build_is_identical(tmp_path, sources):
  build(tmp_path)
  for split in ("validation", "test"):
    again = tfds.data_source("synthetic_scenes/tiny", split=split, data_dir=tmp_path)
    for index in range(SIZES[split]):
      first, second = sources[split][index], again[index]
      np.testing.assert_array_equal(first["image"], second["image"])
      assert first["captions"] == second["captions"]
      assert first["objects"] == second["objects"]


def test_worker_processes_draw_the_same_examples():
  config = builder_module.SyntheticScenesConfig(name="check", num_validation=120)
  serial = list(builder_module.generate_split(config, "validation", workers=1))
  parallel = list(builder_module.generate_split(config, "validation", workers=2, chunk=50))
  assert [index for index, _ in parallel] == list(range(120))
  for (_, a), (_, b) in zip(serial, parallel):
    assert a["image"] == b["image"] and a["captions"] == b["captions"] and a["background"] == b["background"]
    assert a["objects"]["shape"] == b["objects"]["shape"]
    np.testing.assert_array_equal(a["objects"]["x"], b["objects"]["x"])
