"""Candidates per second per core through boilerplate, filters and hypernymization on a realistic alt-text mix.

usage: python benchmarks/text_pipeline_speed.py [--n=20000] [--seed=0] [--cc3m=PATH]
Prints a table and one JSON line.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import random
import time
from collections.abc import Sequence

from absl import flags

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
DEFAULT_CC3M = SHARED / "data" / "cc3m" / "Validation_GCC-1.1.0-Validation.tsv"
if (SHARED / "nltk_data").is_dir():
  os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))  # before nltk is imported

from capjax import cli  # noqa: E402
from capjax.text.pipeline import TextPipeline  # noqa: E402

PAPER_CANDIDATES = 5_000_000_000

FIRST = ["Harrison", "Emma", "James", "Olivia", "Michael", "Sophia", "David", "Laura", "Daniel", "Anna", "Peter",
         "Maria"]
LAST = ["Ford", "Watson", "Miller", "Garcia", "Brown", "Jones", "Taylor", "Wilson", "Moore", "Clark", "Lewis", "Young"]
PLACES = ["Paris", "London", "New York", "Franklin, Tennessee", "Chicago", "Tokyo", "Sydney", "Berlin", "Austin, Texas",
          "Rome", "Madrid", "Toronto"]
ROLES = ["actor", "singer", "player", "designer", "artist", "president", "chef", "model"]
EVENTS = ["the premiere", "the festival", "the gala", "the ceremony", "the match", "the concert", "the show"]
DATES = ["on September 23, 2017", "in 2016", "on Monday", "on June 5", "in May 2018", ""]
OBJECTS = ["dog", "cat", "car", "house", "bridge", "boat", "tree", "bicycle", "horse", "cake", "dress", "kitchen",
           "road"]
ADJECTIVES = ["red", "old", "small", "beautiful", "white", "large", "wooden", "modern", "young", "happy"]
SCENES = ["the park", "the beach", "the street", "a field", "the lake", "the garden", "the city", "a forest",
          "the snow"]
VERBS = ["stands", "sits", "walks", "runs", "rests", "waits", "plays", "lies"]
KEYWORDS = ["beach", "sunset", "ocean", "waves", "sand", "summer", "fashion", "women", "dress", "travel", "food",
            "wedding", "flowers", "nature", "landscape", "business", "technology", "holiday", "vintage"]
TITLE_WORDS = ["Best", "Places", "To", "Visit", "In", "Europe", "Top", "Ideas", "For", "Your", "Home", "How", "The",
               "Guide", "Summer", "Recipes", "Easy", "Ways"]
LABELS = ["Home", "Logo", "Products", "Buy now", "Contact us", "Banner", "Menu", "Next", "Previous", "Red Dress",
          "Sale", "Cart", "Search", "Facebook", "Twitter icon", "Loading...", "spacer", "arrow"]
FILES = ["IMG_{n}.JPG", "DSC0{n}.jpg", "photo-{n}.png", "https://example.com/images/{n}.jpg", "banner_{n}.gif",
         "untitled-{n}", "image", "thumbnail", "Embedded image permalink", "click to enlarge picture"]
HOSTILE = ["😀😀😀 🎉", "&lt;b&gt;Sale&lt;/b&gt; &amp; more", "Ein Hund spielt im Park mit einem Ball",
           "\x00\x07\x1b[31m", "Un chat dort sur le canapé de la maison", "WOW!!! AMAZING DEAL ON SHOES", "x" * 5000,
           "Fucking awesome view of the beach", "Beautiful amazing wonderful happy love the best day ever"]


def person(rng: random.Random) -> str:
  return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def descriptive(rng: random.Random) -> str:
  """Sentences that look like keepers: they exercise every filter and most hypernymization steps."""
  kind = rng.randrange(5)
  if kind == 0:
    return f"{person(rng)} and {person(rng)} attend {rng.choice(EVENTS)} in {rng.choice(PLACES)} {rng.choice(DATES)}."
  if kind == 1:
    return f"{rng.choice(ROLES).capitalize()} {person(rng)} performs at {rng.choice(EVENTS)} {rng.choice(DATES)}."
  if kind == 2:
    count = rng.choice(["Two", "Three", "A", "The", "A"])
    noun = rng.choice(OBJECTS) + ("s" if count in ("Two", "Three") else "")
    return f"{count} {rng.choice(ADJECTIVES)} {noun} in {rng.choice(SCENES)} in {rng.choice(PLACES)}."
  if kind == 3:
    return f"A {rng.choice(ADJECTIVES)} {rng.choice(OBJECTS)} {rng.choice(VERBS)} on {rng.choice(SCENES)}"
  return f"View of {rng.choice(SCENES)} from the window of a {rng.choice(ADJECTIVES)} {rng.choice(OBJECTS)}."


def from_cc3m(caption: str, rng: random.Random) -> str:
  """A released caption turned back into an alt-text: capitalized, names and places put back."""
  words = caption.split()
  out = []
  for w in words:
    if w == "person":
      out.append(person(rng))
    elif w == "city":
      out.append(rng.choice(PLACES))
    else:
      out.append(w)
  text = " ".join(out).replace(" ,", ",").replace(" .", ".").replace(" 's", "'s").replace(" n't", "n't")
  return text[:1].upper() + text[1:]


def realistic_mix(n: int, seed: int, cc3m: list[str]) -> list[tuple[str, str]]:
  """(category, alt-text) pairs in proportions typical of web alt-text: most of it is not a caption."""
  rng = random.Random(seed)
  categories = [
      ("empty", 0.10, lambda: rng.choice(["", " ", "\t"])),
      ("file_or_url", 0.15, lambda: rng.choice(FILES).format(n=rng.randrange(1000, 99999))),
      ("label", 0.15, lambda: rng.choice(LABELS)),
      ("title_case", 0.10, lambda: " ".join(rng.choice(TITLE_WORDS) for _ in range(rng.randrange(4, 9)))),
      ("keywords", 0.10, lambda: " ".join(rng.sample(KEYWORDS, rng.randrange(3, 8)))),
      ("stock_wrapped", 0.05, lambda: f"{descriptive(rng)} - stock photo"),
      ("hostile", 0.05, lambda: rng.choice(HOSTILE)),
      ("descriptive", 0.15, lambda: descriptive(rng)),
      ("cc3m_like", 0.15, lambda: from_cc3m(rng.choice(cc3m), rng) if cc3m else descriptive(rng)),
  ]
  weights = [w for _, w, _ in categories]
  out = []
  for _ in range(n):
    name, _, make = rng.choices(categories, weights)[0]
    out.append((name, make()))
  return out


FLAGS = flags.FlagValues()
_N = flags.DEFINE_integer("n", 20_000, "candidates in the mix", lower_bound=1, flag_values=FLAGS)
_SEED = flags.DEFINE_integer("seed", 0, "seed of the mix", flag_values=FLAGS)
_CC3M = flags.DEFINE_string("cc3m", str(DEFAULT_CC3M), "CC3M TSV for real-vocabulary sentences (optional)",
                            flag_values=FLAGS)


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  cc3m = []
  if _CC3M.value and pathlib.Path(_CC3M.value).exists():
    with open(_CC3M.value, encoding="utf-8") as f:
      cc3m = [line.split("\t")[0] for line in f]
  mix = realistic_mix(_N.value, _SEED.value, cc3m)

  start = time.perf_counter()
  pipeline = TextPipeline()
  pipeline.process("warmup", "Harrison Ford and Calista Flockhart attend the premiere at Hollywood")
  load_s = time.perf_counter() - start

  per_category: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
  kept = 0
  cpu0, wall0 = time.process_time(), time.perf_counter()
  for i, (category, text) in enumerate(mix):
    t0 = time.process_time()
    record = pipeline.process(str(i), text)
    per_category[category][0] += 1
    per_category[category][1] += time.process_time() - t0
    kept += record.kept
  cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0

  rate = len(mix) / cpu
  print(f"resources loaded in {load_s:.1f} s (once per worker)")
  print(f"{'category':<15}{'share':>8}{'cand/s':>10}")
  for category, (count, seconds) in sorted(per_category.items()):
    print(f"{category:<15}{count / len(mix):>8.1%}{count / seconds:>10.0f}")
  core_hours = PAPER_CANDIDATES / rate / 3600
  print(f"mix: {len(mix)} candidates, kept {kept} ({kept / len(mix):.1%}), {rate:.0f} candidates/s per core "
        f"(wall {len(mix) / wall:.0f}/s), 5e9 candidates = {core_hours:,.0f} core-hours")
  print(json.dumps({"candidates": len(mix), "candidates_per_s_per_core": round(rate), "kept": kept,
                    "core_hours_for_5e9": round(core_hours), "load_s": round(load_s, 1),
                    "descriptive_per_s": round(per_category["descriptive"][0] / per_category["descriptive"][1]),
                    "cc3m_like_per_s": round(per_category["cc3m_like"][0] / per_category["cc3m_like"][1])}))
  return 0


if __name__ == "__main__":
  cli.run(main)
