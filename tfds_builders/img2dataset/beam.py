"""The Beam path of one split: the same shard events and join rule as the plain path (`join.py`), as a PTransform
whose shuffles carry no image bytes. Pass 1 reads each shard and checks each image, emitting light events (row,
key, order, reason, size) as plain tuples, batched by group of TSV rows; each group's batches are grouped and the one
join rule (`row_outcome`) picks each row's winner; the winners (a few numbers each) are grouped by shard, and pass
2 reads their bytes again (at their offsets in a tar: `read_images`).

Batches, not one element per image: Beam's per-element costs (each element through each transform, its coding at
each shuffle) were most of this path's cost beyond the plain path's, and a group holds the events of the rows in
GROUP_BYTES of the TSV only, so the join's memory stays bounded at any size.

Imported by package name only (Beam workers unpickle these functions by module path; see the package's docstring)."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds

from capjax.progress import log_shard
from tfds_builders import report as report_lib
from tfds_builders.img2dataset.join import (Event, Winner, row_outcome, shard_events, shard_examples, split_report,
                                            winner_of)
from tfds_builders.img2dataset.shards import Where
from tfds_builders.img2dataset.tsv import tsv_index

# The rows joined in one element: those whose lines start in the same GROUP_BYTES of the TSV (a row's id is its
# byte offset), about 1,600 of CC3M's rows. img2dataset's shards hold runs of consecutive rows, so a shard's events
# fall in a few groups (one batch each); a retry's scattered rows in more, never more batches than events.
GROUP_BYTES = 1 << 18
MAIN, COUNTS = "main", "counts"
# A light event as pass 1 sends it: (kind, row, position, key, reason, shard, sample, width, height, offset, size,
# crc); Beam codes tuples of str and int natively (an Event dataclass would be pickled, one by one).
Packed = tuple[str, int, int, str, str, int, int, int, int, int, int, int]


def _packed(event: Event) -> Packed:
  where = event.where or Where(-1, "", -1, -1, -1)
  return (event.kind, event.row, event.position, event.key, event.reason, *event.order, event.width, event.height,
          where.offset, where.size, where.crc)


def _unpacked(packed: Packed) -> Event:
  kind, row, position, key, reason, shard, sample, width, height, offset, size, crc = packed
  where = Where(sample, key, offset, size, crc) if kind == "example" else None
  return Event(kind, row, position, key, reason, order=(shard, sample), width=width, height=height, where=where)


def _read_shard(item: tuple[int, str], tsv_path: str, labeled: bool, name: str, total: int) -> Iterator[Any]:
  """Pass 1 of one shard: (group, [Packed]) per group of rows it has images of, and its Report of image-side counts
  tagged COUNTS; with a `name`, one log line when the shard is read (each worker sees only its own shards: the
  shard's number of the total, its images checked and failed, and its rate)."""
  beam = tfds.core.lazy_imports.apache_beam
  number, shard = item
  start, checked, failed = time.process_time(), 0, 0
  groups: dict[int, list[Packed]] = collections.defaultdict(list)
  for event in shard_events(shard, tsv_path, labeled, number, light=True):
    if event.kind == "counts":
      yield beam.pvalue.TaggedOutput(COUNTS, event.counts)
      continue
    checked += 1
    failed += event.kind == "bad"
    groups[event.row // GROUP_BYTES].append(_packed(event))
  if name:
    log_shard(name, number, total, checked, failed, time.process_time() - start)
  yield from groups.items()


def _join_group(item: tuple[int, Iterable[list[Packed]]]) -> Iterator[Any]:
  """One group's batches under the join rule, row by row: (shard number, [Winner]) for each shard holding some of
  its winners, and the group's Report of row outcomes tagged COUNTS."""
  beam = tfds.core.lazy_imports.apache_beam
  by_row: dict[int, list[Event]] = collections.defaultdict(list)
  for batch in item[1]:
    for packed in batch:
      by_row[packed[1]].append(_unpacked(packed))
  counts, winners = report_lib.Report(), collections.defaultdict(list)
  for events in by_row.values():
    winner, row_counts = row_outcome(events)
    counts.merge(row_counts)
    if winner is not None:
      number, won = winner_of(winner)
      winners[number].append(won)
  yield from winners.items()
  yield beam.pvalue.TaggedOutput(COUNTS, counts)


def _shard_examples(item: tuple[int, Iterable[list[Winner]]], shards: list[str], tsv_path: str,
                    labeled: bool) -> Iterator[tuple[int, dict[str, Any]]]:
  number, batches = item
  return shard_examples(shards[number], tsv_path, labeled, [winner for batch in batches for winner in batch])


def _write_split_report(counts: report_lib.Report, tsv_path: str, labeled: bool, data_dir: str, split: str) -> None:
  report_lib.write_part(data_dir, split, split_report(counts, tsv_index(tsv_path, labeled)))


def _beam_split(pipeline_input, shards: list[str], tsv_path: str, labeled: bool, data_dir: str, split: str,
                name: str = ""):
  """One split as a Beam graph: one work item per shard (pass 1), its light events grouped by group of rows and
  joined by the rule, winners grouped by shard (pass 2 reads their bytes); every Report summed by one combine and
  written as the split's part of the build report."""
  beam = tfds.core.lazy_imports.apache_beam
  # Create already reshuffles its elements (more than one): one shard a work item, without a Reshuffle of ours.
  events = (pipeline_input
            | "Shards" >> beam.Create(list(enumerate(shards)))
            | "ReadShard" >> beam.FlatMap(_read_shard, tsv_path=tsv_path, labeled=labeled, name=name,
                                          total=len(shards)).with_outputs(COUNTS, main=MAIN))
  joined = (events[MAIN]
            | "GroupRows" >> beam.GroupByKey()
            | "JoinRule" >> beam.FlatMap(_join_group).with_outputs(COUNTS, main=MAIN))
  # Without defaults: no side input to make a sum of nothing (every shard sends its counts), one stage less.
  _ = ((events[COUNTS], joined[COUNTS])
       | "AllCounts" >> beam.Flatten()
       | "SumReports" >> beam.CombineGlobally(report_lib.combine).without_defaults()
       | "WriteReport" >> beam.Map(_write_split_report, tsv_path=tsv_path, labeled=labeled, data_dir=data_dir,
                                   split=split))
  return (joined[MAIN]
          | "GroupByShard" >> beam.GroupByKey()
          | "ReadWinners" >> beam.FlatMap(_shard_examples, shards=shards, tsv_path=tsv_path, labeled=labeled))


def beam_split_transform(shards: list[str], tsv: str, labeled: bool, data_dir: str, split: str, name: str = ""):
  """The Beam path of one split, as the PTransform a builder's `_generate_examples` returns; its report part is
  written into `data_dir`, the dataset's folder being built. With a `name`, each shard read logs a line."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.ptransform_fn(_beam_split)(shards, tsv, labeled, data_dir, split, name)
