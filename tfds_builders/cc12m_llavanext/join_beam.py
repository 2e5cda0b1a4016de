"""The cc12m_llavanext Beam pipeline, whose shuffles carry no image bytes: the jsonl.gz read as one stream of
(key, row); each tar one work item of (key, image) with each image checked and its bytes dropped (pass 1); both
grouped by key, and each key joined by join.key_outcome, so that the examples and the report are the plain path's;
the winners (their text fields, no bytes) grouped by tar, and their bytes read again there, at their offsets
(pass 2: i2d.read_images).
The Reports of every step are summed into the build report's part.

Imported by package name only (workers unpickle these functions by module path; see tfds_builders/img2dataset/),
and only when Beam runs: this module imports apache_beam at the top.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from absl import logging

from tfds_builders import report as report_lib
from tfds_builders.cc12m_llavanext import join
from tfds_builders.progress import log_shard

MAIN, COUNTS = "main", "counts"


NAME = "cc12m_llavanext train"  # of the log lines


class ReadRowsFn(beam.DoFn):
  """The jsonl.gz → (key, (line, row)) of its good rows; its counts (rows, bad rows, truncated_jsonl) tagged. Logs
  one line when the jsonl is read: its rows, the bad ones, and the rate."""

  def process(self, path: str) -> Iterator[Any]:
    counts: collections.Counter = collections.Counter()
    start, good = time.process_time(), 0
    for line, row in join.read_rows(path, counts):
      good += 1
      yield row.key, (line, row)
    seconds = time.process_time() - start
    logging.info("%s jsonl read: %d rows, %d bad, %s rows/s", NAME, counts["rows"], counts["rows"] - good,
                 f"{counts['rows'] / seconds:,.0f}" if seconds > 0 else "-")
    yield beam.pvalue.TaggedOutput(COUNTS, report_lib.Report(counts))


class ReadShardFn(beam.DoFn):
  """One (number, tar) → (key, light image) of its images, each checked, no bytes kept; its counts (shards,
  unsafe_member, truncated_shard) tagged. Logs one line per tar: its number of the `total`, its images checked and
  those that cannot be an example here (bad; rows are joined later, on other workers), and the rate."""

  def __init__(self, total: int):
    super().__init__()
    self._total = total

  def process(self, item: tuple[int, str]) -> Iterator[Any]:
    number, shard = item
    counts: collections.Counter = collections.Counter()
    start, checked, failed = time.process_time(), 0, 0
    for image in join.shard_images(shard, counts, light=True):
      checked += 1
      failed += bool(image.reason)
      yield image.key, image
    log_shard(NAME, number, self._total, checked, failed, time.process_time() - start)
    yield beam.pvalue.TaggedOutput(COUNTS, report_lib.Report(counts))


class JoinFn(beam.DoFn):
  """(key, {rows, images}) → (tar name, Winner) when the key makes an example; the counts of every key tagged."""

  def __init__(self, drop_flagged: bool):
    super().__init__()
    self._drop_flagged = drop_flagged

  def process(self, item: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[Any]:
    _, grouped = item
    report = report_lib.Report()
    result = join.key_outcome(grouped["rows"], grouped["images"], self._drop_flagged, report)
    if result is not None:
      line, example, image = result
      yield image.order[0], (image.where, line, example)
    yield beam.pvalue.TaggedOutput(COUNTS, report)


def shard_examples(item: tuple[str, Iterable[join.Winner]], shards: dict[str, str]) -> Iterator[Any]:
  """(tar name, its winners) → (line, example) of each, the tar read again for their bytes."""
  name, winners = item
  return join.shard_examples(shards[name], winners)


def write_report(report: report_lib.Report, data_dir: str) -> None:
  report_lib.write_part(data_dir, "train", join.finish_report(report))


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
              | "ByKey" >> beam.CoGroupByKey()
              | "Join" >> beam.ParDo(JoinFn(self._drop_flagged)).with_outputs(COUNTS, main=MAIN))
    _ = ((rows[COUNTS], images[COUNTS], joined[COUNTS])
         | "AllCounts" >> beam.Flatten()
         | "SumReports" >> beam.CombineGlobally(report_lib.combine).without_defaults()  # no side-input stage
         | "WriteReport" >> beam.Map(write_report, data_dir=self._data_dir))
    by_name = {os.path.basename(shard): shard for shard in self._shards}
    return (joined[MAIN]
            | "WinnersByShard" >> beam.GroupByKey()
            | "ReadWinners" >> beam.FlatMap(shard_examples, shards=by_name))
