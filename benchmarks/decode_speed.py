"""Captions/s of greedy and beam-4 decoding, with the key/value cache and recomputing the prefix, side by side.

usage: python benchmarks/decode_speed.py [--config=configs/t2t.py:8x8] [--batch=32] [--repeats=3]
Random weights and inputs (speed does not depend on them); the paper's T2T (6+6 layers, d=512) by default.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import flax.linen as nn
import jax
import numpy as np
from absl import flags

from capjax import cli, config_util, decode, models

FLAGS = flags.FlagValues()
_CONFIG = flags.DEFINE_string("config", "configs/t2t.py:8x8", "config file[:variants]", flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch", 32, "images per decoding batch", lower_bound=1, flag_values=FLAGS)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 4000, "caption vocabulary", lower_bound=5, flag_values=FLAGS)
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls per search (the best counts)", lower_bound=1,
                                flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  config = config_util.load(_CONFIG.value)
  model = models.build(config, _VOCAB_SIZE.value)
  max_len = config.max_caption_tokens + 1
  rng = np.random.default_rng(0)
  if config.model.encoder.name == "features":
    inputs = rng.normal(size=(_BATCH.value, *config.dataset.feature_shape)).astype(np.float32)
  else:
    size = config.dataset.image_size
    inputs = rng.integers(0, 256, (_BATCH.value, size, size, 3), dtype=np.uint8)
  tokens = np.zeros((1, max_len), np.int32)
  params = jax.jit(lambda: nn.unbox(model.init(jax.random.key(0), inputs[:1], tokens)["params"]))()

  def searcher(method: str, cached: bool):
    def run(params, inputs):
      fns = decode.cached_step(model, params) if cached else decode.uncached_step(model, params, max_len)
      if method == "greedy":
        # Force full-length decoding so both variants do the same number of steps.
        return decode.greedy_search(fns, inputs, max_len)
      return decode.beam_search(fns, inputs, max_len, 4, 0.6)[0]
    return jax.jit(run)

  print(f"{_CONFIG.value}: batch {_BATCH.value}, max length {max_len}, {jax.devices()[0].platform}")
  print(f"{'search':<8} {'cached':>14} {'uncached':>14} {'speed-up':>9}")
  for method in ("greedy", "beam4"):
    rates = {}
    for cached in (True, False):
      fn = searcher(method, cached)
      jax.block_until_ready(fn(params, inputs))  # compile
      best = float("inf")
      for _ in range(_REPEATS.value):
        start = time.perf_counter()
        jax.block_until_ready(fn(params, inputs))
        best = min(best, time.perf_counter() - start)
      rates[cached] = _BATCH.value / best
    print(f"{method:<8} {rates[True]:>10.1f} c/s {rates[False]:>10.1f} c/s {rates[True] / rates[False]:>8.2f}x")


if __name__ == "__main__":
  cli.run(main)
