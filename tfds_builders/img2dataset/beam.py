"""The Beam path of one split: the same shard events and join rule as the plain path (`join.py`), as a PTransform
whose shuffles carry no image bytes. Pass 1 reads each shard and checks each image, emitting light events (row,
key, order, reason, size); they are grouped by row and the one join rule (`row_outcome`) picks each row's winner;
the winners (a few numbers each) are grouped by shard, and pass 2 reads their bytes again (at their offsets in a
tar: `read_images`).

Imported by package name only (Beam workers unpickle these functions by module path; see the package's docstring)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds

from tfds_builders import report as report_lib
from tfds_builders.img2dataset.join import (Event, Winner, row_outcome, shard_events, shard_examples, split_report,
                                            winner_of)
from tfds_builders.img2dataset.tsv import tsv_index
from tfds_builders.progress import log_shard


def _read_shard(item: tuple[int, str], tsv_path: str, labeled: bool, name: str, total: int) -> Iterator[Event]:
  """Pass 1 of one shard: its light events; with a `name`, one log line when the shard is read (each worker sees
  only its own shards: the shard's number of the total, its images checked and failed, and its rate)."""
  number, shard = item
  start, checked, failed = time.process_time(), 0, 0
  for event in shard_events(shard, tsv_path, labeled, number, light=True):
    checked += event.kind != "counts"
    failed += event.kind == "bad"
    yield event
  if name:
    log_shard(name, number, total, checked, failed, time.process_time() - start)


def _decide_row(item: tuple[int, Iterable[Event]]) -> Iterator[Any]:
  """One row's grouped light events under the join rule: ("winner", (shard number, Winner)) when it makes an
  example, then ("counts", Report)."""
  winner, counts = row_outcome(item[1])
  if winner is not None:
    yield "winner", winner_of(winner)
  yield "counts", counts


def _shard_examples(item: tuple[int, Iterable[Winner]], shards: list[str], tsv_path: str,
                    labeled: bool) -> Iterator[tuple[int, dict[str, Any]]]:
  number, winners = item
  return shard_examples(shards[number], tsv_path, labeled, winners)


def _write_split_report(counts: report_lib.Report, tsv_path: str, labeled: bool, data_dir: str, split: str) -> None:
  report_lib.write_part(data_dir, split, split_report(counts, tsv_index(tsv_path, labeled)))


def _beam_split(pipeline_input, shards: list[str], tsv_path: str, labeled: bool, data_dir: str, split: str,
                name: str = ""):
  """One split as a Beam graph: one work item per shard (pass 1), light events grouped by row and joined by the
  rule, winners grouped by shard (pass 2 reads their bytes); every Report summed by one combine and written as the
  split's part of the build report."""
  beam = tfds.core.lazy_imports.apache_beam
  events = (pipeline_input
            | "Shards" >> beam.Create(list(enumerate(shards)))
            | "OneShardPerWorker" >> beam.Reshuffle()
            | "ReadShard" >> beam.FlatMap(_read_shard, tsv_path=tsv_path, labeled=labeled, name=name,
                                          total=len(shards)))
  rows = (events
          | "RowEvents" >> beam.Filter(lambda e: e.kind != "counts")
          | "ByRow" >> beam.Map(lambda e: (e.row, e))
          | "GroupByRow" >> beam.GroupByKey()
          | "JoinRule" >> beam.FlatMap(_decide_row))
  shard_counts = events | "ShardEvents" >> beam.Filter(lambda e: e.kind == "counts") | "ShardCounts" >> beam.Map(
      lambda e: e.counts)
  row_counts = rows | "RowOutcomes" >> beam.Filter(lambda kv: kv[0] == "counts") | "RowCounts" >> beam.Map(
      lambda kv: kv[1])
  _ = ((row_counts, shard_counts)
       | "AllCounts" >> beam.Flatten()
       | "SumReports" >> beam.CombineGlobally(report_lib.combine)
       | "WriteReport" >> beam.Map(_write_split_report, tsv_path=tsv_path, labeled=labeled, data_dir=data_dir,
                                   split=split))
  return (rows
          | "Winners" >> beam.Filter(lambda kv: kv[0] == "winner")
          | "ByShard" >> beam.Map(lambda kv: kv[1])
          | "GroupByShard" >> beam.GroupByKey()
          | "ReadWinners" >> beam.FlatMap(_shard_examples, shards=shards, tsv_path=tsv_path, labeled=labeled))


def beam_split_transform(shards: list[str], tsv: str, labeled: bool, data_dir: str, split: str, name: str = ""):
  """The Beam path of one split, as the PTransform a builder's `_generate_examples` returns; its report part is
  written into `data_dir`, the dataset's folder being built. With a `name`, each shard read logs a line."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.ptransform_fn(_beam_split)(shards, tsv, labeled, data_dir, split, name)
