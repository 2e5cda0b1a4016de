"""Image preprocessing on the host: resize, the paper's random crop (50-100% of the area) and colour distortion.

Images stay uint8 until the model; `capjax.models.encoders.to_unit_range` scales them to [-1, 1].
"""

from __future__ import annotations

import dataclasses

import numpy as np
from PIL import Image


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
  crop: bool = False
  crop_min_scale: float = 0.5   # smallest crop area as a fraction of the image
  color: bool = False


def resize(image: np.ndarray, size: int) -> np.ndarray:
  if image.shape[0] == size and image.shape[1] == size:
    return image
  return np.asarray(Image.fromarray(image).resize((size, size), Image.BILINEAR))


def random_crop(image: np.ndarray, min_scale: float, rng: np.random.Generator) -> np.ndarray:
  """A crop covering a uniform [min_scale, 1] fraction of the area, aspect ratio in [3/4, 4/3]."""
  h, w = image.shape[:2]
  area = rng.uniform(min_scale, 1.0) * h * w
  aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
  ch = int(round(min(h, np.sqrt(area / aspect))))
  cw = int(round(min(w, np.sqrt(area * aspect))))
  top = int(rng.integers(0, h - ch + 1))
  left = int(rng.integers(0, w - cw + 1))
  return image[top:top + ch, left:left + cw]


def color_distort(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  """Random brightness (±32/255), contrast and saturation (×[0.5, 1.5]), in random order, as Inception does."""
  x = image.astype(np.float32) / 255.0
  ops = rng.permutation(3)
  for op in ops:
    if op == 0:
      x = x + rng.uniform(-32 / 255, 32 / 255)
    elif op == 1:
      mean = x.mean()
      x = (x - mean) * rng.uniform(0.5, 1.5) + mean
    else:
      gray = x @ np.asarray([0.299, 0.587, 0.114], np.float32)
      x = (x - gray[..., None]) * rng.uniform(0.5, 1.5) + gray[..., None]
  return (np.clip(x, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def train_image(image: np.ndarray, size: int, augment: AugmentConfig, rng: np.random.Generator) -> np.ndarray:
  if augment.crop:
    image = random_crop(image, augment.crop_min_scale, rng)
  image = resize(image, size)
  if augment.color:
    image = color_distort(image, rng)
  return image


def eval_image(image: np.ndarray | None, size: int) -> np.ndarray:
  """Resized image, or black for the padding rows of the last evaluation batch."""
  if image is None:
    return np.zeros((size, size, 3), np.uint8)
  return resize(image, size)
