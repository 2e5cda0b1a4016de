"""Captions/s of greedy and beam-4 decoding, with the key/value cache and recomputing the prefix, side by side,
and the share of training time that validation takes at the config's `eval_every`.

usage: python benchmarks/decode_speed.py [--config=configs/t2t.py:8x8 --config=configs/t2t.py:1x1] [--batch=256]
           [--methods=beam4,greedy] [--repeats=2] [--vocab_size=25000]
Random weights and inputs (speed does not depend on them); the paper's T2T (6+6 layers, d=512) by default, at the
paper's evaluation batch of 256.

Validation share: training runs `eval_every` steps (each timed here at the config's batch size), then decodes
`eval.num_examples` validation images with the config's search (beam 4 with the cache) at the cached rate measured
here (greedy for configs that validate with it); the share is decoding time over both. Scoring the captions
(CIDEr-D on 2,048 images) takes well under a second and is left out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import flax.linen as nn
import jax
import ml_collections
import numpy as np
from absl import flags

from capjax import cli, config_util, decode, models, sharding
from capjax.data import sources
from capjax.train import make_setup

METHODS = ("greedy", "beam4")
FLAGS = flags.FlagValues()
_CONFIGS = flags.DEFINE_multi_string("config", ["configs/t2t.py:8x8", "configs/t2t.py:1x1"],
                                     "config file[:variants], repeated for several", flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch", 256, "images per decoding batch", lower_bound=1, flag_values=FLAGS)
_METHODS = flags.DEFINE_list("methods", ["beam4", "greedy"], f"searches to time, of {list(METHODS)}",
                             flag_values=FLAGS)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 25_000, "caption vocabulary", lower_bound=5, flag_values=FLAGS)
_REPEATS = flags.DEFINE_integer("repeats", 2, "timed calls per search (the best counts)", lower_bound=1,
                                flag_values=FLAGS)
_TRAIN_STEPS = flags.DEFINE_integer("train_steps", 3, "timed train steps for the validation share (0: skip it)",
                                    lower_bound=0, flag_values=FLAGS)


def _best_time(fn, *args) -> float:
  jax.block_until_ready(fn(*args))  # compile
  best = float("inf")
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - start)
  return best


def random_inputs(spec: sources.InputSpec, batch: int) -> np.ndarray:
  """Random pixels or features of the shape and type the config's model reads."""
  rng = np.random.default_rng(0)
  shape = (batch, *spec.shape)
  return (rng.integers(0, 256, shape) if spec.dtype == "uint8" else rng.normal(size=shape)).astype(spec.dtype)


def decode_rates(config: ml_collections.ConfigDict, batch: int, vocab_size: int,
                 methods: Sequence[str]) -> dict[tuple[str, bool], float]:
  """Captions/s by (method, cached)."""
  model = models.build(config, vocab_size)
  max_len = config.max_caption_tokens + 1
  inputs = random_inputs(sources.input_spec(config), batch)
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

  return {(method, cached): batch / _best_time(searcher(method, cached), params, inputs)
          for method in methods for cached in (True, False)}


def train_step_s(config: ml_collections.ConfigDict, vocab_size: int, steps: int) -> float:
  """Median seconds of the config's train step at its batch size, on one device."""
  mesh = sharding.make_mesh(config, jax.devices()[:1])
  setup = make_setup(config, vocab_size, mesh)
  state = setup.init(jax.random.key(0))
  rng = np.random.default_rng(1)
  b, length = config.batch_size, config.max_caption_tokens + 1
  host = {"image": random_inputs(setup.inputs, b),
          "inputs": rng.integers(1, vocab_size, (b, length)).astype(np.int32),
          "targets": rng.integers(1, vocab_size, (b, length)).astype(np.int32)}
  batch = sharding.host_to_global(host, mesh)
  state, metrics = setup.train_step(state, batch)  # compile
  jax.block_until_ready(metrics)
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    state, metrics = setup.train_step(state, batch)
    jax.block_until_ready(metrics)
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if unknown := sorted(set(_METHODS.value) - set(METHODS)):
    cli.fail(f"--methods: unknown {unknown} — choose from {list(METHODS)}")
  try:
    configs = {spec: config_util.load(spec) for spec in _CONFIGS.value}
  except (FileNotFoundError, ValueError) as e:
    cli.fail(str(e))
  print(f"batch {_BATCH.value}, vocab {_VOCAB_SIZE.value:,}, best of {_REPEATS.value}, {jax.devices()[0].platform}\n")
  print("| config | search | cached captions/s | uncached captions/s | speed-up |")
  print("|---|---|---:|---:|---:|")
  eval_rates = {}
  for spec, config in configs.items():
    rates = decode_rates(config, _BATCH.value, _VOCAB_SIZE.value, _METHODS.value)
    for method in _METHODS.value:
      cached, uncached = rates[method, True], rates[method, False]
      print(f"| {spec} | {method} | {cached:.1f} | {uncached:.1f} | {cached / uncached:.1f}x |", flush=True)
    search = _search(config)
    eval_rates[spec] = (search, rates.get((search, True)))
  if not _TRAIN_STEPS.value:
    return
  print("\n| config | train step s (batch) | eval_every | validation images | search | decoding s | share of "
        "training time |")
  print("|---|---:|---:|---:|---|---:|---:|")
  for spec, config in configs.items():
    search, rate = eval_rates[spec]
    if rate is None:
      print(f"| {spec} | – | – | – | {search} | not timed: add it to --methods | – |")
      continue
    step_s = train_step_s(config, _VOCAB_SIZE.value, _TRAIN_STEPS.value)
    train_s = config.eval_every * step_s
    eval_s = config.eval.num_examples / rate
    print(f"| {spec} | {step_s:.3f} ({config.batch_size}) | {config.eval_every:,} | {config.eval.num_examples:,} | "
          f"{search} | {eval_s:.0f} | {eval_s / (train_s + eval_s):.1%} |", flush=True)


def _search(config: ml_collections.ConfigDict) -> str:
  """The search the config's validation runs, as named here."""
  if config.decode.method == "beam" and config.decode.beam_size != 4:
    cli.fail(f"{config.decode.beam_size=} — this benchmark times beam 4 and greedy search")
  return "beam4" if config.decode.method == "beam" else "greedy"


if __name__ == "__main__":
  cli.run(main)
