"""Frozen Inception-ResNet-v2: the encoder that turns pictures into the `grid` and `pooled` arrays a feature variant
stores (and the naming of those variants), for the extraction tool and `--mode=caption`; and the ImageNet-head
labeler of the paper's image-text cross filter (top-k classes -> WordNet names and hypernyms)."""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from PIL import Image

from capjax import sharding
from capjax.image import io as image_io
from capjax.image import labels as imagenet_labels
from capjax.models import inception_resnet_v2 as irv2

DEFAULT_VARIANT = "irv2"
FEATURE_KEYS = ("grid", "pooled")
LABELER_IMAGE_SIZE = 299


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
  """uint8 (B, S, S, 3) images -> {"grid", "pooled"} in `dtype`, the batch split over `devices` (the data-parallel
  mesh and `dp` rules of `capjax.sharding`: a frozen encoder needs no optimizer state to shard)."""

  def __init__(self, variables: Any, devices: Sequence[jax.Device], dtype: str):
    self.mesh = sharding.data_mesh(devices)
    replicated = sharding.replicated(self.mesh)
    self.batch_sharding = sharding.batch_sharding(self.mesh)
    model = irv2.InceptionResNetV2(num_classes=None)
    headless = {k: v for k, v in variables["params"].items() if k != irv2.HEAD_NAME}
    self.variables = jax.device_put({"params": headless, "batch_stats": variables["batch_stats"]}, replicated)

    def encode(variables, images):
      with sharding.axis_rules(self.mesh, sharding.DP):  # IRv2's activation constraints: the batch split
        out = model.apply(variables, irv2.preprocess(images))
      return {k: out[k].astype(dtype) for k in FEATURE_KEYS}
    self._encode = jax.jit(encode, in_shardings=(replicated, self.batch_sharding),
                           out_shardings=self.batch_sharding)

  def __call__(self, images: np.ndarray) -> dict[str, jax.Array]:
    return self._encode(self.variables, images)


# ------------------------------------------------------------------------------- the cross filter's labeler


@functools.cache
def _probabilities_fn(num_classes: int):
  """One jitted forward pass per head size, shared by every labeler in the process (one compilation per shape)."""
  model = irv2.InceptionResNetV2(num_classes=num_classes)

  @jax.jit
  def probabilities(variables, pixels):
    logits = model.apply(variables, irv2.preprocess(pixels))["logits"]
    return jax.nn.softmax(logits.astype("float32"), axis=-1)

  return probabilities


class Irv2Labeler:
  """Labels one JPEG at a time: `labels(image_bytes)` → tuple of words. Loads weights and compiles once."""

  def __init__(self, weights: str, top_k: int = 5, threshold: float = 0.1, min_depth: int = 6):
    metadata = irv2.read_metadata(weights)
    num_classes = metadata.get("num_classes")
    if num_classes not in (1000, 1001):
      raise ValueError(f"{weights} holds no ImageNet head (num_classes={num_classes}): convert weights with one")
    self.label_offset = num_classes - imagenet_labels.NUM_CLASSES  # 1001-way heads: index 0 is background
    self.variables = irv2.load_converted(weights)
    self.top_k, self.threshold, self.min_depth = top_k, threshold, min_depth
    self._probabilities = _probabilities_fn(num_classes)

  @staticmethod
  def pixels(image: bytes) -> np.ndarray:
    """(299, 299, 3) uint8: decoded at the smallest JPEG scale still ≥ 299 (draft), then resized."""
    with Image.open(io.BytesIO(image)) as picture:
      picture.draft("RGB", (LABELER_IMAGE_SIZE, LABELER_IMAGE_SIZE))
      rgb = image_io.to_rgb(picture).resize((LABELER_IMAGE_SIZE, LABELER_IMAGE_SIZE), Image.BILINEAR)
      return np.asarray(rgb, np.uint8)

  def classes(self, images: Sequence[bytes]) -> list[list[tuple[str, float]]]:
    """Per image, (wnid, probability) of the top-k classes at or above the threshold, most likely first."""
    batch = np.stack([self.pixels(b) for b in images])
    probabilities = np.asarray(self._probabilities(self.variables, batch))
    out = []
    for row in probabilities:
      order = np.argsort(-row, kind="stable")[:self.top_k]
      found = []
      for index in order:
        wnid = imagenet_labels.wnid_of(int(index), self.label_offset)
        if wnid is not None and row[index] >= self.threshold:
          found.append((wnid, float(row[index])))
      out.append(found)
    return out

  def labels(self, image: bytes) -> tuple[str, ...]:
    names: list[str] = []
    for wnid, _ in self.classes([image])[0]:
      names.extend(imagenet_labels.class_labels(wnid, self.min_depth))
    return tuple(dict.fromkeys(names))
