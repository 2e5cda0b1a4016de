"""The Beam path of one split: the same shard events and join rule as the plain path (`join.py`), as a PTransform.

Imported by package name only (Beam workers unpickle these functions by module path; see the package's docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds

from tfds_builders import report as report_lib
from tfds_builders.img2dataset.join import Event, row_outcome, shard_events, split_report
from tfds_builders.img2dataset.tsv import tsv_index


def _read_shard(item: tuple[int, str], tsv_path: str, labeled: bool) -> Iterator[Event]:
  number, shard = item
  return shard_events(shard, tsv_path, labeled, number)


def _beam_row(item: tuple[int, Iterable[Event]]) -> Iterator[Any]:
  """One row's grouped images under the join rule: ("example", (row, example)) when it makes one, then
  ("counts", Report)."""
  example, counts = row_outcome(item[1])
  if example is not None:
    yield "example", example
  yield "counts", counts


def _write_split_report(counts: report_lib.Report, tsv_path: str, labeled: bool, data_dir: str, split: str) -> None:
  report_lib.write_part(data_dir, split, split_report(counts, tsv_index(tsv_path, labeled)))


def _beam_split(pipeline_input, shards: list[str], tsv_path: str, labeled: bool, data_dir: str, split: str):
  """One split as a Beam graph: one work item per shard, images grouped by row and joined by the rule, every
  Report summed by one combine and written as the split's part of the build report."""
  beam = tfds.core.lazy_imports.apache_beam
  events = (pipeline_input
            | "Shards" >> beam.Create(list(enumerate(shards)))
            | "OneShardPerWorker" >> beam.Reshuffle()
            | "ReadShard" >> beam.FlatMap(_read_shard, tsv_path=tsv_path, labeled=labeled))
  rows = (events
          | "RowEvents" >> beam.Filter(lambda e: e.kind != "counts")
          | "ByRow" >> beam.Map(lambda e: (e.row, e))
          | "GroupByRow" >> beam.GroupByKey()
          | "JoinRule" >> beam.FlatMap(_beam_row))
  shard_counts = events | "ShardEvents" >> beam.Filter(lambda e: e.kind == "counts") | "ShardCounts" >> beam.Map(
      lambda e: e.counts)
  row_counts = rows | "RowOutcomes" >> beam.Filter(lambda kv: kv[0] == "counts") | "RowCounts" >> beam.Map(
      lambda kv: kv[1])
  _ = ((row_counts, shard_counts)
       | "AllCounts" >> beam.Flatten()
       | "SumReports" >> beam.CombineGlobally(report_lib.combine)
       | "WriteReport" >> beam.Map(_write_split_report, tsv_path=tsv_path, labeled=labeled, data_dir=data_dir,
                                   split=split))
  return rows | "Examples" >> beam.Filter(lambda kv: kv[0] == "example") | "KeyExample" >> beam.Map(lambda kv: kv[1])


def beam_split_transform(shards: list[str], tsv: str, labeled: bool, data_dir: str, split: str):
  """The Beam path of one split, as the PTransform a builder's `_generate_examples` returns; its report part is
  written into `data_dir`, the dataset's folder being built."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.ptransform_fn(_beam_split)(shards, tsv, labeled, data_dir, split)
