"""Concept pruning (Knowl 3's last step): count resolved concepts over the dataset, drop pairs with rare ones.

`ConceptCounts` has the CombineFn shape (create/add/merge/extract), so Beam can run it as a global combine.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

from capjax.text.filters import Reason


class ConceptCounts:
  """How many pairs mention each concept; a pair counts once per concept however often it repeats it.

  In Beam: `counts = concepts | beam.CombineGlobally(ConceptCounts())` and then
  `pairs | beam.Filter(lambda p, c: prune(p.concepts, c, k) is None, c=beam.pvalue.AsSingleton(counts))`.
  """

  def create_accumulator(self) -> collections.Counter[str]:
    return collections.Counter()

  def add_input(self, accumulator: collections.Counter[str], concepts: Iterable[str]) -> collections.Counter[str]:
    accumulator.update(set(concepts))
    return accumulator

  def merge_accumulators(self, accumulators: Iterable[collections.Counter[str]]) -> collections.Counter[str]:
    merged: collections.Counter[str] = collections.Counter()
    for accumulator in accumulators:
      merged.update(accumulator)
    return merged

  def extract_output(self, accumulator: collections.Counter[str]) -> dict[str, int]:
    return dict(sorted(accumulator.items(), key=lambda kv: (-kv[1], kv[0])))


def count_concepts(concept_lists: Iterable[Iterable[str]]) -> dict[str, int]:
  """ConceptCounts run in one process."""
  fn = ConceptCounts()
  accumulator = fn.create_accumulator()
  for concepts in concept_lists:
    accumulator = fn.add_input(accumulator, concepts)
  return fn.extract_output(accumulator)


def rare_concepts(counts: Mapping[str, int], min_count: int) -> frozenset[str]:
  """Concepts seen `min_count` times or fewer."""
  return frozenset(c for c, n in counts.items() if n <= min_count)


def prune(concepts: Iterable[str], counts: Mapping[str, int], min_count: int) -> Reason | None:
  """RARE_CONCEPT when any of the pair's concepts is seen `min_count` times or fewer in the dataset."""
  return Reason.RARE_CONCEPT if any(counts.get(c, 0) <= min_count for c in concepts) else None
