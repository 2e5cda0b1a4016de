"""The one reader of a record's reference captions (a decoded TFDS record: `captions` is a sequence of bytes or
str, or one caption), for the vocabulary, the dataset pages, SCST's references, ERG's factual captions and the
cross-domain matrix. Style-specific captions are `capjax.data.stylized`'s."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from capjax.strings import as_str

FIELD = "captions"


def captions_of(record: Mapping[str, Any], field: str = FIELD) -> list[str]:
  """The references of a decoded record as text: every caption of a sequence field, or the one caption."""
  value = record[field]
  if isinstance(value, (list, tuple, np.ndarray)):
    return [as_str(v) for v in value]
  return [as_str(value)]


def all_captions(source, field: str = FIELD) -> Iterator[str]:
  """Every reference caption of every record of a data source, in order (the vocabulary's input)."""
  for i in range(len(source)):
    yield from captions_of(source[i], field)
