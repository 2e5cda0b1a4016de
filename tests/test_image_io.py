"""capjax.image.io: bytes or path → upright RGB, header-only probes, the fast JPEG check and its reasons."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from capjax.image import io as image_io


def _encode(image: Image.Image, fmt: str, **kwargs) -> bytes:
  buffer = io.BytesIO()
  image.save(buffer, fmt, **kwargs)
  return buffer.getvalue()


def _picture(width: int = 64, height: int = 48) -> np.ndarray:
  y, x = np.mgrid[0:height, 0:width]
  return np.stack([x * 255 // width, y * 255 // height, np.full_like(x, 90)], -1).astype(np.uint8)


def test_sniff_format_reads_magic_bytes_not_names():
  rgb = Image.fromarray(_picture())
  assert image_io.sniff_format(_encode(rgb, "JPEG")) == "jpeg"
  assert image_io.sniff_format(_encode(rgb, "PNG")) == "png"
  assert image_io.sniff_format(_encode(rgb, "GIF")) == "gif"
  assert image_io.sniff_format(_encode(rgb, "WEBP")) == "webp"
  assert image_io.sniff_format(b"<html>not found</html>") is None


def test_probe_reads_size_and_mode_from_the_header_alone():
  data = _encode(Image.fromarray(_picture(640, 480)), "JPEG")
  # The first 2 KB hold the whole header: no pixel data is needed.
  assert image_io.probe(data[:2048]) == image_io.Header("jpeg", 640, 480, "RGB")


def test_verify_jpeg_accepts_a_whole_jpeg_and_names_each_defect():
  data = _encode(Image.fromarray(_picture(640, 480)), "JPEG", quality=90)
  assert image_io.verify_jpeg(data) == image_io.Header("jpeg", 640, 480, "RGB")
  cases = {
      "truncated": data[:len(data) // 2],
      "not_jpeg": _encode(Image.fromarray(_picture()), "PNG"),
      "undecodable": data[:4] + b"\x00" * 200,
  }
  for reason, bad in cases.items():
    with pytest.raises(image_io.ImageError) as e:
      image_io.verify_jpeg(bad)
    assert e.value.reason == reason


def test_decompression_bombs_are_refused_before_decoding():
  data = _encode(Image.new("L", (400, 300)), "JPEG")
  with pytest.raises(image_io.ImageError) as e:
    image_io.verify_jpeg(data, max_pixels=100_000)
  assert e.value.reason == "too_many_pixels"
  with pytest.raises(image_io.ImageError):
    image_io.load_rgb(data, max_pixels=100_000)
  with pytest.raises(image_io.ImageError):
    image_io.probe(data, max_pixels=100_000)


def test_load_rgb_from_bytes_and_path_agree(tmp_path):
  data = _encode(Image.fromarray(_picture()), "PNG")
  (tmp_path / "a.png").write_bytes(data)
  from_bytes, from_path = image_io.load_rgb(data), image_io.load_rgb(tmp_path / "a.png")
  assert from_bytes.dtype == np.uint8 and from_bytes.shape == (48, 64, 3)
  np.testing.assert_array_equal(from_bytes, _picture())  # PNG is lossless
  np.testing.assert_array_equal(from_bytes, from_path)


def test_load_rgb_applies_exif_orientation():
  exif = Image.Exif()
  exif[0x0112] = 6  # "rotate 90 CW to display"
  data = _encode(Image.fromarray(_picture(64, 48)), "JPEG", exif=exif)
  assert image_io.load_rgb(data).shape == (64, 48, 3)
  assert image_io.probe(data).width == 64  # the probe reports the stored size


def test_load_rgb_converts_grey_rgba_palette_and_cmyk_to_rgb():
  grey = image_io.load_rgb(_encode(Image.new("L", (8, 6), 200), "PNG"))
  np.testing.assert_array_equal(grey, np.full((6, 8, 3), 200, np.uint8))
  transparent = image_io.load_rgb(_encode(Image.new("RGBA", (8, 6), (0, 0, 0, 0)), "PNG"))
  np.testing.assert_array_equal(transparent, np.full((6, 8, 3), 255, np.uint8))  # over white
  palette = Image.new("P", (8, 6), 1)
  palette.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
  np.testing.assert_array_equal(image_io.load_rgb(_encode(palette, "PNG"))[0, 0], [10, 20, 30])
  cmyk = image_io.load_rgb(_encode(Image.new("CMYK", (8, 6), (0, 255, 255, 0)), "JPEG", quality=100))
  assert cmyk.shape == (6, 8, 3)
  assert cmyk[0, 0, 0] > 240 and cmyk[0, 0, 1] < 15 and cmyk[0, 0, 2] < 15  # pure red


def test_load_rgb_reports_garbage_with_a_reason():
  with pytest.raises(image_io.ImageError) as e:
    image_io.load_rgb(b"not an image at all")
  assert e.value.reason == "undecodable"
