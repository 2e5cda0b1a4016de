"""The paper's image filters as one pure function: JPEG by magic number, both sides over 400 pixels, aspect ratio at
most 2.0, decodable, no decompression bomb (judged from the header), and an optional unsafe-content scorer.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from PIL import Image

from capjax.image import io as image_io

# Reason codes in the order the checks run (cheapest first; the full decode check last but the scorer).
REASONS = ("missing_image", "download_failed", "not_jpeg", "undecodable", "decompression_bomb", "too_small",
           "aspect_ratio", "truncated", "not_rgb", "unsafe")

UnsafeScorer = Callable[[bytes], float]


@dataclasses.dataclass(frozen=True)
class ImageFilterConfig:
  min_side: int = 400  # both sides must exceed this (the paper: "width and height exceed 400 pixels")
  max_aspect_ratio: float = 2.0  # larger side / smaller side at most this
  max_pixels: int = image_io.MAX_PIXELS  # more pixels in the header is a decompression bomb: never decoded
  unsafe_threshold: float = 0.5  # a scorer's score at or above this drops the image


def load_scorer(name: str) -> UnsafeScorer | None:
  """`package.module:function` → the callable (bytes → score in [0, 1]); '' → None. Raises ValueError."""
  if not name:
    return None
  module, _, function = name.partition(":")
  try:
    scorer = getattr(importlib.import_module(module), function)
  except (ImportError, AttributeError, ValueError) as e:
    raise ValueError(f"unsafe_scorer={name} cannot be imported ({e}): name it as package.module:function") from e
  if not callable(scorer):
    raise ValueError(f"unsafe_scorer={name} is not callable")
  return scorer


def _original_size(meta: Mapping[str, Any], header: image_io.Header) -> tuple[int, int]:
  """img2dataset's original_width/height when it resized the image (the size rules are about the original)."""
  width, height = meta.get("original_width"), meta.get("original_height")
  if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
    return width, height
  return header.width, header.height


def image_filter(image: bytes | None, meta: Mapping[str, Any], config: ImageFilterConfig,
                 scorer: UnsafeScorer | None = None) -> tuple[str | None, tuple[int, int]]:
  """(reason or None, (width, height) of the original); the reason is one of REASONS."""
  if image is None:
    status = meta.get("status")
    if status == "truncated":  # the shard ended inside this sample (tfds_builders/img2dataset/shards.py)
      return "truncated", (0, 0)
    return ("download_failed" if status not in (None, "success", "missing_image") else "missing_image"), (0, 0)
  if image_io.sniff_format(image) != "jpeg":
    return "not_jpeg", (0, 0)
  try:
    with warnings.catch_warnings():  # Pillow warns of bombs it still opens: judged (and counted) here instead
      warnings.simplefilter("ignore", Image.DecompressionBombWarning)
      header = image_io.probe(image, max_pixels=2**62)  # header only: the size is judged below, before decoding
  except image_io.ImageError as e:  # Pillow refuses headers over twice its own limit while opening
    return ("decompression_bomb" if e.reason == "too_many_pixels" else "undecodable"), (0, 0)
  if header.width * header.height > config.max_pixels:
    return "decompression_bomb", (header.width, header.height)
  width, height = _original_size(meta, header)
  if min(width, height) <= config.min_side:
    return "too_small", (width, height)
  if max(width, height) / min(width, height) > config.max_aspect_ratio:
    return "aspect_ratio", (width, height)
  try:
    image_io.verify_jpeg(image, config.max_pixels)
  except image_io.ImageError as e:
    return ("truncated" if e.reason == "truncated" else "undecodable"), (width, height)
  if header.mode not in ("RGB", "L"):
    return "not_rgb", (width, height)  # CMYK/YCCK JPEGs: the trainer's decoder would see 4 channels
  if scorer is not None and scorer(image) >= config.unsafe_threshold:
    return "unsafe", (width, height)
  return None, (width, height)
