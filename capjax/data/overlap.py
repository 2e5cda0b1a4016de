"""How many images of one built dataset have a near-copy in another: each image's pHash (capjax.image.phash), and
those of A within a Hamming distance of one of B's, found by multi-index hashing. Also the hashes an
alt_text_captions build with `--set=exclude=...` drops the near-copies of (evaluation-set leakage).

  python -m capjax.data.overlap A B [--threshold=10] [--data_dir=DIR] [--pairs=10]

A and B are built datasets, NAME[/CONFIG][:SPLIT] (every split without one) with an `image` feature, e.g.
`python -m capjax.data.overlap alt_text_captions/paper karpathy/coco:test`. It prints how many images of A have a
near-copy in B and the first --pairs of them (A's key, B's key, their distance); keys are SPLIT/KEY (the `key`
feature, else the index in the split).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from absl import flags

from capjax import cli
from capjax.data import integrity
from capjax.image import phash as phash_lib

FLAGS = flags.FlagValues()
_THRESHOLD = flags.DEFINE_integer("threshold", 10, "Hamming distance (of 64 bits) within which two pHashes are "
                                  "near-copies.", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of both ('' -> $TFDS_DATA_DIR or "
                                "~/tensorflow_datasets).", flag_values=FLAGS)
_PAIRS = flags.DEFINE_integer("pairs", 10, "Pairs listed (the first by A's key).", lower_bound=0, flag_values=FLAGS)


class UnusableDatasetError(ValueError):
  """A dataset to hash that is not built, has no such split, or has no `image` feature; the message says what to
  do."""


def split_spec(spec: str) -> tuple[str, str]:
  """`NAME[/CONFIG][:SPLIT]` → (NAME[/CONFIG], SPLIT: '' for every split). Raises UnusableDatasetError."""
  dataset, _, split = spec.partition(":")
  if wrong := integrity.dataset_problem(dataset):
    raise UnusableDatasetError(f"{spec}: {wrong}")
  return dataset, split


def open_split(spec: str, data_dir: str) -> tuple[Any, list[str]]:
  """The builder of a built dataset (`spec`: NAME[/CONFIG][:SPLIT]) with an `image` feature, and the splits to hash
  (every split without one). Raises UnusableDatasetError."""
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data import show, sources  # noqa: PLC0415 (JAX and TensorFlow: not for --help and flag errors)
  dataset, split = split_spec(spec)
  if os.path.exists(data_dir) and not os.path.isdir(data_dir):
    raise UnusableDatasetError(f"--data_dir={data_dir} is a file, not a directory — give the TFDS data dir the "
                               "datasets are built in")
  try:
    builder = show.open_builder(dataset, data_dir)
  except (sources.DatasetNotBuiltError, ConfigError) as e:
    raise UnusableDatasetError(str(e)) from e
  if "image" not in builder.info.features:
    raise UnusableDatasetError(f"{dataset} has no `image` feature — give a dataset of images")
  splits = list(builder.info.splits)
  if split and split not in splits:
    raise UnusableDatasetError(f"{dataset} has no split {split!r} — choose one of {', '.join(splits)}")
  return builder, [split] if split else splits


def hashes(builder: Any, splits: Sequence[str]) -> list[phash_lib.Hashed]:
  """The hash of every image of `splits` of an opened builder, its bytes read undecoded (JPEGs drafted); keys
  SPLIT/KEY (the `key` feature, else the index). An image whose bytes do not hash is left out."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  hashed = []
  for name in splits:
    source = builder.as_data_source(split=name, decoders={"image": tfds.decode.SkipDecoding()})
    for index in range(len(source)):
      record = source[index]
      key = record["key"].decode() if "key" in record else str(index)
      if (made := phash_lib.phash(record["image"])) is not None:
        hashed.append(phash_lib.Hashed(f"{name}/{key}", *made))
  return hashed


def split_hashes(spec: str, data_dir: str) -> list[phash_lib.Hashed]:
  """`hashes` of a built dataset's split (`open_split`). Raises UnusableDatasetError."""
  return hashes(*open_split(spec, data_dir))


def near_copies(a: Sequence[phash_lib.Hashed], b: Sequence[phash_lib.Hashed],
                threshold: int) -> list[tuple[str, str, int]]:
  """(A's key, B's nearest key, distance) of each image of `a` with a near-copy in `b`, by A's key."""
  index = phash_lib.HashIndex([h.phash for h in b], threshold)
  pairs = []
  for h in a:
    if near := index.near(h.phash):
      nearest, d = min(near, key=lambda found: (found[1], b[found[0]].key))
      pairs.append((h.key, b[nearest].key, d))
  return sorted(pairs)


def main(argv: Sequence[str]) -> None:
  args = cli.parse(FLAGS, argv, __doc__, positional=True)
  cli.quiet_library_logs()
  if len(args) != 2:
    given = f" ({' '.join(args)})" if args else ""
    cli.fail(f"give two datasets, not {len(args)}{given} — `python -m capjax.data.overlap A B` "
             "(NAME[/CONFIG][:SPLIT])")
  if wrong := phash_lib.check_threshold(_THRESHOLD.value):
    cli.fail(f"--threshold={wrong}")
  data_dir = integrity.data_dir(_DATA_DIR.value)
  try:
    opened = [open_split(spec, data_dir) for spec in args]  # both checked before either is read
  except UnusableDatasetError as e:
    cli.fail(str(e))
  a, b = (hashes(*split) for split in opened)
  pairs = near_copies(a, b, _THRESHOLD.value)
  share = f" ({len(pairs) / len(a):.1%})" if a else ""
  print(f"{len(pairs):,} of {len(a):,} images of {args[0]} have a near-copy in {args[1]} ({len(b):,} images) "
        f"within {_THRESHOLD.value} bits{share}")
  for pair in pairs[:_PAIRS.value]:
    print("\t".join(map(str, pair)))
  sys.stdout.flush()


if __name__ == "__main__":
  cli.run(main)
