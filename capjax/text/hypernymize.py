"""Hypernymization (Knowl 3): drop counts, dates, places and proper-noun modifiers; entities -> hypernyms.

"Harrison Ford and Calista Flockhart attend the premiere at Hollywood" -> "actors attend the premiere".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from capjax.text import resources
from capjax.text.annotate import Annotation, Annotator, Span, is_temporal_word, is_word
from capjax.text.config import HypernymConfig
from capjax.text.filters import Reason
from capjax.text.resolvers import LITERAL, PERSON, PLACE, Concept, EntityResolver, Kinds, default_resolver

_YEAR = re.compile(r"^(?:1[5-9]\d\d|20\d\d)$|^(?:1[5-9]|20)\d0'?s$|^'\d0s$")
_DAY = re.compile(r"^(?:[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?$", re.IGNORECASE)
_NUMERIC_PREFIX = re.compile(r"^\d[\d,.]*-(?=[a-zA-Z])")
_PARTS_OF_DAY = frozenset({"morning", "afternoon", "evening", "night"})
_COORDINATORS = frozenset({"and", "&"})
_DROPPED_PUNCT = frozenset({"``", "''", '"', "(", ")", "[", "]", "{", "}", "*", "|"})
_SENTENCE_END = frozenset({".", "!", "?"})
_DANGLING = frozenset({"a", "an", "the", "and", "or", "but", "&", "of", "with", "from", "by", "to", "'s"})
_NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
_IRREGULAR_PLURALS = {
    "person": "people", "man": "men", "woman": "women", "child": "children", "foot": "feet", "tooth": "teeth",
    "mouse": "mice", "goose": "geese", "ox": "oxen", "wife": "wives", "life": "lives", "knife": "knives",
    "thief": "thieves", "leaf": "leaves", "wolf": "wolves", "calf": "calves", "half": "halves",
}
_AN_EXCEPTIONS = ("hour", "honest", "honor", "honour", "heir")
_A_EXCEPTIONS = ("uni", "use", "usu", "uti", "eu", "one", "once", "ur", "ewe")


@dataclasses.dataclass(frozen=True)
class Hypernymized:
  """The caption in CC3M form (lowercased, tokenized) with the concepts it resolved, or why there is none."""

  caption: str | None
  concepts: tuple[str, ...]
  reason: Reason | None


@dataclasses.dataclass
class _Piece:
  words: tuple[str, ...]
  tag: str
  source: int  # index of the first original token it comes from
  concept: Concept | None = None
  plural: bool = False


def pluralize(noun: str) -> str:
  """English plural of a (possibly multi-word) noun: "actor" -> "actors", "person" -> "people"."""
  *head, last = noun.split(" ")
  if last in _IRREGULAR_PLURALS:
    plural = _IRREGULAR_PLURALS[last]
  elif last.endswith("man") and last not in ("human", "german", "roman", "shaman"):
    plural = last[:-3] + "men"
  elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
    plural = last[:-1] + "ies"
  elif last.endswith(("s", "x", "z", "ch", "sh")):
    plural = last + "es"
  else:
    plural = last + "s"
  return " ".join([*head, plural])


def indefinite_article(word: str) -> str:
  """ "a" or "an" by the sound of the next word (spelling heuristics with the common exceptions)."""
  lower = word.lower()
  if lower.startswith(_AN_EXCEPTIONS):
    return "an"
  if lower.startswith(_A_EXCEPTIONS):
    return "a"
  return "an" if lower[:1] in "aeiou" else "a"


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
    elif start > 0 and tokens[start - 1] == "," and (end == n or tokens[end] in _SENTENCE_END):
      start -= 1
    spans.append(Span(start, end))
    i = end
  return spans


class Hypernymizer:
  """Turns an annotated alt-text into a CC3M-style caption; one instance per process (it holds caches)."""

  def __init__(self, config: HypernymConfig, annotator: Annotator, resolver: EntityResolver | None = None):
    self.config = config
    self.annotator = annotator
    self.kinds = Kinds(annotator)
    if resolver is None:
      extra = None
      if config.entities_path:
        with open(config.entities_path, encoding="utf-8") as f:
          extra = resources.parse_entity_table(f.read().splitlines())
      resolver = default_resolver(annotator, extra, config.use_seed_entities)
    self.resolver = resolver
    self.units = resources.word_list("units.txt")
    self.place_prepositions = frozenset(config.place_prepositions)
    self.drop_places = frozenset(config.drop_place_concepts)
    self.temporal_prepositions = frozenset(config.temporal_prepositions)

  def __call__(self, a: Annotation) -> Hypernymized:
    tokens, penn = a.tokens, a.penn
    dropped: set[int] = set()
    for span in temporal_spans(tokens, penn, self.temporal_prepositions):
      dropped.update(range(span.start, span.end))
    spans = [s for s in a.entities if not dropped.intersection(range(s.start, s.end))]
    concepts = {s: self.resolver.resolve(tokens[s.start:s.end]) for s in spans}
    spans, concepts = self._merge_city_state(tokens, spans, concepts)
    if self.config.share_role_in_coordination:
      concepts = self._share_roles(tokens, spans, concepts)
    dropped |= self._place_phrases(tokens, spans, concepts)
    dropped |= self._modifiers(tokens, penn, spans, concepts, dropped)
    dropped |= self._counts(tokens, penn, dropped)
    appositions = self._appositions(tokens, penn, spans, concepts, dropped)
    dropped |= {i for s in appositions for i in range(s.start, s.end)}

    pieces: list[_Piece] = []
    starts = {s.start: s for s in spans}
    occupations = {s.start - 1 for s in appositions}
    i = 0
    while i < len(tokens):
      if i in dropped:
        i += 1
        continue
      span = starts.get(i)
      if span is None:
        token = _NUMERIC_PREFIX.sub("", tokens[i])
        concept = Concept(token.lower(), PERSON) if i in occupations else None
        pieces.append(_Piece((token,), penn[i], i, concept))
        i += 1
        continue
      concept = concepts[span]
      if concept is None:
        if self.config.discard_unresolved:
          return Hypernymized(None, (), Reason.UNRESOLVED_ENTITY)
        concept = Concept(" ".join(tokens[span.start:span.end]).lower(), LITERAL)
      words = tuple(tokens[span.start:span.end]) if concept.kind == LITERAL else tuple(concept.name.split(" "))
      pieces.append(_Piece(words, "NNP" if concept.kind == LITERAL else "NN", i, concept))
      i = span.end

    pieces = _merge_coordinations(pieces)
    pieces = _repair_articles(pieces, tokens)
    pieces = _repair_punctuation(pieces, self.config.keep_final_period)
    return self._finish(pieces)

  def _finish(self, pieces: list[_Piece]) -> Hypernymized:
    words = [w.lower() for p in pieces for w in p.words]
    resolved = tuple(dict.fromkeys(p.concept.name for p in pieces if p.concept and p.concept.kind != LITERAL))
    content = [w for w in words if is_word(w)]
    if len(content) < self.config.min_tokens:
      return Hypernymized(None, resolved, Reason.TOO_SHORT_AFTER_HYPERNYMIZATION)
    if content[0] in ("and", "or", "but", "of", "'s") or content[-1] in _DANGLING:
      return Hypernymized(None, resolved, Reason.FRAGMENTED)
    if not any(p.tag in _NOUN_TAGS for p in pieces):
      return Hypernymized(None, resolved, Reason.FRAGMENTED)
    return Hypernymized(" ".join(words), resolved, None)

  def _merge_city_state(
      self, tokens: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None]
  ) -> tuple[list[Span], dict[Span, Concept | None]]:
    """A name followed by ", <state/country>" is one place ("Franklin, Tennessee"): a city unless it is another place."""
    out: list[Span] = []
    merged = dict(concepts)
    i = 0
    while i < len(spans):
      span = spans[i]
      if i + 1 < len(spans):
        nxt = spans[i + 1]
        region = concepts.get(nxt)
        if (nxt.start == span.end + 1 and tokens[span.end] == "," and region is not None
            and region.name in ("state", "country", "province", "county")):
          first = concepts.get(span)
          whole = Span(span.start, nxt.end)
          merged[whole] = first if first is not None and first.kind == PLACE else Concept("city", PLACE)
          out.append(whole)
          i += 2
          continue
      out.append(span)
      i += 1
    return out, merged

  def _share_roles(
      self, tokens: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None]
  ) -> dict[Span, Concept | None]:
    """In "X and Y", a person or unknown conjunct takes the one role named for the others."""
    out = dict(concepts)
    for group in _coordinated_groups(tokens, spans):
      known = [concepts[s] for s in group if concepts[s] is not None]
      if not known or any(c.kind != PERSON for c in known):
        continue
      roles = {c.name for c in known if c.name != "person"}
      role = Concept(roles.pop(), PERSON) if len(roles) == 1 else Concept("person", PERSON)
      for s in group:
        if concepts[s] is None or concepts[s].name == "person":
          out[s] = role
    return out

  def _place_phrases(
      self, tokens: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None]
  ) -> set[int]:
    """ "in Franklin, Tennessee", "at Hollywood", "in London and Paris": preposition + places, dropped."""
    dropped: set[int] = set()

    def is_place(s: Span) -> bool:
      c = concepts.get(s)
      return c is not None and c.kind == PLACE and c.name in self.drop_places

    by_start = {s.start: s for s in spans}
    for span in spans:
      if not is_place(span) or span.start in dropped:
        continue
      start = span.start - 1
      if start >= 0 and tokens[start].lower() == "the":
        start -= 1
      if start < 0 or tokens[start].lower() not in self.place_prepositions:
        continue
      end = span.end
      while end + 1 < len(tokens):
        if tokens[end].lower() in (",", "and", "&", "or", "(") and end + 1 in by_start and is_place(by_start[end + 1]):
          end = by_start[end + 1].end + (tokens[end] == "(" and by_start[end + 1].end < len(tokens)
                                         and tokens[by_start[end + 1].end] == ")")
        else:
          break
      dropped.update(range(start, end))
    return dropped

  def _modifiers(
      self, tokens: Sequence[str], penn: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None],
      dropped: set[int],
  ) -> set[int]:
    """Proper-noun runs right before a common noun modify it: "British Airways Airbus A319 aircraft"."""
    out: set[int] = set()
    has_verb = any(tag.startswith("VB") or tag == "MD" for tag in penn)
    for span in spans:
      concept = concepts.get(span)
      if concept is not None and concept.kind == LITERAL:
        continue
      nxt = span.end
      while nxt < len(tokens) and nxt in dropped:
        nxt += 1
      if nxt >= len(tokens) or penn[nxt] not in ("NN", "NNS") or not tokens[nxt][:1].islower():
        continue
      # The tagger often reads the verb after a name as a noun ("Taylor Swift performs on stage"): a
      # verb-able word in a sentence with no other verb, not after a determiner, is taken as the verb.
      after_determiner = span.start > 0 and penn[span.start - 1] in ("DT", "PRP$", "POS")
      if not has_verb and not after_determiner and self.annotator.has_pos(tokens[nxt].lower(), "VERB"):
        continue
      out.update(range(span.start, span.end))
    return out

  def _counts(self, tokens: Sequence[str], penn: Sequence[str], dropped: set[int]) -> set[int]:
    """ "Two dogs" -> "dogs"; "a 500 ml bottle" -> "a bottle"; "2 kg of rice" -> "rice"."""
    out: set[int] = set()
    n = len(tokens)
    for i, tag in enumerate(penn):
      if tag != "CD" or i in dropped:
        continue
      nxt = i + 1
      if nxt < n and tokens[nxt].lower() in self.units:
        out.update((i, nxt))
        if nxt + 1 < n and tokens[nxt + 1].lower() == "of":
          out.add(nxt + 1)
      elif nxt < n and penn[nxt] in ("NN", "NNS", "JJ", "JJR", "JJS", "VBG", "VBN"):
        out.add(i)
    return out

  def _appositions(
      self, tokens: Sequence[str], penn: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None],
      dropped: set[int],
  ) -> list[Span]:
    """ "actor Harrison Ford" -> "actor": a person named right after the occupation that names them."""
    out = []
    first_word = next((i for i, t in enumerate(tokens) if is_word(t)), -1)
    for span in spans:
      prev = span.start - 1
      concept = concepts.get(span)
      if (prev >= 0 and prev not in dropped and span.start not in dropped and penn[prev] in ("NN", "NNP")
          and tokens[prev].isalpha() and (tokens[prev].islower() or prev == first_word)
          and (concept is None or concept.kind == PERSON) and self.kinds.is_person_noun(tokens[prev])):
        out.append(span)
    return out


def _coordinated_groups(tokens: Sequence[str], spans: list[Span]) -> list[list[Span]]:
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


def _merge_coordinations(pieces: list[_Piece]) -> list[_Piece]:
  """ "actor and actor" -> "actors"; "city , city and city" -> "cities" (the last joint must be and/&)."""
  out: list[_Piece] = []
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
    out.append(_Piece(tuple(pluralize(concept.name).split(" ")), "NNS", pieces[i].source, concept, plural=True))
    i = last + 1
  return out


def _repair_articles(pieces: list[_Piece], tokens: Sequence[str]) -> list[_Piece]:
  """ "A aircraft" -> "an aircraft"; "a actors" -> "actors"; only where something after the article changed."""
  out: list[_Piece] = []
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


def _repair_punctuation(pieces: list[_Piece], keep_final_period: bool) -> list[_Piece]:
  """Drops quotes and brackets, doubled or leading punctuation and punctuation left dangling before the end."""
  out: list[_Piece] = []
  for piece in pieces:
    word = piece.words[0]
    if word in _DROPPED_PUNCT:
      continue
    if not is_word(word) and piece.concept is None:
      if not out:
        continue
      previous = out[-1].words[-1]
      if not is_word(previous):
        if word in _SENTENCE_END and previous not in _SENTENCE_END:
          out[-1] = piece
        continue
    out.append(piece)
  while out and not is_word(out[-1].words[-1]) and out[-1].words[-1] not in _SENTENCE_END:
    out.pop()
  if out and not keep_final_period and out[-1].words[-1] in _SENTENCE_END:
    out.pop()
  return out
