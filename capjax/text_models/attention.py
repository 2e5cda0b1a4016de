"""Self-attention shared by the BERT encoder and the GPT-2 decoder: it returns its weights (the style extractor
reads the [CLS] row per layer and head) and can write its keys and values into an explicit decode cache.

The parameter layout follows `capjax.models.layers.MultiHeadAttention` (query/key/value kernels
(embed, heads, kv), an output kernel (heads, kv, embed)), so the same logical-axis rules shard both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from capjax.models.layers import logical

Array = jax.Array
Dtype = Any
KVCache = tuple[Array, Array]  # keys, values: (batch, max_length, heads, head_dim)

# Added to the logits of masked keys. Finite (not -inf) so that a row whose keys are all masked (a padding query)
# gives uniform weights instead of NaN; Hugging Face adds float32's minimum, to the same effect.
MASKED = -1e9

ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),  # Hugging Face's "gelu" is the exact (erf) one
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
}


def dense(features: int, axes: tuple[str | None, str | None], name: str, dtype: Dtype) -> nn.Dense:
  return nn.Dense(features, dtype=dtype, name=name,
                  kernel_init=logical(nn.initializers.normal(stddev=0.02), axes),
                  bias_init=logical(nn.initializers.zeros, axes[1:]))


def layer_norm(name: str, epsilon: float, dtype: Dtype) -> nn.LayerNorm:
  return nn.LayerNorm(epsilon=epsilon, dtype=dtype, name=name,
                      scale_init=logical(nn.initializers.ones, ("embed",)),
                      bias_init=logical(nn.initializers.zeros, ("embed",)))


def embedding(rows: int, features: int, axes: tuple[str | None, str], name: str) -> nn.Embed:
  return nn.Embed(rows, features, name=name, embedding_init=logical(nn.initializers.normal(stddev=0.02), axes))


class SelfAttention(nn.Module):
  """Multi-head self-attention with biased q/k/v projections, scaled by 1/sqrt(head_dim) as BERT and GPT-2 are."""

  num_heads: int
  head_dim: int
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32

  def setup(self):
    init = nn.initializers.normal(stddev=0.02)

    def proj(name: str) -> nn.DenseGeneral:
      return nn.DenseGeneral((self.num_heads, self.head_dim), dtype=self.dtype, name=name,
                             kernel_init=logical(init, ("embed", "heads", "kv")),
                             bias_init=logical(nn.initializers.zeros, ("heads", "kv")))

    self.query, self.key, self.value = proj("query"), proj("key"), proj("value")
    self.out_kernel = self.param("out_kernel", logical(init, ("heads", "kv", "embed")),
                                 (self.num_heads, self.head_dim, self.num_heads * self.head_dim))
    self.out_bias = self.param("out_bias", logical(nn.initializers.zeros, ("embed",)),
                               (self.num_heads * self.head_dim,))
    self.dropout = nn.Dropout(self.dropout_rate)

  def __call__(self, x: Array, bias: Array, deterministic: bool, cache: KVCache | None = None,
               index: Array | int = 0) -> tuple[Array, Array, KVCache | None]:
    """x (B, T, E) and an additive bias broadcastable to (B, heads, T, keys) -> (output (B, T, E),
    weights (B, heads, T, keys), the updated cache). With a cache, this chunk's keys and values are written at
    position `index` and the queries attend over the whole cache (keys = its max_length)."""
    q = self.query(x) / jnp.sqrt(self.head_dim).astype(self.dtype)
    k, v = self.key(x), self.value(x)
    if cache is not None:
      k = jax.lax.dynamic_update_slice_in_dim(cache[0], k.astype(cache[0].dtype), index, axis=1)
      v = jax.lax.dynamic_update_slice_in_dim(cache[1], v.astype(cache[1].dtype), index, axis=1)
      cache = (k, v)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) + bias
    weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    ctx = jnp.einsum("bhqk,bkhd->bqhd", self.dropout(weights.astype(self.dtype), deterministic=deterministic), v)
    out = jnp.einsum("bqhd,hde->bqe", ctx, self.out_kernel.astype(self.dtype)) + self.out_bias
    return out, weights, cache


def padding_bias(attention_mask: Array) -> Array:
  """(B, keys) 1/0 mask -> (B, 1, 1, keys) additive bias."""
  return jnp.where(attention_mask[:, None, None, :] > 0, 0.0, MASKED).astype(jnp.float32)
