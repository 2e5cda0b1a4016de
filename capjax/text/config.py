"""Every threshold of the text pipeline, in three frozen dataclasses with one documented line per field.

Defaults follow the paper where it gives a rule and are calibrated on the released CC3M validation captions.
"""

from __future__ import annotations

import dataclasses

# Place concepts whose prepositional phrases are dropped ("in Franklin, Tennessee"); landmarks such as
# "airport" or "river" are kept and replaced instead ("from airport").
GEOPOLITICAL_PLACES = (
    "city", "town", "village", "country", "state", "province", "county", "continent", "district",
    "borough", "region", "neighborhood", "place",
)


@dataclasses.dataclass(frozen=True)
class FilterConfig:
  """Knowl 1-3 text filters; a candidate failing any one is dropped with that filter's reason."""

  max_chars: int = 1000  # longer raw alt-texts are dropped before tokenizing ("too_many_characters")
  min_tokens: int = 3  # word tokens after boilerplate stripping; CC3M validation's shortest captions have 3
  max_tokens: int = 50  # word tokens; CC3M's longest validation caption has 46 tokens
  max_capitalized_ratio: float = 0.75  # capitalized words / words ("Beautiful Sunset Over The Lake" fails)
  max_all_caps_ratio: float = 0.34  # words of 2+ letters written in capitals / words (acronyms pass)
  max_repetition_ratio: float = 0.34  # 1 - distinct/total over content (non-closed-class) words; 0.14% of CC3M
  max_content_repeats: int = 3  # one content word seen this many times or more fails; 0.22% of CC3M
  max_noun_ratio: float = 0.7  # nouns / words, a proper-noun run counting once (keyword lists fail); 1.4% of CC3M
  max_abs_sentiment: float = 0.9  # |VADER compound| at or above this is "extreme"; 0.2% of CC3M
  vocabulary_path: str | None = None  # one word a line (a TSV keeps column 0); None: wordfreq+WordNet+closed class
  # wordfreq English words kept by the default vocabulary: Zipf 1.0 = one per 100 million words, the lowest
  # frequency wordfreq ships. The paper's "seen at least 5 times in English Wikipedia" (~4 billion words) is
  # about Zipf 0.1, below that floor: the whole list is the closest a public list gets.
  vocabulary_min_zipf: float = 1.0
  check_proper_nouns_in_vocabulary: bool = False  # entity tokens are resolved by hypernymization instead
  profanity_path: str | None = None  # None: the list shipped in capjax/text/data/profanity.txt


@dataclasses.dataclass(frozen=True)
class HypernymConfig:
  """Hypernymization: what is dropped, what replaces named entities, and what output is too poor to keep."""

  entities_path: str | None = None  # extra entity<TAB>hypernym table (a Knowledge Graph export), checked first
  use_seed_entities: bool = True  # the shipped capjax/text/data/entities.tsv seed table
  place_prepositions: tuple[str, ...] = ("in", "at", "near", "outside", "inside", "around", "across", "throughout")
  drop_place_concepts: tuple[str, ...] = GEOPOLITICAL_PLACES  # PP + entity of these kinds is dropped
  temporal_prepositions: tuple[str, ...] = ("on", "in", "at", "during", "since", "until", "by", "from", "of")
  drop_venue_phrases: bool = True  # "from the Taj Mahal Hotel" goes unless that leaves a fragment
  share_role_in_coordination: bool = True  # "Harrison Ford and Calista Flockhart": unknowns take the known role
  discard_unresolved: bool = True  # an entity no resolver knows drops the pair ("unresolved_entity")
  min_tokens: int = 3  # word tokens left after hypernymization (as short as CC3M goes)
  keep_final_period: bool = True  # CC3M captions keep a final " ." when the alt-text had one


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
  """The whole text side: filters, hypernymization, dataset-level concept pruning."""

  filters: FilterConfig = FilterConfig()
  hypernyms: HypernymConfig = HypernymConfig()
  min_concept_count: int = 100  # a pair is dropped when any of its concepts is seen this many times or fewer
