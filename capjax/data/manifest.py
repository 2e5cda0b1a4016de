"""A built dataset's manifest: which keys a build obtained, each with its image bytes' sha256, and the comparison of
two builds' manifests (results of two groups are comparable only on the keys both obtained).

  python -m capjax.data.manifest compare A B [--common=FILE.tsv]
  python -m capjax.data.manifest write --dataset=NAME[/CONFIG] [--data_dir=DIR]

A and B are manifests (`manifest.tsv.gz`) or the dataset folders that hold them. `compare` prints how many keys are
in both, only in A, only in B, and how many common keys have different image bytes; --common writes the common
keys (A's rows: split, key, url). `write` writes the manifest of a dataset built before builds wrote one.

The manifest is `manifest.tsv.gz` in the dataset's version folder: a header line `split key url sha256`, then one
line per example, in the order of the ArrayRecord shards. The builders over web images (cc3m) write it at the
report step, when TFDS writes the dataset's info, on the plain and the Beam paths alike (`write`). A row's identity
is its split and url (its key when it has no url): img2dataset's keys are positions in one download's input, so a
first download and its retry, or two groups' downloads, give one image different keys.
"""

from __future__ import annotations

import array
import dataclasses
import gzip
import hashlib
import io
import os
import re
import zlib
from collections.abc import Iterator, Sequence

import numpy as np
from absl import flags

from capjax import cli, files
from capjax.data import integrity

NAME = "manifest.tsv.gz"
HEADER = ("split", "key", "url", "sha256")
_SHARD = re.compile(r".+?-(?P<split>[^-.]+)\.array_record-(?P<shard>\d{5})-of-\d{5}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_LINE = 1 << 16  # characters: a url is at most a few thousand

FLAGS = flags.FlagValues()
_DATASET = flags.DEFINE_string("dataset", None, "write: the built dataset, NAME or NAME/CONFIG.", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "write: TFDS data dir ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets)",
                                flag_values=FLAGS)
_COMMON = flags.DEFINE_string("common", "", "compare: write the keys in both manifests here (split, key, url).",
                              flag_values=FLAGS)


class ManifestError(ValueError):
  """A file that is not a manifest; the message names it and what is wrong."""


# ------------------------------------------------------------------------------------------------ writing


def _shards(folder: str) -> list[tuple[str, str]]:
  """(split, path) of each ArrayRecord shard in a dataset's folder, by split and shard number."""
  found = []
  for entry in os.listdir(folder):
    if match := _SHARD.fullmatch(entry):
      found.append((match["split"], int(match["shard"]), os.path.join(folder, entry)))
  return [(split, path) for split, _, path in sorted(found)]


def entries(folder: str, with_sha256: bool = True) -> Iterator[tuple[str, str, str, str]]:
  """(split, key, url, sha256 of the image bytes) of every record of the dataset in `folder`, read from its
  ArrayRecord shards (the image's bytes as stored, never decoded); '' for a field the records lack, and for the
  sha256 without `with_sha256`."""
  from array_record.python import array_record_module  # noqa: PLC0415
  # The records are tf.train.Examples: TFDS's own copy of the proto reads them without importing TensorFlow (4 s
  # and 450 MiB, which a build that needs no TensorFlow would pay for its manifest).
  from tensorflow_datasets.proto import tf_example_pb2 as example_pb2  # noqa: PLC0415

  def text(example, name: str) -> bytes:
    values = example.features.feature[name].bytes_list.value if name in example.features.feature else []
    return values[0] if values else b""

  for split, path in _shards(folder):
    reader = array_record_module.ArrayRecordReader(path)
    try:
      for start in range(0, reader.num_records(), 256):
        for record in reader.read(start, min(start + 256, reader.num_records())):
          example = example_pb2.Example.FromString(record)
          key, url = (text(example, name).decode("utf-8", "replace") for name in ("key", "url"))
          yield split, key, url, hashlib.sha256(text(example, "image")).hexdigest() if with_sha256 else ""
    finally:
      reader.close()


def _clean(field: str) -> str:
  return " ".join(field.split()) if any(c in field for c in "\t\r\n") else field


def write(folder: str | os.PathLike[str]) -> tuple[str, int] | None:
  """Writes `manifest.tsv.gz` into the dataset's `folder` from its ArrayRecord shards (complete, or not at all);
  returns (its path, rows), or None when the folder holds no ArrayRecord shard (a TFRecord build)."""
  folder = os.fspath(folder)
  if not _shards(folder):
    return None
  path = os.path.join(folder, NAME)
  rows = 0
  with files.writing(path, "wb", flag="the manifest") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
    f.write(("\t".join(HEADER) + "\n").encode())
    for split, key, url, sha in entries(folder):
      f.write(f"{split}\t{_clean(key)}\t{_clean(url)}\t{sha}\n".encode())
      rows += 1
  return path, rows


# ------------------------------------------------------------------------------------------------ reading


def manifest_path(path: str) -> str:
  """The manifest a command was given: the file, or `manifest.tsv.gz` in a dataset folder."""
  return os.path.join(path, NAME) if os.path.isdir(path) else path


def read(path: str) -> Iterator[tuple[str, str, str, str]]:
  """The rows (split, key, url, sha256) of a manifest; ManifestError naming the file (and line) when it is not one:
  not gzip, another header, a row without four fields, a sha256 that is not 64 hex digits, no url and no key, a line
  over 64 KiB (read no further). A FIFO or device is refused before it is opened (`files.open_input`)."""
  with files.open_input(path, what="a manifest") as raw:
    try:
      with gzip.GzipFile(fileobj=raw) as unzipped, io.TextIOWrapper(unzipped, encoding="utf-8", newline="\n") as f:
        number = 0
        for number, line in enumerate(iter(lambda: f.readline(_MAX_LINE), ""), start=1):
          if not line.endswith("\n"):
            if len(line) >= _MAX_LINE:
              raise ManifestError(f"{path} is not a manifest: line {number} is over {_MAX_LINE:,} characters")
            line += "\n"  # a last line without its newline
          fields = line[:-1].split("\t")
          if number == 1:
            if tuple(fields) != HEADER:
              raise ManifestError(f"{path} is not a manifest: its first line is not `{' '.join(HEADER)}` "
                                  "(tab-separated)")
            continue
          if len(fields) != 4 or not fields[0] or not (fields[1] or fields[2]) or not _SHA256.fullmatch(fields[3]):
            raise ManifestError(f"{path} is not a manifest: line {number} is not `split key url sha256` with a "
                                "64-digit sha256")
          yield fields[0], fields[1], fields[2], fields[3]
        if number == 0:
          raise ManifestError(f"{path} is not a manifest: it is empty")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
      raise ManifestError(f"{path} is not a manifest: not a whole gzip file of UTF-8 text ({type(e).__name__})") from e


def _identity(split: str, key: str, url: str) -> int:
  """A row's identity, split and url (its key when it has no url), as a 64-bit hash."""
  text = f"{split}\t{url}" if url else f"{split}\tkey:{key}"
  return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


@dataclasses.dataclass(frozen=True)
class Keys:
  """A manifest in bounded memory: its rows' identities and image hashes as sorted 64-bit integers (16 bytes a row:
  53 MB at 3.3M rows). `repeated`: rows whose identity an earlier row has (the first is kept)."""
  path: str
  ids: np.ndarray
  sha: np.ndarray
  repeated: int

  @classmethod
  def load(cls, path: str) -> Keys:
    ids, sha = array.array("Q"), array.array("Q")  # C arrays while reading: 8 bytes an entry, not a Python int's 36
    for split, key, url, digest in read(path):
      ids.append(_identity(split, key, url))
      sha.append(int(digest[:16], 16))
    ids_np, sha_np = np.frombuffer(ids, np.uint64), np.frombuffer(sha, np.uint64)
    unique, first = np.unique(ids_np, return_index=True)  # the first row of each identity
    return cls(path, unique, sha_np[first], len(ids_np) - len(unique))


@dataclasses.dataclass(frozen=True)
class Comparison:
  a: int
  b: int
  common: int
  only_a: int
  only_b: int
  different_bytes: int
  repeated_a: int = 0
  repeated_b: int = 0

  def table(self, a: str, b: str) -> str:
    rows = [("keys in A", self.a), ("keys in B", self.b), ("in common", self.common), ("only in A", self.only_a),
            ("only in B", self.only_b), ("in common, other bytes", self.different_bytes)]
    rows += [("repeated in A", self.repeated_a), ("repeated in B", self.repeated_b)] * bool(
        self.repeated_a or self.repeated_b)
    return "\n".join([f"A: {a}", f"B: {b}"] + [f"{label:<24}{n:>12,}" for label, n in rows])


def compare(a: Keys, b: Keys) -> tuple[Comparison, np.ndarray]:
  """The counts of two manifests, and the identities they share (sorted)."""
  common, ia, ib = np.intersect1d(a.ids, b.ids, assume_unique=True, return_indices=True)
  different = int((a.sha[ia] != b.sha[ib]).sum())
  return Comparison(len(a.ids), len(b.ids), len(common), len(a.ids) - len(common), len(b.ids) - len(common), different,
                    a.repeated, b.repeated), common


def write_common(path: str, common: np.ndarray, output: str) -> int:
  """Writes the rows of manifest `path` whose identity is in `common` (sorted) as `split key url` lines, once each;
  returns how many."""
  written = 0
  seen = np.zeros(len(common), bool)
  with files.writing(output, "w", flag="--common") as f:
    f.write("split\tkey\turl\n")
    for split, key, url, _ in read(path):
      i = int(np.searchsorted(common, np.uint64(_identity(split, key, url))))
      if i < len(common) and common[i] == _identity(split, key, url) and not seen[i]:
        seen[i] = True
        f.write(f"{split}\t{key}\t{url}\n")
        written += 1
  return written


# ------------------------------------------------------------------------------------------------ the command


def _compare_command(a: str, b: str) -> None:
  paths = [manifest_path(a), manifest_path(b)]
  common_out = _COMMON.value
  if common_out:
    files.output_file(common_out, "--common", inputs={"A": paths[0], "B": paths[1]}, example="common.tsv")
  try:
    keys = [Keys.load(path) for path in paths]
  except ManifestError as e:
    cli.fail(f"{e} — give a manifest.tsv.gz a build wrote (or its dataset's folder)")
  result, common = compare(*keys)
  print(result.table(*paths))
  if common_out:
    n = write_common(paths[0], common, common_out)
    print(f"wrote {common_out} ({n:,} common keys)")


def _write_command() -> None:
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data import show, sources  # noqa: PLC0415 (JAX and TensorFlow: not for --help and flag errors)
  if not _DATASET.value:
    cli.fail("missing --dataset — give the built dataset, e.g. --dataset=cc3m")
  if wrong := integrity.dataset_problem(_DATASET.value):
    cli.fail(f"--dataset={_DATASET.value}: {wrong}")
  try:
    builder = show.open_builder(_DATASET.value, integrity.data_dir(_DATA_DIR.value))
  except (sources.DatasetNotBuiltError, ConfigError) as e:
    cli.fail(str(e))
  if not {"image", "url", "key"} <= set(builder.info.features):
    cli.fail(f"{_DATASET.value} has no image, url and key fields — a manifest is for datasets of downloaded images")
  written = write(os.fspath(builder.data_dir))
  if written is None:
    cli.fail(f"{builder.data_dir} holds no ArrayRecord shards — build it with `python -m capjax.data.build`")
  print(f"wrote {written[0]} ({written[1]:,} keys)")


def main(argv: Sequence[str]) -> None:
  args = cli.parse(FLAGS, argv, __doc__, positional=True)
  verb, rest = (args[0], args[1:]) if args else ("", [])
  if verb == "compare":
    if len(rest) != 2:
      cli.fail(f"compare takes two manifests, not {len(rest)} — `python -m capjax.data.manifest compare A B`")
    if _DATASET.value:
      cli.fail("--dataset is for `write` — compare takes two manifests")
    _compare_command(*rest)
  elif verb == "write":
    if rest or _COMMON.value:
      cli.fail("write takes --dataset and --data_dir only — see --help")
    _write_command()
  else:
    cli.fail(f"{'no command' if not verb else f'unknown command {verb!r}'} — give `compare A B` or "
             "`write --dataset=NAME`")


if __name__ == "__main__":
  cli.run(main)
