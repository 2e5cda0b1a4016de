"""The rows of a caption TSV that a build left without an example, each with its reason, as the TSV img2dataset takes
(a `caption url reason` header; img2dataset reads the caption and url columns and ignores the reason), so that a
user downloads only those again (into `images/SPLIT.retry/`, which the next build joins with the first download).

A row is retried when it is the kept row of its url (not a malformed row, not a later duplicate) and its url is not
among the urls the build obtained (its manifest). Its reason: `corrupt_image: REASON` when the shards hold an image
for it that is no usable JPEG, else `missing_image: ERROR` with img2dataset's error message from the parquet
sidecars, else `missing_image` (no shard lists it). A manual dir whose shards list no row of the TSV (none there, or
another download's) is the wrong one: a ManualDataError, not every row listed as `missing_image`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from capjax import files
from capjax.image import io as image_io
from tfds_builders.builder_base import ManualDataError
from tfds_builders.img2dataset.shards import parquet_path, read_parquet_rows, shard_samples, verify_image
from tfds_builders.img2dataset.tsv import parse_row, tsv_index

def _one_line(text: str) -> str:
  return " ".join(str(text).split())


class _Reasons(dict):
  """position → reason, each distinct reason held once (img2dataset's few error messages, over a million rows)."""

  def __init__(self):
    super().__init__()
    self._texts: dict[str, str] = {}

  def __setitem__(self, position: int, reason: str) -> None:
    super().__setitem__(position, self._texts.setdefault(reason, reason))

  def setdefault(self, position: int, reason: str) -> str:
    if position not in self:
      self[position] = reason
    return self[position]


def _reasons(index, shards: Iterable[str], obtained: np.ndarray) -> tuple[dict[int, str], bool]:
  """(position → why the row has no example, for the rows without one that the shards say anything about; whether
  the shards list any row of the TSV at all). Every shard is read once (a tar is a stream); only the images of rows
  without an example are decoded."""
  reasons, listed = _Reasons(), False
  for shard in shards:
    rows = read_parquet_rows(parquet_path(shard)) or {}
    for row in rows.values():
      url = row.get("url")
      found = index.lookup(url) if isinstance(url, str) else None
      listed = listed or found is not None
      if found is not None and not obtained[found[0]] and row.get("status") != "success":
        message = _one_line(row.get("error_message") or row.get("status") or "")
        reasons.setdefault(found[0], f"missing_image: {message}" if message else "missing_image")
    counts: collections.Counter = collections.Counter()
    for sample in shard_samples(shard, counts):
      url = (sample.meta or {}).get("url") or rows.get(sample.key, {}).get("url")  # as the join finds it
      found = index.lookup(url) if isinstance(url, str) else None
      listed = listed or found is not None
      if found is None or obtained[found[0]] or reasons.get(found[0], "").startswith("corrupt_image"):
        continue
      if sample.truncated or sample.too_large:
        reasons[found[0]] = f"corrupt_image: {'truncated' if sample.truncated else 'too_large'}"
      elif sample.image is not None:
        try:
          verify_image(sample.image)
        except image_io.ImageError as e:
          reasons[found[0]] = f"corrupt_image: {e.reason}"
  return reasons, listed


def failed_rows(tsv_path: str, labeled: bool, shards: Sequence[str], obtained_urls: Iterable[str],
                where: str) -> Iterator[tuple[str, str, str]]:
  """(caption, url, reason) of every row of the TSV that has no example, in the TSV's order. A ManualDataError now,
  before any row, when no shard (looked for in `where`) lists a row of the TSV: the manual dir is not the build's."""
  index = tsv_index(tsv_path, labeled)
  obtained = np.zeros(len(index), bool)
  for url in obtained_urls:
    if (found := index.lookup(url)) is not None:
      obtained[found[0]] = True
  reasons, listed = _reasons(index, shards, obtained)
  if not listed and len(index):
    raise ManualDataError(f"--manual_dir: no image shard in {where} lists a row of {tsv_path} ({len(shards)} shard(s) "
                          "there), so every row would be listed as missing_image — give --manual_dir the folder the "
                          "dataset was built from (its TSVs and img2dataset's images/)")
  return _rows(tsv_path, labeled, index, obtained, reasons)


def _rows(tsv_path: str, labeled: bool, index, obtained: np.ndarray,
          reasons: dict[int, str]) -> Iterator[tuple[str, str, str]]:
  offset = 0
  with files.open_regular(tsv_path) as f:
    for line in f:
      start, offset = offset, offset + len(line)
      fields = parse_row(line, labeled)
      found = index.lookup(fields[1]) if fields is not None else None
      if found is None or found[1] != start or obtained[found[0]]:
        continue  # a header, a malformed row, a later row of a url, or a row with its example
      yield fields[0], fields[1], reasons.get(found[0], "missing_image")
