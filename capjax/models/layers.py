"""Shared Flax layers with logical axis names: dense, attention with an explicit decode cache, MLP, positions.

Every kernel and bias is created through `nn.with_logical_partitioning`; `capjax.sharding` maps the names.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
Dtype = Any

NEG_INF = -1e9


def logical(init: nn.initializers.Initializer, axes: tuple[str, ...]) -> nn.initializers.Initializer:
  return nn.with_logical_partitioning(init, axes)


def sinusoidal_positions(length: int, dim: int, max_timescale: float = 1e4) -> np.ndarray:
  """The tensor2tensor timing signal: sin on the first half of the channels, cos on the second."""
  num_timescales = dim // 2
  log_increment = np.log(max_timescale) / max(num_timescales - 1, 1)
  inv_timescales = np.exp(np.arange(num_timescales, dtype=np.float64) * -log_increment)
  scaled = np.arange(length, dtype=np.float64)[:, None] * inv_timescales[None, :]
  signal = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
  if dim % 2:
    signal = np.pad(signal, ((0, 0), (0, 1)))
  return signal.astype(np.float32)


def word_embedding(vocab_rows: int, d: int) -> nn.Embed:
  """The word embedding, also the output projection (tied) through `Embed.attend`."""
  return nn.Embed(vocab_rows, d, name="embed",
                  embedding_init=logical(nn.initializers.normal(stddev=d**-0.5), ("vocab", "embed")))


def visual_projection(d: int, dtype: Dtype) -> nn.Dense:
  """Image-encoder channels -> model width."""
  return nn.Dense(d, dtype=dtype, name="visual_proj",
                  kernel_init=logical(nn.initializers.xavier_uniform(), ("features", "embed")),
                  bias_init=logical(nn.initializers.zeros, ("embed",)))


def grid_tokens(grid: Array, mode: str) -> Array:
  """(B, h, w, C) feature grid -> visual tokens: (B, h*w, C) in raster order for "8x8", (B, 1, C) mean for "1x1"."""
  b, h, w, ch = grid.shape
  tokens = grid.reshape(b, h * w, ch)
  if mode == "1x1":
    return tokens.mean(axis=1, keepdims=True)
  if mode == "8x8":
    return tokens
  raise ValueError(f"grid must be '8x8' or '1x1', got {mode!r}")


def mask_padding_rows(logits: Array, num_words: int | None) -> Array:
  """Logits of the embedding rows added only to make the table divisible are never predicted."""
  rows = logits.shape[-1]
  if num_words is None or num_words >= rows:
    return logits
  return jnp.where(jnp.arange(rows) < num_words, logits, NEG_INF)


class MultiHeadAttention(nn.Module):
  """Multi-head attention whose key/value projection can run once and be reused (decode caches)."""

  num_heads: int
  head_dim: int
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32

  def setup(self):
    init = nn.initializers.xavier_uniform()

    def proj(name: str) -> nn.DenseGeneral:
      return nn.DenseGeneral(
          (self.num_heads, self.head_dim), dtype=self.dtype, name=name,
          kernel_init=logical(init, ("embed", "heads", "kv")),
          bias_init=logical(nn.initializers.zeros, ("heads", "kv")))

    self.query, self.key, self.value = proj("query"), proj("key"), proj("value")
    self.out_kernel = self.param("out_kernel", logical(init, ("heads", "kv", "embed")),
                                 (self.num_heads, self.head_dim, self.num_heads * self.head_dim))
    self.out_bias = self.param("out_bias", logical(nn.initializers.zeros, ("embed",)),
                               (self.num_heads * self.head_dim,))
    self.dropout = nn.Dropout(self.dropout_rate)

  def project_kv(self, x: Array) -> tuple[Array, Array]:
    """Keys and values, (batch, length, heads, head_dim)."""
    return self.key(x), self.value(x)

  def attend(self, x_q: Array, k: Array, v: Array, bias: Array | None, deterministic: bool) -> Array:
    q = self.query(x_q) / jnp.sqrt(self.head_dim).astype(self.dtype)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    if bias is not None:
      logits = logits + bias
    weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(self.dtype)
    weights = self.dropout(weights, deterministic=deterministic)
    ctx = jnp.einsum("bhqk,bkhd->bqhd", weights, v)
    return jnp.einsum("bqhd,hde->bqe", ctx, self.out_kernel.astype(self.dtype)) + self.out_bias

  def __call__(self, x_q: Array, x_kv: Array, bias: Array | None, deterministic: bool) -> Array:
    k, v = self.project_kv(x_kv)
    return self.attend(x_q, k, v, bias, deterministic)


class MLP(nn.Module):
  mlp_dim: int
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x: Array, deterministic: bool) -> Array:
    d = x.shape[-1]
    init = nn.initializers.xavier_uniform()
    h = nn.Dense(self.mlp_dim, dtype=self.dtype, name="wi",
                 kernel_init=logical(init, ("embed", "mlp")),
                 bias_init=logical(nn.initializers.zeros, ("mlp",)))(x)
    h = nn.relu(h)
    h = nn.Dropout(self.dropout_rate)(h, deterministic=deterministic)
    return nn.Dense(d, dtype=self.dtype, name="wo",
                    kernel_init=logical(init, ("mlp", "embed")),
                    bias_init=logical(nn.initializers.zeros, ("embed",)))(h)


def layer_norm(name: str, dtype: Dtype = jnp.float32) -> nn.LayerNorm:
  return nn.LayerNorm(dtype=dtype, name=name,
                      scale_init=logical(nn.initializers.ones, ("embed",)),
                      bias_init=logical(nn.initializers.zeros, ("embed",)))
