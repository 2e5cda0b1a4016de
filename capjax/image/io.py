"""The one image loader: bytes or a path → RGB uint8 array (EXIF orientation, grey/RGBA/CMYK converted), plus
header-only format and size probes and a fast full-stream decode check for builders.
"""

from __future__ import annotations

import dataclasses
import io
import os
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

# Pillow's own decompression-bomb threshold (about 89M pixels, e.g. 9,500 x 9,500): larger images are refused.
MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485

# Magic bytes of the formats image crawls return; the first match names the format.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)

Source = bytes | str | os.PathLike | BinaryIO


class ImageError(ValueError):
  """An image that cannot be used; `reason` is a short machine-readable cause (for build reports)."""

  def __init__(self, reason: str, message: str):
    super().__init__(f"{reason}: {message}")
    self.reason = reason


@dataclasses.dataclass(frozen=True)
class Header:
  """What the first bytes of an image say: its format (lower case: jpeg, png, ...), size and Pillow mode."""
  format: str
  width: int
  height: int
  mode: str


def sniff_format(data: bytes) -> str | None:
  """The format named by the magic bytes at the start of `data`, or None when none is known."""
  for magic, name in _MAGIC:
    if data.startswith(magic):
      return name
  if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
    return "webp"
  return None


def _open(source: Source) -> Image.Image:
  if isinstance(source, bytes):
    source = io.BytesIO(source)
  try:
    return Image.open(source)
  except Image.DecompressionBombError as e:
    raise ImageError("too_many_pixels", str(e)) from e
  except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
    raise ImageError("undecodable", f"not an image Pillow can read ({e})") from e


def _check_pixels(image: Image.Image, max_pixels: int) -> None:
  width, height = image.size
  if width * height > max_pixels:
    raise ImageError("too_many_pixels", f"{width}x{height} is over the {max_pixels:,}-pixel limit")


def probe(source: Source, max_pixels: int = MAX_PIXELS) -> Header:
  """Format, size and mode from the header alone (no pixel data is decoded). Raises ImageError."""
  with _open(source) as image:
    _check_pixels(image, max_pixels)
    return Header((image.format or "").lower(), image.width, image.height, image.mode)


def verify_jpeg(data: bytes, max_pixels: int = MAX_PIXELS) -> Header:
  """Checks that `data` is a complete JPEG: magic bytes, header, pixel cap, then the whole entropy-coded stream
  decoded at 1/8 scale (`draft`), which still reads every byte and so still catches truncation and corruption
  for a fraction of a full decode's cost. Raises ImageError with reason not_jpeg, undecodable, truncated or
  too_many_pixels; returns the header (the stored size, not the draft's)."""
  found = sniff_format(data)
  if found != "jpeg":
    raise ImageError("not_jpeg", f"the bytes are {found or 'no known image format'}, not JPEG")
  with _open(data) as image:
    _check_pixels(image, max_pixels)
    header = Header("jpeg", image.width, image.height, image.mode)
    image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
    try:
      image.load()
    except OSError as e:
      # Pillow says "image file is truncated" when the stream ends early; other errors are corrupt data.
      reason = "truncated" if "truncated" in str(e) else "undecodable"
      raise ImageError(reason, str(e)) from e
    except (SyntaxError, ValueError, Image.DecompressionBombError) as e:
      raise ImageError("undecodable", str(e)) from e
  return header


def to_rgb(image: Image.Image) -> Image.Image:
  """`image` turned upright by its EXIF orientation and converted to RGB (grey, palette, CMYK, 16-bit; alpha is
  composited over white, as a page shows a transparent picture)."""
  image = ImageOps.exif_transpose(image)
  if image.mode == "RGB":
    return image
  if image.mode == "P":
    image = image.convert("RGBA" if "transparency" in image.info else "RGB")
  if image.mode in ("RGBA", "LA", "PA"):
    image = image.convert("RGBA")
    background = Image.new("RGBA", image.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, image).convert("RGB")
  if image.mode in ("I;16", "I;16B", "I;16L", "I"):
    # 16-bit grey: keep the high byte rather than clip at 255.
    image = Image.fromarray((np.asarray(image, np.uint32) >> 8).astype(np.uint8))
  return image.convert("RGB")


def load_rgb(source: Source, max_pixels: int = MAX_PIXELS) -> np.ndarray:
  """Decodes an image (bytes, path or binary file) into an (h, w, 3) uint8 RGB array, upright. Raises ImageError."""
  with _open(source) as image:
    _check_pixels(image, max_pixels)
    try:
      image.load()
      return np.asarray(to_rgb(image), np.uint8)
    except OSError as e:
      raise ImageError("truncated" if "truncated" in str(e) else "undecodable", str(e)) from e
    except (SyntaxError, ValueError) as e:
      raise ImageError("undecodable", str(e)) from e
