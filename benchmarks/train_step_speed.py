"""Train-step examples/s and achieved FLOP/s of the paper's four captioners, on features and on pixels.

usage: python benchmarks/train_step_speed.py [--models=t2t8x8,t2t1x1,rnn8x8,rnn1x1] [--inputs=features,pixels]
           [--steps=3] [--batch=25] [--image_size=299]
       python benchmarks/train_step_speed.py --vs=pytorch [--rounds=5] [--batch=25] [--vocab_size=25000]
One device; random weights and inputs (speed does not depend on them). FLOP/s is a fraction of a matmul peak
measured in the same run (jitted 2048x2048 float32 matmuls).

--vs=pytorch races capjax's T2T 8x8 train step on features against a PyTorch eager `nn.Transformer` of the same
dimensions (benchmarks/torch_reference.py; `pip install -e '.[bench]'`) on the same batch, one step of each in
turn, and prints both rates, their ratio, and each one's share of the matmul peak with FLOPs counted analytically
(`t2t_flops_per_example`: 12.3 GFLOP per example at vocab 25,000).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import flags

from capjax import cli, config_util, sharding
from capjax.train import make_setup

MODELS = {"t2t8x8": "configs/t2t.py:8x8", "t2t1x1": "configs/t2t.py:1x1",
          "rnn8x8": "configs/rnn.py:8x8", "rnn1x1": "configs/rnn.py:1x1"}

FLAGS = flags.FlagValues()
_MODELS = flags.DEFINE_list("models", list(MODELS), f"comma-separated subset of {list(MODELS)}", flag_values=FLAGS)
_INPUTS = flags.DEFINE_list("inputs", ["features", "pixels"], "features (8x8x1536 grids), pixels (IRv2)",
                            flag_values=FLAGS)
_STEPS = flags.DEFINE_integer("steps", 3, "timed steps after compilation and one warm-up", lower_bound=1,
                              flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch", 25, "the paper's batch size", lower_bound=1, flag_values=FLAGS)
_IMAGE_SIZE = flags.DEFINE_integer("image_size", 299, "pixels: Inception-ResNet-v2 input size", flag_values=FLAGS)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 3920, "caption vocabulary (--vs=pytorch: 25,000 unless given)",
                                   lower_bound=5, flag_values=FLAGS)
_VS = flags.DEFINE_enum("vs", None, ["pytorch"], "race T2T 8x8 against a PyTorch eager reference", flag_values=FLAGS)
_ROUNDS = flags.DEFINE_integer("rounds", 5, "--vs: timed steps of each, alternately", lower_bound=1,
                               flag_values=FLAGS)
VS_VOCAB_SIZE = 25_000


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
  """FLOP/s of the best of `repeats` jitted (n, n) @ (n, n) float32 matmuls."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
  matmul = jax.jit(jnp.matmul)
  jax.block_until_ready(matmul(a, b))
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(matmul(a, b))
    best = min(best, time.perf_counter() - start)
  return 2 * n**3 / best


def _config(spec: str, inputs: str, batch: int, image_size: int) -> ml_collections.ConfigDict:
  c = config_util.load(spec)
  c.batch_size = batch
  if inputs == "pixels":
    c.model.encoder.name = "irv2"  # Inception-ResNet-v2 fine-tuned end to end (frozen batch-norm statistics)
    c.dataset.features = ""
    c.dataset.image_size = image_size
  return c


def _batch(c: ml_collections.ConfigDict, vocab_size: int) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(0)
  b, length = c.batch_size, c.max_caption_tokens + 1
  if c.model.encoder.name == "features":
    image = rng.normal(size=(b, *c.dataset.feature_shape)).astype(np.float32)
  else:
    image = rng.integers(0, 256, (b, c.dataset.image_size, c.dataset.image_size, 3), dtype=np.uint8)
  return {"image": image, "inputs": rng.integers(1, vocab_size, (b, length)).astype(np.int32),
          "targets": rng.integers(1, vocab_size, (b, length)).astype(np.int32)}


def _xla_flops(compiled) -> float | None:
  analysis = compiled.cost_analysis()
  if isinstance(analysis, (list, tuple)):
    analysis = analysis[0] if analysis else None
  flops = (analysis or {}).get("flops")
  return float(flops) if flops and flops > 0 else None


def lstm_loop_flops(c: ml_collections.ConfigDict) -> float:
  """Matmul FLOPs (forward + backward = 3x forward) of the LSTM steps XLA's cost analysis leaves out: it counts
  a while loop's body once, and the encoder runs 64 (8x8) or 1 (1x1) steps, the decoder 16."""
  d, b = c.model.d_model, c.batch_size
  steps = (64 if c.model.grid == "8x8" else 1) + c.max_caption_tokens + 1
  per_step = 2 * b * (d + d) * 4 * d  # input and recurrent kernels, 4 gates
  return 3.0 * per_step * (steps - 2)  # encoder and decoder bodies are each counted once already


def step_flops(c: ml_collections.ConfigDict, compiled, params: int, tokens: int) -> tuple[float, str]:
  """FLOPs of one train step and where the number comes from."""
  flops = _xla_flops(compiled)
  if flops is None:  # backends without a cost analysis: the 6 * parameters * tokens rule of thumb
    return 6.0 * params * tokens, "analytic 6·N·tokens"
  if c.model.name == "rnn":
    return flops + lstm_loop_flops(c), "XLA + LSTM loop steps"
  return flops, "XLA cost analysis"


def measure(spec: str, inputs: str, batch_size: int, image_size: int, vocab_size: int,
            steps: int) -> dict[str, float | str]:
  c = _config(spec, inputs, batch_size, image_size)
  mesh = sharding.make_mesh(c, jax.devices()[:1])
  setup = make_setup(c, vocab_size, mesh)
  state = setup.init(jax.random.key(0))
  batch = sharding.host_to_global(_batch(c, vocab_size), mesh)
  start = time.perf_counter()
  compiled = setup.train_step.lower(state, batch).compile()
  compile_s = time.perf_counter() - start
  params = sum(x.size for x in jax.tree.leaves(state.params))
  flops, source = step_flops(c, compiled, params, c.batch_size * (c.max_caption_tokens + 1))
  state, metrics = compiled(state, batch)  # warm-up
  jax.block_until_ready(metrics)
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    times.append(time.perf_counter() - start)
  step_s = float(np.median(times))
  return {"compile_s": compile_s, "step_s": step_s, "examples_s": c.batch_size / step_s, "flops": flops,
          "source": source}


def t2t_flops_per_example(d: int = 512, ff: int = 2048, layers: int = 6, visual_tokens: int = 64,
                          feature_dim: int = 1536, length: int = 16, vocab: int = VS_VOCAB_SIZE) -> float:
  """Matmul FLOPs of one T2T training example (forward x 3: the backward pass costs two forwards), counted from
  the shapes: the visual projection, encoder and decoder layers (projections, attention scores and mixing, MLP)
  and the tied output projection. Element-wise work (norms, softmax, dropout) is left out, as MFU counts do."""
  n, m = visual_tokens, length
  encoder = 2 * (4 * n * d * d + 2 * n * n * d + 2 * n * d * ff)
  decoder = 2 * (4 * m * d * d + 2 * m * m * d            # self-attention
                 + 2 * m * d * d + 2 * n * d * d + 2 * m * n * d  # cross: q and out over the caption, k and v over
                 + 2 * m * d * ff)                        # the visual tokens, scores and mixing; the MLP
  forward = 2 * n * feature_dim * d + layers * (encoder + decoder) + 2 * m * d * vocab
  return 3.0 * forward


def race_pytorch(batch_size: int, vocab_size: int, rounds: int) -> None:
  """capjax's and PyTorch's step on the same batch, alternately, after a compile and a warm-up step each."""
  try:
    import torch
    import torch_reference  # beside this file
  except ImportError:
    cli.fail("--vs=pytorch needs torch — pip install -e '.[bench]'")
  c = _config(MODELS["t2t8x8"], "features", batch_size, 299)
  mesh = sharding.make_mesh(c, jax.devices()[:1])
  setup = make_setup(c, vocab_size, mesh)
  state = setup.init(jax.random.key(0))
  host_batch = _batch(c, vocab_size)
  batch = sharding.host_to_global(host_batch, mesh)
  compiled = setup.train_step.lower(state, batch).compile()
  reference = torch_reference.Step(host_batch, vocab_size)
  state, metrics = compiled(state, batch)
  jax.block_until_ready(metrics)
  reference()
  times: dict[str, list[float]] = {"capjax": [], "pytorch": []}
  for _ in range(rounds):
    start = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    times["capjax"].append(time.perf_counter() - start)
    start = time.perf_counter()
    reference()
    times["pytorch"].append(time.perf_counter() - start)
  peak = matmul_peak()
  flops = t2t_flops_per_example(vocab=vocab_size) * batch_size
  print(f"T2T 8x8 on features, batch {batch_size}, vocab {vocab_size:,}, {flops / batch_size / 1e9:.1f} GFLOP per "
        f"example (analytic); median of {rounds} alternating steps; torch {torch.__version__} with "
        f"{torch.get_num_threads()} threads; matmul peak (2048² f32, jax) {peak / 1e9:.1f} GFLOP/s\n")
  print("| implementation | step s | examples/s | GFLOP/s | of peak |")
  print("|---|---:|---:|---:|---:|")
  rates = {}
  for name, ts in times.items():
    step_s = float(np.median(ts))
    rates[name] = batch_size / step_s
    print(f"| {name} | {step_s:.3f} | {rates[name]:.1f} | {flops / step_s / 1e9:.1f} | {flops / step_s / peak:.0%} |")
  print(f"\ncapjax / pytorch: {rates['capjax'] / rates['pytorch']:.2f}x")


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if _VS.value:
    vocab = _VOCAB_SIZE.value if FLAGS["vocab_size"].present else VS_VOCAB_SIZE
    race_pytorch(_BATCH.value, vocab, _ROUNDS.value)
    return
  for name, given, known in (("models", _MODELS.value, list(MODELS)),
                             ("inputs", _INPUTS.value, ["features", "pixels"])):
    if unknown := sorted(set(given) - set(known)):
      cli.fail(f"--{name}: unknown {unknown}; choose from {known}")
  peak = matmul_peak()
  device = jax.devices()[0]
  print(f"{device.platform} ({device.device_kind}), batch {_BATCH.value}, median of {_STEPS.value} steps; "
        f"matmul peak (2048² f32) {peak / 1e9:.1f} GFLOP/s\n")
  print("| model | input | compile s | step s | examples/s | GFLOP/step | FLOPs from | GFLOP/s | of peak |")
  print("|---|---|---:|---:|---:|---:|---|---:|---:|")
  for inputs in _INPUTS.value:
    for name in _MODELS.value:
      r = measure(MODELS[name], inputs, _BATCH.value, _IMAGE_SIZE.value, _VOCAB_SIZE.value, _STEPS.value)
      achieved = r["flops"] / r["step_s"]
      label = f"{inputs} ({_IMAGE_SIZE.value}px IRv2)" if inputs == "pixels" else "features 8x8x1536"
      print(f"| {MODELS[name]} | {label} | {r['compile_s']:.1f} | {r['step_s']:.3f} | {r['examples_s']:.1f} | "
            f"{r['flops'] / 1e9:.1f} | {r['source']} | {achieved / 1e9:.1f} | {achieved / peak:.0%} |", flush=True)


if __name__ == "__main__":
  cli.run(main)
