"""Gradients of a batch taken in micro-batches (gradient accumulation, `optimizer.accumulate_steps`): the captioner's
train step calls it inside its jit, so the k micro-batches run one after another in one compiled step, and the
optimizer sees one update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def accumulated(loss_of: Callable[..., tuple[jax.Array, jax.Array]], params: Any, batch: dict[str, jax.Array],
                rng: jax.Array, steps: int) -> tuple[tuple[jax.Array, jax.Array], Any]:
  """((mean token loss, tokens), gradients) of `batch` taken in `steps` micro-batches, one after another
  (`lax.scan`): the same values as the whole batch at once, to float rounding, with a `steps`-th of its activations.

  `loss_of(params, batch, rng)` gives (mean token loss, tokens), as `capjax.train.loss_fn`. Each micro-batch's
  summed loss is its mean times its tokens; the sums and their gradients add up and are divided by all the batch's
  tokens, so that micro-batches with more words weigh more, as in the whole batch. Micro-batch j holds rows j,
  j + steps, ...: each device keeps its own rows of every micro-batch. Dropout draws micro-batch j's masks from
  `fold_in(rng, j)`.
  """
  def micro(x: jax.Array) -> jax.Array:
    return jnp.moveaxis(x.reshape(x.shape[0] // steps, steps, *x.shape[1:]), 1, 0)

  def summed(p, b, r):
    mean, tokens = loss_of(p, b, r)
    return mean * jnp.maximum(tokens, 1.0), tokens

  grad_fn = jax.value_and_grad(summed, has_aux=True)

  def body(carry, xs):
    total, tokens, grads = carry
    b, j = xs
    (s, t), g = grad_fn(params, b, jax.random.fold_in(rng, j))
    return (total + s, tokens + t, jax.tree.map(jnp.add, grads, g)), None

  zeros = (jnp.float32(0.0), jnp.float32(0.0), jax.tree.map(jnp.zeros_like, params))
  (total, tokens, grads), _ = jax.lax.scan(body, zeros, (jax.tree.map(micro, batch), jnp.arange(steps)))
  n = jnp.maximum(tokens, 1.0)
  return (total / n, tokens), jax.tree.map(lambda g: g / n, grads)
