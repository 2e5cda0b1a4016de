"""Turning the kept pieces back into a CC3M-form sentence: articles, plurals, punctuation, coordinations
("actor and actor" -> "actors", "a aircraft" -> "an aircraft"); `inflect` does the English."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

from capjax.text.annotate import SENTENCE_END, Span, is_word
from capjax.text.resolvers import LITERAL, Concept

_COORDINATORS = frozenset({"and", "&"})
_DROPPED_PUNCT = frozenset({"``", "''", '"', "(", ")", "[", "]", "{", "}", "*", "|"})


@dataclasses.dataclass
class Piece:
  """Output words and the token they come from; `concept` when they stand for a resolved name."""

  words: tuple[str, ...]
  tag: str
  source: int  # index of the first original token it comes from
  concept: Concept | None = None
  plural: bool = False


@functools.cache
def _inflect() -> Any:
  import inflect  # noqa: PLC0415 (on first use: inflect loads slowly)

  return inflect.engine()


@functools.lru_cache(maxsize=1 << 12)
def pluralize(noun: str) -> str:
  """English plural of a (possibly multi-word) noun, by `inflect`: "actor" -> "actors", "person" -> "people",
  "aircraft" -> "aircraft"."""
  *head, last = noun.split(" ")
  return " ".join([*head, _inflect().plural_noun(last)])


@functools.lru_cache(maxsize=1 << 12)
def indefinite_article(word: str) -> str:
  """ "a" or "an" by the sound of the next word, by `inflect` ("an hour", "a university", "an urn")."""
  return _inflect().a(word).split(" ", 1)[0].lower()


def sentence_start_indices(tokens: Sequence[str]) -> set[int]:
  """Indices of the first token of each sentence (after ".", "!", "?", ":" and at 0)."""
  return {0} | {i + 1 for i, t in enumerate(tokens) if t in (".", "!", "?", ":", "-", "--", "|")}


def coordinated_groups(tokens: Sequence[str], spans: list[Span]) -> list[list[Span]]:
  """Spans joined by "," / "and" / "&": "A, B and C" is one group."""
  groups: list[list[Span]] = []
  current: list[Span] = []
  for span in spans:
    if current:
      gap = [t.lower() for t in tokens[current[-1].end:span.start]]
      if gap and all(t in (",", "and", "&") for t in gap) and len(gap) <= 2:
        current.append(span)
        continue
      if len(current) > 1:
        groups.append(current)
    current = [span]
  if len(current) > 1:
    groups.append(current)
  return groups


def merge_coordinations(pieces: list[Piece]) -> list[Piece]:
  """ "actor and actor" -> "actors"; "city , city and city" -> "cities" (the last joint must be and/&)."""
  out: list[Piece] = []
  i = 0
  while i < len(pieces):
    concept = pieces[i].concept
    if concept is None or concept.kind == LITERAL:
      out.append(pieces[i])
      i += 1
      continue
    members, joints = [i], []
    while True:
      k, joint = members[-1] + 1, []
      while k < len(pieces) and len(joint) < 2 and pieces[k].words[0].lower() in (",", "and", "&"):
        joint.append(pieces[k].words[0].lower())
        k += 1
      if not joint or k >= len(pieces) or pieces[k].concept != concept:
        break
      members.append(k)
      joints.append(joint)
    closing = [n for n, joint in enumerate(joints) if _COORDINATORS.intersection(joint)]
    if not closing:
      out.append(pieces[i])
      i += 1
      continue
    last = members[closing[-1] + 1]
    out.append(Piece(tuple(pluralize(concept.name).split(" ")), "NNS", pieces[i].source, concept, plural=True))
    i = last + 1
  return out


def repair_articles(pieces: list[Piece], tokens: Sequence[str]) -> list[Piece]:
  """ "A aircraft" -> "an aircraft"; "a actors" -> "actors"; only where something after the article changed."""
  out: list[Piece] = []
  for i, piece in enumerate(pieces):
    word = piece.words[0]
    if word.lower() in ("a", "an") and piece.concept is None:
      nxt = pieces[i + 1] if i + 1 < len(pieces) else None
      unchanged = nxt is not None and nxt.concept is None and nxt.source == piece.source + 1 and \
          tokens[nxt.source] == nxt.words[0]
      if unchanged:
        out.append(piece)
        continue
      if nxt is None or not is_word(nxt.words[0]) or nxt.plural or nxt.tag in ("NNS", "NNPS"):
        continue
      article = indefinite_article(nxt.words[0])
      out.append(dataclasses.replace(piece, words=(article.capitalize() if word[0].isupper() else article,)))
      continue
    out.append(piece)
  return out


def repair_punctuation(pieces: list[Piece], keep_final_period: bool) -> list[Piece]:
  """Drops quotes and brackets, doubled or leading punctuation and punctuation left dangling before the end."""
  out: list[Piece] = []
  for piece in pieces:
    word = piece.words[0]
    if word in _DROPPED_PUNCT:
      continue
    if not is_word(word) and piece.concept is None:
      if not out:
        continue
      previous = out[-1].words[-1]
      if not is_word(previous):
        if word in SENTENCE_END and previous not in SENTENCE_END:
          out[-1] = piece
        continue
    out.append(piece)
  while out and not is_word(out[-1].words[-1]) and out[-1].words[-1] not in SENTENCE_END:
    out.pop()
  if out and not keep_final_period and out[-1].words[-1] in SENTENCE_END:
    out.pop()
  return out
