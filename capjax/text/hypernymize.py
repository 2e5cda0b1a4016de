"""Hypernymization (Knowl 3): drop counts, dates, places and proper-noun modifiers; entities -> hypernyms.

"Harrison Ford and Calista Flockhart attend the premiere at Hollywood" -> "actors attend the premiere".
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import Any

from capjax.text import resources
from capjax.text.annotate import Annotation, Annotator, Span, is_temporal_word, is_word
from capjax.text.config import HypernymConfig
from capjax.text.filters import Reason
from capjax.text.resolvers import (
    LITERAL, PERSON, PLACE, THING, Concept, EntityResolver, Kinds, MakeResolver, default_resolver)

_YEAR = re.compile(r"^(?:1[5-9]\d\d|20\d\d)$|^(?:1[5-9]|20)\d0'?s$|^'\d0s$")
_DAY = re.compile(r"^(?:[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?$", re.IGNORECASE)
_NUMERIC_PREFIX = re.compile(r"^\d[\d,.]*-(?=[a-zA-Z])")
_PARTS_OF_DAY = frozenset({"morning", "afternoon", "evening", "night"})
_COORDINATORS = frozenset({"and", "&"})
_DROPPED_PUNCT = frozenset({"``", "''", '"', "(", ")", "[", "]", "{", "}", "*", "|"})
_SENTENCE_END = frozenset({".", "!", "?"})
_DANGLING = frozenset({"a", "an", "the", "and", "or", "but", "&", "of", "with", "from", "by", "to", "'s"})
_NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
_DETERMINER_TAGS = frozenset({"DT", "PRP$", "POS"})
_MODEL_TOKEN = re.compile(r"^(?:[A-Z]{1,2}|[A-Za-z]*\d[\w-]*)$")  # "S", "X5", "A319", "5D": ends a product name
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th)$", re.IGNORECASE)
_TIME_UNITS = frozenset(
    "second seconds minute minutes hour hours day days night nights week weeks weekend weekends month months "
    "year years decade decades century centuries".split())
# Counts that make "for <count> <unit>" a duration to drop. The released captions keep "for a week" and have no
# "for two hours": the paper dropped counted durations only.
_DURATION_COUNTS = frozenset("few several many couple".split())
# Nouns a title of a work follows: "the premiere of 'Hollywood Homicide'", "the film Jaws", "the cover of Vogue".
_WORK_NOUNS = frozenset(
    "premiere premieres screening screenings cover covers poster posters trailer launch release episode season "
    "book books film films movie movies album albums song songs single show novel play musical soundtrack "
    "copy copies edition performance production opera ballet series painting exhibition".split())
_VENUE_PREPOSITIONS = frozenset({"from"})  # beside `place_prepositions`: "from the Taj Mahal Hotel"


@dataclasses.dataclass(frozen=True)
class Hypernymized:
  """The caption in CC3M form (lowercased, tokenized) with the concepts it resolved, or why there is none."""

  caption: str | None
  concepts: tuple[str, ...]
  reason: Reason | None
  unresolved: str | None = None  # the name no resolver knew, when reason is UNRESOLVED_ENTITY


@dataclasses.dataclass
class _Piece:
  words: tuple[str, ...]
  tag: str
  source: int  # index of the first original token it comes from
  concept: Concept | None = None
  plural: bool = False


@functools.cache
def _inflect() -> Any:
  import inflect

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
    if (tokens[i].isdigit() and _YEAR.match(tokens[i]) and i > 0 and penn[i - 1] in _DETERMINER_TAGS
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
    self.makes = MakeResolver(resources.entity_table("makes.tsv"), self.kinds)
    self.first_names = resources.first_names()
    self.nationalities = frozenset(n.lower() for n in resources.gazetteer("nationalities.txt"))
    self.us_states = frozenset(n.lower() for n in resources.gazetteer("usstates.txt"))
    self.place_prepositions = frozenset(config.place_prepositions)
    self.venue_prepositions = self.place_prepositions | _VENUE_PREPOSITIONS
    self.drop_places = frozenset(config.drop_place_concepts)
    self.temporal_prepositions = frozenset(config.temporal_prepositions)

  def __call__(self, a: Annotation) -> Hypernymized:
    result, dropped_venue = self._hypernymize(a, drop_venues=self.config.drop_venue_phrases)
    # A venue phrase that was the sentence's object: dropping it left a fragment, so its head noun stays
    # ("Jimmy Barnes performs at the Sydney Entertainment Centre" -> "person performs at the centre").
    if dropped_venue and result.reason in (Reason.TOO_SHORT_AFTER_HYPERNYMIZATION, Reason.FRAGMENTED):
      result, _ = self._hypernymize(a, drop_venues=False)
    return result

  def _hypernymize(self, a: Annotation, drop_venues: bool) -> tuple[Hypernymized, bool]:
    tokens, penn = a.tokens, a.penn
    dropped: set[int] = set()
    for span in temporal_spans(tokens, penn, self.temporal_prepositions):
      dropped.update(range(span.start, span.end))
    dropped |= self._durations(tokens, penn, dropped)
    dropped |= self._titles(tokens, penn, a.entities, dropped)
    spans = self._split_nationalities(
        tokens, [s for s in a.entities if not dropped.intersection(range(s.start, s.end))])
    dropped |= self._editions(tokens, penn, spans, dropped)
    concepts = {s: self.resolver.resolve(tokens[s.start:s.end]) for s in spans}
    concepts = self._in_context(tokens, penn, spans, concepts)
    spans, concepts, kept_cities = self._merge_city_state(tokens, spans, concepts)
    if self.config.share_role_in_coordination:
      concepts = self._share_roles(tokens, spans, concepts)
    places, dropped_venue = self._place_phrases(tokens, spans, concepts, kept_cities, drop_venues)
    dropped |= places
    dropped |= self._nationalities(tokens, spans, concepts, dropped)
    dropped |= self._modifiers(tokens, penn, spans, concepts, dropped)
    dropped |= self._counts(tokens, penn, dropped)
    appositions, named = self._appositions(tokens, penn, spans, concepts, dropped)
    dropped |= {i for s in appositions for i in range(s.start, s.end)} | named

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
        if i in occupations:
          pieces.append(_Piece((token,), "NN", i, Concept(token.lower(), PERSON)))
        else:
          pieces.append(_Piece((token,), penn[i], i, None))
        i += 1
        continue
      concept = concepts[span]
      if concept is None:
        if self.config.discard_unresolved:
          name = " ".join(tokens[span.start:span.end])
          return Hypernymized(None, (), Reason.UNRESOLVED_ENTITY, unresolved=name), dropped_venue
        concept = Concept(" ".join(tokens[span.start:span.end]).lower(), LITERAL)
      if concept.kind == LITERAL:
        words = tuple(tokens[span.start:span.end])
      else:
        words = tuple((pluralize(concept.name) if concept.plural else concept.name).split(" "))
      if span in kept_cities and not (pieces and pieces[-1].words[-1].lower() in ("a", "an", "the")):
        words = (indefinite_article(words[0]), *words)
      pieces.append(_Piece(words, "NNP" if concept.kind == LITERAL else ("NNS" if concept.plural else "NN"), i,
                           concept))
      i = span.end

    pieces = _merge_coordinations(pieces)
    pieces = _repair_articles(pieces, tokens)
    pieces = _repair_punctuation(pieces, self.config.keep_final_period)
    return self._finish(pieces), dropped_venue

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

  def _durations(self, tokens: Sequence[str], penn: Sequence[str], dropped: set[int]) -> set[int]:
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

  def _titles(
      self, tokens: Sequence[str], penn: Sequence[str], entities: Sequence[Span], dropped: set[int]
  ) -> set[int]:
    """Titles of works go with their "of": quoted and capitalized ("the premiere of 'Hollywood Homicide'",
    "their album "Blue Skies"") or a name right after a work noun ("a screening of Finding Nemo")."""
    out: set[int] = set()
    n = len(tokens)
    starts = _sentence_start_indices(tokens)
    i = 0
    while i < n:
      close = {"``": "''", "'": "'", "‘": "’", "“": "”"}.get(tokens[i])
      if close is None or i in starts or i + 1 >= n or not tokens[i + 1][:1].isupper() or i + 1 in starts:
        i += 1
        continue
      end = next((k for k in range(i + 2, min(n, i + 12)) if tokens[k] == close), None)
      if end is None or any(t in (".", "!", "?") for t in tokens[i + 1:end]):
        i += 1
        continue
      start = i
      if i >= 2 and tokens[i - 1].lower() == "of" and penn[i - 2] in ("NN", "NNS"):
        start = i - 1
      out.update(range(start, end + 1))
      i = end + 1
    for span in entities:
      prev = span.start - 1
      if prev >= 1 and tokens[prev].lower() == "of" and tokens[prev - 1].lower() in _WORK_NOUNS:
        out.update(range(prev, span.end))
      elif prev >= 0 and tokens[prev].lower() in _WORK_NOUNS and tokens[prev].islower():
        out.update(range(span.start, span.end))
    return out - dropped

  def _split_nationalities(self, tokens: Sequence[str], spans: list[Span]) -> list[Span]:
    """ "French President Emmanuel Macron": the nationality is its own span when the rest names a person."""
    out: list[Span] = []
    for span in spans:
      if len(span) > 1 and tokens[span.start].lower() in self.nationalities:
        rest = self.resolver.resolve(tokens[span.start + 1:span.end])
        if rest is not None and rest.kind == PERSON:
          out += [Span(span.start, span.start + 1), Span(span.start + 1, span.end)]
          continue
      out.append(span)
    return out

  def _editions(self, tokens: Sequence[str], penn: Sequence[str], spans: list[Span], dropped: set[int]) -> set[int]:
    """ "the 29th American Film Festival" -> "festival": an edition number before a name goes with its article
    (the paper's "at festival"). Before a common noun it stays, as in the released captions ("her 80th
    birthday", "a 19th century coffee machine")."""
    out: set[int] = set()
    named = {s.start for s in spans}
    for i, token in enumerate(tokens):
      if i in dropped or not _ORDINAL.match(token):
        continue
      end = i + 1
      if end < len(tokens) and tokens[end].lower() == "annual":
        end += 1
      if end in named:
        out.update(range(i - (i > 0 and tokens[i - 1].lower() == "the"), end))
    return out

  def _in_context(
      self, tokens: Sequence[str], penn: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None]
  ) -> dict[Span, Concept | None]:
    """What the words around a name say: "a Ferrari" is a car; "Sydney" is a city only beside a preposition
    or a place noun ("in Sydney", "Sydney harbour"), a person otherwise ("Sydney and her sister")."""
    out = dict(concepts)
    for span in spans:
      words = tokens[span.start:span.end]
      concept = concepts[span]
      before = span.start - 1
      if before >= 0 and tokens[before].lower() == "the":
        before -= 1
      if span.start > 0 and tokens[span.start - 1].lower() in ("a", "an"):
        product = self.makes.product(words)
        if product is not None and product[1] == len(words):
          out[span] = Concept(product[0], THING)
          continue
      if len(words) == 1 and words[0] in self.first_names and concept is not None and concept.kind == PLACE:
        after = tokens[span.end].lower() if span.end < len(tokens) else ""
        beside_place = (before >= 0 and (penn[before] in ("IN", "TO") or tokens[before] in (",", "("))) or (
            after.isalpha() and self.annotator.is_common_noun(after) and self.kinds.is_venue_noun(after)) or (
            span.end < len(tokens) and tokens[span.end] == ",")
        if not beside_place:
          out[span] = Concept("person", PERSON)
    return out

  def _merge_city_state(
      self, tokens: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None]
  ) -> tuple[list[Span], dict[Span, Concept | None], set[Span]]:
    """A name followed by ", <state/country>" is one place ("Franklin, Tennessee"): a city unless it is another place.

    A US "City, State" is one Knowledge Graph entity and is kept as "a city" (the paper's "performs at the
    festival in a city"); "Balakot, Pakistan" and "Deauville, France" are dropped with their preposition.
    """
    out: list[Span] = []
    merged = dict(concepts)
    kept: set[Span] = set()
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
          if " ".join(tokens[nxt.start:nxt.end]).lower() in self.us_states and merged[whole].name == "city":
            kept.add(whole)
          out.append(whole)
          i += 2
          continue
      out.append(span)
      i += 1
    return out, merged, kept

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
      self, tokens: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None], kept: set[Span],
      drop_venues: bool,
  ) -> tuple[set[int], bool]:
    """ "in Franklin, Tennessee", "at Hollywood", "in London and Paris": preposition + places, dropped; with
    `drop_venues`, named venues too ("from the Taj Mahal Hotel", "at the Sydney Entertainment Centre")."""
    dropped: set[int] = set()
    dropped_venue = False

    def is_place(s: Span) -> bool:
      c = concepts.get(s)
      return c is not None and c.kind == PLACE and c.name in self.drop_places and s not in kept

    def is_venue(s: Span) -> bool:
      c = concepts.get(s)
      return (drop_venues and c is not None and c.kind != LITERAL and c.name not in self.drop_places
              and self.annotator.is_common_noun(c.name.split(" ")[-1]) and self.kinds.is_venue_noun(c.name))

    by_start = {s.start: s for s in spans}
    for span in spans:
      place, venue = is_place(span), not is_place(span) and is_venue(span)
      if not (place or venue) or span.start in dropped:
        continue
      start = span.start - 1
      if start >= 0 and tokens[start].lower() == "the":
        start -= 1
      prepositions = self.place_prepositions if place else self.venue_prepositions
      if start < 0 or tokens[start].lower() not in prepositions:
        continue
      end = span.end
      while end + 1 < len(tokens):
        if tokens[end].lower() in (",", "and", "&", "or", "(") and end + 1 in by_start and is_place(by_start[end + 1]):
          end = by_start[end + 1].end + (tokens[end] == "(" and by_start[end + 1].end < len(tokens)
                                         and tokens[by_start[end + 1].end] == ")")
        else:
          break
      dropped.update(range(start, end))
      dropped_venue |= venue
    return dropped, dropped_venue

  def _nationalities(
      self, tokens: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None], dropped: set[int]
  ) -> set[int]:
    """ "A Pakistani worker" -> "a worker", "British actor Hugh Jackman" -> "actor": a nationality before a
    person or an occupation goes, whatever the tagger made of it ("a Japanese garden" keeps it)."""
    out: set[int] = set()
    by_start = {s.start: s for s in spans}
    for i, token in enumerate(tokens):
      if i in dropped or not token[:1].isupper() or token.lower() not in self.nationalities:
        continue
      span = by_start.get(i)
      if span is not None and len(span) != 1:
        continue
      nxt = i + 1
      while nxt < len(tokens) and nxt in dropped:
        nxt += 1
      if nxt >= len(tokens):
        continue
      following = by_start.get(nxt)
      if following is not None:
        person = concepts.get(following) is not None and concepts[following].kind == PERSON
      else:
        person = tokens[nxt].isalpha() and self.kinds.is_person_noun(tokens[nxt])
      if person:
        out.add(i)
    return out

  def _modifiers(
      self, tokens: Sequence[str], penn: Sequence[str], spans: list[Span], concepts: dict[Span, Concept | None],
      dropped: set[int],
  ) -> set[int]:
    """Proper-noun runs right before a common noun modify it: "British Airways Airbus A319 aircraft"."""
    out: set[int] = set()
    has_verb = any(tag.startswith("VB") or tag == "MD" for tag in penn)
    for span in spans:
      concept = concepts.get(span)
      # A one-word name kept as written stays ("a Christmas tree"); "United Nations building" loses its name.
      if concept is not None and concept.kind == LITERAL and len(span) == 1:
        continue
      nxt = span.end
      while nxt < len(tokens) and nxt in dropped:
        nxt += 1
      if nxt >= len(tokens) or penn[nxt] not in ("NN", "NNS") or not tokens[nxt][:1].islower():
        continue
      # The tagger often reads the verb after a name as a noun ("Taylor Swift performs on stage", "A Tesla
      # Model S charges at the station"): a verb-able word in a sentence with no other verb, not after a
      # determiner unless a preposition follows it, is taken as the verb.
      after_determiner = span.start > 0 and penn[span.start - 1] in _DETERMINER_TAGS
      product = _MODEL_TOKEN.match(tokens[span.end - 1]) is not None and len(span) > 1
      then_preposition = product and nxt + 1 < len(tokens) and penn[nxt + 1] in ("IN", "TO", "RP")
      if not has_verb and (not after_determiner or then_preposition) and self.annotator.has_pos(
          tokens[nxt].lower(), "VERB"):
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
  ) -> tuple[list[Span], set[int]]:
    """An occupation noun right before a person's name, whatever its tag: "Musician Justin Timberlake",
    "the actor Harrison Ford" -> the occupation. After a preposition a bare occupation goes and the name
    speaks for itself when it resolves (the paper's "sculptures by artist Duncan McKellar" -> "by person").

    Returns the names replaced by their occupation, and the occupation tokens dropped.
    """
    out: list[Span] = []
    named: set[int] = set()
    first_word = next((i for i, t in enumerate(tokens) if is_word(t) and i not in dropped), -1)
    for span in spans:
      prev = span.start - 1
      concept = concepts.get(span)
      # Lowercase, or the sentence's first word (then any tag: "Musician/JJ Justin Timberlake").
      if not (prev >= 0 and prev not in dropped and span.start not in dropped and tokens[prev].isalpha()
              and (prev == first_word or (tokens[prev].islower() and penn[prev] not in ("IN", "DT")))
              and (concept is None or concept.kind == PERSON) and self.kinds.is_person_noun(tokens[prev])):
        continue
      before = prev - 1
      while before >= 0 and before in dropped:
        before -= 1
      if concept is not None and before >= 0 and penn[before] == "IN" and tokens[prev].islower():
        named.add(prev)
      else:
        out.append(span)
    return out, named


def _sentence_start_indices(tokens: Sequence[str]) -> set[int]:
  """Indices of the first token of each sentence (after ".", "!", "?", ":" and at 0)."""
  return {0} | {i + 1 for i, t in enumerate(tokens) if t in (".", "!", "?", ":", "-", "--", "|")}


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
