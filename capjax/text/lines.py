"""The lines of a text file read as bytes: any line ending ("\\n", "\\r\\n", a lone "\\r"), a leading UTF-8
byte-order mark dropped, and each line left for its reader to decode, so that one bad byte costs one row, never
the whole file nor a silent U+FFFD. The file must be a regular file, and not UTF-16 or UTF-32 (`capjax.files`).

Text mode would do the first two, but it decodes the whole stream: `errors="replace"` turns bad bytes into
U+FFFD without a word, `errors="strict"` stops at the first one and cannot say on which line.

`split_lines` splits text already decoded at the same line endings and no others: `str.splitlines` also splits at
form feed, U+2028, U+0085 and more, so a sentence holding one became two rows and a command's output rows no
longer matched its input lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from capjax import files

BOM = b"\xef\xbb\xbf"
_NEWLINE = re.compile(rb"\r\n|\r|\n")
_TEXT_NEWLINE = re.compile(r"\r\n|\r|\n")


def read_lines(path: str | os.PathLike, chunk_size: int = 1 << 20, flag: str = "") -> Iterator[bytes]:
  """Every line of the file at `path`, without its line ending, in `chunk_size` reads (files of any size).

  A file ending with a line ending has no empty last line; a blank line in the middle is an empty `bytes`. A FIFO,
  a device or text in UTF-16 is an `error:` line naming `flag` and the file, before the first line.
  """
  with files.open_input(path, flag) as f:
    head = f.read(max(len(BOM), 4096))
    files.refuse_other_encoding(head, path, flag)
    pending = head.removeprefix(BOM)
    while chunk := f.read(chunk_size):
      data = pending + chunk
      # A "\r" at the end may be the first half of a "\r\n" cut by the read: it waits for the next chunk.
      cut = len(data) - 1 if data.endswith(b"\r") else len(data)
      lines = _NEWLINE.split(data[:cut])
      pending = lines.pop() + data[cut:]
      yield from lines
    lines = _NEWLINE.split(pending)
    last = lines.pop()
    yield from lines
    if last:
      yield last


def split_lines(text: str) -> list[str]:
  """The lines of decoded `text`, split at "\\n", "\\r\\n" and a lone "\\r" only (form feed, U+2028 and the other
  separators `str.splitlines` splits at stay inside a line); a final line ending adds no empty line."""
  lines = _TEXT_NEWLINE.split(text)
  if lines[-1] == "":
    lines.pop()
  return lines


def undecodable(line: bytes, error: UnicodeDecodeError) -> str:
  """The first byte of `line` that is not UTF-8, for a message: "byte 4 (0xe9)", counting bytes from 1."""
  return f"byte {error.start + 1} (0x{line[error.start]:02x})"
