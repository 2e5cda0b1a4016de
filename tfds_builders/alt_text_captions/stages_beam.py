"""The alt_text_captions Beam pipeline: one work item per shard, then one DoFn per stage of stages.py (image, text,
cross, clip when on, hypernym, dedup when on, concepts), each tagging its rejects with their reason, and the
funnel: one Report summed from those tags and the shards' counts. No image bytes wait for the global concept counts
nor cross a shuffle: the hypernym stage drops them (its outcome keeps the shard's name and, with dedup, the image's
hash), and the kept outcomes, grouped by shard, read their images again there (stages.shard_examples, the plain
path's second pass).

Imported by package name only (workers unpickle these DoFns by module path; see tfds_builders/img2dataset/), and
only when Beam runs: this module imports apache_beam at the top.
"""

from __future__ import annotations

import array
import collections
import functools
import time
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam

from capjax.image import phash as phash_lib
from capjax.progress import log_shard
from capjax.text import concepts as concepts_lib
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.alt_text_captions import clip_stage as clip_lib
from tfds_builders.alt_text_captions import dedup as dedup_lib
from tfds_builders.alt_text_captions import stages as stages_lib

KEPT, REJECTS, COUNTS, SCORES = "kept", "rejects", "counts", "scores"


@functools.lru_cache(maxsize=4)
def _worker_stages(settings: stages_lib.Settings, labels: str, weights: str, clip: str) -> stages_lib.Stages:
  """One Stages per worker process, shared by every stage's DoFn there: NLTK, the labeler and CLIP load once, not
  once per DoFn instance."""
  return stages_lib.Stages(settings, labels, weights, clip)


def _kept_or_reject(kept: Any, key: str, stage: str | None, reason: str | None, *more: Any) -> Any:
  """`kept` for the main output when no stage dropped it (`reason` None), else its reject (key, stage, reason,
  *more) tagged `rejects`: how every stage's DoFn routes what the shared stage function decided."""
  return kept if reason is None else beam.pvalue.TaggedOutput(REJECTS, (key, stage, reason, *more))


class _StagesDoFn(beam.DoFn):
  """A DoFn holding the worker's Stages, built in setup (not pickled with the DoFn); `paths` are the labels file,
  the labeler's and the CLIP's weights."""

  stage = ""

  def __init__(self, settings: stages_lib.Settings, paths: tuple[str, str, str]):
    super().__init__()
    self._args = (settings, *paths)
    self._stages: stages_lib.Stages | None = None

  def setup(self):
    self._stages = _worker_stages(*self._args)
    self._stages.load(self.stage)


class ReadShardFn(beam.DoFn):
  """(number, shard) → its candidates (image bytes included), plus the shard's counts and the candidate total for
  the funnel. Only this step's input is reshuffled: the candidates stay fused with the stages that read their
  images. Logs one line per shard: its number of the `shards`, its candidates, those without an image (a failed
  download, or one missing or cut), and the rate (of the stages fused with this read too)."""

  def __init__(self, shards: int):
    super().__init__()
    self._shards = shards

  def process(self, item: tuple[int, str]) -> Iterator[Any]:
    number, shard = item
    counts: collections.Counter = collections.Counter()
    start, total, failed = time.process_time(), 0, 0
    for candidate in i2d.shard_candidates(shard, counts):
      total += 1
      failed += candidate.image is None
      yield stages_lib.Item(candidate, shard=shard)
    log_shard("alt_text_captions train", number, self._shards, total, failed, time.process_time() - start,
              "candidates", "read")
    yield beam.pvalue.TaggedOutput(COUNTS, report_lib.Report(counts).count(stages_lib.CANDIDATES, total))


class StageFn(_StagesDoFn):
  """One of the stages image, text, cross: the item on the main output if kept, else (key, stage, reason) tagged
  `rejects` (no image bytes)."""

  def __init__(self, stage: str, settings: stages_lib.Settings, paths: tuple[str, str, str]):
    super().__init__(settings, paths)
    self.stage = stage

  def process(self, item: stages_lib.Item) -> Iterator[Any]:
    reason, item = self._stages.stage(self.stage)(item)
    yield _kept_or_reject(item, item.candidate.key, self.stage, reason)


class ClipFn(_StagesDoFn):
  """Beyond the paper: the CLIP score of a batch of items (beam.BatchElements of clip_stage.BATCH), each kept item on
  the main output, each reject tagged `rejects`, and the batch's scores as a Report tagged `counts` (the
  histogram); with a share cut-off, each score tagged `scores` too (the pool the cut-off is computed from)."""

  stage = "clip"

  def process(self, items: list[stages_lib.Item]) -> Iterator[Any]:
    scores = report_lib.Report()
    share = clip_lib.share(self._stages.settings) is not None
    for reason, item in self._stages.clip_stage(items):
      clip_lib.count_score(scores, item.clip_score)
      if share:
        yield beam.pvalue.TaggedOutput(SCORES, item.clip_score)
      yield _kept_or_reject(item, item.candidate.key, self.stage, reason)
    yield beam.pvalue.TaggedOutput(COUNTS, scores)


class HypernymFn(_StagesDoFn):
  """The repair step: (Outcome, shard) of a captioned candidate (its image bytes dropped), or its reject with its
  CLIP score (with a share cut-off, `clip_cut_reject` decides its stage)."""

  stage = "hypernym"

  def process(self, item: stages_lib.Item) -> Iterator[Any]:
    reason, outcome = self._stages.stage(self.stage)(item)
    yield _kept_or_reject((outcome, item.shard), outcome.key, self.stage, reason, outcome.clip_score)


class CutoffFn(beam.CombineFn):
  """A share's cut-off over the whole build: every score the clip stage gave (8 bytes each, as the plain path's
  pool holds them), then clip_stage.pool_cutoff, the plain path's rule, so that both paths drop the same keys."""

  def __init__(self, threshold: Any):
    super().__init__()
    self._threshold = threshold

  def create_accumulator(self) -> array.array:
    return array.array("d")

  def add_input(self, accumulator: array.array, score: float) -> array.array:
    accumulator.append(score)
    return accumulator

  def merge_accumulators(self, accumulators: Iterable[array.array]) -> array.array:
    merged = array.array("d")
    for accumulator in accumulators:
      merged.extend(accumulator)
    return merged

  def extract_output(self, accumulator: array.array) -> float:
    return clip_lib.pool_cutoff(accumulator, self._threshold)


def clip_cut_reject(reject: tuple[str, str, str, float | None], cutoff: float) -> tuple[Any, ...]:
  """A hypernym reject's stage once a share's cut-off is known (clip_stage.cut: below it, the clip stage's)."""
  key, stage, reason, score = reject
  return (key, *clip_lib.cut(stage, reason, score, cutoff))


class ClipCutFn(beam.DoFn):
  """A share's global step (after the hypernym repair, before dedup): (Outcome, shard) kept or rejected at the stage
  clip_stage.cut gives it once the cut-off (a side input) is known."""

  def process(self, item: tuple[stages_lib.Outcome, str], cutoff: float) -> Iterator[Any]:
    outcome = item[0]
    stage, reason = clip_lib.cut(outcome.stage, outcome.reason, outcome.clip_score, cutoff)
    yield _kept_or_reject(item, outcome.key, stage, reason)


class ConceptCountsFn(concepts_lib.ConceptCounts, beam.CombineFn):
  """capjax.text's ConceptCounts (its methods first) as a beam.CombineFn: pairs per concept over the whole build."""


class ConceptsFn(beam.DoFn):
  """d. Concept pruning against the global counts (a side input): (shard, Outcome) of a kept one, or its
  reject."""

  def __init__(self, min_count: int):
    super().__init__()
    self._min_count = min_count

  def process(self, item: tuple[stages_lib.Outcome, str], counts: dict[str, int]) -> Iterator[Any]:
    outcome, shard = item
    yield _kept_or_reject((shard, outcome), outcome.key, "concepts",
                          stages_lib.concept_reason(outcome.concepts, counts, self._min_count))


def band_entries(item: tuple[stages_lib.Outcome, str], threshold: int) -> Iterator[tuple[tuple[int, int], Any]]:
  """(band number, band value) → the outcome's Hashed (a key, a hash and a rank: no bytes), for each band."""
  outcome = item[0]
  if outcome.phash is not None:
    for band in phash_lib.band_keys(outcome.phash, threshold):
      yield band, outcome.hashed()


def band_outranked(group: tuple[tuple[int, int], Iterable[phash_lib.Hashed]],
                   threshold: int) -> Iterator[tuple[str, bool]]:
  """(key, True) of each member of one band's group outranked by another within the threshold: `outranked`'s keys,
  the group searched as the plain path searches all (capjax.image.phash.near_duplicates), not pair by pair."""
  members = list(group[1])
  if len(members) > 1:
    for key in sorted(phash_lib.near_duplicates(members, threshold)):
      yield key, True


def by_key(item: tuple[stages_lib.Outcome, str]) -> tuple[str, tuple[stages_lib.Outcome, str]]:
  return item[0].key, item


def alone(keyed: tuple[str, Any]) -> tuple[str, dict[str, list]]:
  """A keyed outcome in CoGroupByKey's form, with no near-duplicate flag (exclude without dedup=phash)."""
  return keyed[0], {"item": [keyed[1]], "near": []}


class DedupFn(beam.DoFn):
  """e. The dedup stage's decision per key (dedup.dedup_outcome, the plain path's): (Outcome, shard) of a kept
  one; the Report of a dropped one or a leak, tagged counts."""

  def __init__(self, excluded: dict[str, phash_lib.HashIndex]):
    super().__init__()
    self._excluded = excluded

  def process(self, joined: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[Any]:
    _, groups = joined
    near = any(True for _ in groups["near"])
    for outcome, shard in groups["item"]:
      report = report_lib.Report()
      if dedup_lib.dedup_outcome(outcome, near, self._excluded, report) is None:
        yield outcome, shard
      if report.counts:
        yield beam.pvalue.TaggedOutput(COUNTS, report)


class Dedup(beam.PTransform):
  """e. (Outcome, shard) → those the dedup stage keeps, and its Reports tagged counts. Near-duplicates: each
  outcome's bands (capjax.image.phash.band_keys) → its Hashed, GroupByKey, each group's outranked keys; those
  keys joined back to the outcomes by key (CoGroupByKey, which also gathers a key flagged in several bands into
  one decision). Only keys, hashes and ranks are shuffled; the exclude splits' hashes travel with the DoFn."""

  def __init__(self, settings: stages_lib.Settings, excluded: dict[str, phash_lib.HashIndex]):
    super().__init__()
    self._settings, self._excluded = settings, excluded

  def expand(self, outcomes):
    keyed = outcomes | "ByKey" >> beam.Map(by_key)
    if self._settings.dedup:
      threshold = self._settings.dedup_threshold
      near = (outcomes
              | "Bands" >> beam.FlatMap(band_entries, threshold)
              | "ByBand" >> beam.GroupByKey()
              | "Outranked" >> beam.FlatMap(band_outranked, threshold))
      joined = {"item": keyed, "near": near} | "JoinByKey" >> beam.CoGroupByKey()
    else:
      joined = keyed | "Alone" >> beam.Map(alone)
    return joined | "Decide" >> beam.ParDo(DedupFn(self._excluded)).with_outputs(COUNTS, main=KEPT)


def outcome_concepts(item: tuple[stages_lib.Outcome, str]) -> tuple[str, ...]:
  return item[0].concepts


def shard_examples(item: tuple[str, Iterable[stages_lib.Outcome]]) -> Iterator[tuple[str, dict[str, Any]]]:
  """(shard, its kept outcomes) → (key, example) of each, the shard read again for their images."""
  shard, outcomes = item
  return stages_lib.shard_examples(shard, {outcome.key: outcome for outcome in outcomes})


def reject_report(reject: tuple[Any, ...]) -> report_lib.Report:
  """A reject (key, stage, reason[, score]) as its contribution to the funnel: one under its stage, by reason."""
  _, stage, reason = reject[:3]
  return report_lib.Report().count(stage, reason=reason)


class StagesPipeline(beam.PTransform):
  """Shards → Reshuffle → ReadShard → image → text → cross → [ClipBatches → clip] → hypernym (bytes dropped) →
  [ClipCut: below a share's cut-off (ClipCutoff over every score the clip stage gave, a side input)] → [dedup] →
  concepts (CountConcepts of the pairs kept, as a side input) → KeptByShard → ReadKept (the shard read again) →
  (key, example); every stage's rejects, the read counts and the CLIP scores, as Reports, summed by one combine into
  the build report's part in `data_dir`, the dataset's folder being built (tfds_builders/report.py). `paths`: the
  labels file, the labeler's and the CLIP's weights; `excluded`: the exclude splits' hash indexes (the
  builder reads them)."""

  def __init__(self, shards: list[str], settings: stages_lib.Settings, paths: tuple[str, str, str], data_dir: str,
               excluded: dict[str, phash_lib.HashIndex] | None = None):
    super().__init__()
    self._shards, self._settings, self._args = shards, settings, (settings, paths)
    self._data_dir, self._excluded = data_dir, excluded or {}

  def expand(self, pipeline_input):
    read = (pipeline_input
            | "Shards" >> beam.Create(list(enumerate(self._shards)))
            | "OneShardPerWorker" >> beam.Reshuffle()
            | "ReadShard" >> beam.ParDo(ReadShardFn(len(self._shards))).with_outputs(COUNTS, main=KEPT))
    items, rejects, counts = read[KEPT], [], [read[COUNTS]]
    for stage in stages_lib.FIRST_STAGES:
      out = items | stage >> beam.ParDo(StageFn(stage, *self._args)).with_outputs(REJECTS, main=KEPT)
      items = out[KEPT]
      rejects.append(out[REJECTS])
    share, cutoff = clip_lib.share(self._settings), None
    if self._settings.clip_weights:  # batches of the fused items: no shuffle, so no image bytes cross one
      out = (items
             | "ClipBatches" >> beam.BatchElements(min_batch_size=clip_lib.BATCH, max_batch_size=clip_lib.BATCH)
             | "clip" >> beam.ParDo(ClipFn(*self._args)).with_outputs(REJECTS, COUNTS, SCORES, main=KEPT))
      items = out[KEPT]
      rejects.append(out[REJECTS])
      counts.append(out[COUNTS])
      cutoff = self._settings.clip_cutoff()
      if share:
        cutoff = beam.pvalue.AsSingleton(out[SCORES] | "ClipCutoff" >> beam.CombineGlobally(CutoffFn(share)))
    out = items | "hypernym" >> beam.ParDo(HypernymFn(*self._args)).with_outputs(REJECTS, main=KEPT)
    rejects.append(out[REJECTS] | "ClipCutRejects" >> beam.Map(clip_cut_reject, cutoff=cutoff) if share else
                   out[REJECTS])
    kept = out[KEPT]
    if share:  # the share's global step, before dedup (the funnel's order)
      cut = kept | "ClipCut" >> beam.ParDo(ClipCutFn(), cutoff=cutoff).with_outputs(REJECTS, main=KEPT)
      kept = cut[KEPT]
      rejects.append(cut[REJECTS])
    if "dedup" in self._settings.stages():
      deduped = kept | "dedup" >> Dedup(self._settings, self._excluded)
      kept = deduped[KEPT]
      counts.append(deduped[COUNTS])
    concept_counts = (kept
                      | "ConceptsOf" >> beam.Map(outcome_concepts)
                      | "CountConcepts" >> beam.CombineGlobally(ConceptCountsFn()))
    pruned = kept | "concepts" >> beam.ParDo(ConceptsFn(self._settings.min_concept_count),
                                              counts=beam.pvalue.AsSingleton(concept_counts)).with_outputs(
                                                  REJECTS, main=KEPT)
    rejects.append(pruned[REJECTS])
    reject_counts = tuple(rejects) | "AllRejects" >> beam.Flatten() | "RejectCounts" >> beam.Map(reject_report)
    _ = ((reject_counts, *counts)
         | "AllCounts" >> beam.Flatten()
         | "SumReports" >> beam.CombineGlobally(report_lib.combine)
         | "WriteReport" >> beam.Map(stages_lib.write_report, data_dir=self._data_dir, settings=self._settings,
                                     clip_cut=cutoff))
    return (pruned[KEPT]
            | "KeptByShard" >> beam.GroupByKey()
            | "ReadKept" >> beam.FlatMap(shard_examples))
