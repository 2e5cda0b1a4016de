"""Frozen Inception-ResNet-v2 features: the encoder that turns pictures into the `grid` and `pooled` arrays a
feature variant stores, and the naming of those variants. Used by the extraction tool and by `--mode=caption`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from capjax import sharding
from capjax.models import inception_resnet_v2 as irv2

DEFAULT_VARIANT = "irv2"
FEATURE_KEYS = ("grid", "pooled")


def variant_name(dataset: str, variant: str | None = DEFAULT_VARIANT) -> str:
  """The TFDS name of `dataset`'s feature variant, e.g. cc3m -> cc3m_irv2; no variant names the pixels, `dataset`."""
  return f"{dataset}_{variant}" if variant else dataset


def grid_shape(image_size: int) -> tuple[int, int, int]:
  """(h, w, 1536) of the grid at `image_size` pixels: (8, 8, 1536) at 299."""
  model = irv2.InceptionResNetV2(num_classes=None)
  images = jax.ShapeDtypeStruct((1, image_size, image_size, 3), np.float32)
  outputs, _ = jax.eval_shape(model.init_with_output, jax.random.key(0), images)
  return tuple(outputs["grid"].shape[1:])


class Encoder:
  """uint8 (B, S, S, 3) images -> {"grid", "pooled"} in `dtype`, the batch split over `devices`."""

  def __init__(self, variables: Any, devices: Sequence[jax.Device], dtype: str):
    self.mesh = sharding.data_mesh(devices)
    replicated = sharding.replicated(self.mesh)
    self.batch_sharding = sharding.batch_sharding(self.mesh)
    model = irv2.InceptionResNetV2(num_classes=None)
    headless = {k: v for k, v in variables["params"].items() if k != irv2.HEAD_NAME}
    self.variables = jax.device_put({"params": headless, "batch_stats": variables["batch_stats"]}, replicated)

    def encode(variables, images):
      out = model.apply(variables, irv2.preprocess(images))
      return {k: out[k].astype(dtype) for k in FEATURE_KEYS}
    self._encode = jax.jit(encode, in_shardings=(replicated, self.batch_sharding),
                           out_shardings=self.batch_sharding)

  def __call__(self, images: np.ndarray) -> dict[str, jax.Array]:
    return self._encode(self.variables, images)
