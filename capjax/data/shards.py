"""Writing a TFDS dataset from outside a builder one ArrayRecord shard at a time, so that a killed job resumes at the
first missing shard: the shards' index ranges, the settings manifest a resumed job must match, the shard writer, and
the dataset's info (`write_info`: dataset_info.json, features.json, metadata.json) once its shards are written.

Used by the feature extraction (`capjax.tools.extract_tfds_features`) and ERG's augmentation (`capjax.erg.augment`).
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from capjax import files


def shard_ranges(num_examples: int, examples_per_shard: int) -> list[tuple[int, int]]:
  """[start, stop) index ranges of consecutive examples; at least one (possibly empty) shard, so that an empty split
  is still a finished dataset."""
  if examples_per_shard < 1:
    raise ValueError(f"examples_per_shard={examples_per_shard} is not positive — give 1 or more")
  starts = range(0, max(num_examples, 1), examples_per_shard)
  return [(s, min(s + examples_per_shard, num_examples)) for s in starts]


def manifest_mismatch(path: pathlib.Path, wanted: Mapping[str, Any]) -> str | None:
  """How the settings saved at `path` by a partial run differ from `wanted` (`key: old -> new, ...`), or None when
  they match or nothing is saved yet."""
  if not path.exists():
    return None
  found = json.loads(path.read_text())
  changed = sorted(k for k in wanted if found.get(k) != wanted[k])
  return ", ".join(f"{k}: {found.get(k)!r} -> {wanted[k]!r}" for k in changed) or None


def write_manifest(path: pathlib.Path, wanted: Mapping[str, Any]) -> None:
  """Saves the settings of the first run (atomically), unless some are saved already."""
  if path.exists():
    return
  path.parent.mkdir(parents=True, exist_ok=True)
  with files.writing(path, flag="--output_data_dir") as f:
    f.write(json.dumps(dict(wanted), indent=2, sort_keys=True) + "\n")


class ShardWriter:
  """Records go to a temporary file; on success (`info` set, no exception) the shard's info is written as JSON, then
  the file is renamed into place. A shard file that exists is therefore complete, and its info is there."""

  def __init__(self, path: pathlib.Path, info_path: pathlib.Path):
    self.path, self.info_path = path, info_path
    self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    self.info: dict[str, Any] | None = None

  def __enter__(self) -> ShardWriter:
    from array_record.python import array_record_module  # noqa: PLC0415
    for stale in self.path.parent.glob(f".{self.path.name}.tmp*"):  # left by a job killed while writing it
      stale.unlink()
    self._writer = array_record_module.ArrayRecordWriter(os.fspath(self.tmp), "group_size:1")
    return self

  def write(self, record: bytes) -> None:
    self._writer.write(record)

  def __exit__(self, exc_type, exc, tb) -> None:
    self._writer.close()
    if exc_type is not None or self.info is None:
      self.tmp.unlink(missing_ok=True)
      return
    self.info_path.write_text(json.dumps(self.info) + "\n")
    os.replace(self.tmp, self.path)


def write_info(out_dir: str | os.PathLike[str], name: str, version: str, features: Any, template: Any,
               shard_lengths: Mapping[str, Sequence[int]], *, config_name: str | None = None,
               config_description: str | None = None, **fields: Any) -> None:
  """The info of the ArrayRecord shards written in `out_dir` (dataset_info.json, features.json; metadata.json with
  `metadata`), so that TFDS reads them as dataset `name` (`tfds.builder(name[/config], data_dir=...)`,
  `tfds.builder_from_directory`): unshuffled, each split of `shard_lengths` with its shards' lengths and bytes (its
  files named by `template`, a `naming.ShardedFileTemplate`). `fields`: DatasetInfo's `description`, `citation`,
  `homepage`, and `metadata` (a dict)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415 (TensorFlow: only once a dataset is written)
  from tensorflow_datasets.core import dataset_info as dataset_info_lib  # noqa: PLC0415
  splits = []
  for split, lengths in shard_lengths.items():
    split_template = template.replace(split=split)
    paths = split_template.sharded_filepaths(len(lengths))
    splits.append(tfds.core.SplitInfo(name=split, shard_lengths=list(lengths),
                                      num_bytes=sum(os.path.getsize(p) for p in paths),
                                      filename_template=split_template))
  identity = dataset_info_lib.DatasetIdentity(
      name=name, version=tfds.core.Version(version), data_dir=os.fspath(out_dir), module_name="",
      config_name=config_name, config_description=config_description)
  if "metadata" in fields:
    fields["metadata"] = tfds.core.MetadataDict(fields["metadata"])
  info = tfds.core.DatasetInfo(builder=identity, features=features, disable_shuffling=True, **fields)
  info.set_file_format("array_record")
  info.set_splits(tfds.core.SplitDict(splits))
  info.write_to_directory(out_dir)
