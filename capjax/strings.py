"""Text values as `str`: TFDS records, h5 attributes and numpy arrays hand back `bytes` or `np.bytes_`."""

from __future__ import annotations

from typing import Any


def as_str(value: Any, errors: str = "strict") -> str:
  """UTF-8 `bytes` (or `np.bytes_`) decoded; anything else through `str()`. `errors` as in `bytes.decode`."""
  return value.decode("utf-8", errors) if isinstance(value, bytes) else str(value)
