"""CIDEr-D speed: capjax's CiderD against pycocoevalcap's Cider on 25,000 images of perturbed CC3M captions (1-5
references each); prints both times (ours: median of --repeats calls), the speed-up and the largest difference.

usage: python benchmarks/cider_speed.py [--images=25000] [--tsv=CC3M_VALIDATION.tsv] [--repeats=3]
"""

from __future__ import annotations

import pathlib
import random
import sys
import time
from collections.abc import Sequence

import numpy as np
from absl import flags

from capjax import cli
from capjax.metrics.cider import CiderD

DEFAULT_TSV = pathlib.Path(__file__).resolve().parents[2] / "shared/data/cc3m/Validation_GCC-1.1.0-Validation.tsv"

FLAGS = flags.FlagValues()
_IMAGES = flags.DEFINE_integer("images", 25_000, "images scored", lower_bound=1, flag_values=FLAGS)
_TSV = flags.DEFINE_string("tsv", str(DEFAULT_TSV), "CC3M TSV whose captions are the references", flag_values=FLAGS)
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls of capjax's CiderD", lower_bound=1, flag_values=FLAGS)


def perturb(caption: str, vocabulary: list[str], rng: random.Random) -> str:
  """A plausible model output: some words dropped, replaced or swapped."""
  words = caption.split()
  out = []
  for word in words:
    roll = rng.random()
    if roll < 0.1:
      continue
    out.append(rng.choice(vocabulary) if roll < 0.25 else word)
  if len(out) > 2 and rng.random() < 0.3:
    i = rng.randrange(len(out) - 1)
    out[i], out[i + 1] = out[i + 1], out[i]
  return " ".join(out)


def build(captions: list[str], num_images: int, seed: int = 0) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
  """{image: references}, {image: [candidate]}: the first reference is a CC3M caption, the rest perturbed."""
  rng = random.Random(seed)
  vocabulary = sorted({w for c in captions for w in c.split()})
  gts, res = {}, {}
  for image in range(num_images):
    source = captions[image % len(captions)]
    gts[image] = [source] + [perturb(source, vocabulary, rng) for _ in range(rng.randint(0, 4))]
    res[image] = [perturb(source, vocabulary, rng)]
  return gts, res


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if not pathlib.Path(_TSV.value).is_file():
    cli.fail(f"--tsv={_TSV.value} is not a file: give the CC3M validation TSV")
  from pycocoevalcap.cider.cider import Cider  # the reference implementation (test extra)

  captions = [line.split("\t")[0] for line in pathlib.Path(_TSV.value).read_text(encoding="utf-8").splitlines() if line]
  gts, res = build(captions, _IMAGES.value)
  num_refs = sum(map(len, gts.values()))
  print(f"{len(gts)} images, {num_refs} references ({num_refs / len(gts):.2f} per image)")

  ours_times = []
  for _ in range(_REPEATS.value):  # the first call also pays for fresh memory pages
    start = time.perf_counter()
    ours, our_scores = CiderD().compute_score(gts, res)
    ours_times.append(time.perf_counter() - start)
  start = time.perf_counter()
  theirs, their_scores = Cider().compute_score(gts, res)
  theirs_s = time.perf_counter() - start

  ours_s = float(np.median(ours_times))
  difference = float(np.max(np.abs(np.asarray(our_scores) - np.asarray(their_scores))))
  runs = ", ".join(f"{t:.3f}" for t in ours_times)
  print(f"capjax CiderD:        {ours_s:8.3f} s (median of {runs})   CIDEr {ours:.12f}")
  print(f"pycocoevalcap Cider:  {theirs_s:8.3f} s (one run)   CIDEr {theirs:.12f}")
  print(f"speed-up: {theirs_s / ours_s:.1f}x (first call alone: {theirs_s / ours_times[0]:.1f}x)   "
        f"largest per-image difference: {difference:.2e}")
  if difference > 1e-9:
    sys.exit("the two implementations disagree")


if __name__ == "__main__":
  cli.run(main)
