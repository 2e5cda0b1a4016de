"""Perceptual hashes (imagehash's 64-bit pHash) of image bytes, and near-duplicates among many hashes found by
multi-index hashing instead of all pairs: for alt_text_captions' dedup stage and `capjax.data.overlap`.

Multi-index hashing: the 64 bits are split into `threshold + 1` bands; two hashes within Hamming distance
`threshold` differ in at most `threshold` bits, so (pigeonhole) they agree exactly on at least one band. Only
hashes that share a band value are compared.
"""

from __future__ import annotations

import collections
import dataclasses
import io
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from PIL import Image

BITS = 64  # imagehash's pHash: 8 x 8 bits
MAX_THRESHOLD = BITS
# Pillow's JPEG draft mode decodes straight to greyscale at the smallest DCT scale (1/2 to 1/8) that is still at
# least this size: pHash shrinks the image to 32 x 32 anyway, and a full decode is the bulk of the time.
DRAFT_SIZE = (64, 64)
_BLOCK = 1 << 22  # pairs compared at once by `outranked` (32 MiB of uint64)


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


def near_duplicates(hashed: Iterable[Hashed], threshold: int) -> set[str]:
  """The keys `outranked` flags among all of `hashed` (pairs found by multi-index hashing, in memory: a key and 8
  bytes a hash). Each band's groups are what the Beam path groups by key."""
  hashed = list(hashed)
  flagged: set[str] = set()
  for shift, width in bands(threshold):
    mask = (1 << width) - 1
    groups: dict[int, list[Hashed]] = collections.defaultdict(list)
    for h in hashed:
      groups[(h.phash >> shift) & mask].append(h)
    for members in groups.values():
      if len(members) > 1:
        flagged.update(outranked(members, threshold))
  return flagged


class HashIndex:
  """Hashes of a set of images (an evaluation split), searched for those within `threshold` of a hash through
  their bands (multi-index hashing)."""

  def __init__(self, hashes: Sequence[int], threshold: int):
    self.hashes, self.threshold = list(hashes), threshold
    self._bands: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    for index, value in enumerate(self.hashes):
      for band in band_keys(value, threshold):
        self._bands[band].append(index)

  def __len__(self) -> int:
    return len(self.hashes)

  def near(self, value: int) -> list[tuple[int, int]]:
    """(index, distance) of every indexed hash within the threshold of `value`, by index."""
    seen: set[int] = set()
    for band in band_keys(value, self.threshold):
      seen.update(self._bands.get(band, ()))
    found = ((index, distance(value, self.hashes[index])) for index in sorted(seen))
    return [(index, d) for index, d in found if d <= self.threshold]
