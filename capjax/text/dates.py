"""Date and duration detection for hypernymization: which tokens say when ("on September 23, 2017", "in the
1950s", "on Monday afternoon", "for two hours"), so that the hypernymizer can drop them with their preposition."""

from __future__ import annotations

import re
from collections.abc import Sequence

from capjax.text.annotate import DETERMINER_TAGS, SENTENCE_END, Span, is_temporal_word, is_word

_YEAR = re.compile(r"^(?:1[5-9]\d\d|20\d\d)$|^(?:1[5-9]|20)\d0'?s$|^'\d0s$")
_DAY = re.compile(r"^(?:[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?$", re.IGNORECASE)
_PARTS_OF_DAY = frozenset({"morning", "afternoon", "evening", "night"})
_TIME_UNITS = frozenset(
    "second seconds minute minutes hour hours day days night nights week weeks weekend weekends month months "
    "year years decade decades century centuries".split())
# Counts that make "for <count> <unit>" a duration to drop. The released captions keep "for a week" and have no
# "for two hours": the paper dropped counted durations only.
_DURATION_COUNTS = frozenset("few several many couple".split())


def temporal_spans(tokens: Sequence[str], penn: Sequence[str], prepositions: frozenset[str]) -> list[Span]:
  """Date expressions with their preposition: "on September 23, 2017", "in 2017", "on Monday afternoon"."""

  def anchor(i: int) -> bool:
    return is_temporal_word(tokens[i], penn[i]) or bool(_YEAR.match(tokens[i]))

  def datelike(i: int) -> bool:
    return anchor(i) or bool(_DAY.match(tokens[i]))

  spans: list[Span] = []
  n, i = len(tokens), 0
  while i < n:
    if not anchor(i):
      i += 1
      continue
    start, end = i, i + 1
    # A lone year modifying a noun ("the 2017 festival", "a 2018 Toyota Camry") goes alone: the article stays.
    # Not a decade: "during the 1950s boats were ..." reads the decade as the object.
    if (tokens[i].isdigit() and _YEAR.match(tokens[i]) and i > 0 and penn[i - 1] in DETERMINER_TAGS
        and i + 1 < n and is_word(tokens[i + 1]) and penn[i + 1] not in ("IN", "TO", "CC", "CD")
        and not datelike(i + 1) and not datelike(i - 1)):
      spans.append(Span(i, i + 1))
      i += 1
      continue
    while start > 0 and (datelike(start - 1) or (tokens[start - 1].lower() in ("of", "the") and start > 1
                                                   and datelike(start - 2))):
      start -= 1
    if start > 0 and tokens[start - 1].lower() == "the":
      start -= 1
    while end < n:
      if datelike(end) or tokens[end].lower() in _PARTS_OF_DAY:
        end += 1
      elif tokens[end] in (",", "of") and end + 1 < n and datelike(end + 1):
        end += 2
      else:
        break
    if start > 0 and tokens[start - 1].lower() in prepositions:
      start -= 1
    elif start > 0 and tokens[start - 1] == "," and (end == n or tokens[end] in SENTENCE_END):
      start -= 1
    spans.append(Span(start, end))
    i = end
  return spans


def counted_durations(tokens: Sequence[str], penn: Sequence[str], dropped: set[int]) -> set[int]:
  """ "for two hours", "for 3 weeks", "for a few days": a counted duration says nothing the picture shows."""
  out: set[int] = set()
  n = len(tokens)
  for i in range(n - 2):
    if tokens[i].lower() != "for" or i in dropped:
      continue
    j = i + 1
    while j < n and j - i <= 3 and (penn[j] == "CD" or tokens[j].lower() in _DURATION_COUNTS):
      j += 1
    if j > i + 1 and j < n and tokens[j].lower() in _TIME_UNITS:
      out.update(range(i, j + 1))
  return out
