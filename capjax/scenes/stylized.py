"""Stylized captions of synthetic scenes: a style phrase from a fixed bank per style grafted onto the factual
canonical caption, with the phrase and its word span recorded (the planted phrase a style extractor must recover).

Example i of a split is `scenes.make_example(seed, split, i)` (the same image and factual captions) plus, for a
stylized split, one caption per style drawn from `np.random.default_rng([seed, split, i, STYLE_STREAM])` alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from capjax.scenes import grammar, sample

STYLES: tuple[str, ...] = ("romantic", "humorous")
# Two to four words each; no word of the scene grammar and no word shared between the styles, so that the planted
# phrase is exactly the words a scene caption cannot hold, and a style is told by its words alone.
PHRASES: dict[str, tuple[str, ...]] = {
    "romantic": (
        "in love", "deeply in love", "longing for romance", "dreaming about sweethearts", "waiting for true love",
        "with tender affection", "under moonlit skies", "burning with passion", "yearning for its beloved",
        "sharing sweet kisses", "on honeymoon", "filled with romance",
    ),
    "humorous": (
        "like clowns", "juggling pizzas", "telling silly jokes", "dancing disco badly", "wearing funny hats",
        "chasing donuts", "acting like potatoes", "after too much coffee", "laughing like hyenas",
        "hiding from homework", "doing goofy tricks", "snoring loudly",
    ),
}
# Where the phrase goes: right after the first noun phrase ("a small red circle in love to the left of ..."), or
# at the end. With one object the two are the same place.
PLACEMENTS: tuple[str, ...] = ("after_subject", "end")
STYLE_STREAM = 1  # the last entry of the stylized captions' seed: their draws never shift the scene's


@dataclasses.dataclass(frozen=True)
class StylizedCaption:
  """A factual caption with a style phrase planted in it: words [start, end) of `caption.split()` are `phrase`."""

  style: str
  caption: str
  phrase: str
  start: int
  end: int
  factual: str  # the caption the phrase was grafted onto: `caption` without the phrase


def graft(factual: str, phrase: str, style: str, placement: str) -> StylizedCaption:
  """`phrase` planted in `factual` at `placement` ("after_subject": after its first noun phrase, or "end")."""
  words = factual.split()
  if placement == "end":
    at = len(words)
  elif placement == "after_subject":
    first = grammar.parse_caption(factual).spans[0]
    at = len(first.text.split()) if first.kind in ("object", "count") else len(words)
  else:
    raise ValueError(f"unknown placement {placement!r} — choose one of {', '.join(PLACEMENTS)}")
  planted = phrase.split()
  caption = " ".join(words[:at] + planted + words[at:])
  return StylizedCaption(style, caption, phrase, at, at + len(planted), factual)


def stylize(factual: str, rng: np.random.Generator) -> tuple[StylizedCaption, ...]:
  """One stylized caption per style (in `STYLES` order): a phrase and a placement drawn from `rng` for each."""
  captions = []
  for style in STYLES:
    phrase = PHRASES[style][int(rng.integers(len(PHRASES[style])))]
    placement = PLACEMENTS[int(rng.integers(len(PLACEMENTS)))]
    captions.append(graft(factual, phrase, style, placement))
  return tuple(captions)


def stylized_captions(seed: int, split_index: int, index: int, factual: str) -> tuple[StylizedCaption, ...]:
  """The stylized captions of example `index` of a split, grafted onto its canonical caption `factual`."""
  return stylize(factual, np.random.default_rng([seed, split_index, index, STYLE_STREAM]))


def split_texts(seed: int, split_index: int, index: int) -> tuple[list[str], tuple[StylizedCaption, ...]]:
  """(factual captions, stylized captions) of example `index` of a split, as `stylized_scenes` records them, without
  rendering the image: text models train on these sentences, and painting 10,000 scenes they never see costs
  seconds. (The factual split's records hold no stylized captions: ignore them there.)"""
  rng = np.random.default_rng([seed, split_index, index])  # the draws of `capjax.scenes.make_example`
  factual = grammar.captions(sample.sample_scene(rng), rng)
  return factual, stylized_captions(seed, split_index, index, factual[0])
