"""grain input pipelines over a split's random-access source (`capjax.data.sources`): training batches with a
random reference caption per example per epoch, and padded, ordered evaluation batches. Each process reads only
its own shard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import grain
import jax
import ml_collections
import numpy as np

from capjax.data import preprocess
from capjax.data.captions import all_captions
from capjax.data.vocab import Vocabulary
from capjax.strings import as_str
from capjax.tokens import BOS_ID


def split_captions(source) -> Iterator[str]:
  """Every reference caption of every example (for building the vocabulary)."""
  return all_captions(source)


@dataclasses.dataclass(frozen=True)
class TrainTransform(grain.transforms.RandomMap):
  """Picks one reference caption at random, encodes it (after the record's `start` token when it has one: a style
  tag), and optionally augments the image (pre-extracted features, read from `key`, pass unchanged)."""

  vocab: Vocabulary
  max_tokens: int
  image_size: int
  augment: preprocess.AugmentConfig
  key: str = "image"

  def random_map(self, record: dict[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    captions = record["captions"]
    caption = captions[rng.integers(len(captions))]
    caption = as_str(caption)
    start = self.vocab.id_of(record["start"]) if "start" in record else BOS_ID  # a style tag, or BOS
    inputs, targets = self.vocab.encode(caption, self.max_tokens, start)
    if self.key == "image":
      image = preprocess.train_image(np.asarray(record["image"]), self.image_size, self.augment, rng)
    else:
      image = np.asarray(record[self.key])
    out = {"image": image, "inputs": inputs, "targets": targets}
    if "example_index" in record:  # SCST's split (`capjax.scst.Scst.training_split`): for each row's references
      out["example_index"] = np.int32(record["example_index"])
    return out


def process_batch_size(global_batch_size: int) -> int:
  if global_batch_size % jax.process_count():
    raise ValueError(f"batch_size={global_batch_size} must be divisible by the {jax.process_count()} processes")
  return global_batch_size // jax.process_count()


def train_iterator(config: ml_collections.ConfigDict, source, vocab: Vocabulary, key: str) -> grain.DatasetIterator:
  """An endless, checkpointable iterator of this process's share of each global training batch; `key` is the
  record field the model reads (`sources.input_spec(config).key`).

  The global batches do not depend on the number of processes: every process orders the whole split the same way
  (same seed), cuts it into blocks of its share, and takes every `process_count`-th block from its own index. The
  global batch `g` is then examples `g*B .. (g+1)*B - 1` of one shuffled stream, as in a single process, so a
  2-process run trains on exactly what a 1-process run does (tests/test_multihost.py compares the losses). grain's
  MapDataset is random access: a process decodes and transforms only the blocks it takes.
  """
  augment = preprocess.AugmentConfig(
      crop=config.augment.crop, crop_min_scale=config.augment.crop_min_scale, color=config.augment.color)
  ds = grain.MapDataset.source(source)
  ds = ds.seed(config.seed).shuffle().repeat()
  ds = ds.random_map(TrainTransform(vocab, config.max_caption_tokens, config.dataset.image_size, augment,
                                    key))
  ds = ds.batch(process_batch_size(config.batch_size), drop_remainder=True)
  ds = ds[jax.process_index()::jax.process_count()]
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
