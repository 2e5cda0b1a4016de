"""Where the paper's T2T 8x8 train step spends its time: the step taken apart, each part timed in one run.

usage: python benchmarks/train_step_profile.py [--rounds=5] [--batch=25] [--vocab_size=25000] [--dump_hlo=DIR]

One device, features input, random weights. Each row is a jitted function on the same batch; the rows run in turn,
`--rounds` times, and the medians are printed (the machines are noisy: differences between rows measured minutes
apart mean little). The rows:
  step                 the train step as training runs it (forward, backward, Adagrad update, gradient norm)
  step, no dropout     the same with dropout_rate 0: the cost of dropout's random bits and masks
  forward + backward   the loss and its gradients, without the optimizer: step - this = the update
  forward              the loss alone (train mode, dropout on)
  matmuls alone        every matrix product of forward and backward (the forward's shapes, and for each its two
                       backward products), with nothing else: the floor if all element-wise work were free
  output layer         the tied output projection and the label-smoothed loss over the vocabulary, with gradients
FLOPs are analytic (`t2t_matmuls`, the shapes of the model's products), so each row's GFLOP/s is comparable with
the jitted 2048² float32 matmul peak measured in the same run. `--dump_hlo=DIR` writes the optimized HLO of the
step, to read which fusions and copies XLA made.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import flags

import train_step_speed as tss
from capjax import cli, sharding
from capjax.train import loss_fn, make_setup

FLAGS = flags.FlagValues()
_ROUNDS = flags.DEFINE_integer("rounds", 5, "timed calls of each row, in turn", lower_bound=1, flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch", 25, "the paper's batch size", lower_bound=1, flag_values=FLAGS)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", tss.VS_VOCAB_SIZE, "caption vocabulary", lower_bound=5,
                                   flag_values=FLAGS)
_DUMP_HLO = flags.DEFINE_string("dump_hlo", None, "write the step's optimized HLO text here", flag_values=FLAGS)

# (batch, M, K, N): batch independent (M, K) @ (K, N) products.
Matmul = tuple[int, int, int, int]


def t2t_matmuls(batch: int, d: int = 512, ff: int = 2048, heads: int = 8, layers: int = 6, visual_tokens: int = 64,
                feature_dim: int = 1536, length: int = 16, vocab: int = tss.VS_VOCAB_SIZE) -> list[Matmul]:
  """The forward pass's matrix products for `batch` examples, with the shapes the model multiplies.

  Their FLOPs, 2·b·M·K·N summed, are `batch` times a third of `train_step_speed.t2t_flops_per_example` (a test
  holds the two counts equal): the same model counted two ways.
  """
  n, m, hd = visual_tokens, length, d // heads
  bn, bm, bh = batch * n, batch * m, batch * heads
  products: list[Matmul] = [(1, bn, feature_dim, d)]  # the visual projection
  encoder = [(1, bn, d, d)] * 4 + [(bh, n, hd, n), (bh, n, n, hd), (1, bn, d, ff), (1, bn, ff, d)]
  decoder = ([(1, bm, d, d)] * 4 + [(bh, m, hd, m), (bh, m, m, hd)]                         # self-attention
             + [(1, bm, d, d)] * 2 + [(1, bn, d, d)] * 2 + [(bh, m, hd, n), (bh, m, n, hd)]  # cross-attention
             + [(1, bm, d, ff), (1, bm, ff, d)])
  products += (encoder + decoder) * layers
  products.append((1, bm, d, vocab))  # tied output projection
  return products


def matmul_flops(products: Sequence[Matmul]) -> float:
  return float(sum(2 * b * m * k * n for b, m, k, n in products))


def matmuls_alone(products: Sequence[Matmul]) -> tuple[Callable, list[tuple[jax.Array, jax.Array, jax.Array]]]:
  """A jitted function computing each forward product and its two backward products (dA = G·Bᵀ, dB = Aᵀ·G) from
  random operands passed as arguments (so nothing is constant-folded), and those operands."""
  keys = iter(jax.random.split(jax.random.key(0), 3 * len(products)))
  operands = []
  for b, m, k, n in products:
    a = jax.random.normal(next(keys), (b, m, k), jnp.float32)
    w = jax.random.normal(next(keys), (b, k, n), jnp.float32)
    g = jax.random.normal(next(keys), (b, m, n), jnp.float32)
    operands.append((a, w, g))

  def run(operands):
    return [(a @ w, g @ jnp.swapaxes(w, 1, 2), jnp.swapaxes(a, 1, 2) @ g) for a, w, g in operands]
  return jax.jit(run), operands


def _timed(fn: Callable, *args) -> float:
  start = time.perf_counter()
  jax.block_until_ready(fn(*args))
  return time.perf_counter() - start


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  batch_size, vocab = _BATCH.value, _VOCAB_SIZE.value
  rows: dict[str, tuple[Callable[[], float], float]] = {}  # name -> (timed call, analytic FLOPs)
  products = t2t_matmuls(batch_size, vocab=vocab)
  train_flops = 3 * matmul_flops(products)

  for dropout in (0.1, 0.0):
    c = tss._config(tss.MODELS["t2t8x8"], "features", batch_size, 299)
    c.model.dropout_rate = dropout
    mesh = sharding.make_mesh(c, jax.devices()[:1])
    setup = make_setup(c, vocab, mesh)
    batch = sharding.host_to_global(tss._batch(c, vocab), mesh)
    state = setup.init(jax.random.key(0))
    compiled = setup.train_step.lower(state, batch).compile()
    holder = {"state": state}

    def step(compiled=compiled, batch=batch, holder=holder) -> float:
      start = time.perf_counter()
      holder["state"], metrics = compiled(holder["state"], batch)
      jax.block_until_ready(metrics)
      return time.perf_counter() - start
    rows["step" if dropout else "step, no dropout"] = (step, train_flops)
    if dropout and _DUMP_HLO.value:
      path = pathlib.Path(_DUMP_HLO.value) / "t2t8x8_train_step.hlo.txt"
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(compiled.as_text())
      print(f"optimized HLO: {path}")
    if not dropout:
      continue
    params = jax.tree.map(jnp.copy, state.params)
    rng = jax.random.key(1)
    num_words = vocab

    def loss(p, batch=batch, model=setup.model):
      return loss_fn(model, p, batch, rng, c.label_smoothing, num_words)[0]
    grad = jax.jit(jax.value_and_grad(loss))
    forward = jax.jit(loss)
    rows["forward + backward"] = (lambda: _timed(grad, params), train_flops)
    rows["forward"] = (lambda: _timed(forward, params), train_flops / 3)

  alone, operands = matmuls_alone(products)
  rows["matmuls alone"] = (lambda: _timed(alone, operands), train_flops)

  rows_v = -(-vocab // 64) * 64
  hidden = jax.random.normal(jax.random.key(2), (batch_size, 16, 512), jnp.float32)
  table = jax.random.normal(jax.random.key(3), (rows_v, 512), jnp.float32) * 512**-0.5
  labels = jax.random.randint(jax.random.key(4), (batch_size, 16), 1, vocab)

  def output_loss(hidden, table):
    logits = jnp.einsum("bld,vd->blv", hidden, table)
    targets = optax.smooth_labels(jax.nn.one_hot(labels, rows_v), 0.1)
    return optax.softmax_cross_entropy(logits, targets).mean()
  output = jax.jit(jax.grad(output_loss, argnums=(0, 1)))
  rows["output layer"] = (lambda: _timed(output, hidden, table), 3 * 2.0 * batch_size * 16 * 512 * rows_v)

  order = ("step", "step, no dropout", "forward + backward", "forward", "matmuls alone", "output layer")
  rows = {name: rows[name] for name in order}
  for fn, _ in rows.values():  # compile and warm up
    fn()
  times: dict[str, list[float]] = {name: [] for name in rows}
  for _ in range(_ROUNDS.value):
    for name, (fn, _) in rows.items():
      times[name].append(fn())
  peak = tss.matmul_peak()
  step_s = float(np.median(times["step"]))
  print(f"T2T 8x8 on features, batch {batch_size}, vocab {vocab:,}: {train_flops / batch_size / 1e9:.2f} GFLOP per "
        f"example in {len(products)} forward products (x3 with the backward); median of {_ROUNDS.value} rounds; "
        f"matmul peak (2048² f32) {peak / 1e9:.1f} GFLOP/s\n")
  print("| part | s | of the step | GFLOP | GFLOP/s | of peak |")
  print("|---|---:|---:|---:|---:|---:|")
  for name, (_, flops) in rows.items():
    s = float(np.median(times[name]))
    print(f"| {name} | {s:.3f} | {s / step_s:.0%} | {flops / 1e9:.1f} | {flops / s / 1e9:.1f} | "
          f"{flops / s / peak:.0%} |")


if __name__ == "__main__":
  cli.run(main)
