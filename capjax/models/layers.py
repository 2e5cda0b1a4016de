"""Shared Flax layers with logical axis names: dense, attention with an explicit decode cache, MLP, positions. The
attention (`HeadsProjection`, `dot_product_attention`, `MultiHeadAttention`, `write_cache`) is also BERT's, GPT-2's
and CLIP's (`capjax.text_models.attention`).

Every kernel and bias is created through `nn.with_logical_partitioning`, and the main activations are constrained
with `nn.with_logical_constraint`; `capjax.sharding` maps the names (the constraints apply inside its
`axis_rules`, and do nothing elsewhere).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
Dtype = Any

NEG_INF = -1e9  # added to the logits of masked keys and padding rows


def logical(init: nn.initializers.Initializer, axes: tuple[str, ...]) -> nn.initializers.Initializer:
  return nn.with_logical_partitioning(init, axes)


TOKEN_AXES = ("batch", "length", "embed")          # the residual stream
HEAD_AXES = ("batch", "length", "heads", "kv")     # queries, keys, values
LOGIT_AXES = ("batch", "length", "vocab")


def constrain_tokens(x: Array) -> Array:
  """The residual stream (batch, length, d_model): batch split, model width whole (gathered once per layer)."""
  return nn.with_logical_constraint(x, TOKEN_AXES)


def logits(embed: nn.Embed, y: Array, num_words: int | None) -> Array:
  """Tied output projection: (batch, length, d) -> float32 logits over the vocabulary, padding rows masked; the
  vocabulary dimension split as the embedding's rows are (tensor parallelism: over `model`)."""
  out = embed.attend(y.astype(jnp.float32))
  if out.ndim == 3:
    out = nn.with_logical_constraint(out, LOGIT_AXES)
  return mask_padding_rows(out, num_words)


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


class HeadsProjection(nn.Module):
  """(..., d) -> (..., heads, head_dim): `nn.DenseGeneral`'s parameters, initial values and result, without its
  flattened initialisation, which checks a kernel's 3 axis names against its 2-D flat shape inside a mesh."""

  num_heads: int
  head_dim: int
  kernel_init: nn.initializers.Initializer
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x: Array) -> Array:
    def flat_init(init):  # DenseGeneral's values: initialised as the (d, heads * head_dim) matrix, then reshaped
      return lambda rng, shape, dtype=jnp.float32: init(rng, (shape[0], shape[1] * shape[2]), dtype).reshape(shape)

    kernel = self.param("kernel", logical(flat_init(self.kernel_init), ("embed", "heads", "kv")),
                        (x.shape[-1], self.num_heads, self.head_dim))
    bias = self.param("bias", logical(nn.initializers.zeros, ("heads", "kv")), (self.num_heads, self.head_dim))
    x, kernel, bias = nn.dtypes.promote_dtype(x, kernel, bias, dtype=self.dtype)
    return jnp.einsum("...d,dhk->...hk", x, kernel) + bias


def dot_product_attention(q: Array, k: Array, v: Array, bias: Array | None, dropout: nn.Dropout,
                          deterministic: bool, dtype: Dtype) -> tuple[Array, Array]:
  """Scaled queries (B, Q, heads, head_dim), keys and values (B, K, heads, head_dim), an additive bias broadcastable
  to (B, heads, Q, K) or None -> (context (B, Q, heads, head_dim), the float32 weights (B, heads, Q, K)). The
  softmax runs in float32; `dropout` drops weights (in `dtype`) on their way to the values, not the ones returned."""
  logits = jnp.einsum("bqhd,bkhd->bhqk", q, k)
  if bias is not None:
    logits = logits + bias
  weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
  ctx = jnp.einsum("bhqk,bkhd->bqhd", dropout(weights.astype(dtype), deterministic=deterministic), v)
  return ctx, weights


def write_cache(cache: tuple[Array, Array], k: Array, v: Array, index: Array | int) -> tuple[Array, Array]:
  """A decode cache (keys, values: (B, max_length, heads, head_dim)) with this chunk's keys and values written at
  position `index` (in the cache's dtype)."""
  return (jax.lax.dynamic_update_slice_in_dim(cache[0], k.astype(cache[0].dtype), index, axis=1),
          jax.lax.dynamic_update_slice_in_dim(cache[1], v.astype(cache[1].dtype), index, axis=1))


class MultiHeadAttention(nn.Module):
  """Multi-head attention whose key/value projection can run once and be reused (decode caches): the attention of
  T2T and, through `capjax.text_models.attention.SelfAttention`, of BERT and GPT-2. Biased query/key/value
  projections (`HeadsProjection`: they initialise inside a mesh), queries scaled by 1/sqrt(head_dim), an output
  kernel (heads, kv, embed) and bias; `kernel_init` initialises the four kernels."""

  num_heads: int
  head_dim: int
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32
  kernel_init: nn.initializers.Initializer = nn.initializers.xavier_uniform()

  def setup(self):
    def proj(name: str) -> HeadsProjection:
      return HeadsProjection(self.num_heads, self.head_dim, self.kernel_init, self.dtype, name=name)

    self.query, self.key, self.value = proj("query"), proj("key"), proj("value")
    self.out_kernel = self.param("out_kernel", logical(self.kernel_init, ("heads", "kv", "embed")),
                                 (self.num_heads, self.head_dim, self.num_heads * self.head_dim))
    self.out_bias = self.param("out_bias", logical(nn.initializers.zeros, ("embed",)),
                               (self.num_heads * self.head_dim,))
    self.dropout = nn.Dropout(self.dropout_rate)

  def project_kv(self, x: Array) -> tuple[Array, Array]:
    """Keys and values, (batch, length, heads, head_dim)."""
    return (nn.with_logical_constraint(self.key(x), HEAD_AXES),
            nn.with_logical_constraint(self.value(x), HEAD_AXES))

  def attention(self, x_q: Array, k: Array, v: Array, bias: Array | None,
                deterministic: bool) -> tuple[Array, Array]:
    """(output (B, Q, E), the float32 weights (B, heads, Q, K)) of queries from `x_q` over keys and values `k`, `v`."""
    q = nn.with_logical_constraint(self.query(x_q), HEAD_AXES) / jnp.sqrt(self.head_dim).astype(self.dtype)
    ctx, weights = dot_product_attention(q, k, v, bias, self.dropout, deterministic, self.dtype)
    return jnp.einsum("bqhd,hde->bqe", ctx, self.out_kernel.astype(self.dtype)) + self.out_bias, weights

  def attend(self, x_q: Array, k: Array, v: Array, bias: Array | None, deterministic: bool) -> Array:
    return self.attention(x_q, k, v, bias, deterministic)[0]

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
    h = nn.with_logical_constraint(nn.relu(h), ("batch", "length", "mlp"))
    h = nn.Dropout(self.dropout_rate)(h, deterministic=deterministic)
    return nn.Dense(d, dtype=self.dtype, name="wo",
                    kernel_init=logical(init, ("mlp", "embed")),
                    bias_init=logical(nn.initializers.zeros, ("embed",)))(h)


def layer_norm(name: str, dtype: Dtype = jnp.float32, epsilon: float = 1e-6) -> nn.LayerNorm:
  return nn.LayerNorm(epsilon=epsilon, dtype=dtype, name=name,
                      scale_init=logical(nn.initializers.ones, ("embed",)),
                      bias_init=logical(nn.initializers.zeros, ("embed",)))
