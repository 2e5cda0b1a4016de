"""The paper's T2T captioner: a Transformer encoder over visual tokens and a causal decoder with tied embeddings.

Visual tokens are an 8x8 grid with 1-D sinusoidal positions over the 64 cells, or one pooled 1x1 token.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from capjax.models import layers
from capjax.models.layers import NEG_INF

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class T2TConfig:
  vocab_size: int            # rows of the embedding table: padded so the model mesh axis divides it
  num_words: int | None = None  # real vocabulary size; logits of padding rows are masked (None: no padding)
  d_model: int = 512
  num_heads: int = 8
  mlp_dim: int = 2048
  encoder_layers: int = 6
  decoder_layers: int = 6
  max_len: int = 16          # decoder positions: BOS + 15 caption tokens (EOS is predicted, never input)
  dropout_rate: float = 0.1
  grid: str = "8x8"          # "8x8": one token per cell; "1x1": one mean-pooled token
  dtype: Any = jnp.float32


class EncoderLayer(nn.Module):
  config: T2TConfig

  @nn.compact
  def __call__(self, x: Array, deterministic: bool) -> Array:
    c = self.config
    drop = nn.Dropout(c.dropout_rate)
    h = layers.layer_norm("ln_attn", c.dtype)(x)
    h = layers.MultiHeadAttention(c.num_heads, c.d_model // c.num_heads, c.dropout_rate, c.dtype,
                                  name="attn")(h, h, None, deterministic)
    x = x + drop(h, deterministic=deterministic)
    h = layers.layer_norm("ln_mlp", c.dtype)(x)
    h = layers.MLP(c.mlp_dim, c.dropout_rate, c.dtype, name="mlp")(h, deterministic)
    return layers.constrain_tokens(x + drop(h, deterministic=deterministic))


class DecoderLayer(nn.Module):
  """Pre-norm decoder layer; `self_kv`/`cross_kv` let a decoder reuse cached keys and values."""

  config: T2TConfig

  def setup(self):
    c = self.config
    hd = c.d_model // c.num_heads
    self.ln_self = layers.layer_norm("ln_self", c.dtype)
    self.self_attn = layers.MultiHeadAttention(c.num_heads, hd, c.dropout_rate, c.dtype)
    self.ln_cross = layers.layer_norm("ln_cross", c.dtype)
    self.cross_attn = layers.MultiHeadAttention(c.num_heads, hd, c.dropout_rate, c.dtype)
    self.ln_mlp = layers.layer_norm("ln_mlp", c.dtype)
    self.mlp = layers.MLP(c.mlp_dim, c.dropout_rate, c.dtype)
    self.drop = nn.Dropout(c.dropout_rate)

  def cross_kv(self, memory: Array) -> tuple[Array, Array]:
    return self.cross_attn.project_kv(memory)

  def self_kv(self, y: Array) -> tuple[Array, Array]:
    return self.self_attn.project_kv(self.ln_self(y))

  def __call__(self, y: Array, self_kv: tuple[Array, Array], self_bias: Array,
               cross_kv: tuple[Array, Array], deterministic: bool) -> Array:
    h = self.self_attn.attend(self.ln_self(y), *self_kv, self_bias, deterministic)
    y = y + self.drop(h, deterministic=deterministic)
    h = self.cross_attn.attend(self.ln_cross(y), *cross_kv, None, deterministic)
    y = y + self.drop(h, deterministic=deterministic)
    h = self.mlp(self.ln_mlp(y), deterministic)
    return layers.constrain_tokens(y + self.drop(h, deterministic=deterministic))


class T2T(nn.Module):
  """A `capjax.models.captioner.Captioner`; `image_encoder` maps inputs (pixels or features) to a (batch, h, w,
  channels) grid."""

  config: T2TConfig
  image_encoder: nn.Module

  def setup(self):
    c = self.config
    self.embed = layers.word_embedding(c.vocab_size, c.d_model)
    self.visual_proj = layers.visual_projection(c.d_model, c.dtype)
    self.encoder_layers = [EncoderLayer(c, name=f"encoder_{i}") for i in range(c.encoder_layers)]
    self.encoder_norm = layers.layer_norm("encoder_norm", c.dtype)
    self.decoder_layers = [DecoderLayer(c, name=f"decoder_{i}") for i in range(c.decoder_layers)]
    self.decoder_norm = layers.layer_norm("decoder_norm", c.dtype)
    self.drop = nn.Dropout(c.dropout_rate)

  def visual_tokens(self, inputs: Array, train: bool) -> Array:
    tokens = layers.grid_tokens(self.image_encoder(inputs, train=train), self.config.grid)
    x = self.visual_proj(tokens.astype(self.config.dtype))
    if self.config.grid == "8x8":
      x = x + layers.sinusoidal_positions(tokens.shape[1], self.config.d_model)[None]
    return x

  def encode(self, inputs: Array, train: bool = False) -> Array:
    x = layers.constrain_tokens(self.drop(self.visual_tokens(inputs, train), deterministic=not train))
    for layer in self.encoder_layers:
      x = layer(x, deterministic=not train)
    return self.encoder_norm(x)

  def embed_tokens(self, tokens: Array, positions: Array) -> Array:
    c = self.config
    x = self.embed(tokens) * jnp.sqrt(c.d_model).astype(c.dtype)
    return x + jnp.asarray(layers.sinusoidal_positions(c.max_len, c.d_model))[positions]

  def logits(self, y: Array) -> Array:
    return layers.logits(self.embed, self.decoder_norm(y), self.config.num_words)

  def decode(self, memory: Array, tokens: Array, train: bool = False) -> Array:
    """Teacher-forced decoding: tokens (B, L) starting with BOS -> logits (B, L, vocab)."""
    length = tokens.shape[1]
    y = layers.constrain_tokens(self.drop(self.embed_tokens(tokens, jnp.arange(length)[None]),
                                          deterministic=not train))
    causal = jnp.where(jnp.tril(jnp.ones((length, length), bool)), 0.0, NEG_INF)[None, None]
    for layer in self.decoder_layers:
      y = layer(y, layer.self_kv(y), causal, layer.cross_kv(memory), deterministic=not train)
    return self.logits(y)

  def __call__(self, inputs: Array, tokens: Array, train: bool = False) -> Array:
    return self.decode(self.encode(inputs, train), tokens, train)

  # --- incremental decoding -------------------------------------------------------------------------------
  def init_cache(self, memory: Array) -> dict[str, Any]:
    """Cross-attention keys/values once per image, and empty self-attention caches of max_len."""
    c = self.config
    b = memory.shape[0]
    hd = c.d_model // c.num_heads
    empty = jnp.zeros((b, c.max_len, c.num_heads, hd), memory.dtype)
    return {
        "cross": [layer.cross_kv(memory) for layer in self.decoder_layers],
        "self": [(empty, empty) for _ in self.decoder_layers],
    }

  def decode_step(self, cache: dict[str, Any], token: Array, index: Array) -> tuple[Array, dict[str, Any]]:
    """One step: token (B,) at position `index` -> logits (B, vocab) and the updated cache."""
    c = self.config
    y = self.embed_tokens(token[:, None], index[None, None])
    bias = jnp.where(jnp.arange(c.max_len) <= index, 0.0, NEG_INF)[None, None, None, :]
    new_self = []
    for layer, (k_cache, v_cache), cross in zip(self.decoder_layers, cache["self"], cache["cross"]):
      k_cache, v_cache = layers.write_cache((k_cache, v_cache), *layer.self_kv(y), index)
      y = layer(y, (k_cache, v_cache), bias, cross, deterministic=True)
      new_self.append((k_cache, v_cache))
    return self.logits(y)[:, 0], {"cross": cache["cross"], "self": new_self}


def count_params(config: T2TConfig, feature_dim: int) -> int:
  """Analytic parameter count without the image encoder: embedding, visual projection, the layers."""
  d, m = config.d_model, config.mlp_dim
  attention = 4 * d * d + 4 * d            # q, k, v, out kernels and biases
  mlp = 2 * d * m + m + d
  encoder_layer = attention + mlp + 2 * 2 * d       # two layer norms
  decoder_layer = 2 * attention + mlp + 3 * 2 * d   # self and cross attention, three layer norms
  return (config.vocab_size * d + feature_dim * d + d + config.encoder_layers * encoder_layer
          + config.decoder_layers * decoder_layer + 2 * 2 * d)
