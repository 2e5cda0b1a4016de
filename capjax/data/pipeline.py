"""grain input pipelines over `tfds.data_source`: training batches with a random reference caption per
example per epoch, and padded, ordered evaluation batches. Each process reads only its own shard.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Iterator
from typing import Any

import grain
import jax
import ml_collections
import numpy as np
from absl import logging

from capjax.config_util import ConfigError
from capjax.data import preprocess
from capjax.data.vocab import Vocabulary

# Datasets whose builders live in this repository: name -> (module to import, how to build it).
KNOWN_BUILDERS: dict[str, tuple[str, str]] = {
    "synthetic_scenes": (
        "tfds_builders.synthetic_scenes",
        "nothing to download: it is built automatically on first use, or by "
        "`python -m capjax.data.build --dataset=synthetic_scenes`"),
    "cc3m": (
        "tfds_builders.cc3m",
        "download the Conceptual Captions TSVs and images (see tfds_builders/cc3m/README.md), then run "
        "`python -m capjax.data.build --dataset=cc3m --manual_dir=DIR --data_dir=DATA_DIR`"),
    "alt_text_captions": (
        "tfds_builders.alt_text_captions",
        "harvest alt-texts and download their images with img2dataset (see tfds_builders/alt_text_captions/README.md), "
        "then run `python -m capjax.data.build --dataset=alt_text_captions --manual_dir=DIR --data_dir=DATA_DIR`"),
}


class DatasetNotBuiltError(RuntimeError):
  pass


def default_data_dir(config: ml_collections.ConfigDict | dict[str, Any]) -> str:
  return os.path.expanduser(config["data_dir"] or os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))


def feature_variant(config: ml_collections.ConfigDict) -> str:
  """The TFDS name of the dataset read: `name`, or `name_{features}` when training on pre-extracted features."""
  return f"{config.name}_{config.features}" if config.get("features") else config.name


def input_key(config: ml_collections.ConfigDict) -> str:
  """The record field the model reads: "image" (pixels) or the feature variant's `feature_key` (grid|pooled)."""
  d, encoder = config.dataset, config.model.encoder.name
  if (encoder == "features") != bool(d.get("features")):
    raise ConfigError(
        f"model.encoder.name={encoder!r} with dataset.features={d.get('features')!r}: the 'features' encoder "
        "reads pre-extracted features (set --config.dataset.features=irv2, written by `python -m "
        "capjax.tools.extract_tfds_features`), the pixel encoders ('conv', 'irv2') need dataset.features=''")
  if encoder != "features":
    return "image"
  if d.feature_key not in ("grid", "pooled"):
    raise ConfigError(f"dataset.feature_key={d.feature_key!r}: use 'grid' (h x w x 1536) or 'pooled' (1536)")
  return d.feature_key


def _with_config(name: str, config: ml_collections.ConfigDict) -> str:
  """`name/builder_config`, or `name` when the config names no builder config."""
  return name + (f"/{config.builder_config}" if config.get("builder_config") else "")


def _builder(config: ml_collections.ConfigDict):
  """The TFDS builder for `config` (dataset.name, data_dir, builder_config, features)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  if config.get("features"):
    return _variant_builder(config)
  name = config.name
  module, how = KNOWN_BUILDERS.get(
      name, (None, f"`python -m capjax.data.build --dataset={name} --data_dir={default_data_dir(config)}`"))
  if module is not None:
    try:
      importlib.import_module(module)
    except ModuleNotFoundError as e:
      if e.name and module.startswith(e.name):
        raise DatasetNotBuiltError(
            f"dataset {name!r} is not built in {default_data_dir(config)} and its builder ({module}) is not "
            f"part of this checkout yet. To build it: {how}.") from e
      raise
  full_name = _with_config(name, config)
  return tfds.builder(full_name, data_dir=default_data_dir(config)), how


def _variant_builder(config: ml_collections.ConfigDict):
  """The feature variant written by capjax.tools.extract_tfds_features (read from its files: no builder code)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  source = _with_config(config.name, config)
  name = _with_config(feature_variant(config), config)
  _, build = KNOWN_BUILDERS.get(
      config.name, (None, f"`python -m capjax.data.build --dataset={source} --data_dir={default_data_dir(config)}`"))
  how = (f"(1) build {source} if it is not built: {build}; (2) convert Inception-ResNet-v2 weights "
         f"(`python -m capjax.tools.convert_weights --format=keras|timm --input=FILE --output=WEIGHTS_DIR`); "
         f"(3) run `python -m capjax.tools.extract_tfds_features "
         f"--dataset={source} --weights=WEIGHTS_DIR --variant={config.features} "
         f"--data_dir={default_data_dir(config)}`")
  try:
    return tfds.builder(name, data_dir=default_data_dir(config)), how
  except tfds.core.registered.DatasetNotFoundError as e:
    raise DatasetNotBuiltError(
        f"the feature variant {name!r} is not in {default_data_dir(config)}. To write it: {how}.") from e


def pixel_source(config: ml_collections.ConfigDict, split: str):
  """The pixels behind a feature variant's split (records' `source_index` index it), or None when that
  dataset is not built here."""
  pixels = ml_collections.ConfigDict(dict(config))
  pixels.features = ""
  pixels.auto_build = False
  try:
    return data_source(pixels, split)
  except (DatasetNotBuiltError, ValueError) as e:
    logging.warning("no pictures for the gallery: %s", e)
    return None


def prepare(config: ml_collections.ConfigDict):
  """The dataset's builder, after building it if it is embedded (no download) and missing; otherwise it
  checks that the dataset exists."""
  builder, how = _builder(config)
  info_path = os.path.join(builder.data_dir, "dataset_info.json")
  if os.path.exists(info_path):
    fmt = builder.info.file_format
    if fmt is not None and "array_record" not in str(fmt).lower():
      raise DatasetNotBuiltError(
          f"dataset {builder.name} in {builder.data_dir} was built as {fmt}; tfds.data_source needs "
          f"ArrayRecord: rebuild with --file_format=array_record.")
    return builder
  if not config.get("auto_build", False) or config.get("features"):
    raise DatasetNotBuiltError(f"dataset {builder.name!r} is not built in {builder.data_dir}. To build it: {how}.")
  if jax.process_index() == 0:
    logging.info("Building %s into %s (first use).", builder.name, builder.data_dir)
    builder.download_and_prepare(file_format="array_record")
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    multihost_utils.sync_global_devices("capjax_dataset_built")
  return builder


def data_source(config: ml_collections.ConfigDict, split: str):
  """The ArrayRecord random-access source of `split` (building embedded datasets on first use)."""
  builder = prepare(config)
  if split not in builder.info.splits:
    raise ValueError(f"split {split!r} not in {builder.name}: has {sorted(builder.info.splits)}")
  return builder.as_data_source(split=split)


def split_captions(source) -> Iterator[str]:
  """Every reference caption of every example (for building the vocabulary)."""
  for i in range(len(source)):
    for c in source[i]["captions"]:
      yield c.decode("utf-8") if isinstance(c, bytes) else str(c)


@dataclasses.dataclass(frozen=True)
class TrainTransform(grain.transforms.RandomMap):
  """Picks one reference caption at random, encodes it, and optionally augments the image (pre-extracted
  features, read from `key`, pass unchanged)."""

  vocab: Vocabulary
  max_tokens: int
  image_size: int
  augment: preprocess.AugmentConfig
  key: str = "image"

  def random_map(self, record: dict[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    captions = record["captions"]
    caption = captions[rng.integers(len(captions))]
    caption = caption.decode("utf-8") if isinstance(caption, bytes) else str(caption)
    inputs, targets = self.vocab.encode(caption, self.max_tokens)
    if self.key == "image":
      image = preprocess.train_image(np.asarray(record["image"]), self.image_size, self.augment, rng)
    else:
      image = np.asarray(record[self.key])
    return {"image": image, "inputs": inputs, "targets": targets}


def process_batch_size(global_batch_size: int) -> int:
  if global_batch_size % jax.process_count():
    raise ValueError(f"batch_size={global_batch_size} must be divisible by the {jax.process_count()} processes")
  return global_batch_size // jax.process_count()


def train_iterator(config: ml_collections.ConfigDict, source, vocab: Vocabulary) -> grain.DatasetIterator:
  """An endless, checkpointable iterator of this process's share of each global training batch."""
  augment = preprocess.AugmentConfig(
      crop=config.augment.crop, crop_min_scale=config.augment.crop_min_scale, color=config.augment.color)
  ds = grain.MapDataset.source(source)
  ds = ds[jax.process_index()::jax.process_count()]
  ds = ds.seed(config.seed).shuffle().repeat()
  ds = ds.random_map(TrainTransform(vocab, config.max_caption_tokens, config.dataset.image_size, augment,
                                    input_key(config)))
  ds = ds.batch(process_batch_size(config.batch_size), drop_remainder=True)
  read = grain.ReadOptions(num_threads=config.input.num_threads, prefetch_buffer_size=config.input.prefetch)
  return iter(ds.to_iter_dataset(read))


def eval_batches(source, image_size: int, global_batch_size: int, num_examples: int | None = None,
                 key: str = "image") -> Iterator[dict[str, np.ndarray]]:
  """Ordered batches of this process's rows; `index` = example index, -1 on padding rows (mask them).

  `image` holds the resized pictures, or the pre-extracted features read from `key` (zeros on padding rows).
  """
  n = len(source) if num_examples is None else min(num_examples, len(source))
  local = process_batch_size(global_batch_size)
  offset = jax.process_index() * local
  blank = None if key == "image" or not n else np.zeros_like(np.asarray(source[0][key]))
  for start in range(0, n, global_batch_size):
    index = np.arange(start + offset, start + offset + local)
    index = np.where(index < n, index, -1)
    if key == "image":
      images = np.stack([
          preprocess.eval_image(np.asarray(source[int(i)]["image"]) if i >= 0 else None, image_size)
          for i in index])
    else:
      images = np.stack([np.asarray(source[int(i)][key]) if i >= 0 else blank for i in index])
    yield {"image": images, "index": index.astype(np.int32)}
