"""The layers of the BERT encoder, the GPT-2 decoder and CLIP's towers: their self-attention, which returns its
weights (the style extractor reads the [CLS] row per layer and head) and can write its keys and values into an
explicit decode cache, their dense layers, layer norms and embeddings (initialised as Hugging Face's:
normal(0.02)), and activations.

The attention is `capjax.models.layers.MultiHeadAttention` (T2T's): the same projections, which initialise inside a
mesh, the same dot-product attention and the same parameter layout (query/key/value kernels (embed, heads, kv), an
output kernel (heads, kv, embed)), so the same logical-axis rules shard all three models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from capjax.models import layers
from capjax.models.layers import logical

Array = jax.Array
Dtype = Any
KVCache = tuple[Array, Array]  # keys, values: (batch, max_length, heads, head_dim)

# Added to the logits of masked keys. Finite (not -inf) so that a row whose keys are all masked (a padding query)
# gives uniform weights instead of NaN; Hugging Face adds float32's minimum, to the same effect.
MASKED = layers.NEG_INF

ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),  # Hugging Face's "gelu" is the exact (erf) one
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "quick_gelu": lambda x: x * jax.nn.sigmoid(1.702 * x),  # CLIP's
    "relu": jax.nn.relu,
}


def dense(features: int, axes: tuple[str | None, str | None], name: str, dtype: Dtype) -> nn.Dense:
  return nn.Dense(features, dtype=dtype, name=name,
                  kernel_init=logical(nn.initializers.normal(stddev=0.02), axes),
                  bias_init=logical(nn.initializers.zeros, axes[1:]))


def layer_norm(name: str, epsilon: float, dtype: Dtype) -> nn.LayerNorm:
  return layers.layer_norm(name, dtype, epsilon)


def embedding(rows: int, features: int, axes: tuple[str | None, str], name: str) -> nn.Embed:
  return nn.Embed(rows, features, name=name, embedding_init=logical(nn.initializers.normal(stddev=0.02), axes))


class SelfAttention(layers.MultiHeadAttention):
  """Multi-head self-attention (`layers.MultiHeadAttention`, its kernels initialised as Hugging Face's) that returns
  its weights and can write into a decode cache."""

  kernel_init: nn.initializers.Initializer = nn.initializers.normal(stddev=0.02)

  def __call__(self, x: Array, bias: Array, deterministic: bool, cache: KVCache | None = None,
               index: Array | int = 0) -> tuple[Array, Array, KVCache | None]:
    """x (B, T, E) and an additive bias broadcastable to (B, heads, T, keys) -> (output (B, T, E),
    weights (B, heads, T, keys), the updated cache). With a cache, this chunk's keys and values are written at
    position `index` and the queries attend over the whole cache (keys = its max_length)."""
    k, v = self.project_kv(x)
    if cache is not None:
      cache = layers.write_cache(cache, k, v, index)
      k, v = cache
    out, weights = self.attention(x, k, v, bias, deterministic)
    return out, weights, cache


def padding_bias(attention_mask: Array) -> Array:
  """(B, keys) 1/0 mask -> (B, 1, 1, keys) additive bias."""
  return jnp.where(attention_mask[:, None, None, :] > 0, 0.0, MASKED).astype(jnp.float32)
