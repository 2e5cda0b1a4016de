"""Cleaning of LLaVA-style recaptions (CC12M LLaVA-NeXT): the dataset card's failures, loops and preambles.

`clean_recaption(text)` cuts repeated suffix loops and "The image shows ..." preambles and flags failures.
"""

from __future__ import annotations

import dataclasses
import re

from capjax.text.annotate import normalize_text

# The failure modes the CC12M LLaVA-NeXT dataset card lists, as phrases in the caption.
FAILURE_PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in (
        ("mentions_no_text", r"\bno (?:visible |legible |readable |discernible |other )?text\b"
                             r"|\btext is not (?:visible|present|legible)\b"),
        ("mentions_other_objects", r"\bother objects\b"),
        ("mentions_additional_objects", r"\badditional objects\b"),
        ("mentions_no_objects", r"\bno (?:other |additional |visible |discernible )?objects\b"),
        ("mentions_alt_text", r"\balt[\s\-_]?text\b"),
    )
}
# Preambles that say nothing about the image, cut at the start (the rest is capitalized).
PREFIX = re.compile(
    r"^(?:"
    r"(?:in )?(?:this|the) (?:image|picture|photo(?:graph)?|illustration|scene|artwork|drawing|painting)"
    r"(?: appears to| seems to)?(?: (?:shows|show|depicts|depict|features|feature|displays|display|captures|capture|"
    r"presents|present|showcases|showcase|portrays|portray|illustrates|illustrate|contains|contain|is of|is))?"
    r"(?:,? we (?:can )?see|,? there (?:is|are))?"
    r"|(?:this|it) is an? (?:image|picture|photo(?:graph)?|illustration) (?:of|showing|depicting)"
    r"|(?:the )?image (?:shows|depicts)"
    r")[\s,:]+",
    re.IGNORECASE,
)
PLACEHOLDER = re.compile(r"^\s*an? (?:image|picture|photo)\s*\.?\s*$", re.IGNORECASE)
_WORD = re.compile(r"\S+")


@dataclasses.dataclass(frozen=True)
class Recaption:
  """A cleaned recaption, the repairs made and the failures found (any failure: do not train on it)."""

  text: str
  repairs: tuple[str, ...]
  failures: tuple[str, ...]

  @property
  def ok(self) -> bool:
    return not self.failures


def cut_repeated_suffix(text: str, min_repeats: int = 2, min_unit_words: int = 3, max_unit_words: int = 60) -> str:
  """Keeps one copy of a word sequence repeated back to back at the end, and drops a trailing partial copy.

  "... The bus is parked. The bus is parked. The bus is" -> "... The bus is parked." Units of 1-2 words
  need `min_repeats + 1` copies, so that "very very" or "bye bye" stay.
  """
  words = _WORD.findall(text)
  norm = [_normal(w) for w in words]
  n = len(words)
  best_cut = n
  for unit in range(1, min(max_unit_words, n // 2) + 1):
    needed = min_repeats if unit >= min_unit_words else min_repeats + 1
    for tail in range(unit):
      end = n - tail
      if end - unit < 0 or norm[end:] != norm[end - unit:end - unit + tail]:
        continue
      copies = 1
      while end - 2 * unit >= 0 and norm[end - unit:end] == norm[end - 2 * unit:end - unit]:
        copies += 1
        end -= unit
      if copies >= needed:
        best_cut = min(best_cut, end)
  if best_cut == n:
    return text
  return " ".join(words[:best_cut]).rstrip(" ,;:-")


def _normal(word: str) -> str:
  return word.lower().strip(".,;:!")


def has_repeated_sequence(text: str, ngram: int = 6, min_count: int = 3) -> bool:
  """True when any `ngram`-word sequence occurs `min_count` times or more, anywhere (a loop left inside)."""
  words = [_normal(w) for w in _WORD.findall(text)]
  seen: dict[tuple[str, ...], int] = {}
  for i in range(len(words) - ngram + 1):
    key = tuple(words[i:i + ngram])
    seen[key] = seen.get(key, 0) + 1
    if seen[key] >= min_count:
      return True
  return False


def trim_prefix(text: str) -> str:
  """ "The image shows a red bus on a street." -> "A red bus on a street." """
  trimmed = PREFIX.sub("", text, count=1)
  if trimmed == text or not trimmed:
    return text
  return trimmed[0].upper() + trimmed[1:]


def is_placeholder(text: str) -> bool:
  """The "An image" placeholder some rows hold instead of a caption."""
  return bool(PLACEHOLDER.match(text))


def detect_failures(text: str) -> tuple[str, ...]:
  """Names of the dataset card's failure modes present in `text`."""
  found = [name for name, pattern in FAILURE_PATTERNS.items() if pattern.search(text)]
  if has_repeated_sequence(text):
    found.append("repeated_sequence")
  return tuple(found)


def clean_recaption(text: str) -> Recaption:
  """Normalizes, cuts a repeated suffix loop, trims a preamble, then flags what is still wrong."""
  repairs = []
  cleaned = normalize_text(text)
  if is_placeholder(cleaned):
    return Recaption(cleaned, (), ("placeholder",))
  cut = cut_repeated_suffix(cleaned)
  if cut != cleaned:
    repairs.append("cut_repeated_suffix")
  trimmed = trim_prefix(cut)
  if trimmed != cut:
    repairs.append("trimmed_prefix")
  failures = detect_failures(trimmed)
  if not trimmed:
    failures = (*failures, "empty")
  return Recaption(trimmed, tuple(repairs), failures)
