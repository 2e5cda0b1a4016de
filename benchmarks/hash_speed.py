"""pHash throughput per core (alt_text_captions' dedup stage, capjax.data.overlap): JPEG bytes → 64-bit pHash with
Pillow's draft-mode decode (what capjax.image.phash does) beside a full decode, on photo-like JPEGs of 640x480 and
1024x768, measured side by side in one run; how far the two hashes lie apart; the multi-index pair search over many
hashes; and the projection for CC3M and the paper's 5 billion candidates in core-hours.

`python benchmarks/hash_speed.py [--images=30] [--rounds=3] [--search=20000,100000]`
Printed figures, not a timed test: CPU time of this process (process_time), so other jobs on the machine do not
count.
"""

from __future__ import annotations

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
_SEARCH = flags.DEFINE_list("search", ["20000", "100000"], "Hash counts for the pair search (uniform random hashes).",
                            flag_values=FLAGS)


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


def search_seconds(count: int, threshold: int) -> tuple[float, int]:
  """CPU seconds of `phash.near_duplicates` over `count` uniform random hashes, and the keys it flags."""
  rng = random.Random(count)
  hashed = [phash.Hashed(f"{i:09d}", rng.getrandbits(64), 1) for i in range(count)]
  start = time.process_time()
  flagged = phash.near_duplicates(hashed, threshold)
  return time.process_time() - start, len(flagged)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
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
  print("\npair search (capjax.image.phash.near_duplicates, plain path; uniform random hashes)")
  print(f"{'hashes':>9}{'threshold':>11}{'bands':>7}{'CPU s':>8}{'flagged':>9}")
  for count in map(int, _SEARCH.value):
    for threshold in (4, 10):
      seconds, flagged = search_seconds(count, threshold)
      print(f"{count:>9,}{threshold:>11}{threshold + 1:>7}{seconds:>8.2f}{flagged:>9,}")


if __name__ == "__main__":
  cli.run(main)
