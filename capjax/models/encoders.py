"""Image encoders that turn model inputs into a (batch, h, w, channels) feature grid.

`conv`: a small CNN for the synthetic scenes; `features`: pre-extracted grids pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from capjax.models.layers import logical

GRID_AXES = ("batch", "height", "width", "channels")  # as Inception-ResNet-v2's activations


def to_unit_range(images: jax.Array) -> jax.Array:
  """uint8 pixels -> float32 in [-1, 1] (Inception's input range); floats are taken as already scaled."""
  if jnp.issubdtype(images.dtype, jnp.integer):
    return images.astype(jnp.float32) / 127.5 - 1.0
  return images.astype(jnp.float32)


class ConvGridEncoder(nn.Module):
  """3x3 convolutions, each halving the resolution: 64x64 pixels -> an 8x8 grid with three of them."""

  widths: Sequence[int] = (32, 64, 128)
  out_features: int = 128
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, images: jax.Array, train: bool = False) -> jax.Array:
    del train  # no batch statistics or dropout here
    x = to_unit_range(images).astype(self.dtype)
    init = nn.initializers.he_normal()
    for i, width in enumerate(self.widths):
      x = nn.Conv(width, (3, 3), strides=(2, 2), dtype=self.dtype, name=f"conv_{i}",
                  kernel_init=logical(init, ("conv_h", "conv_w", "conv_in", "conv_out")),
                  bias_init=logical(nn.initializers.zeros, ("conv_out",)))(x)
      x = nn.with_logical_constraint(nn.relu(x), GRID_AXES)
    x = nn.Conv(self.out_features, (3, 3), dtype=self.dtype, name="conv_out",
                kernel_init=logical(init, ("conv_h", "conv_w", "conv_in", "conv_out")),
                bias_init=logical(nn.initializers.zeros, ("conv_out",)))(x)
    return nn.with_logical_constraint(nn.relu(x), GRID_AXES)


class FeatureGrid(nn.Module):
  """Pre-extracted features: (batch, h, w, C) grids, or (batch, C) pooled vectors as a 1x1 grid."""

  @nn.compact
  def __call__(self, features: jax.Array, train: bool = False) -> jax.Array:
    del train
    if features.ndim == 2:
      features = features[:, None, None, :]
    if features.ndim != 4:
      raise ValueError(f"features must be (batch, h, w, C) or (batch, C), got shape {features.shape}")
    return features.astype(jnp.float32)
