"""A released caption TSV as an index, url → row, in bounded memory: the side of the join that cc3m releases."""

from __future__ import annotations

import array
import functools
import hashlib
import io
import mmap
import os

import numpy as np
from etils import epath

from capjax import files


def _url_hash(url: bytes) -> int:
  return int.from_bytes(hashlib.blake2b(url, digest_size=8).digest(), "little")


def parse_row(line: bytes, labeled: bool) -> tuple[str, ...] | None:
  """The fields of one TSV line (caption, url[, labels, mids, confidences]), or None when malformed."""
  fields = line.rstrip(b"\r\n").split(b"\t")
  if len(fields) != (5 if labeled else 2) or not fields[0].strip() or not fields[1].strip():
    return None
  try:
    texts = tuple(f.decode("utf-8") for f in fields)
  except UnicodeDecodeError:
    return None
  if labeled:
    labels, mids, confidences = (texts[i].split(",") for i in (2, 3, 4))
    try:
      [float(c) for c in confidences]
    except ValueError:
      return None
    if not len(labels) == len(mids) == len(confidences):
      return None
  return texts


class TsvIndex:
  """url → row of one released TSV, in bounded memory: 8-byte url hashes sorted beside each row's byte offset
  and length; a row's text is read back from the memory-mapped file
  (the OS page cache, not this heap) and its url compared, so a hash collision cannot pair the wrong caption.
  That is 20 bytes a row once built (66 MB at 3.3M rows); while reading, C arrays (not Python lists) hold them.
  A later row with a url seen before, and a malformed row (wrong number of fields, an extra tab, no url), are
  counted and left out."""

  def __init__(self, path: str, labeled: bool):
    self.path, self.labeled = path, labeled
    # epath: the manual dir may be on GCS (Dataflow); a local file is memory-mapped, a remote one read by seeks.
    self._file = files.open_regular(path)  # a FIFO would hang the read, a device never end it
    try:
      self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # no file descriptor, or empty
      self._map = None
    hashes, offsets, lengths = array.array("Q"), array.array("q"), array.array("i")
    self.tsv_rows = self.malformed_row = 0
    offset = 0
    for number, line in enumerate(iter(functools.partial(self._file.readline), b"")):
      start, offset = offset, offset + len(line)
      if number == 0 and line.rstrip(b"\r\n").lower().split(b"\t")[:2] == [b"caption", b"url"]:
        continue  # a header line added for img2dataset: not a row
      if not line.strip():
        continue
      self.tsv_rows += 1
      fields = parse_row(line, labeled)
      if fields is None:
        self.malformed_row += 1
        continue
      hashes.append(_url_hash(fields[1].encode("utf-8")))
      offsets.append(start)
      lengths.append(len(line))
    hashes_np = np.frombuffer(hashes, np.uint64)
    offsets_np = np.frombuffer(offsets, np.int64)
    # Stable sort: of rows with one url, the first in the file comes first and is the one kept.
    order = np.argsort(hashes_np, kind="stable")
    hashes_np, offsets_np, lengths_np = hashes_np[order], offsets_np[order], np.frombuffer(lengths, np.int32)[order]
    first = np.ones(len(hashes_np), bool)
    first[1:] = hashes_np[1:] != hashes_np[:-1]
    # Equal 64-bit hashes of different urls: about 3e-7 expected pairs at 3.3M rows; counted as duplicates.
    self.duplicate_url = int((~first).sum())
    self._hashes, self._offsets, self._lengths = hashes_np[first], offsets_np[first], lengths_np[first]

  def __len__(self) -> int:
    return len(self._hashes)

  @property
  def nbytes(self) -> int:
    return self._hashes.nbytes + self._offsets.nbytes + self._lengths.nbytes

  def lookup(self, url: str) -> tuple[int, int, tuple[str, ...]] | None:
    """(position, row id, fields) of the row with this url, or None. The position (0..len-1) indexes per-row
    state; the row id, the row's byte offset in the TSV, is the example's key: unique and stable."""
    target = _url_hash(url.encode("utf-8"))
    i = int(np.searchsorted(self._hashes, np.uint64(target)))
    if i == len(self._hashes) or int(self._hashes[i]) != target:
      return None
    offset, fields = self.row_at(i)
    if fields is None or fields[1] != url:
      return None
    return i, offset, fields

  def row_at(self, position: int) -> tuple[int, tuple[str, ...] | None]:
    """(row id, fields) of the row at `position` (as `lookup` gave it); fields None if the file changed."""
    offset, length = int(self._offsets[position]), int(self._lengths[position])
    if self._map is not None:
      line = self._map[offset:offset + length]
    else:
      self._file.seek(offset)
      line = self._file.read(length)
    return offset, parse_row(line, self.labeled)


@functools.lru_cache(maxsize=4)
def _cached_index(path: str, labeled: bool, size: int, mtime: float) -> TsvIndex:
  del size, mtime  # part of the cache key: a changed file is indexed again
  return TsvIndex(path, labeled)


def tsv_index(path: str, labeled: bool) -> TsvIndex:
  """The index of `path`, built once per process (Beam workers build it in their first work item)."""
  stat = epath.Path(path).stat()
  return _cached_index(os.fspath(path), labeled, stat.length, stat.mtime)
