"""pHash throughput per core (alt_text_captions' dedup stage, capjax.data.overlap): JPEG bytes → 64-bit pHash with
Pillow's draft-mode decode (what capjax.image.phash does) beside a full decode, on photo-like JPEGs of 640x480 and
1024x768, measured side by side in one run; how far the two hashes lie apart; the near-duplicate pair search over
many hashes, before (`threshold + 1` exact bands, the reference `near_duplicates_before`) and after (capjax's planned
bands with radii), on uniform random hashes and on clusters of near-copies; and the projections for CC3M and the
paper's 5 billion candidates in core-hours.

`python benchmarks/hash_speed.py [--images=30] [--rounds=3] [--search=20000,100000,1000000] [--before_max=1000000]`
Printed figures, not a timed test: CPU time of this process (process_time), so other jobs on the machine do not
count.
"""

from __future__ import annotations

import collections
import io
import pathlib
import random
import sys
import time
from collections.abc import Sequence

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np
from absl import flags
from PIL import Image, ImageDraw, ImageFilter

from capjax import cli
from capjax.image import phash

CC3M_IMAGES = 3_300_000
PAPER_CANDIDATES = 5_000_000_000
# The share of the candidates the dedup stage hashes: those the image stage (35% kept), the text stage (3% of the
# rest), the cross filter (40% kept) and the hypernym repair (80% kept) leave, by the paper's funnel (section 3).
HASHED_SHARE = 0.35 * 0.03 * 0.4 * 0.8
SIZES = ((640, 480), (1024, 768))

FLAGS = flags.FlagValues()
_IMAGES = flags.DEFINE_integer("images", 30, "JPEGs of each size.", lower_bound=1, flag_values=FLAGS)
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Rounds over them, draft and full decode alternating.", lower_bound=1,
                               flag_values=FLAGS)
_SEARCH = flags.DEFINE_list("search", ["20000", "100000", "1000000"], "Hash counts for the pair search.",
                            flag_values=FLAGS)
_BEFORE_MAX = flags.DEFINE_integer("before_max", 1_000_000, "The most hashes the quadratic search before runs on "
                                   "(above, projected from the largest it ran: CPU seconds x (n / n0)^2).",
                                   lower_bound=1, flag_values=FLAGS)
_HASHES = flags.DEFINE_boolean("hashes", True, "Measure pHash throughput (off: the pair search only).",
                               flag_values=FLAGS)
PROJECTED = (CC3M_IMAGES, round(PAPER_CANDIDATES * HASHED_SHARE))


def photo(seed: int, size: tuple[int, int]) -> bytes:
  """A photo-like JPEG (quality 85): blurred shapes over a gradient, with sensor-like noise, so that its size and
  decode time are those of a photo's (a flat drawing compresses to a tenth)."""
  rng = np.random.default_rng(seed)
  width, height = size
  y, x = np.mgrid[0:height, 0:width]
  base = np.stack([x * 255 // width, y * 255 // height, (x + y) * 127 // (width + height)], -1) + rng.integers(0, 80, 3)
  image = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
  draw = ImageDraw.Draw(image)
  for _ in range(30):
    x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
    box = (x0, y0, x0 + int(rng.integers(10, width // 3)), y0 + int(rng.integers(10, height // 3)))
    (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
  pixels = np.asarray(image.filter(ImageFilter.GaussianBlur(1.5)), np.int16)
  pixels = np.clip(pixels + rng.normal(0, 8, pixels.shape), 0, 255).astype(np.uint8)
  buffer = io.BytesIO()
  Image.fromarray(pixels).save(buffer, "JPEG", quality=85)
  return buffer.getvalue()


def hash_rates(images: list[bytes], rounds: int) -> dict[bool, float]:
  """Hashes per CPU second, draft (True) and full decode (False), their rounds alternating."""
  seconds = {True: 0.0, False: 0.0}
  for _ in range(rounds):
    for draft in (True, False):
      start = time.process_time()
      for data in images:
        phash.phash(data, draft)
      seconds[draft] += time.process_time() - start
  return {draft: len(images) * rounds / s for draft, s in seconds.items()}


def near_duplicates_before(hashed: Sequence[phash.Hashed], threshold: int) -> set[str]:
  """The search before (issue 33's): `threshold + 1` bands, each hash compared with every other of its bucket of each
  band (`phash.outranked`, all pairs in blocks): quadratic in a bucket's n/64 hashes at threshold 10."""
  flagged: set[str] = set()
  for shift, width in phash.bands(threshold):
    mask = (1 << width) - 1
    groups: dict[int, list[phash.Hashed]] = collections.defaultdict(list)
    for h in hashed:
      groups[(h.phash >> shift) & mask].append(h)
    for members in groups.values():
      if len(members) > 1:
        flagged.update(phash.outranked(members, threshold))
  return flagged


def hash_set(kind: str, count: int) -> list[phash.Hashed]:
  """`count` ranked hashes: uniform random, or clustered (a quarter random centres, the rest near-copies of them,
  each a centre with 0 to 8 bits flipped: about 3 near-duplicates an image, as in a crawl's reposts)."""
  rng = random.Random(count)
  if kind == "random":
    values = [rng.getrandbits(64) for _ in range(count)]
  else:
    values = [rng.getrandbits(64) for _ in range(count // 4)]
    for _ in range(count - len(values)):
      value = values[rng.randrange(count // 4)]
      for bit in rng.sample(range(64), rng.randint(0, 8)):
        value ^= 1 << bit
      values.append(value)
  return [phash.Hashed(f"{i:09d}", value, rng.randint(1, 4)) for i, value in enumerate(values)]


def search_seconds(search, hashed: list[phash.Hashed], threshold: int) -> tuple[float, int]:
  """CPU seconds of `search` over `hashed`, and the keys it flags."""
  start = time.process_time()
  flagged = search(hashed, threshold)
  return time.process_time() - start, len(flagged)


def search_table(counts: Sequence[int], before_max: int) -> None:
  """The pair search before and after, side by side (CPU seconds; `~` projected), and both projected to CC3M and
  the paper's funnel quadratically from the largest count measured (an upper bound for after: its probes grow
  less than quadratically)."""
  print("\nnear-duplicate pair search (plain path: near_duplicates; CPU seconds; bands after: width/radius)")
  print(f"{'hashes':>10}{'set':>10}{'threshold':>10}{'before s':>10}{'after s':>9}{'speed-up':>9}{'flagged':>10}"
        f"  bands after")
  largest: dict[tuple[str, int], tuple[int, float, int, float]] = {}
  for count in counts:
    for kind in ("random", "clustered"):
      hashed = hash_set(kind, count)
      for threshold in (4, 10):
        after, flagged = search_seconds(phash.near_duplicates, hashed, threshold)
        before_n, before = largest.get((kind, threshold), (0, 0.0, 0, 0.0))[:2]
        if count <= before_max:
          before, before_flagged = search_seconds(near_duplicates_before, hashed, threshold)
          assert before_flagged == flagged, (count, kind, threshold, before_flagged, flagged)
          before_n, text = count, f"{before:.2f}"
        else:
          before = before * (count / before_n) ** 2
          text = f"~{before:.0f}"
        largest[kind, threshold] = before_n if count > before_max else count, before, count, after
        bands = " ".join(f"{b.width}/{b.radius}" for b in phash.plan(count, threshold))
        print(f"{count:>10,}{kind:>10}{threshold:>10}{text:>10}{after:>9.2f}{before / after:>8.0f}x{flagged:>10,}"
              f"  {bands}")
  print(f"\nprojected core-hours (quadratic from the largest count measured; {PROJECTED[1] / 1e6:.1f}M: the paper's "
        "funnel after the hypernym repair)")
  print(f"{'set':>10}{'threshold':>10}" + "".join(f"{f'{n / 1e6:.1f}M before':>14}{'after':>8}" for n in PROJECTED))
  for (kind, threshold), (_, before, count, after) in largest.items():
    cells = "".join(f"{before * (n / count) ** 2 / 3600:>14.2f}{after * (n / count) ** 2 / 3600:>8.2f}"
                    for n in PROJECTED)
    print(f"{kind:>10}{threshold:>10}{cells}")


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if not _HASHES.value:
    search_table([int(count) for count in _SEARCH.value], _BEFORE_MAX.value)
    return
  phash.phash(photo(0, (64, 64)))  # imports imagehash and scipy outside the timing
  print(f"pHash per core (CPU seconds of this process; {_IMAGES.value} photo-like JPEGs a size, quality 85, "
        f"{_ROUNDS.value} rounds)")
  print(f"{'size':<10}{'KB':>6}{'draft/s':>10}{'full/s':>9}{'ratio':>7}{'bits apart':>12}"
        f"{'CC3M core-h':>13}{'5e9 core-h':>12}")
  for size in SIZES:
    images = [photo(seed, size) for seed in range(_IMAGES.value)]
    rates = hash_rates(images, _ROUNDS.value)
    apart = [phash.distance(phash.phash(data)[0], phash.phash(data, False)[0]) for data in images]
    kb = sum(map(len, images)) / len(images) / 1024
    hours = CC3M_IMAGES / rates[True] / 3600, PAPER_CANDIDATES * HASHED_SHARE / rates[True] / 3600
    ratio, apart_text = rates[True] / rates[False], f"{np.mean(apart):.1f} (max {max(apart)})"
    print(f"{f'{size[0]}x{size[1]}':<10}{kb:>6.0f}{rates[True]:>10.1f}{rates[False]:>9.1f}{ratio:>6.1f}x"
          f"{apart_text:>12}{hours[0]:>13.1f}{hours[1]:>12.1f}")
  print(f"(5e9: the {PAPER_CANDIDATES * HASHED_SHARE / 1e6:.1f}M candidates the paper's funnel leaves after the "
        f"hypernym repair, {HASHED_SHARE:.3%}; every one of the 5e9 would be {1 / HASHED_SHARE:.0f}x that)")
  search_table([int(count) for count in _SEARCH.value], _BEFORE_MAX.value)


if __name__ == "__main__":
  cli.run(main)
