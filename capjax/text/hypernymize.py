"""Hypernymization (Knowl 3): drop counts, dates, places and proper-noun modifiers; entities -> hypernyms.

"Harrison Ford and Calista Flockhart attend the premiere at Hollywood" -> "actors attend the premiere".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from capjax.text import resources
from capjax.text import lines as lines_lib
from capjax.text.annotate import DETERMINER_TAGS, Annotation, Annotator, Span, is_word
from capjax.text.config import HypernymConfig
from capjax.text.dates import counted_durations, temporal_spans
from capjax.text.filters import Reason
from capjax.text.resolvers import (
    LITERAL, PERSON, PLACE, THING, Concept, EntityResolver, Kinds, MakeResolver, default_resolver)
from capjax.text.surface import (
    Piece, coordinated_groups, indefinite_article, merge_coordinations, pluralize, repair_articles, repair_punctuation,
    sentence_start_indices)

_NUMERIC_PREFIX = re.compile(r"^\d[\d,.]*-(?=[a-zA-Z])")
_DANGLING = frozenset({"a", "an", "the", "and", "or", "but", "&", "of", "with", "from", "by", "to", "'s"})
_NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
_MODEL_TOKEN = re.compile(r"^(?:[A-Z]{1,2}|[A-Za-z]*\d[\w-]*)$")  # "S", "X5", "A319", "5D": ends a product name
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th)$", re.IGNORECASE)
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
          extra = resources.parse_entity_table(lines_lib.split_lines(f.read()))
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
    dropped |= counted_durations(tokens, penn, dropped)
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

    pieces: list[Piece] = []
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
          pieces.append(Piece((token,), "NN", i, Concept(token.lower(), PERSON)))
        else:
          pieces.append(Piece((token,), penn[i], i, None))
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
      pieces.append(Piece(words, "NNP" if concept.kind == LITERAL else ("NNS" if concept.plural else "NN"), i,
                           concept))
      i = span.end

    pieces = merge_coordinations(pieces)
    pieces = repair_articles(pieces, tokens)
    pieces = repair_punctuation(pieces, self.config.keep_final_period)
    return self._finish(pieces), dropped_venue

  def _finish(self, pieces: list[Piece]) -> Hypernymized:
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

  def _titles(
      self, tokens: Sequence[str], penn: Sequence[str], entities: Sequence[Span], dropped: set[int]
  ) -> set[int]:
    """Titles of works go with their "of": quoted and capitalized ("the premiere of 'Hollywood Homicide'",
    "their album "Blue Skies"") or a name right after a work noun ("a screening of Finding Nemo")."""
    out: set[int] = set()
    n = len(tokens)
    starts = sentence_start_indices(tokens)
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
    for group in coordinated_groups(tokens, spans):
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
      after_determiner = span.start > 0 and penn[span.start - 1] in DETERMINER_TAGS
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
