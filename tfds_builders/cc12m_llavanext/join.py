"""The cc12m_llavanext join, shared by the plain path and the Beam DoFns (join_beam.py): train.jsonl.gz read as a
bounded stream of rows, an on-disk key → row store, the cc12m-wds tars read as streams of checked images, the
join on key checked against url, the captions cleaned by capjax.text.recaption, and the build report.

Builders and Beam workers import this module by its package name (see tfds_builders/img2dataset/).
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
import sqlite3
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


from capjax import files
from capjax.progress import Progress
from capjax.strings import is_utf8
from capjax.text import recaption
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.img2dataset import wds

JSONL = "train.jsonl.gz"
RECAPTIONS = ("caption_llava", "caption_llava_short")  # cleaned by capjax.text.recaption
CAPTION_FIELDS = (*RECAPTIONS, "alt_text")  # the text fields `dataset.caption_field` may name
# A caption over this is no caption but a corrupt row (LLaVA-NeXT's long captions run to a few hundred words);
# the limit also bounds what the cleaning rules, whose cost grows with the length, are given.
MAX_CAPTION_CHARS = 10_000
# A line over this is skipped as it streams past, never held whole: memory stays bounded whatever the input.
MAX_LINE_BYTES = 1 << 20
_READ_BYTES = 1 << 20  # decompressed bytes read at a time

# Rows add up: rows = examples (+ flagged, in `clean`) + row_without_image + corrupt_image + BAD_ROW_KEYS.
# `repaired` and `flagged` count joined images with a repair or a failure flag (`clean` drops the flagged).
BAD_ROW_KEYS = ("invalid_json", "missing_field", "caption_too_long", "line_too_long", "duplicate_key")
ROW_KEYS = ("rows", "examples", "repaired", "flagged", "row_without_image", "corrupt_image", *BAD_ROW_KEYS)
# Images that became no example, shards, and a jsonl.gz that ends early.
IMAGE_KEYS = ("image_without_row", "url_mismatch", "duplicate_image", "unsafe_member", "shards", "truncated_shard",
              "truncated_jsonl")
REPORT_KEYS = ROW_KEYS + IMAGE_KEYS
TITLE = "cc12m_llavanext build report"


# ------------------------------------------------------------------------------------------------ rows


@dataclasses.dataclass(frozen=True)
class Row:
  """The fields of one jsonl row the dataset keeps (`caption` is the alt-text)."""

  key: str
  url: str
  caption_llava: str
  caption_llava_short: str
  alt_text: str
  original_width: int  # -1 when the row does not say
  original_height: int

  def to_json(self) -> str:
    return json.dumps(dataclasses.astuple(self), ensure_ascii=False)

  @classmethod
  def from_json(cls, text: str) -> Row:
    return cls(*json.loads(text))


def jsonl_lines(path: str, counts: collections.Counter) -> Iterator[bytes | None]:
  """The lines of a gzip file, read a megabyte at a time and never whole; None for a line over MAX_LINE_BYTES
  (skipped as it streams past). A gzip stream that ends early or is corrupt is counted `truncated_jsonl`, and the
  lines read before it are kept; a last line cut by it is dropped."""
  pending, skipping = bytearray(), False
  with files.open_regular(path) as raw:  # a file that cannot be opened or read is an error, not a count
    try:
      with gzip.GzipFile(fileobj=raw) as f:
        # read1: one decompression step a call, so what was decompressed before a cut is returned before it raises.
        for data in iter(lambda: f.read1(_READ_BYTES), b""):
          start = 0
          while True:
            end = data.find(b"\n", start)
            if not skipping:
              pending += data[start:] if end < 0 else data[start:end]
              if len(pending) > MAX_LINE_BYTES:
                pending.clear()
                skipping = True
                yield None
            if end < 0:
              break
            if not skipping:
              yield bytes(pending)
            pending.clear()
            skipping = False
            start = end + 1
    except (EOFError, gzip.BadGzipFile, zlib.error):  # cut short; not gzip, or a CRC that does not match; corrupt
      counts["truncated_jsonl"] += 1
      return
  if pending and not skipping:
    yield bytes(pending)  # a last line without a newline


def _size(value: Any) -> int:
  return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else -1


def parse_row(line: bytes) -> Row | str:
  """The row of one line, or the count it falls under: invalid_json (not JSON, not an object), missing_field (key,
  url or a caption missing or not text UTF-8 can encode; key and url empty) or caption_too_long."""
  try:
    value = json.loads(line)
  except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; RecursionError: hostile nesting
    return "invalid_json"
  if not isinstance(value, dict):
    return "invalid_json"
  texts = [value.get(name) for name in ("key", "url", "caption_llava", "caption_llava_short", "caption")]
  if not all(is_utf8(t) for t in texts) or not texts[0].strip() or not texts[1].strip():  # no lone surrogate
    return "missing_field"
  if any(len(t) > MAX_CAPTION_CHARS for t in texts[2:]):
    return "caption_too_long"
  return Row(*texts, _size(value.get("original_width")), _size(value.get("original_height")))


def read_rows(path: str, counts: collections.Counter) -> Iterator[tuple[int, Row]]:
  """(line number from 0, row) of every good row in file order; every other line that is not blank is counted
  in `counts` under its reason (duplicate keys are the store's or the join's to count)."""
  for number, line in enumerate(jsonl_lines(path, counts)):
    if line is None:
      counts["rows"] += 1
      counts["line_too_long"] += 1
      continue
    if not line.strip():
      continue
    counts["rows"] += 1
    row = parse_row(line)
    if isinstance(row, str):
      counts[row] += 1
    else:
      yield number, row


def _advance(progress: Progress, done: int, failures: int) -> None:
  """Brings `progress` to these totals (a bad row is counted where it is read, between the good rows)."""
  progress.update(done - progress.done, failures - progress.failures)


class RowStore:
  """key → (position, line, row) of train.jsonl.gz, in an SQLite file: memory stays at SQLite's page cache (64
  MiB) at any size. Positions 0..len-1 index per-row state; the line number is the example's key. Of rows with one
  key the first is kept, the others counted `duplicate_key`; the read's other counts are in `counts`."""

  def __init__(self, jsonl: str, folder: str, batch: int = 10_000, progress: Progress | None = None):
    self.counts: collections.Counter = collections.Counter()
    self._db = sqlite3.connect(os.path.join(folder, "rows.sqlite"))
    self._db.executescript(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;"
        "CREATE TABLE rows (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, line INTEGER NOT NULL, row TEXT);")
    pending: list[tuple[str, int, str]] = []
    good = 0
    for line, row in read_rows(jsonl, self.counts):
      good += 1
      pending.append((row.key, line, row.to_json()))
      if len(pending) == batch:
        self._insert(pending)
        if progress:  # once a batch: the rows read so far, and the bad ones among them
          _advance(progress, self.counts["rows"], self.counts["rows"] - good)
    self._insert(pending)
    if progress:
      _advance(progress, self.counts["rows"], self.counts["rows"] - good)
      progress.finish()
    self._db.commit()
    self._len = self._db.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
    self.counts["duplicate_key"] += good - self._len

  def _insert(self, rows: list[tuple[str, int, str]]) -> None:
    # A later row with a key already stored is ignored (and adds no id: positions stay dense).
    self._db.executemany("INSERT OR IGNORE INTO rows (key, line, row) VALUES (?, ?, ?)", rows)
    rows.clear()

  def __len__(self) -> int:
    return self._len

  def lookup(self, key: str) -> tuple[int, int, Row] | None:
    found = self._db.execute("SELECT id, line, row FROM rows WHERE key = ?", (key,)).fetchone()
    return None if found is None else (found[0] - 1, found[1], Row.from_json(found[2]))

  def close(self) -> None:
    self._db.close()


# ------------------------------------------------------------------------------------------------ images


def list_shards(manual_dir: str) -> list[str]:
  """The cc12m-wds tars `cc12m-train-NNNN.tar` in the manual dir (symlinks are not followed), sorted."""
  return wds.mirror_shards(manual_dir, "cc12m", "train")


# The images of a cc12m-wds tar, checked (shared with cc3m's wds config: tfds_builders/img2dataset/wds.py).
Image = wds.Image
shard_images = wds.shard_images


def url_mismatch(image: Image, row: Row) -> bool:
  """The image is not the row's: its .json names another url, or (for an image that decodes) none at all. A bad
  image without its .json (cut with it) is still the row's by key, and counts as corrupt_image."""
  return image.url != row.url and (image.url is not None or not image.reason)


def join_event(image: Image, found: tuple[int, int, Row] | None) -> i2d.Event:
  """What one image contributes, given its key's (position, line, row) if any (`joined_examples` turns these into
  examples and counts). An example keeps the image's order and where its bytes lie: a light image's winner is read
  again there."""
  if found is None:
    return i2d.Event("image_without_row", key=image.key)
  position, line, row = found
  if url_mismatch(image, row):
    return i2d.Event("url_mismatch", key=image.key)
  if image.reason:
    return i2d.Event("bad", line, position, image.key, image.reason)
  return i2d.Event("example", line, position, image.key, example=raw_example(row, image), order=image.order,
                   where=image.where)


def raw_example(row: Row, image: Image) -> dict[str, Any]:
  """The example before cleaning: the JPEG bytes as stored in the tar, the row's captions and sizes."""
  return {
      "image": image.data,
      "caption_llava": row.caption_llava,
      "caption_llava_short": row.caption_llava_short,
      "alt_text": row.alt_text,
      "url": row.url,
      "key": row.key,
      "width": image.width,
      "height": image.height,
      "original_width": row.original_width,
      "original_height": row.original_height,
  }


# ------------------------------------------------------------------------------------------------ cleaning


def clean(example: dict[str, Any]) -> tuple[list[str], list[str]]:
  """Cleans the example's recaptions in place (capjax.text.recaption: whitespace and newlines stripped, suffix
  loops cut, boilerplate openings trimmed) and sets `flags` to every rule that fired, as FIELD:RULE. Returns the
  repairs (the text was fixed) and the failures (a placeholder, a loop left inside, a dataset-card failure,
  nothing left: the example is flagged, and `clean` drops it)."""
  repairs: list[str] = []
  failures: list[str] = []
  for field in RECAPTIONS:
    result = recaption.clean_recaption(example[field])
    example[field] = result.text
    repairs += [f"{field}:{rule}" for rule in result.repairs]
    failures += [f"{field}:{rule}" for rule in result.failures]
  example["alt_text"] = example["alt_text"].strip()
  example["flags"] = repairs + failures
  return repairs, failures


def clean_and_count(example: dict[str, Any], report: report_lib.Report) -> bool:
  """`clean`, with the example's flags counted (`repaired`, `flagged`, and each FIELD:RULE under "flags"); True
  when flagged."""
  repairs, failures = clean(example)
  report.count("repaired", int(bool(repairs)))
  report.count("flagged", int(bool(failures)))
  for name in example["flags"]:
    report.count("flags", reason=name)
  return bool(failures)


# ------------------------------------------------------------------------------------------------ the join


def joined_examples(events: Iterable[i2d.Event], num_rows: int, drop_flagged: bool,
                    report: report_lib.Report) -> Iterator[i2d.Event]:
  """The join, on both paths: `join_event`s of rows 0..num_rows-1, each key's images in (shard, sample) order, into
  the events of their examples (`i2d.row_outcomes`: a row's first good image), each cleaned and counted
  (`clean_and_count`; a flagged one dropped with `drop_flagged`); once the events are exhausted, the images and
  rows that gave none counted in `report` (see finish_report)."""
  counts = report.counts
  outcomes: dict[str, Any] = collections.defaultdict(int)
  joined = 0
  for event in i2d.row_outcomes(events, num_rows, outcomes):
    joined += 1
    if clean_and_count(event.example, report) and drop_flagged:
      continue
    counts["examples"] += 1
    yield event
  for kind in ("image_without_row", "url_mismatch", "duplicate_image"):
    counts[kind] += outcomes[kind]
  for reason, n in outcomes["corrupt_reasons"].items():
    report.count("corrupt_image", n, reason=reason)
  counts["row_without_image"] += num_rows - joined - outcomes["corrupt_image"]


def _shard_events(shards: list[str], store: RowStore, counts: collections.Counter,
                  progress: Progress | None) -> Iterator[i2d.Event]:
  """Each shard's images as join events, in (shard, sample) order; `progress` counts shards done, images read, and
  images that cannot be an example (bad, without a row, naming another url)."""
  for shard in shards:
    for image in shard_images(shard, counts):
      event = join_event(image, store.lookup(image.key))
      if progress:
        progress.update(0, int(event.kind != "example"), items=1)
      yield event
    if progress:
      progress.update(1)
  if progress:
    progress.finish()


def plain_examples(jsonl: str, shards: list[str], folder: str, drop_flagged: bool, report: report_lib.Report,
                   name: str = "", every: float = 30.0) -> Iterator[tuple[int, dict[str, Any]]]:
  """The plain path: the rows into a store in `folder`, then each shard's images joined, one at a time, a row's
  first good image its example; every count goes into `report` (see finish_report). With a `name`, progress is
  logged at most every `every` seconds: while the store is built, jsonl rows read (their total is not known before
  the end of a gzip stream) and bad rows; then shards done of the shards, images read and images that failed."""
  rows = Progress(f"{name} jsonl", None, every, failed="bad rows so far") if name else None
  store = RowStore(jsonl, folder, progress=rows)
  try:
    report.counts.update(store.counts)
    shards_done = (Progress(name, len(shards), every, unit="shards", items="images", failed="images failed so far")
                   if name else None)
    events = _shard_events(shards, store, report.counts, shards_done)
    for event in joined_examples(events, len(store), drop_flagged, report):
      yield event.row, event.example
  finally:
    store.close()


def key_rows(rows: Iterable[tuple[int, Row]], report: report_lib.Report) -> dict[str, tuple[int, int, Row]]:
  """Some keys' (line, row) pairs as `RowStore` holds them, in memory: key → (position, line, row); of rows with
  one key the first is kept, the others counted `duplicate_key`."""
  found: dict[str, tuple[int, int, Row]] = {}
  for line, row in sorted(rows, key=lambda r: r[0]):
    if row.key in found:
      report.count("duplicate_key")
    else:
      found[row.key] = (len(found), line, row)
  return found


def join_group(rows: Iterable[tuple[int, Row]], images: Iterable[Image], drop_flagged: bool,
               report: report_lib.Report) -> Iterator[i2d.Event]:
  """The Beam path's join of a group of keys (all their rows and images, grouped) by the plain path's steps: the
  rows as the store holds them (`key_rows`), the images in (shard, sample) order as the plain path reads them, each
  its `join_event`, then `joined_examples`. Light images give examples whose "image" is None: `shard_examples`
  fills it."""
  found = key_rows(rows, report)
  events = (join_event(image, found.get(image.key)) for image in sorted(images, key=lambda i: i.order))
  return joined_examples(events, len(found), drop_flagged, report)


# A winner as the Beam path sends it to its shard's second pass: (where its bytes lie, line, example without image).
Winner = tuple[i2d.Where, int, dict[str, Any]]


def winner_of(event: i2d.Event) -> tuple[str, Winner]:
  """(tar name, Winner) of a light image's example event (`join_group`): text fields and where its bytes lie."""
  return event.order[0], (event.where, event.row, event.example)


def shard_examples(shard: str, winners: Iterable[Winner]) -> Iterator[tuple[int, dict[str, Any]]]:
  """The examples of one tar's winners (checked, joined and cleaned in the first pass), their bytes read again
  (`i2d.read_images`: at their offsets in the tar)."""
  by_number = {where.number: (line, example) for where, line, example in winners}
  for where, image in i2d.read_images(shard, [where for where, _, _ in winners]):
    line, example = by_number[where.number]
    yield line, {**example, "image": image}


# ------------------------------------------------------------------------------------------------ report


def finish_report(report: report_lib.Report) -> dict[str, Any]:
  """The build report as written: REPORT_KEYS, then `corrupt_reasons` and `flags` (examples with each), each sorted
  by name."""
  return report.as_dict(REPORT_KEYS, {"corrupt_image": "corrupt_reasons", "flags": "flags"})


def write_report(report: report_lib.Report, data_dir: str) -> None:
  """The build report's part into the dataset's folder being built, once every count is in `report` (both paths'
  last step: tfds_builders/report.py)."""
  report_lib.write_part(data_dir, "train", finish_report(report))


def format_report(report: Mapping[str, Any]) -> str:
  """The report as i2d's table (corrupt-image reasons under corrupt_image), then the examples with each flag."""
  labels = [f"  {name}" for name in report["flags"]]
  title = TITLE.ljust(max([len(TITLE), *(len(label) for label in labels)]))  # one width for both parts
  table = i2d.format_report({"train": report}, title, REPORT_KEYS, {"corrupt_image": "corrupt_reasons"})
  width = len(title) + 2
  lines = [table, "flags (examples with each)"]
  lines += [label.ljust(width) + f"{n:>12,}" for label, n in zip(labels, report["flags"].values())]
  return "\n".join(lines)
