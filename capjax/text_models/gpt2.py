"""GPT-2 in Flax, laid out like Hugging Face's `GPT2LMHeadModel` (pre-norm blocks, tied output embedding), with
an explicit key/value cache for incremental decoding: `init_cache`, then chunks of tokens at increasing `index`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from capjax.text_models import attention as attn
from capjax.text_models.config import ConfigError, activation, integer, number

Array = jax.Array
Cache = tuple[attn.KVCache, ...]  # one (keys, values) per layer, each (B, max_length, heads, head_dim)


@dataclasses.dataclass(frozen=True)
class GPT2Config:
  """The fields of a Hugging Face GPT-2 config.json that the network depends on (defaults are GPT2Config's)."""

  vocab_size: int = 50257
  n_positions: int = 1024
  n_embd: int = 768
  n_layer: int = 12
  n_head: int = 12
  n_inner: int | None = None     # None: 4 * n_embd
  activation_function: str = "gelu_new"
  layer_norm_epsilon: float = 1e-5
  dropout_rate: float = 0.1            # resid_pdrop (embd_pdrop too)
  attention_dropout_rate: float = 0.1  # attn_pdrop

  @property
  def head_dim(self) -> int:
    return self.n_embd // self.n_head

  @property
  def mlp_dim(self) -> int:
    return self.n_inner or 4 * self.n_embd

  @classmethod
  def from_dict(cls, config: Mapping[str, Any]) -> GPT2Config:
    """Reads and checks a Hugging Face GPT-2 config.json; variants capjax does not implement are refused."""
    for field, plain in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                         ("reorder_and_upcast_attn", False), ("add_cross_attention", False)):
      if config.get(field, plain) != plain:
        raise ConfigError(f"config.json {field}={config[field]!r} is not supported (only GPT-2's {plain})")
    embd, heads = integer(config, "n_embd", 768), integer(config, "n_head", 12)
    if embd % heads:
      raise ConfigError(f"config.json n_embd={embd} is not divisible by n_head={heads}")
    n_inner = config.get("n_inner")
    if n_inner is not None:
      n_inner = integer(config, "n_inner")
    return cls(vocab_size=integer(config, "vocab_size", 50257), n_positions=integer(config, "n_positions", 1024),
               n_embd=embd, n_layer=integer(config, "n_layer", 12), n_head=heads, n_inner=n_inner,
               activation_function=activation(config, "activation_function", "gelu_new"),
               layer_norm_epsilon=number(config, "layer_norm_epsilon", 1e-5),
               dropout_rate=number(config, "resid_pdrop", 0.1),
               attention_dropout_rate=number(config, "attn_pdrop", 0.1))

  def to_dict(self) -> dict[str, Any]:
    fields = dataclasses.asdict(self)
    fields["resid_pdrop"] = fields.pop("dropout_rate")
    fields["attn_pdrop"] = fields.pop("attention_dropout_rate")
    return {"model_type": "gpt2", **fields}


class Block(nn.Module):
  config: GPT2Config
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array, bias: Array, deterministic: bool, cache: attn.KVCache | None,
               index: Array | int) -> tuple[Array, Array, attn.KVCache | None]:
    c = self.config
    drop = nn.Dropout(c.dropout_rate)
    h = attn.layer_norm("ln_1", c.layer_norm_epsilon, self.dtype)(x)
    h, weights, cache = attn.SelfAttention(c.n_head, c.head_dim, c.attention_dropout_rate, self.dtype,
                                           name="attn")(h, bias, deterministic, cache, index)
    x = x + drop(h, deterministic=deterministic)
    h = attn.layer_norm("ln_2", c.layer_norm_epsilon, self.dtype)(x)
    h = attn.dense(c.mlp_dim, ("embed", "mlp"), "c_fc", self.dtype)(h)
    h = attn.dense(c.n_embd, ("mlp", "embed"), "c_proj", self.dtype)(attn.ACTIVATIONS[c.activation_function](h))
    return x + drop(h, deterministic=deterministic), weights, cache


@flax.struct.dataclass
class GPT2Output:
  logits: Array              # (B, T, vocab)
  cache: Cache | None        # the updated cache when one was given
  attentions: Array | None   # (layers, B, heads, T, keys) when asked for


class GPT2(nn.Module):
  """GPT2LMHeadModel: token + position embeddings, pre-norm blocks, a final layer norm, logits through `wte`."""

  config: GPT2Config
  dtype: Any = jnp.float32

  def init_cache(self, batch: int, max_length: int) -> Cache:
    """Zeros for `max_length` positions (<= n_positions); no parameters needed, so callable on an unbound module."""
    if max_length > self.config.n_positions:
      raise ValueError(f"max_length={max_length} exceeds n_positions={self.config.n_positions}")
    shape = (batch, max_length, self.config.n_head, self.config.head_dim)
    return tuple((jnp.zeros(shape, self.dtype), jnp.zeros(shape, self.dtype)) for _ in range(self.config.n_layer))

  @nn.compact
  def __call__(self, input_ids: Array, attention_mask: Array | None = None, cache: Cache | None = None,
               index: Array | int = 0, deterministic: bool = True, return_attentions: bool = False) -> GPT2Output:
    """input_ids (B, T) at positions index..index+T-1.

    Without a cache: a causal pass over the T tokens (index must be 0); attention_mask (B, T) masks padding keys.
    With a cache from `init_cache`: the chunk's keys and values are stored at `index` and each query attends to
    the cached positions up to its own; attention_mask, if given, is (B, max_length) over the cache positions.
    """
    c = self.config
    _, length = input_ids.shape
    keys = length if cache is None else cache[0][0].shape[1]
    if cache is None and length > c.n_positions:
      raise ValueError(f"{length} tokens exceed n_positions={c.n_positions}: truncate first")
    positions = index + jnp.arange(length)
    wte = attn.embedding(c.vocab_size, c.n_embd, ("vocab", "embed"), "wte")
    x = wte(input_ids) + attn.embedding(c.n_positions, c.n_embd, ("length", "embed"), "wpe")(positions)[None]
    x = nn.Dropout(c.dropout_rate)(x.astype(self.dtype), deterministic=deterministic)
    causal = jnp.where(jnp.arange(keys)[None, :] <= positions[:, None], 0.0, attn.MASKED)[None, None]
    bias = causal if attention_mask is None else causal + attn.padding_bias(attention_mask)
    new_cache, attentions = [], []
    for i in range(c.n_layer):
      x, weights, layer_cache = Block(c, self.dtype, name=f"h_{i}")(
          x, bias, deterministic, None if cache is None else cache[i], index)
      new_cache.append(layer_cache)
      attentions.append(weights)
    x = attn.layer_norm("ln_f", c.layer_norm_epsilon, self.dtype)(x)
    logits = wte.attend(x.astype(jnp.float32))
    return GPT2Output(logits, None if cache is None else tuple(new_cache),
                      jnp.stack(attentions) if return_attentions else None)


def abstract_params(config: GPT2Config) -> Any:
  """Shapes and logical axes of every parameter, without allocating them."""
  ids = jax.ShapeDtypeStruct((1, 2), jnp.int32)
  return jax.eval_shape(GPT2(config).init, jax.random.key(0), ids)["params"]
