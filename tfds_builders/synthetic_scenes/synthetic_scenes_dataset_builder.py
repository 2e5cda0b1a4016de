"""The `synthetic_scenes` TFDS builder: coloured shapes with reference captions and object annotations, in two
domains (configs `default`/`tiny`: plain; `vivid`/`vivid_tiny`: another scene distribution and caption style).
Nothing is downloaded: example i of split s is drawn from `np.random.default_rng(scenes.rng_key(seed, s, i, domain))`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import multiprocessing
import os
import warnings
from collections.abc import Iterator

import numpy as np
import tensorflow_datasets as tfds

from capjax import preemption, scenes
from tfds_builders.builder_base import LocalCodePath

SPLITS: tuple[str, ...] = ("train", "validation", "test")  # the split index seeds the examples: keep this order
_PARALLEL_MIN_EXAMPLES = 4096  # smaller splits are drawn in this process alone: not worth a pool


@dataclasses.dataclass(eq=False)
class ScenesConfig(tfds.core.BuilderConfig):
  """Split sizes, seed and image size of one build of the scenes (this builder's and stylized_scenes')."""
  num_train: int = 20_000
  num_validation: int = 1_000
  num_test: int = 1_000
  seed: int = 0
  image_size: int = 64


@dataclasses.dataclass(eq=False)
class SyntheticScenesConfig(ScenesConfig):
  """ScenesConfig and the scene domain (`capjax.scenes.sample.DOMAINS`)."""
  domain: str = "plain"

  def split_size(self, split: str) -> int:
    return {"train": self.num_train, "validation": self.num_validation, "test": self.num_test}[split]


def example_features(example: scenes.Example, index: int) -> dict[str, object]:
  """The record of `example` (index `index` of its split), as the builder writes it."""
  objects = example.scene.objects
  return {
      "id": index,
      "image": example.png,
      "captions": example.captions,
      "objects": {
          "shape": [o.shape for o in objects],
          "colour": [o.colour for o in objects],
          "size": [o.size for o in objects],
          "x": np.asarray([o.x for o in objects], np.float32),
          "y": np.asarray([o.y for o in objects], np.float32),
      },
      "background": example.scene.background.description,
  }


def scene_features(size: int, captions_doc: str | None = None) -> dict[str, tfds.features.FeatureConnector]:
  """The features of a scene's record (`example_features`), for images of `size` pixels a side."""
  return {
      "id": tfds.features.Scalar(np.int64, doc="Index of the example in its split."),
      "image": tfds.features.Image(shape=(size, size, 3), encoding_format="png"),
      "captions": tfds.features.Sequence(tfds.features.Text(), doc=captions_doc),
      "objects": tfds.features.Sequence({
          "shape": tfds.features.Text(),
          "colour": tfds.features.Text(),
          "size": tfds.features.Text(),
          "x": tfds.features.Scalar(np.float32, doc="Centre, fraction of the width from the left."),
          "y": tfds.features.Scalar(np.float32, doc="Centre, fraction of the height from the top."),
      }),
      "background": tfds.features.Text(),
  }


def _default_workers(size: int) -> int:
  """One process per core for large splits where the platform can fork; otherwise this process alone."""
  if size < _PARALLEL_MIN_EXAMPLES or "fork" not in multiprocessing.get_all_start_methods():
    return 1
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def generate_split(config: SyntheticScenesConfig,
                   split: str,
                   workers: int | None = None,
                   chunk: int = 500) -> Iterator[tuple[int, dict[str, object]]]:
  """(index, features) for every example of `split`, in index order. With workers > 1 the examples are
  drawn by a pool of processes, `chunk` at a time, while TFDS encodes and writes in this one; the content is
  the same either way.

  The workers are forked: spawned ones would re-import the caller's main module (and TensorFlow). A forked
  child runs only numpy, PIL and zlib, never the parent's TensorFlow or JAX threads, so JAX's warning that
  fork "will likely lead to a deadlock" does not apply here and is silenced for these forks.
  """
  split_index, size = SPLITS.index(split), config.split_size(split)
  workers = _default_workers(size) if workers is None else workers
  if workers <= 1:
    for index in range(size):
      example = scenes.make_example(config.seed, split_index, index, config.image_size, config.domain)
      yield index, example_features(example, index)
    return
  starts = range(0, size, chunk)
  stops = [min(start + chunk, size) for start in starts]
  pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                                initializer=preemption.end_with_parent, initargs=(os.getpid(),))
  try:
    with warnings.catch_warnings():
      warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
      # map submits every chunk at once, so all the workers are forked here.
      chunks = pool.map(scenes.make_examples, itertools.repeat(config.seed), itertools.repeat(split_index),
                        starts, stops, itertools.repeat(config.image_size), itertools.repeat(config.domain))
    for start, examples in zip(starts, chunks):
      for index, example in enumerate(examples, start):
        yield index, example_features(example, index)
  finally:  # stopped early (the writer failed, the generator was closed): drop the chunks not yet drawn
    pool.shutdown(cancel_futures=True)


class Builder(LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """Synthetic scenes of one to three shapes, each with four reference captions, in two domains (plain, vivid)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {
      "1.0.0": "Initial release: 4 shapes, 6 colours, 2 sizes, 1-3 objects, 4 captions per image. Configs vivid and "
               "vivid_tiny (a second domain) added later: default's and tiny's records did not change.",
  }
  BUILDER_CONFIGS = [
      SyntheticScenesConfig(
          name="default", description="64x64 images; 20,000 train, 1,000 validation and 1,000 test."),
      SyntheticScenesConfig(
          name="tiny",
          description="64x64 images; 512 train, 64 validation and 64 test: for tests.",
          num_train=512,
          num_validation=64,
          num_test=64),
      SyntheticScenesConfig(
          name="vivid",
          description="The vivid domain (pale tinted backgrounds, 5 and 14 px radii, fewer objects, its own caption "
          "style naming the background), for cross-domain experiments; 64x64 images; 20,000 / 1,000 / 1,000.",
          domain="vivid"),
      SyntheticScenesConfig(
          name="vivid_tiny",
          description="The vivid domain, 512 train, 64 validation and 64 test: for tests.",
          num_train=512,
          num_validation=64,
          num_test=64,
          domain="vivid"),
  ]
  DEFAULT_CONFIG_NAME = "default"

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict(scene_features(self.builder_config.image_size)),
        # Examples are independent draws already: storing them in index order makes record i example i.
        disable_shuffling=True,
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    del dl_manager  # nothing to download
    return {split: self._generate_examples(split) for split in SPLITS}

  def _generate_examples(self, split: str) -> Iterator[tuple[int, dict[str, object]]]:
    yield from generate_split(self.builder_config, split)
