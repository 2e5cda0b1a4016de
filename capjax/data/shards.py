"""Writing a TFDS dataset from outside a builder one ArrayRecord shard at a time, so that a killed job resumes at the
first missing shard: the shards' index ranges, the settings manifest a resumed job must match (`check_manifest`), a
split's shards and their infos (`SplitShards`, `ShardWriter`), and the dataset's info (`write_info`:
dataset_info.json, features.json, metadata.json) once its shards are written.

Used by the feature extraction (`capjax.tools.extract_tfds_features`), ERG's augmentation (`capjax.erg.augment`) and
the recaptioning's TFDS copy (`capjax.recaption.tfds_output`).
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def check_manifest(path: pathlib.Path, wanted: Mapping[str, Any], refuse: Callable[[str], Exception],
                   write: bool = True) -> None:
  """A job's settings against those its first run saved at `path`: `refuse(details)` (`manifest_mismatch`'s) is
  raised when they differ, for a resumed job with other settings would write a dataset of two kinds; with `write`,
  `wanted` is saved when nothing is yet. A job checks with `write=False` before its slow set-up, then writes."""
  if details := manifest_mismatch(path, wanted):
    raise refuse(details)
  if write:
    write_manifest(path, wanted)


INFO_DIR = "shard_info"  # beside the shards: one JSON per finished shard, its num_examples and what its job adds


class SplitShards:
  """One split of dataset `name` in `out_dir`, written shard by shard: shard `i` holds the examples `ranges[i]`, in
  the file `paths[i]` (named as TFDS names it), with its info in `info_paths[i]` (INFO_DIR/`info_name`). A shard is
  written whole or not at all (`writer`), so a shard whose file exists is finished and a resumed job writes the
  `missing` ones."""

  def __init__(self, out_dir: pathlib.Path, name: str, split: str, ranges: Sequence[tuple[int, int]],
               info_name: str = "{split}-{number:05d}.json"):
    self.ranges = list(ranges)
    self.paths = [pathlib.Path(os.fspath(p)) for p in _template(out_dir, name, split).sharded_filepaths(len(ranges))]
    self.info_paths = [pathlib.Path(out_dir) / INFO_DIR / info_name.format(split=split, number=i)
                       for i in range(len(self.ranges))]

  def missing(self, numbers: Iterable[int] | None = None) -> list[int]:
    """The shards of `numbers` (default: every one) not written yet."""
    return [i for i in (range(len(self.ranges)) if numbers is None else numbers) if not self.paths[i].exists()]

  def writer(self, number: int) -> ShardWriter:
    """Shard `number`'s writer: set its `info` (a dict with `num_examples`) once every record is written."""
    return ShardWriter(self.paths[number], self.info_paths[number])

  def infos(self) -> list[dict[str, Any]]:
    """Every shard's info, in order (all of them written)."""
    return [json.loads(path.read_text()) for path in self.info_paths]


def _template(out_dir: str | os.PathLike[str], name: str, split: str):
  """The `naming.ShardedFileTemplate` of a split's shard files: `name-split.array_record-00000-of-00003`."""
  from tensorflow_datasets.core import naming  # noqa: PLC0415 (TensorFlow: only once a dataset is written)
  return naming.ShardedFileTemplate(data_dir=out_dir, dataset_name=name, split=split, filetype_suffix="array_record",
                                    template=naming.DEFAULT_FILENAME_TEMPLATE)


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
    self.info_path.parent.mkdir(parents=True, exist_ok=True)
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


def write_info(out_dir: str | os.PathLike[str], name: str, version: str, features: Any,
               shard_lengths: Mapping[str, Sequence[int]], *, config_name: str | None = None,
               config_description: str | None = None, **fields: Any) -> None:
  """The info of the ArrayRecord shards written in `out_dir` (dataset_info.json, features.json; metadata.json with
  `metadata`), so that TFDS reads them as dataset `name` (`tfds.builder(name[/config], data_dir=...)`,
  `tfds.builder_from_directory`): unshuffled, each split of `shard_lengths` with its shards' lengths and bytes (its
  files named as `SplitShards` names them). `fields`: DatasetInfo's `description`, `citation`, `homepage`, and
  `metadata` (a dict)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415 (TensorFlow: only once a dataset is written)
  from tensorflow_datasets.core import dataset_info as dataset_info_lib  # noqa: PLC0415
  splits = []
  for split, lengths in shard_lengths.items():
    split_template = _template(out_dir, name, split)
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
