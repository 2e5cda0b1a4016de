"""The synthetic scenes dataset's generator: example i of a split drawn, rendered and captioned from its own
seed, in one of two domains. `sample` draws scenes, `render` paints them, `grammar` words plain scenes and parses
captions of both back, `vivid` words vivid scenes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# Modules, not their functions: `capjax.scenes.render` stays the module whatever is imported first.
from capjax.scenes import grammar, render, sample, vivid


@dataclasses.dataclass(frozen=True)
class Example:
  scene: sample.Scene
  png: bytes  # the rendered scene, PNG-encoded
  captions: list[str]


def rng_key(seed: int, split_index: int, index: int, domain: str = "plain") -> list[int]:
  """The seed of one example: [seed, split_index, index] in the plain domain, the domain's index appended in the
  others (so the same index draws unrelated scenes in two domains)."""
  key = [seed, split_index, index]
  return key if domain == "plain" else key + [sample.DOMAINS.index(domain)]


def make_example(seed: int, split_index: int, index: int, image_size: int = 64, domain: str = "plain") -> Example:
  """Example `index` of a split of `domain` (one of `sample.DOMAINS`), drawn from
  `np.random.default_rng(rng_key(...))` alone: the content of a split never depends on how its generation is
  sharded or ordered."""
  if domain not in sample.DOMAINS:
    raise ValueError(f"unknown scene domain {domain!r}; expected one of {sample.DOMAINS}")
  rng = np.random.default_rng(rng_key(seed, split_index, index, domain))
  scene = sample.sample_scene(rng, domain=domain)
  words = grammar.captions if domain == "plain" else vivid.captions
  return Example(scene, render.encode_png(render.render(scene, image_size)), words(scene, rng))


def make_examples(seed: int, split_index: int, start: int, stop: int, image_size: int = 64,
                  domain: str = "plain") -> list[Example]:
  """Examples start .. stop - 1 of a split (one task of a process pool: this module imports no TensorFlow)."""
  return [make_example(seed, split_index, index, image_size, domain) for index in range(start, stop)]
