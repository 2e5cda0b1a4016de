"""The contract every captioner keeps: what training, decoding and evaluation call on a model, whichever one
`capjax.models.build` chose (T2T and the LSTM both satisfy it; tests/test_captioner_contract.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import jax

# Whatever `encode` makes of the image (T2T: the encoder's output tokens; LSTM: its final carry) and whatever
# `init_cache` makes of that (T2T: per-layer keys/values; LSTM: the carry). Decoding only needs every leaf
# of both to carry the batch on axis 0, so that beam search can tile and gather them per beam.
Memory = Any
Cache = Any


@runtime_checkable
class Captioner(Protocol):
  """A Flax module whose methods are called through `apply(variables, ..., method=model.<name>)`."""

  def apply(self, variables: Any, *args: Any, method: Callable[..., Any] | str | None = None,
            **kwargs: Any) -> Any:
    """`flax.linen.Module.apply`: how decoding runs the methods below with a set of parameters."""
    ...

  def encode(self, inputs: jax.Array, train: bool = False) -> Memory:
    """Pixels or frozen features (B, ...) -> the memory the decoder reads."""
    ...

  def decode(self, memory: Memory, tokens: jax.Array, train: bool = False) -> jax.Array:
    """Teacher forcing: tokens (B, L) starting with BOS -> logits (B, L, vocab)."""
    ...

  def init_cache(self, memory: Memory) -> Cache:
    """The incremental decoding state before the first token."""
    ...

  def decode_step(self, cache: Cache, token: jax.Array, index: jax.Array) -> tuple[jax.Array, Cache]:
    """Token (B,) at position `index` -> logits (B, vocab) and the updated cache; equal to `decode`'s logits
    at that position when fed the same prefix."""
    ...
