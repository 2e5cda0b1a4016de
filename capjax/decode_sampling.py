"""Caption sampling beside `capjax.decode`'s greedy and beam search: n multinomial samples per image with temperature,
top-k and top-p (nucleus) filtering, in one `lax.while_loop` over the same step functions (the T2T's KV cache, an
LSTM's carry), each image's decoder state computed once and repeated for its samples; and `check_sampling`, the one
check of the sampling settings (`scst.*` in the configs).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from capjax.config_util import check_number
from capjax.decode import NEG_INF, StepFunctions, token_loop
from capjax.tokens import BOS_ID


@dataclasses.dataclass(frozen=True)
class Sampling:
  """How tokens are drawn: logits / `temperature`, then only the `top_k` likeliest (0: all), then only the smallest
  set of likeliest tokens whose probability reaches `top_p` (1: all); `num_samples` captions per image."""

  num_samples: int = 1
  temperature: float = 1.0
  top_k: int = 0
  top_p: float = 1.0


def check_sampling(s: Sampling, prefix: str = "--config.scst.") -> None:
  """ConfigError naming the first impossible setting (`prefix` + its name: the flag or config field it came from):
  num_samples below 1, a temperature that is not positive, top_k below 0, top_p outside (0, 1]."""
  check_number(f"{prefix}num_samples", s.num_samples, 1, hint=" (captions sampled per image)")
  check_number(f"{prefix}temperature", s.temperature, 0, low_open=True)
  check_number(f"{prefix}top_k", s.top_k, 0, hint=" (0 keeps every token)")
  check_number(f"{prefix}top_p", s.top_p, 0, 1, low_open=True, hint=" (1 keeps every token)")


def filter_logits(logits: jax.Array, s: Sampling) -> jax.Array:
  """`logits` (..., V) divided by the temperature, NEG_INF outside the top-k and outside the nucleus (top-p: the
  likeliest tokens until their probability reaches top_p, the likeliest always kept; ties at the edge stay)."""
  logits = logits.astype(jnp.float32) / s.temperature
  if s.top_k and s.top_k < logits.shape[-1]:
    kth = jax.lax.top_k(logits, s.top_k)[0][..., -1:]
    logits = jnp.where(logits < kth, NEG_INF, logits)
  if s.top_p < 1.0:
    ordered = jnp.sort(logits, axis=-1)[..., ::-1]
    probs = jax.nn.softmax(ordered, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # the mass of the likelier tokens
    kept = jnp.where(before < s.top_p, ordered, jnp.inf)
    logits = jnp.where(logits < jnp.min(kept, axis=-1, keepdims=True), NEG_INF, logits)
  return logits


def sample_search(fns: StepFunctions, inputs: jax.Array, max_len: int, rng: jax.Array, s: Sampling = Sampling(),
                  start: int = BOS_ID) -> jax.Array:
  """`s.num_samples` sampled captions per image from the token `start`: (B, n, max_len) token ids, EOS once then
  PAD. Sample j of image b is row b * n + j of one loop; position i draws from `fold_in(rng, i)`. Stops when every
  row has ended."""
  batch, n = inputs.shape[0], s.num_samples
  state = jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), fns.init(inputs))

  def choose(logits: jax.Array, i: jax.Array) -> jax.Array:
    return jax.random.categorical(jax.random.fold_in(rng, i), filter_logits(logits, s), axis=-1)

  return token_loop(fns, state, batch * n, max_len, start, choose).reshape(batch, n, max_len)
