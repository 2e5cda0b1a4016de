"""What parameter EMA costs a train step, and what each model of a test-time ensemble costs a decoded batch, side by
side in one process, in process CPU seconds (the wall clock of a shared machine is noise).

usage: python benchmarks/ema_ensemble_cost.py [CONFIG_SPEC] [--steps=10] [--repeats=5]
CONFIG_SPEC defaults to configs/t2t.py:shapes. Random weights and inputs (speed does not depend on them); the train
steps alternate between a state without EMA and one with `optimizer.ema_decay=0.999`, ten at a time, and the median
of the repeats is printed; then the config's search decodes one `eval.batch_size` batch with 1, 2 and 3 models.
"""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from capjax import config_util, ensemble, inference, sharding, train
from capjax.data import sources
from capjax.tokens import BOS_ID

VOCAB = 60


def _setup(spec: str, decay: float):
  config = config_util.load(spec)
  config.optimizer.ema_decay = decay
  return config, train.make_setup(config, VOCAB, sharding.make_mesh(config), sources.input_spec(config))


def _batch(config, setup) -> dict:
  images = setup.inputs.zeros(config.batch_size)
  tokens = np.random.default_rng(0).integers(4, VOCAB, (config.batch_size, config.max_caption_tokens + 1))
  return sharding.host_to_global({"image": images, "inputs": tokens.astype(np.int32),
                                  "targets": tokens.astype(np.int32)}, setup.mesh)


def _cpu_seconds(fn) -> float:
  start = time.process_time()
  jax.block_until_ready(fn())
  return time.process_time() - start


def train_steps(spec: str, steps: int, repeats: int) -> dict[float, float]:
  """{ema_decay: median CPU seconds per train step}."""
  runs = {}
  for decay in (0.0, 0.999):
    config, setup = _setup(spec, decay)
    batch = _batch(config, setup)
    state, _ = setup.train_step(setup.init(jax.random.key(0)), batch)  # compiled here
    runs[decay] = [setup, state, batch]
  seconds: dict[float, list[float]] = {decay: [] for decay in runs}
  for _ in range(repeats):
    for decay, run in runs.items():
      def ten(run=run):
        for _ in range(steps):
          run[1], _ = run[0].train_step(run[1], run[2])
        return run[1]
      seconds[decay].append(_cpu_seconds(ten) / steps)
  return {decay: float(np.median(s)) for decay, s in seconds.items()}


def ensemble_decodes(spec: str, repeats: int) -> tuple[dict[int, float], int, str]:
  """({models: median CPU seconds per decoded batch}, batch, search)."""
  config, setup = _setup(spec, 0.0)
  params = [setup.init(jax.random.key(i)).params for i in range(3)]
  images = sharding.host_to_global({"image": setup.inputs.zeros(config.eval.batch_size)}, setup.mesh)["image"]
  decoders = {1: (setup.decode, params[0])}
  for n in (2, 3):
    decoders[n] = (inference.ensemble_decode(setup, n, BOS_ID), ensemble.Members(tuple(params[:n])))
  for decode, p in decoders.values():
    jax.block_until_ready(decode(p, images))  # compiled here
  seconds: dict[int, list[float]] = {n: [] for n in decoders}
  for _ in range(repeats):
    for n, (decode, p) in decoders.items():
      seconds[n].append(_cpu_seconds(lambda decode=decode, p=p: decode(p, images)))
  return {n: float(np.median(s)) for n, s in seconds.items()}, config.eval.batch_size, config.decode.method


def main(argv: list[str]) -> None:
  options = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--"))
  spec = next((a for a in argv[1:] if not a.startswith("--")), "configs/t2t.py:shapes")
  steps, repeats = int(options.get("steps", 10)), int(options.get("repeats", 5))
  per_step = train_steps(spec, steps, repeats)
  print(f"{spec}: train step without EMA {per_step[0.0] * 1e3:.1f} ms CPU, with EMA {per_step[0.999] * 1e3:.1f} ms "
        f"CPU (x{per_step[0.999] / per_step[0.0]:.3f})")
  per_batch, batch, method = ensemble_decodes(spec, repeats)
  for n, s in per_batch.items():
    print(f"{spec}: {method} decoding of {batch} images with {n} model(s): {s * 1e3:.0f} ms CPU "
          f"(x{s / per_batch[1]:.2f})")


if __name__ == "__main__":
  main(sys.argv)
