"""The paper's RNN baseline: a 1-layer LSTM encoder over the visual tokens whose final state starts a 1-layer
LSTM decoder; no attention; word embeddings tied to the output projection.

A `capjax.models.captioner.Captioner`, like `T2T`: the decoder's carry is its cache.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from capjax.models import layers
from capjax.models.layers import logical

Array = jax.Array
Carry = tuple[Array, Array]


@dataclasses.dataclass(frozen=True)
class RNNConfig:
  vocab_size: int               # embedding rows (padded; see capjax.models.build)
  num_words: int | None = None  # real vocabulary size: logits of padding rows are masked
  d_model: int = 512            # LSTM width = embedding width (tied)
  max_len: int = 16
  dropout_rate: float = 0.1
  grid: str = "8x8"             # "8x8": the encoder reads 64 cells in raster order; "1x1": one pooled vector
  dtype: Any = jnp.float32


def _cell(d: int, name: str) -> nn.LSTMCell:
  """Kernels (input or hidden state -> one gate) named ("lstm_in", "lstm_gates"): axes of their own, so a rules
  table can place the recurrence apart from the Transformer's feed-forward (`mlp`)."""
  return nn.LSTMCell(
      d, name=name,
      kernel_init=logical(nn.initializers.xavier_uniform(), ("lstm_in", "lstm_gates")),
      recurrent_kernel_init=logical(nn.initializers.orthogonal(), ("lstm_in", "lstm_gates")),
      bias_init=logical(nn.initializers.zeros, ("lstm_gates",)))


class RNN(nn.Module):
  config: RNNConfig
  image_encoder: nn.Module

  def setup(self):
    c = self.config
    self.embed = layers.word_embedding(c.vocab_size, c.d_model)
    self.visual_proj = layers.visual_projection(c.d_model, c.dtype)
    self.encoder = nn.RNN(_cell(c.d_model, "encoder_cell"), return_carry=True, name="encoder")
    self.decoder_cell = _cell(c.d_model, "decoder_cell")
    self.decoder = nn.RNN(self.decoder_cell, return_carry=True, name="decoder")
    self.drop = nn.Dropout(c.dropout_rate)

  def encode(self, inputs: Array, train: bool = False) -> Carry:
    """The encoder LSTM's final (c, h) after reading the visual tokens."""
    tokens = layers.grid_tokens(self.image_encoder(inputs, train=train), self.config.grid)
    x = self.drop(self.visual_proj(tokens.astype(self.config.dtype)), deterministic=not train)
    carry, _ = self.encoder(nn.with_logical_constraint(x, ("batch", "length", "embed")))
    return carry

  def logits(self, y: Array) -> Array:
    return layers.logits(self.embed, y, self.config.num_words)

  def decode(self, memory: Carry, tokens: Array, train: bool = False) -> Array:
    """Teacher forcing: tokens (B, L) starting with BOS -> logits (B, L, vocab)."""
    x = self.drop(self.embed(tokens), deterministic=not train)
    _, y = self.decoder(nn.with_logical_constraint(x, ("batch", "length", "embed")), initial_carry=memory)
    return self.logits(self.drop(y, deterministic=not train))

  def __call__(self, inputs: Array, tokens: Array, train: bool = False) -> Array:
    return self.decode(self.encode(inputs, train), tokens, train)

  def init_cache(self, memory: Carry) -> Carry:
    return memory

  def decode_step(self, cache: Carry, token: Array, index: Array) -> tuple[Array, Carry]:
    del index  # an LSTM's carry already holds the position
    carry, y = self.decoder_cell(cache, self.embed(token))
    return self.logits(y), carry


def count_params(vocab_rows: int, d: int, feature_dim: int, grid: str = "8x8") -> int:
  """Analytic parameter count (without the image encoder): embedding, projection and two LSTMs."""
  del grid  # both variants share the same parameters
  lstm = 4 * (d * d + d * d + d)   # input kernel, recurrent kernel (no bias), bias on the input kernel
  return vocab_rows * d + (feature_dim * d + d) + 2 * lstm

