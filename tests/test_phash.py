"""capjax.image.phash's near-duplicate search: the pairs its planned bands find are exactly those within the
threshold (brute force over all pairs), on uniform random hashes and on clusters of near-copies."""

from __future__ import annotations

import random

import numpy as np
import pytest

from capjax.image import phash


def hash_sets(count: int = 1500) -> dict[str, list[int]]:
  """Uniform random 64-bit hashes, and clusters: 30 centres, each copy a centre with up to 12 bits flipped."""
  rng = random.Random(count)
  centres = [rng.getrandbits(64) for _ in range(30)]
  clustered = []
  for _ in range(count):
    value = rng.choice(centres)
    for bit in rng.sample(range(64), rng.randint(0, 12)):
      value ^= 1 << bit
    clustered.append(value)
  return {"random": [rng.getrandbits(64) for _ in range(count)], "clustered": clustered}


def brute_force_pairs(values: list[int], threshold: int) -> np.ndarray:
  array = np.array(values, np.uint64)
  near = np.triu(np.bitwise_count(array[:, None] ^ array[None, :]) <= threshold, 1)
  return np.stack(np.nonzero(near), 1)


# Pairs within each threshold (random: none below 16, where 1 pair in 4e4 is within; clusters: many at each).
PAIRS = {0: [0, 245], 4: [0, 3586], 10: [0, 16660], 16: [44, 33410]}


@pytest.mark.parametrize("threshold", sorted(PAIRS))
def test_phash_search_finds_exactly_the_pairs_within_the_threshold(threshold):
  for (name, values), count in zip(hash_sets().items(), PAIRS[threshold]):
    expected = brute_force_pairs(values, threshold)
    assert len(expected) == count
    assert np.array_equal(phash.near_pairs(values, threshold), expected), name
    ranked = [phash.Hashed(f"k{i:04d}", value, i % 3) for i, value in enumerate(values)]
    assert phash.near_duplicates(ranked, threshold) == set(phash.outranked(ranked, threshold)), name
    index = phash.HashIndex(values[:1000], threshold)
    for query in values[1000:1100]:
      assert index.near(query) == [(i, phash.distance(query, value)) for i, value in enumerate(values[:1000])
                                   if phash.distance(query, value) <= threshold], name


def test_phash_plan_trades_bands_for_radius_as_hashes_grow():
  """Every plan's radii reach the pigeonhole's bound; more hashes, fewer and wider bands."""
  widths = {count: [(band.width, band.radius) for band in phash.plan(count, 10)] for count in (100, 100_000, 10**7)}
  for bands in widths.values():
    assert sum(radius + 1 for _, radius in bands) >= 11 and sum(width for width, _ in bands) == 64
  assert widths[100_000] == [(16, 2), (16, 2), (16, 2), (16, 1)] and widths[10**7] == [(22, 3), (21, 3), (21, 2)]
  assert len(widths[100]) > 4
  assert phash.near_pairs([5, 5, 5], 0).tolist() == [[0, 1], [0, 2], [1, 2]]
  assert phash.near_pairs([5], 0).shape == (0, 2)
