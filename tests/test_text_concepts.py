"""Concept pruning: a CombineFn-shaped count over the dataset, then pairs with rare concepts dropped."""

from capjax.text.concepts import ConceptCounts, count_concepts, prune, rare_concepts
from capjax.text.filters import Reason


def test_counts_each_concept_once_per_pair():
  assert count_concepts([["actor", "actor", "city"], ["actor"], []]) == {"actor": 2, "city": 1}


def test_combine_fn_shards_merge_to_the_same_counts():
  fn = ConceptCounts()
  pairs = [["actor"], ["actor", "city"], ["city"], ["airport"], ["actor"]]
  shards = []
  for shard in (pairs[:2], pairs[2:4], pairs[4:]):
    accumulator = fn.create_accumulator()
    for concepts in shard:
      accumulator = fn.add_input(accumulator, concepts)
    shards.append(accumulator)
  merged = fn.extract_output(fn.merge_accumulators(shards))
  assert merged == count_concepts(pairs) == {"actor": 3, "city": 2, "airport": 1}
  assert list(merged) == ["actor", "city", "airport"]  # most frequent first


def test_pairs_with_any_concept_seen_at_most_min_count_times_are_dropped():
  counts = {"actor": 101, "city": 100, "airport": 7}
  assert prune(["actor"], counts, min_count=100) is None
  assert prune(["actor", "city"], counts, min_count=100) == Reason.RARE_CONCEPT
  assert prune(["unseen"], counts, min_count=100) == Reason.RARE_CONCEPT
  assert prune([], counts, min_count=100) is None
  assert rare_concepts(counts, 100) == {"city", "airport"}
