"""The one reader of a record's stylized captions: the `stylized` sequence that stylized_scenes, flickrstyle10k and
senticap records carry (style, caption and, in stylized_scenes, the planted phrase with its word span), as TFDS
hands it back (bytes) or as a builder yields it (str)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from capjax.strings import as_str

FIELD = "stylized"


@dataclasses.dataclass(frozen=True)
class StylizedCaption:
  """One entry of a record's `stylized` sequence."""
  style: str
  caption: str
  phrase: str = ""           # the planted style phrase, "" where the record has none
  content: str | None = None  # the caption without the phrase's word span, None where the record has no span


def entries(record: Mapping[str, Any]) -> list[StylizedCaption] | None:
  """The record's stylized captions in order; None when the record has no `stylized` field."""
  stylized = record.get(FIELD)
  if stylized is None:
    return None
  phrases = stylized.get("phrase")
  spans = "phrase_start" in stylized
  out = []
  for j, (style, caption) in enumerate(zip(stylized["style"], stylized["caption"])):
    caption = as_str(caption)
    phrase = as_str(phrases[j]) if phrases is not None and len(phrases) > j else ""
    content = None
    if phrase and spans:
      words = caption.split()
      start, end = int(stylized["phrase_start"][j]), int(stylized["phrase_end"][j])
      content = " ".join(words[:start] + words[end:])
    out.append(StylizedCaption(as_str(style), caption, phrase, content))
  return out


def captions(record: Mapping[str, Any], style: str) -> list[str]:
  """The record's stylized captions of `style` (a record without the field has none)."""
  return [entry.caption for entry in entries(record) or () if entry.style == style]


def styles(record: Mapping[str, Any]) -> set[str]:
  """The styles of the record's stylized captions."""
  return {entry.style for entry in entries(record) or ()}
