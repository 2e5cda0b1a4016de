"""Image files built byte by byte for the loader's tests: PNG chunks, and decompression bombs that are small on disk
(a 30,000 x 30,000 PNG in about 110 KB) and quick to make because no pixel is ever compressed twice."""

from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG colour types (the IHDR byte).
GREY, RGB, PALETTE, GREY_ALPHA, RGBA = 0, 2, 3, 4, 6


def png_chunk(kind: bytes, data: bytes) -> bytes:
  """One chunk: length, type, data and the CRC-32 of type and data."""
  return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, bit_depth: int, colour_type: int, zlib_data: bytes, *chunks: bytes) -> bytes:
  """A PNG (no interlace) from the zlib stream of its filtered rows; `chunks` (tRNS, ...) go between IHDR and IDAT."""
  header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0))
  return PNG_SIGNATURE + header + b"".join(chunks) + png_chunk(b"IDAT", zlib_data) + png_chunk(b"IEND", b"")


def zlib_of_zero_rows(row_bytes: int, rows: int, rows_per_block: int = 512) -> bytes:
  """The zlib stream of rows x row_bytes zero bytes, without compressing them all: `rows_per_block` rows are
  compressed once and the block repeated (a full flush ends it on a byte boundary and forgets the history, so
  copies can follow one another), then an empty final block and the Adler-32 of N zeros, (N mod 65521) << 16 | 1."""
  compressor = zlib.compressobj(9)
  start = compressor.flush(zlib.Z_FULL_FLUSH)  # the zlib header (and an empty stored block)

  def block(count: int) -> bytes:
    return compressor.compress(bytes(row_bytes * count)) + compressor.flush(zlib.Z_FULL_FLUSH)

  whole, rest = divmod(rows, rows_per_block)
  body = block(rows_per_block) * whole + (block(rest) if rest else b"")
  adler = (row_bytes * rows % 65521) << 16 | 1
  return start + body + b"\x03\x00" + struct.pack(">I", adler)


def black_bilevel_png(width: int, height: int) -> bytes:
  """A 1-bit grey PNG, every pixel black: each row is filter byte 0 and ceil(width / 8) zero bytes."""
  return png(width, height, 1, GREY, zlib_of_zero_rows(1 + (width + 7) // 8, height))


def black_grey_png(width: int, height: int) -> bytes:
  """An 8-bit grey PNG, every pixel black."""
  return png(width, height, 8, GREY, zlib_of_zero_rows(1 + width, height))


def with_jpeg_size(jpeg: bytes, width: int, height: int) -> bytes:
  """`jpeg` with the size in its start-of-frame header replaced: the header claims width x height (at most 65,535
  a side) while the scan still holds the original's blocks, as a crafted bomb does (decoders size the frame from
  the header before reading the scan)."""
  at = 2
  while at < len(jpeg):
    marker, length = jpeg[at + 1], struct.unpack(">H", jpeg[at + 2:at + 4])[0]
    if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # SOFn: length, precision, height, width
      return jpeg[:at + 5] + struct.pack(">HH", height, width) + jpeg[at + 9:]
    at += 2 + length
  raise ValueError("no start-of-frame marker")


def with_gif_size(gif: bytes, width: int, height: int) -> bytes:
  """`gif` with its logical screen and first frame both claiming width x height (at most 65,535 a side); the
  frame's LZW data stays the original's."""
  at = 13 + (3 << ((gif[10] & 7) + 1) if gif[10] & 0x80 else 0)  # after the screen and global colour table
  while gif[at] == 0x21:  # an extension: introducer, label, then data sub-blocks up to a zero length
    at += 2
    while gif[at]:
      at += 1 + gif[at]
    at += 1
  if gif[at] != 0x2C:
    raise ValueError("no image descriptor")
  size = struct.pack("<HH", width, height)
  return gif[:6] + size + gif[10:at + 5] + size + gif[at + 9:]
