"""Captions/s of greedy and beam-4 decoding, with the key/value cache and recomputing the prefix, side by side.

`python benchmarks/decode_speed.py [--config=configs/t2t.py:8x8] [--batch=32] [--repeats=3]`
Random weights and inputs (speed does not depend on them); the paper's T2T (6+6 layers, d=512) by default.
"""

from __future__ import annotations

import argparse
import time

import flax.linen as nn
import jax
import numpy as np

from capjax import decode, models
from capjax.tools.param_count import load_config


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/t2t.py:8x8")
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--vocab_size", type=int, default=4000)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  config = load_config(args.config)
  model = models.build(config, args.vocab_size)
  max_len = config.max_caption_tokens + 1
  rng = np.random.default_rng(0)
  if config.model.encoder.name == "features":
    inputs = rng.normal(size=(args.batch, *config.dataset.feature_shape)).astype(np.float32)
  else:
    size = config.dataset.image_size
    inputs = rng.integers(0, 256, (args.batch, size, size, 3), dtype=np.uint8)
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

  print(f"{args.config}: batch {args.batch}, max length {max_len}, {jax.devices()[0].platform}")
  print(f"{'search':<8} {'cached':>14} {'uncached':>14} {'speed-up':>9}")
  for method in ("greedy", "beam4"):
    rates = {}
    for cached in (True, False):
      fn = searcher(method, cached)
      jax.block_until_ready(fn(params, inputs))  # compile
      best = float("inf")
      for _ in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(params, inputs))
        best = min(best, time.perf_counter() - start)
      rates[cached] = args.batch / best
    print(f"{method:<8} {rates[True]:>10.1f} c/s {rates[False]:>10.1f} c/s {rates[True] / rates[False]:>8.2f}x")


if __name__ == "__main__":
  main()
