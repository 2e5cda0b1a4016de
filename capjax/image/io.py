"""The one image loader: bytes or a path → RGB uint8 array (EXIF orientation; every Pillow mode converted, see
`to_rgb`), plus header-only format and size probes and a fast full-stream decode check for builders.
"""

from __future__ import annotations

import dataclasses
import io
import os
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageOps

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
  """An image that cannot be used; `reason` is a short machine-readable cause (for build reports): too_many_pixels
  (judged from the header, before any pixel is decoded), truncated, undecodable, or not_jpeg (verify_jpeg)."""

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


def _decode_error(error: Exception) -> ImageError:
  """The ImageError for what Pillow raised while opening or decoding. Its format plugins raise many types on
  malformed bytes: OSError, SyntaxError, ValueError, EOFError and struct.error, but also AssertionError (FTEX) and
  NotImplementedError (DDS); all but a bomb or a stream that ends early are `undecodable`."""
  if isinstance(error, (Image.DecompressionBombError, Image.DecompressionBombWarning)):  # the warning: under -W error
    return ImageError("too_many_pixels", str(error))
  if isinstance(error, OSError) and "truncated" in str(error):  # Pillow: "image file is truncated ..."
    return ImageError("truncated", str(error))
  return ImageError("undecodable", f"not an image Pillow can read ({type(error).__name__}: {error})")


def _open(source: Source) -> Image.Image:
  if isinstance(source, bytes):
    source = io.BytesIO(source)
  try:
    return Image.open(source)  # over twice Pillow's pixel limit, it raises DecompressionBombError right here
  except MemoryError:
    raise
  except Exception as e:  # any malformed input is an ImageError (see _decode_error)
    raise _decode_error(e) from e


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
    except MemoryError:
      raise
    except Exception as e:  # any malformed input is an ImageError (see _decode_error)
      raise _decode_error(e) from e
  return header


_SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I")
# Pillow widens 2- and 4-bit grey PNGs to 8 bits (x 85, x 17) but leaves their tRNS key at the stored depth.
_PNG_GREY_WIDENING = {"L;2": 85, "L;4": 17}


def _over_white(colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
  """`colour` (h, w) or (h, w, 3) uint8 composited over white by `alpha` (h, w) uint8: exactly
  round((c·a + 255·(255 − a)) / 255), which never exceeds 255·255, so uint16 holds every step."""
  a = alpha.astype(np.uint16)
  if colour.ndim == 3:
    a = a[..., None]
  out = colour.astype(np.uint16) * a
  out += 255 * (255 - a) + 127
  out //= 255
  return out.astype(np.uint8)


def _colour_and_alpha(image: Image.Image, png_rawmode: str | None) -> tuple[np.ndarray, np.ndarray | None]:
  """8-bit grey (h, w) or RGB (h, w, 3) pixels of `image` and its alpha (h, w), None when it has none.
  `png_rawmode` is how a PNG's pixels are stored (L;2, RGB;16B, ...), None when unknown."""
  mode, transparent = image.mode, image.info.get("transparency")
  grey_key = transparent if isinstance(transparent, int) else None  # the tRNS value of a grey PNG (or GIF)
  if grey_key is not None:
    grey_key *= _PNG_GREY_WIDENING.get(png_rawmode, 1)
  if mode in _SIXTEEN_BIT_MODES:
    values = np.asarray(image).astype(np.int32)  # I;16B arrives big-endian; int32 holds every 16-bit and I value
    grey = (np.clip(values, 0, 65535) >> 8).astype(np.uint8)
    return grey, (None if grey_key is None else np.where(values == grey_key, 0, 255).astype(np.uint8))
  if mode == "F":
    values = np.nan_to_num(np.asarray(image, np.float32), nan=0.0, posinf=1.0, neginf=0.0)
    return np.rint(np.clip(values, 0.0, 1.0) * 255).astype(np.uint8), None
  if mode in ("1", "L"):
    grey = np.asarray(image.convert("L"))  # bilevel: 0 and 255
    return grey, (None if grey_key is None else np.where(grey == grey_key, 0, 255).astype(np.uint8))
  if mode in ("LA", "La"):
    grey_alpha = np.asarray(image.convert("LA"))  # La (premultiplied) is divided out first
    return grey_alpha[..., 0], grey_alpha[..., 1]
  # A tRNS colour; a 16-bit RGB PNG's cannot be matched, as Pillow keeps only the high byte of its pixels.
  if mode == "RGB" and png_rawmode != "RGB;16B" and isinstance(transparent, tuple) and len(transparent) == 3 \
      and all(0 <= v <= 255 for v in transparent):
    rgb = np.asarray(image)
    return rgb, np.where(np.all(rgb == np.asarray(transparent, np.uint8), -1), 0, 255).astype(np.uint8)
  if mode in ("RGBA", "RGBa", "PA") or (mode == "P" and transparent is not None):
    rgba = np.asarray(image.convert("RGBA"))  # a palette's tRNS (one index or per-entry alphas) becomes alpha
    return rgba[..., :3], rgba[..., 3]
  return np.asarray(image.convert("RGB")), None  # P, CMYK (Adobe-inverted in JPEG: Pillow undoes it), YCbCr, ...


def to_rgb(image: Image.Image) -> Image.Image:
  """`image` turned upright by its EXIF orientation and converted to 8-bit RGB, mode by mode:

  - RGB: unchanged. L: grey copied to R, G and B. 1 (bilevel): 0 → 0, 1 → 255.
  - 16-bit grey (I;16, I;16B, I;16L): the high byte, value >> 8 (65535 → 255, 32768 → 128, 255 → 0). It is what
    Pillow's decoder keeps of 16-bit RGB, RGBA and LA PNGs, so one 16-bit picture saved grey or colour gives the
    same pixels, and an 8-bit picture widened the PNG way (v · 257) comes back exactly. (Pillow's own
    convert("RGB") clips these at 255 instead: a 16-bit picture comes out all white.)
  - I (32-bit int): read as 16-bit grey, 0..65535 (older Pillows open 16-bit PNGs as I), clipped to that range,
    then >> 8; a 32-bit TIFF using a wider range saturates.
  - F (32-bit float, float TIFFs and PFM): 0.0 is black and 1.0 white, as float images are written (PFM, GIMP,
    scikit-image), then round(v · 255); values outside [0, 1] are clipped, NaN is black. (Pillow's convert
    reads F as 0..255 and would turn such a picture black.)
  - Transparency is composited over white, as a page shows a transparent picture: round((c·a + 255·(255 − a)) /
    255) per channel. This covers RGBA, LA, PA, premultiplied RGBa/La, a palette with a tRNS entry (P), and the
    tRNS colour of 1, L (any bit depth), 16-bit grey and 8-bit RGB PNGs (pixels of exactly that value become
    white; a 16-bit RGB PNG's tRNS colour is ignored: Pillow keeps only the high byte of its pixels).
  - P without transparency: its palette colours. CMYK: Pillow's conversion, (255 − C)(255 − K)/255 for R and so
    on; CMYK JPEGs are read as Adobe-inverted (what Photoshop writes), which Pillow undoes while decoding.
  - Any other mode (YCbCr, LAB, HSV, RGBX): Pillow's convert("RGB").
  """
  # Read before anything loads the pixels (exif_transpose may): loading empties the tile list.
  tile_args = image.tile[0].args if image.format == "PNG" and image.tile else None
  png_rawmode = tile_args if isinstance(tile_args, str) else None
  image = ImageOps.exif_transpose(image)
  if image.mode == "RGB" and "transparency" not in image.info:
    return image
  colour, alpha = _colour_and_alpha(image, png_rawmode)
  if alpha is not None:
    colour = _over_white(colour, alpha)
  if colour.ndim == 2:
    colour = np.repeat(colour[..., None], 3, axis=-1)
  return Image.fromarray(colour)


def load_rgb(source: Source, max_pixels: int = MAX_PIXELS) -> np.ndarray:
  """Decodes an image (bytes, path or binary file) into an (h, w, 3) uint8 RGB array, upright, converted as
  `to_rgb` says. Whatever the bytes, it returns such an array or raises ImageError (nothing else but MemoryError):
  too_many_pixels when the header names more than `max_pixels` pixels, before any pixel data is read; truncated;
  undecodable."""
  with _open(source) as image:
    _check_pixels(image, max_pixels)
    try:
      return np.asarray(to_rgb(image), np.uint8)  # to_rgb decodes the pixels (after reading how they are stored)
    except MemoryError:
      raise
    except Exception as e:  # any malformed input is an ImageError (see _decode_error)
      raise _decode_error(e) from e
