"""capjax.image.io: bytes or path → upright RGB (every Pillow mode, exact values), header-only probes, the fast JPEG
check and its reasons, decompression bombs refused unread, and any bytes either decoded or refused with a reason."""

from __future__ import annotations

import io
import struct
import zlib

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
from PIL import Image

import image_bytes
from capjax.image import io as image_io


def _encode(image: Image.Image, fmt: str, **kwargs) -> bytes:
  buffer = io.BytesIO()
  image.save(buffer, fmt, **kwargs)
  return buffer.getvalue()


def _picture(width: int = 64, height: int = 48) -> np.ndarray:
  y, x = np.mgrid[0:height, 0:width]
  return np.stack([x * 255 // width, y * 255 // height, np.full_like(x, 90)], -1).astype(np.uint8)


def _mode_of(data: bytes) -> str:
  """The mode Pillow opens `data` in: each conversion test first checks that it builds the case it names."""
  with Image.open(io.BytesIO(data)) as image:
    return image.mode


def _rgb_of_grey(grey) -> np.ndarray:
  return np.repeat(np.asarray(grey, np.uint8)[..., None], 3, axis=-1)


def _over_white(colour, alpha) -> np.ndarray:
  """The documented compositing, written out in floats: round((c·a + 255·(255 − a)) / 255). (The quotient is never
  exactly k + 0.5: that would need an odd multiple of 255 to be even.)"""
  c, a = np.asarray(colour, np.float64), np.asarray(alpha, np.float64)
  if c.ndim == 3:
    a = a[..., None]
  return np.round((c * a + 255 * (255 - a)) / 255).astype(np.uint8)


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


def test_load_rgb_reports_garbage_with_a_reason():
  with pytest.raises(image_io.ImageError) as e:
    image_io.load_rgb(b"not an image at all")
  assert e.value.reason == "undecodable"


# --- Every mode Pillow opens, converted to 8-bit RGB (the rules are in to_rgb's docstring) ---

def test_8_bit_grey_is_copied_to_each_channel():
  grey = np.arange(256, dtype=np.uint8).reshape(16, 16)
  data = _encode(Image.fromarray(grey), "PNG")
  assert _mode_of(data) == "L"
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey(grey))


def test_bilevel_is_black_and_white():
  checker = (np.indices((5, 11)).sum(0) % 2).astype(bool)
  for fmt in ("PNG", "TIFF", "BMP"):
    data = _encode(Image.fromarray(checker), fmt)
    assert _mode_of(data) == "1"
    np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey(checker * 255), err_msg=fmt)


def test_16_bit_grey_png_keeps_the_high_byte_rather_than_turning_white():
  # Every 16-bit value: row r holds 256·r .. 256·r + 255 and comes out as r (Pillow's convert gives 255 for all
  # but the first row).
  gradient = np.arange(65536, dtype=np.uint16).reshape(256, 256)
  data = _encode(Image.fromarray(gradient), "PNG")
  assert _mode_of(data) == "I;16"
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey(np.repeat(np.arange(256)[:, None], 256, 1)))
  # An 8-bit picture widened the PNG way (v · 257) comes back unchanged.
  grey = np.arange(256, dtype=np.uint16).reshape(16, 16)
  np.testing.assert_array_equal(image_io.load_rgb(_encode(Image.fromarray(grey * 257), "PNG")), _rgb_of_grey(grey))


def test_a_16_bit_picture_saved_grey_or_rgb_gives_the_same_pixels():
  grey = np.random.default_rng(0).integers(0, 65536, (12, 10), dtype=np.uint16)
  rows = np.repeat(grey[..., None], 3, axis=-1).astype(">u2").reshape(12, -1)  # R = G = B, big-endian samples
  raw = b"".join(b"\x00" + row.tobytes() for row in rows)
  rgb_png = image_bytes.png(10, 12, 16, image_bytes.RGB, zlib.compress(raw))
  grey_png = _encode(Image.fromarray(grey), "PNG")
  assert (_mode_of(rgb_png), _mode_of(grey_png)) == ("RGB", "I;16")
  np.testing.assert_array_equal(image_io.load_rgb(grey_png), image_io.load_rgb(rgb_png))
  np.testing.assert_array_equal(image_io.load_rgb(grey_png), _rgb_of_grey(grey >> 8))


def test_big_and_little_endian_16_bit_grey():
  values = np.array([[0, 255, 256, 257, 32767, 32768, 65280, 65535]], np.uint16)
  expected = _rgb_of_grey([[0, 0, 1, 1, 127, 128, 255, 255]])
  big = _encode(Image.frombytes("I;16B", (8, 1), values.astype(">u2").tobytes()), "TIFF")
  assert _mode_of(big) == "I;16B"
  np.testing.assert_array_equal(image_io.load_rgb(big), expected)
  # Pillow opens little-endian files as I;16, so I;16L exists only in memory: to_rgb takes it too.
  little = Image.frombytes("I;16L", (8, 1), values.astype("<u2").tobytes())
  np.testing.assert_array_equal(np.asarray(image_io.to_rgb(little)), expected)


def test_32_bit_int_is_read_as_16_bit_grey_and_clipped():
  values = np.array([[-70000, -1, 0, 255, 256, 32768, 65535, 65536, 2**31 - 1]], np.int32)
  data = _encode(Image.fromarray(values), "TIFF")
  assert _mode_of(data) == "I"
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey([[0, 0, 0, 0, 1, 128, 255, 255, 255]]))


def test_float_is_read_as_0_black_to_1_white_and_clipped():
  values = np.array([[np.nan, -np.inf, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, np.inf]], np.float32)
  data = _encode(Image.fromarray(values), "TIFF")
  assert _mode_of(data) == "F"
  # 0.25 · 255 = 63.75 → 64; 0.5 · 255 = 127.5 → 128 (half to even).
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey([[0, 0, 0, 0, 64, 128, 255, 255, 255]]))
  pfm = b"Pf\n4 1\n-1.0\n" + np.array([0.0, 0.2, 0.6, 1.0], "<f4").tobytes()  # grey PFM, little-endian
  assert _mode_of(pfm) == "F"
  np.testing.assert_array_equal(image_io.load_rgb(pfm), _rgb_of_grey([[0, 51, 153, 255]]))


def test_rgba_is_composited_over_white():
  rgb = np.random.default_rng(1).integers(0, 256, (16, 16, 3), dtype=np.uint8)
  alpha = np.arange(256, dtype=np.uint8).reshape(16, 16)
  rgba = np.concatenate([rgb, alpha[..., None]], axis=-1)
  rgba[0, :3] = [[0, 0, 0, 0], [10, 20, 30, 255], [0, 100, 200, 128]]
  data = _encode(Image.fromarray(rgba), "PNG")
  assert _mode_of(data) == "RGBA"
  loaded = image_io.load_rgb(data)
  np.testing.assert_array_equal(loaded[0, :3], [[255, 255, 255], [10, 20, 30], [127, 177, 227]])
  np.testing.assert_array_equal(loaded, _over_white(rgba[..., :3], rgba[..., 3]))


def test_grey_with_alpha_is_composited_over_white():
  grey, alpha = np.meshgrid(np.arange(0, 256, 17, dtype=np.uint8), np.arange(0, 256, 15, dtype=np.uint8))
  data = _encode(Image.fromarray(np.stack([grey, alpha], axis=-1)), "PNG")
  assert _mode_of(data) == "LA"
  loaded = image_io.load_rgb(data)
  assert loaded[0, 0].tolist() == [255] * 3 and loaded[-1, 5].tolist() == [85] * 3  # alpha 0, then 255
  np.testing.assert_array_equal(loaded, _rgb_of_grey(_over_white(grey, alpha)))


def _palette_image(indices: list[int], mode: str = "P") -> Image.Image:
  image = Image.frombytes(mode, (len(indices), 1), bytes(indices))
  image.putpalette([10, 20, 30, 200, 100, 50, 0, 0, 0, 250, 250, 0])
  return image


def test_palette_colours_and_a_palette_trns_entry():
  plain = _encode(_palette_image([0, 1, 2, 3]), "PNG")
  assert _mode_of(plain) == "P"
  np.testing.assert_array_equal(image_io.load_rgb(plain)[0], [[10, 20, 30], [200, 100, 50], [0, 0, 0], [250, 250, 0]])
  for fmt in ("PNG", "GIF"):  # entry 1 fully transparent
    data = _encode(_palette_image([0, 1, 2, 1]), fmt, transparency=1)
    assert _mode_of(data) == "P"
    np.testing.assert_array_equal(image_io.load_rgb(data)[0], [[10, 20, 30], [255] * 3, [0, 0, 0], [255] * 3], fmt)
  # A tRNS chunk with an alpha per entry: 255, 0, 128 (entries past it are opaque).
  data = _encode(_palette_image([0, 1, 2, 3]), "PNG", transparency=bytes([255, 0, 128]))
  np.testing.assert_array_equal(image_io.load_rgb(data)[0], [[10, 20, 30], [255] * 3, [127] * 3, [250, 250, 0]])


def test_palette_with_alpha_is_composited_over_white():
  image = Image.frombytes("PA", (3, 1), bytes([0, 255, 1, 128, 2, 0]))  # (index, alpha) pairs
  image.putpalette([10, 20, 30, 200, 100, 50, 0, 0, 0])
  data = _encode(image, "TIFF")
  assert _mode_of(data) == "PA"
  # (200, 100, 50) at alpha 128: round((200·128 + 255·127) / 255) = 227, then 177 and 152.
  np.testing.assert_array_equal(image_io.load_rgb(data)[0], [[10, 20, 30], [227, 177, 152], [255] * 3])


def test_trns_colours_of_grey_and_rgb_pngs_are_transparent():
  grey = np.array([[0, 7, 200, 7]], np.uint8)
  data = _encode(Image.fromarray(grey), "PNG", transparency=7)
  assert _mode_of(data) == "L"
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey([[0, 255, 200, 255]]))
  rgb = np.array([[[1, 2, 3], [4, 5, 6], [4, 5, 7]]], np.uint8)
  data = _encode(Image.fromarray(rgb), "PNG", transparency=(4, 5, 6))
  assert _mode_of(data) == "RGB"
  np.testing.assert_array_equal(image_io.load_rgb(data)[0], [[1, 2, 3], [255, 255, 255], [4, 5, 7]])
  sixteen = np.array([[256, 257, 65535]], np.uint16)  # the key is matched at 16 bits: 257 stays 1
  data = _encode(Image.fromarray(sixteen), "PNG", transparency=256)
  assert _mode_of(data) == "I;16"
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey([[255, 1, 255]]))
  bilevel = _encode(Image.fromarray(np.array([[False, True]])), "PNG", transparency=0)
  assert _mode_of(bilevel) == "1"
  np.testing.assert_array_equal(image_io.load_rgb(bilevel), _rgb_of_grey([[255, 255]]))


def test_trns_key_of_a_2_bit_grey_png_is_matched_at_its_bit_depth():
  # Samples 0, 1, 2, 3 (packed in one byte) read as 0, 85, 170, 255; tRNS names sample 1.
  data = image_bytes.png(4, 1, 2, image_bytes.GREY, zlib.compress(b"\x00\x1b"),
                         image_bytes.png_chunk(b"tRNS", struct.pack(">H", 1)))
  assert _mode_of(data) == "L"
  np.testing.assert_array_equal(image_io.load_rgb(data), _rgb_of_grey([[0, 255, 170, 255]]))


def test_trns_colour_of_a_16_bit_rgb_png_is_ignored():
  # Pillow keeps the high byte of each sample, so (0, 0, 1) and (0, 0, 0) both read as black: no exact match.
  rows = np.array([[[0, 0, 0], [0, 0, 1], [65535, 0, 0]]], ">u2").reshape(1, -1)
  data = image_bytes.png(3, 1, 16, image_bytes.RGB, zlib.compress(b"\x00" + rows.tobytes()),
                         image_bytes.png_chunk(b"tRNS", struct.pack(">HHH", 0, 0, 0)))
  np.testing.assert_array_equal(image_io.load_rgb(data)[0], [[0, 0, 0], [0, 0, 0], [255, 0, 0]])


def test_cmyk_tiff_and_adobe_inverted_cmyk_jpeg():
  c, k = np.meshgrid(np.arange(0, 256, 17), np.arange(0, 256, 51))
  cmyk = np.stack([c, np.full_like(c, 128), np.full_like(c, 30), k], axis=-1).astype(np.uint8)
  data = _encode(Image.frombytes("CMYK", (16, 6), cmyk.tobytes()), "TIFF")
  assert _mode_of(data) == "CMYK"
  expected = np.round((255 - cmyk[..., :3].astype(np.float64)) * (255 - cmyk[..., 3:].astype(np.float64)) / 255)
  np.testing.assert_array_equal(image_io.load_rgb(data), expected.astype(np.uint8))
  # Pillow writes CMYK JPEGs as Photoshop does (Adobe APP14 marker, inks inverted) and reads them back the same way.
  patches = [(0, 255, 255, 0), (0, 0, 0, 255), (255, 128, 0, 64), (10, 20, 30, 40)]
  cmyk = np.repeat(np.repeat(np.array(patches, np.uint8)[None], 16, axis=1), 16, axis=0)
  data = _encode(Image.frombytes("CMYK", (64, 16), cmyk.tobytes()), "JPEG", quality=100)
  assert b"Adobe" in data and _mode_of(data) == "CMYK"
  loaded = image_io.load_rgb(data)
  assert [loaded[8, 16 * i + 8].tolist() for i in range(4)] == [[255, 0, 0], [0, 0, 0], [0, 95, 191], [207, 198, 190]]


# --- Decompression bombs: small files whose headers name more pixels than the cap, refused unread ---

def _pillow_images_allocated() -> int:
  """How many images Pillow has allocated pixel memory for in this process (its block allocator's count)."""
  return Image.core.get_stats()["new_count"]


def test_the_pixel_cap_is_pillows_production_limit():
  assert image_io.MAX_PIXELS == Image.MAX_IMAGE_PIXELS == 89_478_485


def _small_jpeg() -> bytes:
  return _encode(Image.new("L", (16, 16), 40), "JPEG")


def _small_gif() -> bytes:
  return _encode(Image.new("L", (16, 16), 40), "GIF")


# Over twice the cap, Pillow refuses the image while opening it; between the cap and twice it, Pillow only warns and
# the loader's own check refuses it. PNGs are whole, valid streams (110 KB for 900M pixels); JPEG and GIF bombs are
# headers claiming the size over a 16 x 16 picture's data, as decoders size the frame before reading the data.
BOMBS = {
    "png_1_bit_30000x30000": lambda: image_bytes.black_bilevel_png(30_000, 30_000),
    "png_8_bit_9500x9500": lambda: image_bytes.black_grey_png(9_500, 9_500),
    "jpeg_65535x65535": lambda: image_bytes.with_jpeg_size(_small_jpeg(), 65_535, 65_535),
    "jpeg_9500x9500": lambda: image_bytes.with_jpeg_size(_small_jpeg(), 9_500, 9_500),
    "gif_65535x65535": lambda: image_bytes.with_gif_size(_small_gif(), 65_535, 65_535),
    "gif_9500x9500": lambda: image_bytes.with_gif_size(_small_gif(), 9_500, 9_500),
}


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize("name", BOMBS)
def test_decompression_bombs_are_refused_before_any_pixel_is_decoded(name):
  data = BOMBS[name]()
  assert len(data) < 200_000
  checks = [image_io.load_rgb, image_io.probe] + ([image_io.verify_jpeg] if name.startswith("jpeg") else [])
  allocated = _pillow_images_allocated()
  for check in checks:
    with pytest.raises(image_io.ImageError) as e:
      check(data)
    assert e.value.reason == "too_many_pixels", check.__name__
  assert _pillow_images_allocated() == allocated  # not one image buffer, let alone a 900M-pixel one


def test_the_bomb_builders_make_images_that_decode():
  # The same builders at sizes under the cap: whole images, every pixel black, as the bombs would decode.
  for data, size in ((image_bytes.black_bilevel_png(700, 1100), (1100, 700)),
                     (image_bytes.black_grey_png(1500, 1000), (1000, 1500))):
    np.testing.assert_array_equal(image_io.load_rgb(data), np.zeros((*size, 3), np.uint8))


# --- Any bytes: an (h, w, 3) uint8 array or an ImageError with a documented reason, never another exception ---

def _loads_or_is_refused(data: bytes) -> None:
  try:
    rgb = image_io.load_rgb(data)
  except image_io.ImageError as e:
    assert e.reason in ("too_many_pixels", "truncated", "undecodable"), e
    return
  assert rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3


# Magic bytes that send arbitrary bytes into Pillow's format plugins (the web's formats and a few exotic ones).
_MAGICS = (b"", b"\xff\xd8\xff", image_bytes.PNG_SIGNATURE, b"GIF89a", b"BM", b"II*\x00", b"MM\x00*",
           b"RIFF\x00\x00\x00\x00WEBPVP8 ", b"P5\n", b"Pf\n", b"\x00\x00\x01\x00", b"8BPS\x00\x01",
           b"DDS |\x00\x00\x00", b"FTEX")

_VALID = tuple(
    [_encode(Image.fromarray(_picture(16, 12)), fmt) for fmt in ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP")]
    + [_encode(Image.fromarray(_picture(16, 12)[..., 0].astype(np.uint16) * 257), "PNG"),
       _encode(Image.fromarray(_picture(16, 12)), "JPEG", progressive=True)])

_QUICK = hypothesis.settings(max_examples=200, deadline=None, database=None)


@_QUICK
@hypothesis.given(st.sampled_from(_MAGICS), st.binary(max_size=600))
@hypothesis.example(b"FTEX", bytes(20))  # Pillow 12.3's FTEX plugin fails an assert while opening it
@hypothesis.example(b"DDS |\x00\x00\x00", bytes(120))  # its DDS plugin: NotImplementedError (pixel format 0)
@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow's TIFF plugin warns of the corrupt EXIF it skips
def test_arbitrary_bytes_load_or_are_refused(magic, tail):
  _loads_or_is_refused(magic + tail)


@st.composite
def _damaged(draw) -> bytes:
  """A valid small image truncated, with bits flipped or with bytes overwritten (one to four times)."""
  data = bytearray(draw(st.sampled_from(_VALID)))
  for _ in range(draw(st.integers(1, 4))):
    at = draw(st.integers(0, len(data) - 1))
    how = draw(st.sampled_from(("truncate", "flip", "overwrite")))
    if how == "truncate":
      del data[max(at, 1):]
    elif how == "flip":
      data[at] ^= 1 << draw(st.integers(0, 7))
    else:
      data[at] = draw(st.integers(0, 255))
  return bytes(data)


@_QUICK
@hypothesis.given(_damaged())
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_damaged_images_load_or_are_refused(data):
  _loads_or_is_refused(data)
