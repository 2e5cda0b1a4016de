"""Named-entity resolvers: what hypernym replaces "Harrison Ford", "Paris" or "Heathrow Airport".

`EntityResolver` is the plug-in point (a Knowledge Graph backend implements `resolve`); `default_resolver` chains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from capjax.text import resources
from capjax.text.annotate import Annotator

PERSON, PLACE, ORGANIZATION, THING = "person", "place", "organization", "thing"
LITERAL = "literal"  # a proper noun kept as written: holidays, languages, nationalities ("Christmas tree")

# WordNet synsets a place instance may sit under, most specific first, and the word that replaces it.
PLACE_TARGETS: tuple[tuple[str, str], ...] = (
    ("city_district.n.01", "district"),
    ("borough.n.01", "borough"),
    ("national_capital.n.01", "city"),
    ("state_capital.n.01", "city"),
    ("capital.n.03", "city"),
    ("city.n.01", "city"),
    ("town.n.01", "town"),
    ("village.n.02", "village"),
    ("american_state.n.01", "state"),
    ("state.n.01", "state"),
    ("province.n.01", "province"),
    ("county.n.01", "county"),
    ("country.n.02", "country"),
    ("state.n.04", "country"),
    ("continent.n.01", "continent"),
    ("island.n.01", "island"),
    ("river.n.01", "river"),
    ("lake.n.01", "lake"),
    ("sea.n.01", "sea"),
    ("ocean.n.01", "ocean"),
    ("range.n.04", "mountains"),
    ("mountain.n.01", "mountain"),
    ("region.n.03", "region"),
    ("location.n.01", "place"),
)
# A noun with a sense under one of these names a venue ("at the Sydney Entertainment Centre").
VENUE_SYNSETS = frozenset({"structure.n.01", "building.n.01", "facility.n.01", "location.n.01"})
# Last words of organization names whose hypernym WordNet's head-noun sense gets wrong.
HEAD_SUFFIXES: dict[str, str] = {
    "airways": "airline", "airlines": "airline", "inc": "company", "inc.": "company", "corp": "company",
    "corp.": "company", "corporation": "company", "ltd": "company", "ltd.": "company", "llc": "company",
    "plc": "company", "co.": "company", "fc": "football team", "f.c.": "football team", "afc": "football team",
}


@dataclasses.dataclass(frozen=True)
class Concept:
  """What an entity resolves to: the words that replace it and a coarse kind."""

  name: str
  kind: str
  plural: bool = False  # written as a plural ("Academy Awards" -> "awards"); counted under `name`


class EntityResolver(Protocol):
  """Maps the words of one proper-noun run to a Concept, or None when it does not know them."""

  def resolve(self, words: Sequence[str]) -> Concept | None:
    ...


class Kinds:
  """Coarse kind (person/place/organization/thing) of a common noun, from its first WordNet sense."""

  def __init__(self, annotator: Annotator):
    self.annotator = annotator

  def of_synset(self, synset_name: str) -> str:
    closure = self.annotator.hypernym_path(synset_name)
    if "person.n.01" in closure:
      return PERSON
    if "location.n.01" in closure:
      return PLACE
    if "organization.n.01" in closure or "social_group.n.01" in closure:
      return ORGANIZATION
    return THING

  def of_noun(self, noun: str) -> str:
    """Kind of a common noun (or noun phrase such as "tennis player"), from its first common sense."""
    synsets = self.common_synsets(noun.replace(" ", "_")) or self.common_synsets(noun.split(" ")[-1])
    return self.of_synset(synsets[0].name()) if synsets else THING

  def common_synsets(self, noun: str) -> list[Any]:
    """Noun senses spelled in lowercase, i.e. not the names in WordNet ("peter" the safe, not Saint Peter)."""
    lower = noun.lower()
    base = self.annotator.lemma(lower, "NOUN") if lower.isalpha() else lower
    return [s for s in self.annotator.noun_synsets(lower) if any(lm.name() in (lower, base) for lm in s.lemmas())]

  def is_person_noun(self, word: str) -> bool:
    """A common noun whose first sense is a kind of person ("actor", "president", "queen")."""
    synsets = self.common_synsets(word)
    return bool(synsets) and self.of_synset(synsets[0].name()) == PERSON

  def is_venue_noun(self, noun: str) -> bool:
    """A noun whose first three senses include a building, structure, facility or location ("hotel", "hall",
    "centre", "airport"): a place phrase naming one names a venue. Not when the first sense is an organization
    ("university", "club"), nor events ("festival", "awards")."""
    senses = self.common_synsets(noun.split(" ")[-1])
    if not senses or self.of_synset(senses[0].name()) == ORGANIZATION:
      return False
    return any(VENUE_SYNSETS.intersection(self.annotator.hypernym_path(s.name())) for s in senses[:3])

  def has_person_sense(self, word: str) -> bool:
    """A common noun with any sense that is a kind of person ("model", "star", "general")."""
    return any(self.of_synset(s.name()) == PERSON for s in self.common_synsets(word))


def _key(words: Sequence[str]) -> str:
  return " ".join(words).lower()


class TableResolver:
  """A lookup table {entity: hypernym} over the whole run, case-insensitive: the Knowledge Graph stand-in."""

  def __init__(self, table: dict[str, str], kinds: Kinds):
    self.table = table
    self.kinds = kinds

  def resolve(self, words: Sequence[str]) -> Concept | None:
    name = self.table.get(_key(words))
    if name is None:
      return None
    return Concept(name, PLACE if name in {w for _, w in PLACE_TARGETS} else self.kinds.of_noun(name))

_PLACE_RANK = {word: i for i, (_, word) in reversed(list(enumerate(PLACE_TARGETS)))}


class WordNetResolver:
  """WordNet instances ("Paris" -> city, "Elvis Presley" -> rock star).

  With `literal=True` it instead keeps proper nouns that WordNet knows as classes, not instances
  ("Christmas", "English"): the chain asks for those after first names, so "Jane Doe" is a person.
  """

  def __init__(self, annotator: Annotator, kinds: Kinds, literal: bool = False,
               first_names: frozenset[str] = frozenset()):
    self.annotator = annotator
    self.kinds = kinds
    self.literal = literal
    self.first_names = first_names

  def resolve(self, words: Sequence[str]) -> Concept | None:
    phrase = "_".join(words)
    synsets = [
        s for s in self.annotator.noun_synsets(phrase)
        if any(lemma.name().lower() == phrase.lower() for lemma in s.lemmas())
    ]
    if not self.literal:
      first: Concept | None = None
      places: list[Concept] = []
      for synset in synsets:
        # NLTK's order of instance hypernyms changes with PYTHONHASHSEED ("New York": port of entry, city):
        # take the most specific place, then the alphabetically first, so every process agrees.
        concepts = [self.concept_of_instance(p.name(), p.lemma_names()[0]) for p in synset.instance_hypernyms()]
        if concepts and first is None:
          first = min(concepts, key=lambda c: (_PLACE_RANK.get(c.name, len(_PLACE_RANK)), c.name))
        places += [c for c in concepts if c.kind == PLACE]
      # A place in any sense wins over a landform in the first ("Japan": archipelago, country -> country).
      if places and (first is None or first.kind != PERSON):
        return min(places, key=lambda c: (_PLACE_RANK.get(c.name, len(_PLACE_RANK)), c.name))
      # A lone first name is an ordinary person, not the saint or apostle WordNet knows ("Peter", "David").
      if first is not None and first.kind == PERSON and len(words) == 1 and words[0] in self.first_names:
        return Concept("person", PERSON)
      return first
    for synset in synsets:
      if any(lemma.name() == phrase and lemma.name()[:1].isupper() for lemma in synset.lemmas()):
        return Concept(" ".join(words).lower(), LITERAL)
    return None

  def concept_of_instance(self, parent_name: str, parent_lemma: str) -> Concept:
    closure = self.annotator.hypernym_path(parent_name)
    for target, word in PLACE_TARGETS:
      if target in closure:
        return Concept(word, PLACE)
    # "president_of_the_united_states" -> "president"; "rock_star" -> "rock star".
    name = parent_lemma.split("_of_")[0].replace("_", " ").lower()
    return Concept(name, self.kinds.of_synset(parent_name))


class GazetteerResolver:
  """NLTK gazetteers: countries, US states, Canadian provinces, Mexican states, US cities, nationalities."""

  def __init__(self) -> None:
    table: dict[str, Concept] = {}
    for fileid, concept in (
        ("uscities.txt", Concept("city", PLACE)),
        ("caprovinces.txt", Concept("province", PLACE)),
        ("mexstates.txt", Concept("state", PLACE)),
        ("usstates.txt", Concept("state", PLACE)),
        ("isocountries.txt", Concept("country", PLACE)),
        ("countries.txt", Concept("country", PLACE)),
    ):
      table.update((name.lower(), concept) for name in resources.gazetteer(fileid))
    self.table = table
    self.nationalities = frozenset(n.lower() for n in resources.gazetteer("nationalities.txt"))

  def resolve(self, words: Sequence[str]) -> Concept | None:
    key = _key(words)
    if key in self.nationalities:
      return Concept(key, LITERAL)
    return self.table.get(key)


class TitleResolver:
  """A run that opens with a person noun names that role: "President Barack Obama" -> president.

  A noun that is a person only in a later sense ("Model", "Star") counts when a first name follows it.
  """

  def __init__(self, kinds: Kinds, names: frozenset[str]):
    self.kinds = kinds
    self.names = names

  def resolve(self, words: Sequence[str]) -> Concept | None:
    if len(words) < 2 or not words[0].isalpha() or words[0] in self.names:
      return None
    if self.kinds.is_person_noun(words[0]) or (words[1] in self.names and self.kinds.has_person_sense(words[0])):
      return Concept(words[0].lower(), PERSON)
    return None


class FirstNameResolver:
  """A run of 1-4 capitalized words opening with a known first name is a person ("Harrison Ford")."""

  def __init__(self, names: frozenset[str]):
    self.names = names

  def resolve(self, words: Sequence[str]) -> Concept | None:
    if 1 <= len(words) <= 4 and words[0] in self.names and all(w[:1].isupper() for w in words):
      return Concept("person", PERSON)
    return None


class HeadNounResolver:
  """A run ending in a common noun is one of those: "Heathrow Airport" -> airport, "British Airways" -> airline."""

  def __init__(self, annotator: Annotator, kinds: Kinds):
    self.annotator = annotator
    self.kinds = kinds

  def resolve(self, words: Sequence[str]) -> Concept | None:
    last = words[-1].lower()
    if last in HEAD_SUFFIXES:
      name = HEAD_SUFFIXES[last]
      return Concept(name, self.kinds.of_noun(name))
    if not last.isalpha() or not self.annotator.is_common_noun(last):
      return None
    if len(words) == 1:
      return Concept(last, LITERAL)
    name = self.annotator.lemma(last, "NOUN")
    return Concept(name, self.kinds.of_noun(name), plural=name != last)


class ModelResolver:
  """A maker's name with a model number is that maker's product: "Boeing 747" -> aircraft, "Canon EOS 5D" -> camera.

  Wraps the chain: the name without trailing model tokens must resolve to "<product> manufacturer".
  """

  def __init__(self, inner: EntityResolver):
    self.inner = inner

  def resolve(self, words: Sequence[str]) -> Concept | None:
    n = len(words)
    while n > 1 and any(c.isdigit() for c in words[n - 1]):
      n -= 1
    if n == len(words):
      return None
    for end in range(n, 0, -1):
      maker = self.inner.resolve(words[:end])
      if maker is not None and maker.name.endswith(" manufacturer"):
        return Concept(maker.name.removesuffix(" manufacturer"), THING)
    return None


class MakeResolver:
  """A maker followed by a model name is the maker's product: "Toyota Camry" -> car, "Ducati Monster" ->
  motorcycle (`data/makes.tsv`); the maker alone is left to the other resolvers ("Toyota" -> car manufacturer)."""

  def __init__(self, makes: dict[str, str], kinds: Kinds):
    self.makes = makes
    self.kinds = kinds

  def product(self, words: Sequence[str]) -> tuple[str, int] | None:
    """(product, words in the maker's name) when the run opens with a maker."""
    for n in (2, 1):
      product = self.makes.get(_key(words[:n])) if len(words) >= n else None
      if product is not None:
        return product, n
    return None

  def resolve(self, words: Sequence[str]) -> Concept | None:
    found = self.product(words)
    if found is None or len(words) == found[1]:
      return None
    last = words[-1]
    # "Ford Field", "Honda Center": a venue named after the maker.
    if last[:1].isupper() and last.isalpha() and self.kinds.is_venue_noun(last.lower()):
      return None
    return Concept(found[0], THING)


class VenueResolver:
  """A run of three or more words ending in a venue noun is that venue, even when it opens with a first name
  or a title: "Sydney Entertainment Centre" -> centre, "Madison Square Garden" -> garden, "Royal Albert Hall"."""

  def __init__(self, annotator: Annotator, kinds: Kinds):
    self.annotator = annotator
    self.kinds = kinds

  def resolve(self, words: Sequence[str]) -> Concept | None:
    last = words[-1].lower()
    if len(words) < 3 or not last.isalpha() or not self.annotator.is_common_noun(last):
      return None
    if not self.kinds.is_venue_noun(last):
      return None
    name = self.annotator.lemma(last, "NOUN")
    return Concept(name, self.kinds.of_noun(name), plural=name != last)


class ChainResolver:
  """Asks each resolver in turn; the first answer wins."""

  def __init__(self, resolvers: Iterable[EntityResolver]):
    self.resolvers = tuple(resolvers)

  def resolve(self, words: Sequence[str]) -> Concept | None:
    for resolver in self.resolvers:
      concept = resolver.resolve(words)
      if concept is not None:
        return concept
    return None


def default_resolver(
    annotator: Annotator, extra_table: dict[str, str] | None = None, use_seed_table: bool = True,
    knowledge_graph: EntityResolver | None = None,
) -> ChainResolver:
  """Knowledge graph (if given), makes, model numbers, tables, WordNet instances, gazetteers, venues, titles,
  first names, WordNet proper nouns kept as written, head nouns: in that order."""
  kinds = Kinds(annotator)
  table = dict(resources.entity_table()) if use_seed_table else {}
  table.update(extra_table or {})
  chain: list[EntityResolver] = [knowledge_graph] if knowledge_graph is not None else []
  table_resolver = TableResolver(table, kinds)
  chain += [
      MakeResolver(resources.entity_table("makes.tsv"), kinds),
      ModelResolver(table_resolver),
      table_resolver,
      WordNetResolver(annotator, kinds, first_names=resources.first_names()),
      GazetteerResolver(),
      VenueResolver(annotator, kinds),
      TitleResolver(kinds, resources.first_names()),
      FirstNameResolver(resources.first_names()),
      WordNetResolver(annotator, kinds, literal=True),
      HeadNounResolver(annotator, kinds),
  ]
  return ChainResolver(chain)
