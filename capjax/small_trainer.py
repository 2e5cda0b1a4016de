"""The training loop of the small auxiliary models (ERG's generator and dual encoder, the style classifier): one
process, parameters that fit on one device, no checkpoints along the way (the captioner's sharded, resumable loop
is `capjax.train`).

`jitted_init` initialises a Flax module in one compile (Flax's init op by op takes seconds on two cores);
`epoch_batches` gives each epoch's rows in a seeded shuffle, whole batches only (one compiled shape); `fit` runs
the jitted AdamW-style step (any optax optimizer) over the batches, splits a dropout key per step, and logs a line
at the end of each epoch and every `log_every` steps (the three callers train for a fixed number of epochs). The
order of every draw (the numpy shuffle, the key splits) is the callers' former own loops', so the parameters they
train are the same bit for bit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import flax.linen as nn
import jax
import numpy as np
import optax

Batch = tuple[Any, ...]
# loss(params, batch, rng, frozen) -> scalar loss; `frozen`: parameters the model reads but the step does not train.
LossFn = Callable[[Any, Batch, Any, Any], jax.Array]


def jitted_init(module: nn.Module) -> Callable[..., Any]:
  """`init(key, *inputs)` -> the module's "params", unboxed, jitted (also usable under `jax.eval_shape`)."""
  return jax.jit(lambda key, *inputs: nn.meta.unbox(module.init(key, *inputs)["params"]))


def epoch_batches(num: int, batch_size: int, epochs: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
  """(epoch, rows) of every step: each epoch a permutation of `num` rows drawn from `np.random.default_rng(seed)`,
  cut into whole batches of `batch_size` (the last partial batch dropped)."""
  order_rng = np.random.default_rng(seed)
  for epoch in range(epochs):
    order = order_rng.permutation(num)
    for step in range(num // batch_size):
      yield epoch, order[step * batch_size:(step + 1) * batch_size]


def make_step(loss_fn: LossFn, optimizer: optax.GradientTransformation) -> Callable[..., Any]:
  """The jitted `step(params, opt_state, batch, rng, frozen)` -> (params, opt_state, loss); `frozen` is an argument,
  not constants baked into the program."""

  @jax.jit
  def step(params, opt_state, batch, rng, frozen):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, rng, frozen)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return step


def fit(loss_fn: LossFn, optimizer: optax.GradientTransformation, params: Any,
        batches: Iterable[tuple[int, Batch]], *, rng: jax.Array | None = None, frozen: Any = None, epochs: int = 1,
        log: Callable[[str], None] | None = None, log_every: int | None = None) -> tuple[Any, list[float]]:
  """Trains `params` on `batches` ((epoch, batch) per step): returns the trained parameters and every step's loss.

  Args:
    loss_fn: loss(params, batch, rng, frozen); its gradient with respect to `params` is the update's.
    rng: a key split before each step (`rng, step_key = split(rng)`), for dropout; None: no key.
    frozen: parameters the loss reads but nobody trains (a locked tower): no gradient, no update, no decay.
    epochs: the number of epochs `batches` holds, for the log lines.
    log: called with a line after each epoch (and every `log_every` steps): the mean loss so far in the epoch and
      the time since the start.
  """
  step = make_step(loss_fn, optimizer)
  params = jax.tree.map(jax.numpy.asarray, params)
  opt_state = optimizer.init(params)
  frozen = {} if frozen is None else frozen
  losses: list[jax.Array] = []
  epoch_losses: list[jax.Array] = []
  current, start = None, time.perf_counter()

  def report(label: str) -> None:
    if log is not None and epoch_losses:
      mean = float(np.mean([float(x) for x in epoch_losses]))
      log(f"{label}: mean loss {mean:.4f} ({time.perf_counter() - start:.1f}s)")

  for number, (epoch, batch) in enumerate(batches, 1):
    if current is not None and epoch != current:
      report(f"epoch {current + 1}/{epochs}")
      epoch_losses = []
    current = epoch
    step_rng = None
    if rng is not None:
      rng, step_rng = jax.random.split(rng)
    params, opt_state, loss = step(params, opt_state, batch, step_rng, frozen)
    losses.append(loss)
    epoch_losses.append(loss)
    if log_every and number % log_every == 0:
      report(f"epoch {epoch + 1}/{epochs} step {number}")
  if current is not None:
    report(f"epoch {current + 1}/{epochs}")
  return params, [float(x) for x in losses]
