"""A split folder's `metadata.jsonl` or `metadata.csv` (Hugging Face's `imagefolder` layout) read into an index,
file name → its captions, with every row that gives none counted by reason; and the one check that a file name
stays inside the split folder. Names and captions only: the index of a 100k-image folder is a few tens of MB,
the images are read one at a time later (`folder.py`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import posixpath
import stat

from capjax import files
from tfds_builders import report as report_lib
from tfds_builders.builder_base import ManualDataError

METADATA_FILES = ("metadata.jsonl", "metadata.csv")
FILE_COLUMN = "file_name"
TEXT_COLUMNS = ("text", "caption")  # `text` is Hugging Face's; `caption` is accepted where there is no `text`
_README = "tfds_builders/caption_folder/README.md"


@dataclasses.dataclass
class Index:
  """A split's metadata: file name (normalised, relative to the split folder) → its captions in file order, [] for
  a file only text-less rows name (counted already, and not unreferenced); `path` is the metadata file."""
  path: str
  captions: dict[str, list[str]]


def safe_name(name: str) -> str | None:
  """`name` normalised (`./a//b.jpg` → `a/b.jpg`), or None when it could leave the split folder by its text alone:
  absolute, a `..` part, a backslash or a NUL, or empty. Links are judged where the file is opened (`inside`)."""
  if not name or "\\" in name or "\0" in name or name.startswith("/") or ".." in name.split("/"):
    return None
  normal = posixpath.normpath(name)
  return None if normal in (".", "") or normal.startswith("../") else normal


def inside(root: str, name: str) -> bool:
  """Whether `root/name`, every link on the way followed, is still inside `root` (a link pointing outside is not):
  decided from the names alone, before anything is opened."""
  real_root = os.path.realpath(root)
  return os.path.realpath(os.path.join(real_root, name)).startswith(real_root + os.sep)


def metadata_file(split_dir: str) -> str | None:
  """The split's metadata file, or None when it has none; both kinds at once, or one that is not a regular file
  (a FIFO would hang the build, a device never end), is a ManualDataError."""
  found = [os.path.join(split_dir, name) for name in METADATA_FILES if os.path.lexists(os.path.join(split_dir, name))]
  if len(found) > 1:
    raise ManualDataError(f"{split_dir} holds both metadata.jsonl and metadata.csv — keep one of them ({_README})")
  if not found:
    return None
  try:
    mode = os.stat(found[0]).st_mode
  except OSError as e:
    raise ManualDataError(f"{found[0]} cannot be read ({e.strerror or e}) — give a metadata file ({_README})") from e
  if not stat.S_ISREG(mode):
    raise ManualDataError(f"{found[0]} is {files.kind(mode)}, not a regular file — save the metadata to a file "
                          f"({_README})")
  return found[0]


def _text(path: str) -> io.TextIOBase:
  """The metadata file open as UTF-8 text (a byte-order mark dropped), opened without blocking and checked again on
  the open file, so that a FIFO swapped in after `metadata_file`'s check cannot hang the build."""
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
  mode = os.fstat(fd).st_mode
  if not stat.S_ISREG(mode):
    os.close(fd)
    raise ManualDataError(f"{path} is {files.kind(mode)}, not a regular file — save the metadata to a file ({_README})")
  os.set_blocking(fd, True)
  return open(fd, encoding="utf-8-sig", newline="")  # closed by the caller's `with`


def _captions(value: object) -> list[str]:
  """The captions of a row's text value, each exactly as written: a string, or a list (several references); empty
  or blank ones and non-strings are no caption."""
  values = value if isinstance(value, list) else [value]
  return [v for v in values if isinstance(v, str) and v.strip()]


class _Rows:
  """What the rows of one metadata file add to its index and its report."""

  def __init__(self, path: str, report: report_lib.Report):
    self.index = Index(path, {})
    self.report = report

  def add(self, name: object, value: object) -> None:
    self.report.count("rows")
    if not isinstance(name, str) or not name:
      self.report.count("malformed_row")
      return
    normal = safe_name(name)
    if normal is None:
      self.report.count("unsafe_name")  # never opened, nor looked up
      return
    captions = _captions(value)
    if not captions:
      self.report.count("no_text")
    self.index.captions.setdefault(normal, []).extend(captions)


def _missing_column(path: str, what: str) -> ManualDataError:
  return ManualDataError(f"{path} has no {what} column — name the columns file_name and text, as Hugging Face's "
                         f"imagefolder does ({_README})")


def read_jsonl(path: str, report: report_lib.Report) -> Index:
  """One JSON object per line: `file_name` and `text` (or `caption`), a string or a list. A line that is not an
  object is a malformed_row; a file in which no row has `file_name`, or none has a text column, is an error."""
  rows = _Rows(path, report)
  seen_file = seen_text = False
  try:
    with _text(path) as f:
      for line in f:
        if not line.strip():
          continue
        try:
          row = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: hostile nesting
          row = None
        if not isinstance(row, dict):
          report.count("rows").count("malformed_row")
          continue
        seen_file |= FILE_COLUMN in row
        column = next((c for c in TEXT_COLUMNS if c in row), None)
        seen_text |= column is not None
        rows.add(row.get(FILE_COLUMN), row.get(column) if column else None)
  except UnicodeDecodeError as e:
    raise ManualDataError(f"{path} is not UTF-8 — save the metadata as UTF-8 ({_README})") from e
  if not seen_file:
    raise _missing_column(path, "file_name")
  if not seen_text:
    raise _missing_column(path, "text (or caption)")
  return rows.index


def read_csv(path: str, report: report_lib.Report) -> Index:
  """A header with `file_name` and `text` (or `caption`), then one row per caption; the header is checked before
  any row. A row with more cells than the header is a malformed_row."""
  rows = _Rows(path, report)
  try:
    with _text(path) as f:
      reader = csv.DictReader(f)
      header = reader.fieldnames or []
      if FILE_COLUMN not in header:
        raise _missing_column(path, "file_name")
      column = next((c for c in TEXT_COLUMNS if c in header), None)
      if column is None:
        raise _missing_column(path, "text (or caption)")
      for row in reader:
        if None in row:  # cells beyond the header's
          report.count("rows").count("malformed_row")
          continue
        rows.add(row.get(FILE_COLUMN), row.get(column))
  except UnicodeDecodeError as e:
    raise ManualDataError(f"{path} is not UTF-8 — save the metadata as UTF-8 ({_README})") from e
  except csv.Error as e:
    raise ManualDataError(f"{path} is not a CSV file ({str(e)[:80]}) — save it as CSV with a header line "
                          f"({_README})") from e
  return rows.index


def read_index(path: str, report: report_lib.Report) -> Index:
  """The index of a split's metadata file (`metadata_file`), its rows counted into `report`."""
  return read_jsonl(path, report) if path.endswith(".jsonl") else read_csv(path, report)
