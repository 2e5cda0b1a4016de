"""Whether a built dataset's folder is whole, checked before it is reused or read: its metadata files parse, and every
ArrayRecord shard that dataset_info.json lists is there and holds the records listed for it. Cheap: each shard's
footer is read, no record (a shard cut short, emptied or replaced has lost its footer and counts 0 records). Also
where a dataset's folders are: the one default data dir (`data_dir`), the one reading and writing of `NAME[/CONFIG]`
(`split_dataset`, `join_dataset`, `dataset_problem`), and the names a folder of a data dir may have (no path
separator, no leading '.').

In the foundations layer, below `capjax.data.sources`, so that `capjax.text.stats` shares it.
"""

from __future__ import annotations

import contextlib
import os

from capjax import files
from capjax.strings import decimal

INFO, FEATURES = "dataset_info.json", "features.json"
DEFAULT_DATA_DIR = "~/tensorflow_datasets"  # TFDS's (tfds.core.constants.DATA_DIR), known without loading TensorFlow


class DamagedDatasetError(RuntimeError):
  """A built dataset's folder is not whole; the message names the file and how to build the dataset again."""


def _num_records(path: str) -> int:
  """The records ArrayRecord's footer counts in `path`; 0 when the file lost its footer (cut short, emptied) or
  its reader fails."""
  from array_record.python import array_record_module  # noqa: PLC0415
  try:
    reader = array_record_module.ArrayRecordReader(path)
  except (RuntimeError, ValueError, OSError):
    return 0
  try:
    return reader.num_records() if reader.ok() else 0
  except (RuntimeError, ValueError, OSError):
    return 0
  finally:
    with contextlib.suppress(RuntimeError, ValueError, OSError):
      reader.close()  # raises the damage it met reading the footer ("Corrupted Riegeli/records file")


def problem(folder: str | os.PathLike[str]) -> str | None:
  """What is wrong with the built dataset in `folder` (`<data_dir>/<name>/<config>/<version>`), or None when it is
  whole: a metadata file that is missing or does not parse, a shard that is missing or holds another number of
  records than dataset_info.json lists."""
  from tensorflow_datasets.core import naming  # noqa: PLC0415 (TensorFlow: only when a dataset is opened)
  folder = os.fspath(folder)
  info, wrong = files.json_object(os.path.join(folder, INFO))
  if info is None:
    return wrong
  _, wrong = files.json_object(os.path.join(folder, FEATURES))
  if wrong:
    return wrong
  splits = info.get("splits")
  if not isinstance(splits, list) or not splits:
    return f"{os.path.join(folder, INFO)} lists no splits: damaged"
  file_format = info.get("fileFormat") or "tfrecord"
  try:
    for split in splits:
      lengths = [int(n) for n in split.get("shardLengths", [])]
      template = naming.ShardedFileTemplate(
          data_dir=folder, template=split.get("filepathTemplate") or naming.DEFAULT_FILENAME_TEMPLATE,
          dataset_name=info["name"], split=split["name"], filetype_suffix=file_format)
      for path, expected in zip(template.sharded_filepaths(len(lengths)), lengths):
        path = os.fspath(path)
        if not os.path.isfile(path):
          return f"{path} is missing"
        if file_format == "array_record" and (found := _num_records(path)) != expected:
          return f"{path} holds {found} records, not the {expected} of {INFO}: truncated or damaged"
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    return f"{os.path.join(folder, INFO)} does not describe its splits ({type(e).__name__}: {e}): damaged"
  return None


def check(folder: str | os.PathLike[str], rebuild: str) -> None:
  """Raises DamagedDatasetError naming what is wrong in `folder` and, after ` — `, `rebuild` (how to build it again);
  nothing when the folder is whole."""
  if wrong := problem(folder):
    raise DamagedDatasetError(f"the dataset in {os.fspath(folder)} is damaged: {wrong} — {rebuild}")


def version_folders(data_dir: str, name: str, config: str = "", version: str = "") -> list[str]:
  """The folders of `name` (with its builder `config`, and `version`: '' for any) in `data_dir` that a reader could
  open: `<data_dir>/<name>[/<config>]/<version>` folders that hold anything. With `config` '', the config TFDS
  recorded as the default (`.config/metadata.json`), else folders of any config."""
  root = os.path.join(data_dir, name)
  if not os.path.isdir(root):
    return []
  if not config:
    recorded, _ = files.json_object(os.path.join(root, ".config", "metadata.json"))
    config = str((recorded or {}).get("default_config_name") or "")
  parents = [os.path.join(root, config)] if config else [root] + [
      os.path.join(root, d) for d in sorted(os.listdir(root)) if not d.startswith(".") and not _is_version(d)]
  found = []
  for parent in parents:
    if not os.path.isdir(parent):
      continue
    for entry in sorted(os.listdir(parent)):
      path = os.path.join(parent, entry)
      if _is_version(entry) and (not version or entry == version) and os.path.isdir(path) and os.listdir(path):
        found.append(path)
  return found


def registered_folder(name: str, builder_config: str, data_dir: str) -> str | None:
  """`<data_dir>/<name>/<config>/<version>`, where the registered builder `name` of this checkout builds (its
  default config when `builder_config` is ''), or None when TFDS has no such builder or config (then
  `tfds.builder` says what is wrong)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  try:
    cls = tfds.builder_cls(name)
  except tfds.core.registered.DatasetNotFoundError:
    return None
  configs = [c.name for c in cls.BUILDER_CONFIGS]
  chosen = builder_config or getattr(cls, "DEFAULT_CONFIG_NAME", None) or (configs[0] if configs else "")
  if chosen and chosen not in configs:
    return None
  return os.path.join(data_dir, name, *([chosen] if chosen else []), str(cls.VERSION))


def _is_version(name: str) -> bool:
  """`1.0.0`: the name of a version folder (TFDS's work-in-progress folders are named `incomplete.*`)."""
  parts = name.split(".")
  return len(parts) == 3 and all(decimal(p) is not None for p in parts)


def data_dir(given: str = "") -> str:
  """The TFDS data dir meant by `given` (a --data_dir flag, a config's dataset.data_dir): `given`, else
  $TFDS_DATA_DIR, else TFDS's ~/tensorflow_datasets; `~` expanded."""
  return os.path.expanduser(given or os.environ.get("TFDS_DATA_DIR", DEFAULT_DATA_DIR))


def split_dataset(dataset: str) -> tuple[str, str]:
  """`NAME` or `NAME/CONFIG`, as --dataset flags and TFDS spell a dataset -> (name, builder config: '' for none)."""
  name, _, config = dataset.partition("/")
  return name, config


def join_dataset(name: str, config: str = "") -> str:
  """`NAME/CONFIG`, or `NAME` when `config` is '': what `split_dataset` reads."""
  return f"{name}/{config}" if config else name


def dataset_problem(dataset: str) -> str | None:
  """Why `dataset` cannot be `NAME` or `NAME/CONFIG` (a part that is no folder name: `name_problem`), with what to
  give instead; None when it can."""
  name, config = split_dataset(dataset)
  for part, what in ((name, "dataset name"), *(((config, "builder config"),) if "/" in dataset else ())):
    if wrong := name_problem(part):
      return f"the {what} {part!r} {wrong} — give NAME or NAME/CONFIG, e.g. synthetic_scenes/tiny"
  return None


def name_problem(name: str) -> str | None:
  """Why `name` (a dataset, builder config or variant name: one folder of a data dir) cannot be one, or None."""
  if not name:
    return "is empty"
  if "/" in name or "\\" in name or (os.altsep and os.altsep in name):
    return "holds a path separator"
  if name.startswith("."):
    return "starts with '.'" + (" (a path out of the data dir)" if name.startswith("..") else "")
  return None


def rebuild_command(dataset: str, data_dir: str, manual: bool = False) -> str:
  """How to build `dataset` (NAME or NAME/CONFIG) again in `data_dir` (`manual`: from files the user downloaded)."""
  return (f"build it again: `python -m capjax.data.build --dataset={dataset} --data_dir={data_dir}"
          f"{' --manual_dir=DIR' if manual else ''}`")
