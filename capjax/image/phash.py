"""Perceptual hashes (imagehash's 64-bit pHash) of image bytes, and near-duplicates among many hashes found by
multi-index hashing instead of all pairs: for alt_text_captions' dedup stage and `capjax.data.overlap`.

Multi-index hashing: the 64 bits are split into `threshold + 1` bands; two hashes within Hamming distance
`threshold` differ in at most `threshold` bits, so (pigeonhole) they agree exactly on at least one band. The Beam
path groups by those bands. In memory (`near_pairs`, `near_duplicates`, `HashIndex`) a plan of fewer, wider bands,
each with a radius (`plan`), is searched instead: two hashes within `threshold` differ by at most band i's radius
r_i in at least one band when sum(r_i + 1) > threshold, so each band's value is looked up at every value within its
radius (a direct-address table a band) and only those candidates are compared. At threshold 10, `threshold + 1`
bands of 5–6 bits leave buckets of n/64 hashes (quadratic); 3 or 4 bands of 16–22 bits leave n/65536 or fewer.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from PIL import Image

BITS = 64  # imagehash's pHash: 8 x 8 bits
MAX_THRESHOLD = BITS
# Pillow's JPEG draft mode decodes straight to greyscale at the smallest DCT scale (1/2 to 1/8) that is still at
# least this size: pHash shrinks the image to 32 x 32 anyway, and a full decode is the bulk of the time.
DRAFT_SIZE = (64, 64)
_BLOCK = 1 << 22  # pairs compared at once by `outranked` and `near_pairs` (32 MiB of uint64)
MAX_WIDTH = 22  # the widest band of a plan: its direct-address table holds 4M slots (16 MiB of int32)
# The plan's cost model, in nanoseconds of numpy on one core (measured on this kind of machine, to the nearest
# factor of 2; only their ratios choose the plan): a band's sort per hash and table per slot, a probe of a table
# per value probed (and a fixed cost per radius mask: numpy calls), a candidate pair compared.
_COST_SORT, _COST_SLOT, _COST_PROBE, _COST_MASK, _COST_PAIR = 100, 3, 6, 20_000, 20
# A single query (HashIndex.near): numpy calls per band, a probe, a candidate.
_COST_QUERY_BAND, _COST_QUERY_PROBE, _COST_QUERY_PAIR = 8_000, 4, 15


def phash(data: bytes, draft: bool = True) -> tuple[int, int] | None:
  """(the 64-bit pHash as an int, the stored image's pixels) of image bytes, or None when they do not decode.
  `draft` (JPEG only; other formats decode in full) decodes at a reduced DCT scale: the hash can differ from a
  full decode's in a few bits, so compare hashes made the same way (every caller here drafts)."""
  import imagehash  # noqa: PLC0415 (scipy: only where hashes are made)
  try:
    with Image.open(io.BytesIO(data)) as image:
      width, height = image.size
      if draft:
        image.draft("L", DRAFT_SIZE)
      bits = imagehash.phash(image).hash.reshape(-1)
  except (OSError, ValueError, Image.DecompressionBombError, SyntaxError):  # Pillow's errors of bad bytes
    return None
  return int.from_bytes(np.packbits(bits).tobytes(), "big"), width * height


def distance(a: int, b: int) -> int:
  """The Hamming distance of two hashes: the bits they differ in."""
  return (a ^ b).bit_count()


def check_threshold(threshold: int) -> str | None:
  """Why `threshold` is no Hamming distance of two hashes (with what to give), or None."""
  if not 0 <= threshold <= MAX_THRESHOLD:
    return (f"{threshold} is out of range — give a Hamming distance from 0 to {MAX_THRESHOLD} (bits of the "
            f"{BITS}-bit pHash in which two near-duplicates may differ; 10 is the default)")
  return None


def bands(threshold: int) -> list[tuple[int, int]]:
  """(shift, width) of the `threshold + 1` bands the bits are split into, widths differing by at most one bit
  (past 63, some are empty: every hash agrees there, as every pair is within such a threshold)."""
  count = threshold + 1
  widths = [BITS // count + (i < BITS % count) for i in range(count)]
  shifts = np.cumsum([0] + widths[:-1]).tolist()
  return list(zip(shifts, widths))


def band_keys(value: int, threshold: int) -> list[tuple[int, int]]:
  """(band number, the hash's bits in that band) of each band: hashes within `threshold` share at least one."""
  return [(number, (value >> shift) & ((1 << width) - 1)) for number, (shift, width) in enumerate(bands(threshold))]


@dataclasses.dataclass(frozen=True)
class Hashed:
  """One image's hash and what ranks it among its near-duplicates: more pixels first, then the smaller key."""
  key: str
  phash: int
  pixels: int

  def rank(self) -> tuple[int, str]:
    """Sorts best first."""
    return -self.pixels, self.key


def outranked(members: Sequence[Hashed], threshold: int) -> Iterator[str]:
  """The keys of `members` that have another member within `threshold` ranking higher (`Hashed.rank`). The rule
  does not depend on order, and leaves no two members within `threshold` of each other both unflagged."""
  ordered = sorted(members, key=Hashed.rank)
  values = np.array([m.phash for m in ordered], np.uint64)
  flagged = np.zeros(len(ordered), bool)
  rows = max(1, _BLOCK // max(1, len(ordered)))
  for start in range(0, len(ordered), rows):  # a block of higher-ranked rows against every member after them
    stop = min(start + rows, len(ordered))
    near = np.bitwise_count(values[start:stop, None] ^ values[None, start:]) <= threshold
    after = np.arange(start, len(ordered))[None, :] > np.arange(start, stop)[:, None]
    flagged[start:] |= (near & after).any(axis=0)
  return (ordered[i].key for i in np.flatnonzero(flagged))


@dataclasses.dataclass(frozen=True)
class Band:
  """One band of a plan: bits `shift` to `shift + width` of a hash, looked up at every value within `radius`."""
  shift: int
  width: int
  radius: int

  def values(self, hashes: np.ndarray) -> np.ndarray:
    """Each hash's bits in this band (int64, for indexing a table)."""
    return ((hashes >> np.uint64(self.shift)) & np.uint64((1 << self.width) - 1)).astype(np.int64)

  def volume(self) -> int:
    """Values within the radius of one value (itself included)."""
    return sum(math.comb(self.width, k) for k in range(min(self.radius, self.width) + 1))


def plan_bands(count: int, threshold: int) -> tuple[Band, ...]:
  """Bands (3 to 64 of them, widths differing by at most one bit, each at most MAX_WIDTH) and radii summing to
  `threshold + 1 - count` at least (the wider bands the larger radii): any two hashes within `threshold` differ by
  at most its radius in at least one band."""
  widths = [BITS // count + (i < BITS % count) for i in range(count)]
  spare = max(0, threshold + 1 - count)
  shifts = np.cumsum([0] + widths[:-1]).tolist()
  return tuple(Band(shift, width, spare // count + (i < spare % count))
               for i, (shift, width) in enumerate(zip(shifts, widths)))


def _join_cost(bands_: Sequence[Band], hashes: int) -> float:
  """Expected nanoseconds of `near_pairs` over `hashes` uniform random hashes."""
  total = 0.0
  for band in bands_:
    slots, volume = 1 << band.width, band.volume()
    distinct = slots * -math.expm1(-hashes / slots)
    total += (_COST_SORT * hashes + _COST_SLOT * slots + volume * (_COST_MASK + _COST_PROBE * distinct)
              + _COST_PAIR * hashes * hashes / 2 * volume / slots)
  return total


def _query_cost(bands_: Sequence[Band], hashes: int) -> float:
  """Expected nanoseconds of one `HashIndex.near` over `hashes` uniform random indexed hashes."""
  return sum(_COST_QUERY_BAND + band.volume() * (_COST_QUERY_PROBE + _COST_QUERY_PAIR * hashes / (1 << band.width))
             for band in bands_)


@functools.lru_cache(maxsize=256)
def plan(hashes: int, threshold: int, query: bool = False) -> tuple[Band, ...]:
  """The cheapest `plan_bands` for searching `hashes` hashes within `threshold` by the cost model (all pairs, or
  one query against them). Exactness does not depend on the plan, only the time does."""
  cost = _query_cost if query else _join_cost
  plans = [plan_bands(count, threshold) for count in range(-(-BITS // MAX_WIDTH), BITS + 1)]
  return min(plans, key=lambda bands_: cost(bands_, max(2, hashes)))


@functools.lru_cache(maxsize=64)
def radius_masks(width: int, radius: int) -> np.ndarray:
  """The nonzero `width`-bit masks of at most `radius` bits: a value XOR each is every other value within radius."""
  masks = [sum(1 << bit for bit in bits) for k in range(1, min(radius, width) + 1)
           for bits in itertools.combinations(range(width), k)]
  return np.array(masks, np.int64)


@dataclasses.dataclass
class _Table:
  """Hashes sorted by one band's value, and a direct-address table: the bucket of value v (its slot) is
  `order[first[slot]:first[slot] + sizes[slot]]`; slots holds -1 for a value no hash has."""
  order: np.ndarray
  values: np.ndarray  # the distinct band values, ascending
  first: np.ndarray
  sizes: np.ndarray
  slots: np.ndarray

  @classmethod
  def build(cls, band: Band, hashes: np.ndarray) -> _Table:
    values = band.values(hashes)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[first, len(ordered)])
    slots = np.full(1 << band.width, -1, np.int32 if len(first) < 1 << 31 else np.int64)
    slots[ordered[first]] = np.arange(len(first))
    return cls(order, ordered[first], first, sizes, slots)


def _expand(starts_a: np.ndarray, sizes_a: np.ndarray, starts_b: np.ndarray,
            sizes_b: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """Every (a, b) of the ranges a in [starts_a, +sizes_a) x b in [starts_b, +sizes_b) of each bucket pair, in
  pieces of at most about _BLOCK pairs (a bucket pair over that split by rows of a)."""
  counts = sizes_a * sizes_b
  if len(counts) and counts.max() > _BLOCK:  # huge buckets (many copies of one image): a piece a few rows of a
    rows = np.maximum(1, _BLOCK // sizes_b)
    pieces = -(-sizes_a // rows)
    pair = np.repeat(np.arange(len(counts)), pieces)
    row = np.arange(len(pair)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    offset = row * rows[pair]
    starts_a, sizes_a = starts_a[pair] + offset, np.minimum(rows[pair], sizes_a[pair] - offset)
    starts_b, sizes_b = starts_b[pair], sizes_b[pair]
    counts = sizes_a * sizes_b
  ends = np.cumsum(counts)
  begin = 0
  while begin < len(counts):
    stop = max(begin + 1, int(np.searchsorted(ends, (ends[begin - 1] if begin else 0) + _BLOCK, "right")))
    count = counts[begin:stop]
    pair = np.repeat(np.arange(begin, stop), count)
    local = np.arange(len(pair)) - np.repeat(np.cumsum(count) - count, count)
    yield starts_a[pair] + local // sizes_b[pair], starts_b[pair] + local % sizes_b[pair]
    begin = stop


def _bucket_pairs(table: _Table, band: Band) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(a, b) slot arrays of the buckets to compare: each bucket of two hashes or more with itself, then each pair of
  buckets whose values lie within the band's radius, once (from the one whose value has the mask's top bit clear:
  the smaller), mask by mask, so that only one mask's pairs are held at a time."""
  several = np.flatnonzero(table.sizes > 1)
  yield several, several
  masks = radius_masks(band.width, band.radius)
  tops = [int(mask).bit_length() - 1 for mask in masks]
  for top, group in itertools.groupby(zip(tops, masks), key=lambda pair: pair[0]):
    source = np.flatnonzero((table.values >> top & 1) == 0)
    values = table.values[source]
    for _, mask in group:
      other = table.slots[values ^ mask]
      hit = np.flatnonzero(other >= 0)
      yield source[hit], other[hit].astype(np.int64)


def _pair_chunks(hashes: np.ndarray, threshold: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(i, j) index arrays, i < j, of pairs of `hashes` within `threshold`, in pieces; a pair may come more than
  once (from several bands or radius masks)."""
  for band in plan(len(hashes), threshold):
    table = _Table.build(band, hashes)
    ordered = hashes[table.order]
    heads = ordered[table.first]  # each bucket's first hash: most buckets of a wide band hold just one
    for number, (a_slot, b_slot) in enumerate(_bucket_pairs(table, band)):
      sizes_a, sizes_b = table.sizes[a_slot], table.sizes[b_slot]
      pieces = []
      if number:  # the first hashes of each bucket pair, without expanding (a bucket with itself: no pair)
        near = np.flatnonzero(np.bitwise_count(heads[a_slot] ^ heads[b_slot]) <= threshold)
        pieces.append((table.first[a_slot[near]], table.first[b_slot[near]]))
      rest = np.flatnonzero((sizes_a > 1) | (sizes_b > 1))  # the others, all pairs (the first ones again)
      for a, b in _expand(table.first[a_slot[rest]], sizes_a[rest], table.first[b_slot[rest]], sizes_b[rest]):
        near = (np.bitwise_count(ordered[a] ^ ordered[b]) <= threshold) & ((a < b) if number == 0 else True)
        pieces.append((a[near], b[near]))
      for a, b in pieces:
        i, j = table.order[a], table.order[b]
        yield np.minimum(i, j), np.maximum(i, j)


def near_pairs(hashes: Sequence[int], threshold: int) -> np.ndarray:
  """Every pair (i, j), i < j, of indexes of `hashes` within Hamming distance `threshold`, sorted ([k, 2] int64)."""
  values = np.array(hashes, np.uint64).reshape(-1)
  if len(values) < 2:
    return np.zeros((0, 2), np.int64)
  found = [i * len(values) + j for i, j in _pair_chunks(values, threshold)]
  codes = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
  return np.stack([codes // len(values), codes % len(values)], 1)


def near_duplicates(hashed: Iterable[Hashed], threshold: int) -> set[str]:
  """The keys `outranked` flags among all of `hashed`: those with another within `threshold` ranking higher,
  the pairs found by `near_pairs`' search (in memory: a key and 8 bytes a hash). The Beam path's groups (`bands`)
  give the same keys."""
  ordered = sorted(hashed, key=Hashed.rank)
  values = np.array([h.phash for h in ordered], np.uint64)
  flagged = np.zeros(len(ordered), bool)
  if len(ordered) > 1:
    for _, later in _pair_chunks(values, threshold):
      flagged[later] = True
  return {ordered[i].key for i in np.flatnonzero(flagged)}


class HashIndex:
  """Hashes of a set of images (an evaluation split), searched for those within `threshold` of a hash through
  the bands of a plan for one query at a time (`plan(..., query=True)`)."""

  def __init__(self, hashes: Sequence[int], threshold: int):
    self.hashes, self.threshold = list(hashes), threshold
    self._values = np.array(self.hashes, np.uint64).reshape(-1)
    self._bands = plan(len(self.hashes), threshold, query=True)
    self._tables = [_Table.build(band, self._values) for band in self._bands] if self.hashes else []

  def __len__(self) -> int:
    return len(self.hashes)

  def near(self, value: int) -> list[tuple[int, int]]:
    """(index, distance) of every indexed hash within the threshold of `value`, by index."""
    if not self.hashes:
      return []
    query = np.array([value], np.uint64)
    found = []
    for band, table in zip(self._bands, self._tables):
      probed = band.values(query)[0] ^ np.r_[0, radius_masks(band.width, band.radius)]
      slot = table.slots[probed]
      slot = slot[slot >= 0]
      if len(slot):
        sizes = table.sizes[slot]
        local = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        found.append(table.order[np.repeat(table.first[slot], sizes) + local])
    if not found:
      return []
    candidates = np.unique(np.concatenate(found))
    distances = np.bitwise_count(self._values[candidates] ^ query)
    near = distances <= self.threshold
    return list(zip(candidates[near].tolist(), distances[near].tolist()))
