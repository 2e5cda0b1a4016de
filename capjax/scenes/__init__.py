"""The synthetic scenes dataset's generator: example i of a split drawn, rendered and captioned from its own
seed. `sample` draws scenes, `render` paints them, `grammar` words them and parses captions back.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# Modules, not their functions: `capjax.scenes.render` stays the module whatever is imported first.
from capjax.scenes import grammar, render, sample


@dataclasses.dataclass(frozen=True)
class Example:
  scene: sample.Scene
  png: bytes  # the rendered scene, PNG-encoded
  captions: list[str]


def make_example(seed: int, split_index: int, index: int, image_size: int = 64) -> Example:
  """Example `index` of a split, drawn from `np.random.default_rng([seed, split_index, index])` alone: the
  content of a split never depends on how its generation is sharded or ordered."""
  rng = np.random.default_rng([seed, split_index, index])
  scene = sample.sample_scene(rng)
  return Example(scene, render.encode_png(render.render(scene, image_size)), grammar.captions(scene, rng))


def make_examples(seed: int, split_index: int, start: int, stop: int, image_size: int = 64) -> list[Example]:
  """Examples start .. stop - 1 of a split (one task of a process pool: this module imports no TensorFlow)."""
  return [make_example(seed, split_index, index, image_size) for index in range(start, stop)]
