"""The `stylized_scenes` TFDS builder: synthetic scenes whose stylized splits carry a romantic and a humorous
caption per image, each with its planted style phrase, and a larger `factual` split with factual captions only.
Nothing is downloaded: example i of split s is `capjax.scenes` and `capjax.scenes.stylized` drawn from [seed, s, i].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import tensorflow_datasets as tfds

from capjax import scenes
from capjax.scenes import stylized
from tfds_builders.builder_base import LocalCodePath
from tfds_builders.synthetic_scenes.synthetic_scenes_dataset_builder import (ScenesConfig, example_features,
                                                                              scene_features)

# The split index seeds the examples: keep this order. train, validation and test are synthetic_scenes' own images
# (the same seed, split index and example index give the same scene), with stylized captions added.
SPLITS: tuple[str, ...] = ("train", "validation", "test", "factual")
FACTUAL_SPLIT = "factual"


@dataclasses.dataclass(eq=False)
class StylizedScenesConfig(ScenesConfig):
  """Split sizes (images), seed and image size of one build: synthetic_scenes' and the factual split's size."""
  num_train: int = 1_000
  num_validation: int = 100
  num_test: int = 100
  num_factual: int = 10_000

  def split_size(self, split: str) -> int:
    return {"train": self.num_train, "validation": self.num_validation, "test": self.num_test,
            FACTUAL_SPLIT: self.num_factual}[split]


def stylized_features(captions: tuple[stylized.StylizedCaption, ...]) -> dict[str, object]:
  """The `stylized` sequence of a record: one entry per stylized caption (none in the factual split)."""
  return {
      "style": [c.style for c in captions],
      "caption": [c.caption for c in captions],
      "phrase": [c.phrase for c in captions],
      "phrase_start": np.asarray([c.start for c in captions], np.int32),
      "phrase_end": np.asarray([c.end for c in captions], np.int32),
  }


def generate_split(config: StylizedScenesConfig, split: str) -> Iterator[tuple[int, dict[str, object]]]:
  """(index, record) for every example of `split`, in index order, in this process (the default config's 11,200
  examples cost about 20 CPU-seconds: not worth synthetic_scenes' process pool)."""
  split_index = SPLITS.index(split)
  for index in range(config.split_size(split)):
    example = scenes.make_example(config.seed, split_index, index, config.image_size)
    captions = () if split == FACTUAL_SPLIT else stylized.stylized_captions(config.seed, split_index, index,
                                                                             example.captions[0])
    yield index, {**example_features(example, index), "stylized": stylized_features(captions)}


class Builder(LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """Synthetic scenes with romantic and humorous captions (planted style phrases) and a factual-only split."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Two styles, 12 phrases each, grafted after the first noun phrase or at the end."}
  BUILDER_CONFIGS = [
      StylizedScenesConfig(name="default", description="1,000 / 100 / 100 stylized images (two captions each) and "
                           "10,000 factual images; 64x64."),
      StylizedScenesConfig(name="tiny", description="64 / 16 / 16 stylized and 128 factual images: for tests.",
                           num_train=64, num_validation=16, num_test=16, num_factual=128),
  ]
  DEFAULT_CONFIG_NAME = "default"

  def _info(self) -> tfds.core.DatasetInfo:
    size = self.builder_config.image_size
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            **scene_features(size, captions_doc="Factual: synthetic_scenes' four."),
            "stylized": tfds.features.Sequence({
                "style": tfds.features.Text(doc="romantic or humorous"),
                "caption": tfds.features.Text(doc="The first factual caption with the phrase planted in it."),
                "phrase": tfds.features.Text(doc="The planted style phrase."),
                "phrase_start": tfds.features.Scalar(np.int32, doc="First word of the phrase in caption.split()."),
                "phrase_end": tfds.features.Scalar(np.int32, doc="One past its last word."),
            }, doc="One per style in the stylized splits; empty in the factual split."),
        }),
        disable_shuffling=True,  # record i is example i, as in synthetic_scenes
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    del dl_manager  # nothing to download
    return {split: self._generate_examples(split) for split in SPLITS}

  def _generate_examples(self, split: str) -> Iterator[tuple[int, dict[str, object]]]:
    yield from generate_split(self.builder_config, split)
