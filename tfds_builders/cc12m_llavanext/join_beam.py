"""The cc12m_llavanext Beam pipeline, whose shuffles carry no image bytes: the jsonl.gz read as one stream of rows;
each tar one work item of images, each checked and its bytes dropped (pass 1); both sent in batches of plain tuples
by group of keys (`key_group`), grouped, and each group joined by join.join_group (the plain path's join, on the
group's rows), so that the examples and the report are the plain path's; the winners (their text fields, no bytes)
grouped by tar, and their bytes read again there, at their offsets (pass 2: i2d.read_images).
The Reports of every step are summed into the build report's part. Batches, not one element per row and per image:
Beam's per-element costs (each element through each transform, a pickled dataclass at each shuffle) were most of
this path's cost beyond the plain path's.

Imported by package name only (workers unpickle these functions by module path; see tfds_builders/img2dataset/),
and only when Beam runs: this module imports apache_beam at the top.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from absl import logging

from capjax.progress import log_shard
from tfds_builders import report as report_lib
from tfds_builders.cc12m_llavanext import join
from tfds_builders.img2dataset.shards import Where

MAIN, COUNTS = "main", "counts"
# Rows in one batch at most: the jsonl's reader holds the batches of a few groups only (keys come in runs).
ROWS_PER_BATCH = 1024
_OPEN_BATCHES = 64


def key_group(key: str) -> str:
  """The group a key is joined in: its characters but the last three. img2dataset's keys are numbers (shard, then
  sample), so a group is up to 1,000 consecutive keys, and a tar's images fall in a few groups."""
  return key[:-3]


# A light image as pass 1 sends it: (key, url, tar name, number, width, height, reason, where as a tuple or None);
# Beam codes tuples of str, int and None natively (a dataclass would be pickled, one by one).
def _packed(image: join.Image) -> tuple:
  where = dataclasses.astuple(image.where) if image.where is not None else None
  return image.key, image.url, *image.order, image.width, image.height, image.reason, where


def _unpacked(packed: tuple) -> join.Image:
  key, url, name, number, width, height, reason, where = packed
  return join.Image(key, url, (name, number), None, width, height, reason, where=Where(*where) if where else None)


NAME = "cc12m_llavanext train"  # of the log lines


class ReadRowsFn(beam.DoFn):
  """The jsonl.gz → (group, [(line, row as a tuple)]) of its good rows, in batches; its counts (rows, bad rows,
  truncated_jsonl) tagged. Logs one line when the jsonl is read: its rows, the bad ones, and the rate."""

  def process(self, path: str) -> Iterator[Any]:
    counts: collections.Counter = collections.Counter()
    start, good = time.process_time(), 0
    batches: dict[str, list[tuple[int, tuple]]] = collections.defaultdict(list)
    for line, row in join.read_rows(path, counts):
      good += 1
      group = key_group(row.key)
      batches[group].append((line, dataclasses.astuple(row)))
      if len(batches[group]) == ROWS_PER_BATCH:
        yield group, batches.pop(group)
      elif len(batches) > _OPEN_BATCHES:
        yield from batches.items()
        batches.clear()
    yield from batches.items()
    seconds = time.process_time() - start
    logging.info("%s jsonl read: %d rows, %d bad, %s rows/s", NAME, counts["rows"], counts["rows"] - good,
                 f"{counts['rows'] / seconds:,.0f}" if seconds > 0 else "-")
    yield beam.pvalue.TaggedOutput(COUNTS, report_lib.Report(counts))


class ReadShardFn(beam.DoFn):
  """One (number, tar) → (group, [packed light image]) of its images, each checked, no bytes kept; its counts
  (shards, unsafe_member, truncated_shard) tagged. Logs one line per tar: its number of the `total`, its images
  checked and those that cannot be an example here (bad; rows are joined later, on other workers), and the rate."""

  def __init__(self, total: int):
    super().__init__()
    self._total = total

  def process(self, item: tuple[int, str]) -> Iterator[Any]:
    number, shard = item
    counts: collections.Counter = collections.Counter()
    start, checked, failed = time.process_time(), 0, 0
    batches: dict[str, list[tuple]] = collections.defaultdict(list)
    for image in join.shard_images(shard, counts, light=True):
      checked += 1
      failed += bool(image.reason)
      batches[key_group(image.key)].append(_packed(image))
    log_shard(NAME, number, self._total, checked, failed, time.process_time() - start)
    yield from batches.items()
    yield beam.pvalue.TaggedOutput(COUNTS, report_lib.Report(counts))


class JoinFn(beam.DoFn):
  """(group, {rows, images}: their batches) → (tar name, [Winner]) for each tar holding some of the group's
  examples (join.join_group); the counts of every key of the group tagged, as one Report."""

  def __init__(self, drop_flagged: bool):
    super().__init__()
    self._drop_flagged = drop_flagged

  def process(self, item: tuple[str, dict[str, Iterable[list[Any]]]]) -> Iterator[Any]:
    _, grouped = item
    rows = [(line, join.Row(*fields)) for batch in grouped["rows"] for line, fields in batch]
    images = [_unpacked(packed) for batch in grouped["images"] for packed in batch]
    report, winners = report_lib.Report(), collections.defaultdict(list)
    for event in join.join_group(rows, images, self._drop_flagged, report):
      name, winner = join.winner_of(event)
      winners[name].append(winner)
    yield from winners.items()
    yield beam.pvalue.TaggedOutput(COUNTS, report)


def shard_examples(item: tuple[str, Iterable[list[join.Winner]]], shards: dict[str, str]) -> Iterator[Any]:
  """(tar name, its winners' batches) → (line, example) of each, the tar read again for their bytes."""
  name, batches = item
  return join.shard_examples(shards[name], [winner for batch in batches for winner in batch])


class JoinPipeline(beam.PTransform):
  """jsonl.gz + tars → (line, example); every step's Reports summed by one combine into the build report's part
  in `data_dir`, the dataset's folder being built (tfds_builders/report.py)."""

  def __init__(self, jsonl: str, shards: list[str], drop_flagged: bool, data_dir: str):
    super().__init__()
    self._jsonl, self._shards, self._drop_flagged, self._data_dir = jsonl, shards, drop_flagged, data_dir

  def expand(self, pipeline_input):
    rows = (pipeline_input
            | "Jsonl" >> beam.Create([self._jsonl])
            | "ReadRows" >> beam.ParDo(ReadRowsFn()).with_outputs(COUNTS, main=MAIN))
    # Create already reshuffles its elements (more than one): one tar a work item, without a Reshuffle of ours.
    images = (pipeline_input
              | "Shards" >> beam.Create(list(enumerate(self._shards)))
              | "ReadShard" >> beam.ParDo(ReadShardFn(len(self._shards))).with_outputs(COUNTS, main=MAIN))
    joined = ({"rows": rows[MAIN], "images": images[MAIN]}
              | "ByKeyGroup" >> beam.CoGroupByKey()
              | "Join" >> beam.ParDo(JoinFn(self._drop_flagged)).with_outputs(COUNTS, main=MAIN))
    _ = ((rows[COUNTS], images[COUNTS], joined[COUNTS])
         | "AllCounts" >> beam.Flatten()
         | "SumReports" >> beam.CombineGlobally(report_lib.combine).without_defaults()  # no side-input stage
         | "WriteReport" >> beam.Map(join.write_report, data_dir=self._data_dir))
    by_name = {os.path.basename(shard): shard for shard in self._shards}
    return (joined[MAIN]
            | "WinnersByShard" >> beam.GroupByKey()
            | "ReadWinners" >> beam.FlatMap(shard_examples, shards=by_name))
