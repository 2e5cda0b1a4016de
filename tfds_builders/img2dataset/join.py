"""The url join of img2dataset's images to a caption TSV's rows, with every row and image accounted for: the events
of a shard (whole, or light: no image bytes), the one join rule (`row_outcome`), the plain path of a split, a
shard's winners read back as examples (the Beam path's second pass) and the build report's counts."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from capjax.image import io as image_io
from capjax.progress import Progress
from tfds_builders import report as report_lib
from tfds_builders.img2dataset.shards import (Where, parquet_path, read_parquet, read_images, shard_samples,
                                              verify_image)
from tfds_builders.img2dataset.tsv import TsvIndex, tsv_index

# Row reasons add up: tsv_rows = examples + missing_image + corrupt_image + duplicate_url + malformed_row.
ROW_KEYS = ("tsv_rows", "examples", "missing_image", "corrupt_image", "duplicate_url", "malformed_row")
# Image-side and shard-side counts: images that became no example, and shards read only in part.
IMAGE_KEYS = ("image_without_row", "duplicate_image", "unsafe_member", "shards", "shard_without_parquet",
              "truncated_shard")
REPORT_KEYS = ROW_KEYS + IMAGE_KEYS


@dataclasses.dataclass(frozen=True)
class Event:
  """What one image or shard contributed: an example for a row, a bad image for a row, or (kind "counts") a
  shard's image-side counts (IMAGE_KEYS) as one Report. A light event (`shard_events(light=True)`) is an example
  without its fields: the image was checked, its size kept, its bytes dropped."""
  kind: str                   # "example" | "bad" | "counts"
  row: int = -1               # the row id (the example key)
  position: int = -1          # the row's position in the TsvIndex
  key: str = ""
  reason: str = ""
  example: dict[str, Any] | None = None
  order: tuple[int | str, int] = (0, 0)  # (shard number or name, sample number): ties broken the same anywhere
  counts: report_lib.Report | None = None
  width: int = 0              # of a good image (kind "example")
  height: int = 0
  where: Where | None = None  # of a light event's image: where its bytes lie, for the second read


def shard_events(shard: str, tsv_path: str, labeled: bool, number: int = 0,
                 with_images: bool = True, light: bool = False) -> Iterator[Event]:
  """Every event of one shard (`number` in the split's sorted list): joins each image to its TSV row by the url
  in its .json (or its parquet row), then one "counts" event with the shard's image-side counts. Without
  `with_images` no image is read nor checked: each row event is a "bad" one, for counting a row's images. With
  `light` each image is checked, but a good one's event holds no example (no bytes), only its size: what the Beam
  path groups by row; `shard_examples` reads the winners back."""
  index = tsv_index(tsv_path, labeled)
  counts: collections.Counter = collections.Counter(shards=1)
  parquet_urls = read_parquet(parquet_path(shard))
  if parquet_urls is None:
    counts["shard_without_parquet"] += 1
  for sample_number, sample in enumerate(shard_samples(shard, counts, with_images=with_images)):
    url = (sample.meta or {}).get("url") or (parquet_urls or {}).get(sample.key)
    found = index.lookup(url) if isinstance(url, str) else None
    if found is None:
      if sample.image is not None or sample.truncated or sample.too_large:
        counts["image_without_row"] += 1
      continue
    position, row, fields = found
    order = (number, sample_number)
    if sample.truncated or sample.too_large:
      yield Event("bad", row, position, sample.key, "truncated" if sample.truncated else "too_large", order=order)
      continue
    if sample.image is None:
      continue  # a .json with no image: img2dataset writes none for failed downloads
    if not with_images:
      yield Event("bad", row, position, sample.key, "unchecked", order=order)
      continue
    try:
      header = verify_image(sample.image)
    except image_io.ImageError as e:
      yield Event("bad", row, position, sample.key, e.reason, order=order)
      continue
    if light:
      yield Event("example", row, position, sample.key, order=order, width=header.width, height=header.height,
                  where=Where.of(sample_number, sample))
      continue
    yield Event("example", row, position, sample.key, order=order, width=header.width, height=header.height,
                example=_example(fields, url, sample.image, sample.key, header.width, header.height, labeled))
  yield Event("counts", counts=report_lib.Report(collections.Counter(counts)))


def _example(fields: tuple[str, ...], url: str, image: bytes, key: str, width: int, height: int,
             labeled: bool) -> dict[str, Any]:
  example = {
      "image": image,  # the bytes as downloaded: Image(encoding_format="jpeg") stores them unchanged
      "caption": fields[0],
      "captions": [fields[0]],  # the trainer's references field (one per image in CC3M)
      "url": url,
      "key": key,
      "width": width,
      "height": height,
  }
  if labeled:
    example["labels"] = fields[2].split(",")
    example["mids"] = fields[3].split(",")
    example["confidences"] = np.asarray([float(c) for c in fields[4].split(",")], np.float32)
  return example


# ------------------------------------------------------------------------------------------------ report


CC3M_BREAKDOWNS = {"corrupt_image": "corrupt_reasons"}


def split_report(counts: report_lib.Report, index: TsvIndex) -> dict[str, Any]:
  """A split's report as builds write it, from its summed Report: the TSV's own counts added, and the rows
  neither given an example nor a bad image are missing_image (never downloaded, or their shard is gone)."""
  total = report_lib.Report().merge(counts)
  total.counts.update(tsv_rows=index.tsv_rows, duplicate_url=index.duplicate_url, malformed_row=index.malformed_row)
  total.counts["missing_image"] = len(index) - total.counts["examples"] - total.counts["corrupt_image"]
  return total.as_dict(REPORT_KEYS, CC3M_BREAKDOWNS)


def format_report(reports: Mapping[str, Mapping[str, Any]], title: str = "cc3m build report",
                  keys: tuple[str, ...] = REPORT_KEYS,
                  breakdowns: Mapping[str, str] = CC3M_BREAKDOWNS) -> str:
  """A build report as a table: one column per split, one line per count in `keys`, each count followed by its
  breakdown (`breakdowns`: count → the report's dict of name → number, e.g. the corrupt-image reasons)."""
  splits = list(reports)
  rows: list[tuple[str, list[int]]] = []
  for key in keys:
    rows.append((key, [reports[s][key] for s in splits]))
    detail = breakdowns.get(key)
    for name in sorted({n for s in splits for n in reports[s][detail]}) if detail else ():
      rows.append((f"  {name}", [reports[s][detail].get(name, 0) for s in splits]))
  width = max(len(title), *(len(label) for label, _ in rows)) + 2
  lines = [title.ljust(width) + "".join(s.rjust(12) for s in splits)]
  lines += [label.ljust(width) + "".join(f"{n:>12,}" for n in numbers) for label, numbers in rows]
  return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the join rule


def _rule_order(event: Event) -> tuple:
  # (shard, sample) is unique within a split: the order is total without looking at the images' bytes.
  return event.kind != "example", event.key, event.order


def row_outcome(events: Iterable[Event]) -> tuple[Event | None, report_lib.Report]:
  """The one join rule, for one row and all of its images (both paths call it): the good image with the smallest
  key is its example (equal keys: the first in (shard, sample) order), returned as its event (whole on the plain
  path, light on Beam's); its other images count as duplicate_image; a row with only bad images is corrupt_image,
  under the reason of its smallest key's image. Deterministic: it does not depend on the order images arrive in,
  which Beam does not keep."""
  events = sorted(events, key=_rule_order)
  first = events[0]
  counts = report_lib.Report().count("duplicate_image", len(events) - 1)
  if first.kind == "example":
    return first, counts.count("examples")
  return None, counts.count("corrupt_image", reason=first.reason)


def _decide(held: list[Event], counts: report_lib.Report,
            progress: Progress | None) -> Iterator[tuple[int, dict[str, Any]]]:
  """The plain path's decision of one row from all of its images: its counts, its progress, its example if any."""
  winner, row_counts = row_outcome(held)
  counts.merge(row_counts)
  if progress:
    progress.update(1, int(winner is None))
  if winner is not None:
    yield winner.row, winner.example


def plain_split(shards: list[str], tsv_path: str, labeled: bool, counts: report_lib.Report,
                name: str = "", every: float = 30.0) -> Iterator[tuple[int, dict[str, Any]]]:
  """The plain path of one split: examples under the join rule, every count added to `counts`. A first pass
  counts each row's images without reading them (tar members are skipped in the stream); then a row with one
  image is decided as its image comes, and a row with more is held only until its last image has come. With a
  `name`, progress is logged at most every `every` seconds: rows decided of the rows the first pass found images
  for, rows/s, ETA, and rows that made no example so far."""
  index = tsv_index(tsv_path, labeled)
  expected = np.zeros(len(index), np.uint32)
  for number, shard in enumerate(shards):
    for event in shard_events(shard, tsv_path, labeled, number, with_images=False):
      if event.kind != "counts":
        expected[event.position] += 1
  progress = Progress(name, int(np.count_nonzero(expected)), every) if name else None
  waiting: dict[int, list[Event]] = {}
  decided = np.zeros(len(index), bool)
  for number, shard in enumerate(shards):
    for event in shard_events(shard, tsv_path, labeled, number):
      if event.kind == "counts":
        counts.merge(event.counts)
        continue
      if decided[event.position]:  # an image the first pass did not see (its shard changed): one more duplicate
        counts.count("duplicate_image")
        continue
      held = waiting.setdefault(event.position, [])
      held.append(event)
      if len(held) < expected[event.position]:
        continue
      del waiting[event.position]
      decided[event.position] = True
      yield from _decide(held, counts, progress)
  for held in waiting.values():  # a shard that changed between the passes: its rows are decided at the end
    yield from _decide(held, counts, progress)
  if progress:
    progress.finish()


# A winner as the Beam path sends it to its shard's second pass: (TSV position, width, height, where its bytes lie).
Winner = tuple[int, int, int, Where]


def winner_of(event: Event) -> tuple[int, Winner]:
  """(shard number, Winner) of a light event that won its row: a few numbers and the key, no bytes."""
  return event.order[0], (event.position, event.width, event.height, event.where)


def shard_examples(shard: str, tsv_path: str, labeled: bool,
                   winners: Iterable[Winner]) -> Iterator[tuple[int, dict[str, Any]]]:
  """The examples of one shard's winners (already checked in the first pass): their bytes read again
  (`read_images`: at their offsets in a tar), their captions read back from the TSV."""
  by_number = {winner[3].number: winner for winner in winners}
  index = tsv_index(tsv_path, labeled)
  for where, image in read_images(shard, [winner[3] for winner in by_number.values()]):
    position, width, height, _ = by_number[where.number]
    row, fields = index.row_at(position)
    if fields is None:
      raise ValueError(f"{tsv_path} changed during the build: its row at {row} no longer parses")
    yield row, _example(fields, fields[1], image, where.key, width, height, labeled)


_UNSEEN, _OK, _BAD = 0, 1, 2


def row_outcomes(events: Iterable[Event], num_rows: int, report: dict[str, Any]) -> Iterator[Event]:
  """A stream of events into the events of their examples and counts, one byte of state per row: a row's first good
  image is its example. This is the join rule only where every image of a row has the same key and events come in
  (shard, sample) order, as in cc12m_llavanext (joined on key); cc3m's rows are joined by url, and use
  `plain_split`."""
  state = np.zeros(num_rows, np.uint8)
  bad_reason: dict[int, str] = {}  # position -> reason, while the row has only bad images
  for event in events:
    if event.kind not in ("example", "bad"):
      report[event.kind] += 1
      continue
    before = state[event.position]
    if before != _UNSEEN:
      report["duplicate_image"] += 1
    if event.kind == "example" and before != _OK:
      state[event.position] = _OK
      bad_reason.pop(event.position, None)
      yield event
    elif event.kind == "bad" and before == _UNSEEN:
      state[event.position] = _BAD
      bad_reason[event.position] = event.reason
  report["examples"] = int((state == _OK).sum())
  report["corrupt_image"] = len(bad_reason)
  report["corrupt_reasons"] = dict(collections.Counter(bad_reason.values()))
