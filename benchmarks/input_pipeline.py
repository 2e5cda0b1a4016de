"""The share of training time spent waiting for input, for grain's thread counts and prefetch depths.

usage: python benchmarks/input_pipeline.py [--setting=THREADS/PREFETCH ...] [--steps=20] [--data_dir=DIR]
           [--cases=shapes,features] [--shapes_builder_config=tiny]

Two cases, each on its real input pipeline (`capjax.data.pipeline.train_iterator` over ArrayRecord):
  shapes     the `configs/t2t.py:shapes` demo: 64 px scene images decoded and batched by 64 (built on first use)
  features   the paper's T2T 8x8 (`configs/t2t.py:8x8`, batch 25) on 8x8x1536 feature grids: the tiny
             synthetic_scenes train split (512 images) extracted at 299 px by `capjax.tools.extract_tfds_features`
             with random Inception-ResNet-v2 weights (first use: a few minutes; cached in --data_dir)
For each case and setting it times, on one device:
  input alone   batches/s that the iterator delivers with nothing else running
  step alone    --steps train steps on one batch already on the device, just before the loop
  loop          the training loop's own order (next batch, put it on the device, dispatch the step) for --steps
The waiting share is 1 - step alone / loop per step: the time the loop spends beyond computing (the input threads
share the CPU cores with XLA's, which counts here as it does in training).
"""

from __future__ import annotations

import pathlib
import tempfile
import time
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
from absl import flags

from capjax import cli, config_util, sharding
from capjax.data import pipeline, sources
from capjax.models import inception_resnet_v2 as irv2
from capjax.tools import extract_tfds_features as etf
from capjax.train import load_or_build_vocab, make_setup

CASES = ("shapes", "features")
FLAGS = flags.FlagValues()
_CASES = flags.DEFINE_list("cases", list(CASES), f"of {list(CASES)}", flag_values=FLAGS)
_SETTINGS = flags.DEFINE_multi_string("setting", ["1/1", "1/4", "2/4", "4/8"],
                                      "grain read threads/prefetch buffer, repeated", flag_values=FLAGS)
_STEPS = flags.DEFINE_integer("steps", 20, "loop steps per setting (and batches for 'input alone')", lower_bound=2,
                              flag_values=FLAGS)
_SHAPES_CONFIG = flags.DEFINE_string("shapes_builder_config", "", "shapes: the synthetic_scenes config (the demo's "
                                     "default, or 'tiny' for a quick check)", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", str(pathlib.Path(tempfile.gettempdir()) / "capjax_bench_data"),
                                "where the datasets are built once and reused", flag_values=FLAGS)


def _settings() -> list[tuple[int, int]]:
  out = []
  for text in _SETTINGS.value:
    try:
      threads, prefetch = (int(x) for x in text.split("/"))
    except ValueError:
      cli.fail(f"--setting={text!r} is not THREADS/PREFETCH — give e.g. --setting=2/4")
    if threads < 0 or prefetch < 0:
      cli.fail(f"--setting={text!r} has a negative count — give counts of 0 or more")
    out.append((threads, prefetch))
  return out


def case_config(case: str, data_dir: str) -> ml_collections.ConfigDict:
  if case == "shapes":
    c = config_util.load("configs/t2t.py:shapes")
    c.dataset.builder_config = _SHAPES_CONFIG.value
  else:
    c = config_util.load("configs/t2t.py:8x8")
    c.dataset.name, c.dataset.builder_config = "synthetic_scenes", "tiny"
    c.dataset.train_split = "train"
  c.dataset.data_dir = data_dir
  return c


def ensure_features(data_dir: str) -> None:
  """The tiny scenes' train split as an IRv2 8x8 feature variant, written by the real extraction tool."""
  pixels = ml_collections.ConfigDict({"name": "synthetic_scenes", "builder_config": "tiny", "data_dir": data_dir,
                                      "auto_build": True, "features": ""})
  builder = sources.prepare(pixels)
  if (pathlib.Path(data_dir) / "synthetic_scenes_irv2" / "tiny").exists():
    return
  weights = pathlib.Path(data_dir) / "random_irv2_weights"
  if not (weights / "metadata.json").exists():
    model = irv2.InceptionResNetV2(num_classes=1001)  # the released layout (the head is not used)
    variables = jax.jit(lambda: nn.unbox(model.init(jax.random.key(0), jnp.zeros((1, 75, 75, 3)))))()
    irv2.save_converted(weights, jax.device_get(variables), {"format": "random (benchmark)", "num_classes": 1001})
  print("extracting IRv2 features of synthetic_scenes/tiny train (first use) ...", flush=True)
  etf.extract_dataset(builder, weights, data_dir, splits=["train"], dtype="float16", devices=jax.devices()[:1])


def measure(case: str, settings: Sequence[tuple[int, int]], steps: int, data_dir: str) -> None:
  c = case_config(case, data_dir)
  if case == "features":
    ensure_features(data_dir)
  else:
    sources.prepare(c.dataset)
  inputs = sources.input_spec(c)
  source = sources.data_source(c.dataset, c.dataset.train_split)
  with tempfile.TemporaryDirectory() as workdir:
    vocab = load_or_build_vocab(c, workdir, source)
  mesh = sharding.make_mesh(c, jax.devices()[:1])
  setup = make_setup(c, len(vocab), mesh, inputs)
  state = setup.init(jax.random.key(0))

  def iterator(threads: int, prefetch: int):
    c.input.num_threads, c.input.prefetch = threads, prefetch
    return pipeline.train_iterator(c, source, vocab, inputs.key)

  fixed = sharding.host_to_global(next(iterator(1, 1)), mesh)
  state, metrics = setup.train_step(state, fixed)  # compile
  jax.block_until_ready(metrics)

  def step_alone() -> float:
    nonlocal state
    start = time.perf_counter()
    for _ in range(steps):
      state, metrics = setup.train_step(state, fixed)
    jax.block_until_ready(metrics)
    return (time.perf_counter() - start) / steps

  print(f"\n{case}: {c.dataset.name}/{c.dataset.builder_config or ''} {c.dataset.train_split}, key {inputs.key!r} "
        f"{inputs.shape}, batch {c.batch_size}, {steps} steps per measure\n")
  print("| threads/prefetch | input alone, batches/s | step alone ms | loop ms/step | waiting share |")
  print("|---|---:|---:|---:|---:|")
  for threads, prefetch in settings:
    it = iterator(threads, prefetch)
    next(it)  # start the threads
    start = time.perf_counter()
    for _ in range(steps):
      next(it)
    input_rate = steps / (time.perf_counter() - start)
    alone_s = step_alone()  # measured just before the loop: the machines are noisy
    it = iterator(threads, prefetch)
    batch = sharding.host_to_global(next(it), mesh)
    state, metrics = setup.train_step(state, batch)
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for _ in range(steps):
      batch = sharding.host_to_global(next(it), mesh)
      state, metrics = setup.train_step(state, batch)
    jax.block_until_ready(metrics)
    loop_s = (time.perf_counter() - start) / steps
    print(f"| {threads}/{prefetch} | {input_rate:.1f} | {alone_s * 1e3:.0f} | {loop_s * 1e3:.0f} | "
          f"{max(0.0, 1 - alone_s / loop_s):.1%} |", flush=True)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if unknown := sorted(set(_CASES.value) - set(CASES)):
    cli.fail(f"--cases: unknown {unknown} — choose from {list(CASES)}")
  settings = _settings()
  if problem := cli.unwritable_reason(_DATA_DIR.value):
    cli.fail(f"--data_dir={_DATA_DIR.value} {problem} — give a directory you can write to")
  for case in _CASES.value:
    measure(case, settings, _STEPS.value, _DATA_DIR.value)


if __name__ == "__main__":
  cli.run(main)
