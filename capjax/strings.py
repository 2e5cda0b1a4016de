"""Text values as `str`: TFDS records, h5 attributes and numpy arrays hand back `bytes` or `np.bytes_`; and whether
a value read from JSON is text that can be written back out (`is_utf8`); the number a name writes (`decimal`)."""

from __future__ import annotations

from typing import Any


def as_str(value: Any, errors: str = "strict") -> str:
  """UTF-8 `bytes` (or `np.bytes_`) decoded; anything else through `str()`. `errors` as in `bytes.decode`."""
  return value.decode("utf-8", errors) if isinstance(value, bytes) else str(value)


def is_utf8(value: Any) -> bool:
  """Whether `value` is a `str` that UTF-8 can encode. JSON's "\\ud800" escape gives a lone surrogate, which no
  record, page or terminal can hold: the write fails, long after the value was read and counted."""
  try:
    return isinstance(value, str) and value.encode("utf-8") is not None
  except UnicodeEncodeError:
    return False


def decimal(text: str) -> int | None:
  """The number that `text` writes in ASCII decimal digits, at most 18 of them (int64), or None. `str.isdigit` takes
  "²" and "٣", which `int()` refuses or reads as another number: a folder or an id named so is not a step, a
  version or an index."""
  return int(text) if text.isascii() and text.isdecimal() and len(text) <= 18 else None
