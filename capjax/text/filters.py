"""The paper's text filters (Knowl 1-3) as pure functions `(annotation) -> Reason | None`, and the chain.

Cheap lexical rules run before the tagger and VADER; a `FilterChain` stops at the first reason and counts it.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import re
import string
from collections.abc import Callable, Iterable
from typing import Any

from capjax.text import resources
from capjax.text.annotate import MONTHS, Annotation, is_capitalized
from capjax.text.config import FilterConfig


class Reason(enum.StrEnum):
  """Why a candidate was dropped; the value is what the pipeline writes."""

  # The input row itself (capjax.text.pipeline.read_tsv): not a candidate at all.
  INVALID_UTF8 = "invalid_utf8"
  NO_TAB = "no_tab"
  EMPTY_ID = "empty_id"
  EXTRA_COLUMNS = "extra_columns"
  EMPTY = "empty"
  TOO_MANY_CHARACTERS = "too_many_characters"
  CONTROL_CHARACTERS = "control_characters"
  BOILERPLATE_ONLY = "boilerplate_only"
  TOO_LONG = "too_long"
  TOO_SHORT = "too_short"
  PROFANITY = "profanity"
  NOT_CAPITALIZED = "first_word_not_capitalized"
  TOO_MANY_CAPITALS = "too_many_capitals"
  ALL_CAPS = "all_caps"
  TITLE_CASE = "title_case"
  REPETITION = "token_repetition"
  NO_DETERMINER = "no_determiner"
  NO_NOUN = "no_noun"
  NO_PREPOSITION = "no_preposition"
  NOUN_RATIO = "high_noun_ratio"
  OUT_OF_VOCABULARY = "out_of_vocabulary"
  EXTREME_SENTIMENT = "extreme_sentiment"
  UNRESOLVED_ENTITY = "unresolved_entity"
  TOO_SHORT_AFTER_HYPERNYMIZATION = "too_short_after_hypernymization"
  FRAGMENTED = "fragmented"
  RARE_CONCEPT = "rare_concept"


# Stages in pipeline order, each with the reasons it can give.
STAGES: dict[str, tuple[Reason, ...]] = {
    "input": (Reason.INVALID_UTF8, Reason.NO_TAB, Reason.EMPTY_ID, Reason.EXTRA_COLUMNS, Reason.EMPTY,
              Reason.TOO_MANY_CHARACTERS, Reason.CONTROL_CHARACTERS, Reason.BOILERPLATE_ONLY),
    "lexical": (Reason.TOO_SHORT, Reason.TOO_LONG, Reason.PROFANITY, Reason.NOT_CAPITALIZED,
                Reason.TOO_MANY_CAPITALS, Reason.ALL_CAPS, Reason.TITLE_CASE, Reason.REPETITION),
    "syntactic": (Reason.NO_DETERMINER, Reason.NO_NOUN, Reason.NO_PREPOSITION, Reason.NOUN_RATIO),
    "vocabulary": (Reason.OUT_OF_VOCABULARY,),
    "sentiment": (Reason.EXTREME_SENTIMENT,),
    "hypernymization": (Reason.UNRESOLVED_ENTITY, Reason.TOO_SHORT_AFTER_HYPERNYMIZATION, Reason.FRAGMENTED),
    "concepts": (Reason.RARE_CONCEPT,),
}
STAGE_OF: dict[Reason, str] = {reason: stage for stage, reasons in STAGES.items() for reason in reasons}

Filter = Callable[[Annotation], "Reason | None"]
_PUNCTUATION = string.punctuation
_NON_WORD = re.compile(f"[{re.escape(string.punctuation)}]")
_BOOSTER_BIGRAMS = ("kind of", "sort of", "just enough")


def raw_text(text: str, max_chars: int) -> Reason | None:
  """Before anything else: nothing to read, or far too long to be a caption."""
  if not text or not text.strip():
    return Reason.EMPTY
  if len(text) > max_chars:
    return Reason.TOO_MANY_CHARACTERS
  return None


# C0 controls but tab, line feed and carriage return (whitespace any text file may hold), DEL, and C1 controls (the
# 8-bit CSI U+009B among them).
_CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def control_characters(text: str) -> Reason | None:
  """Control characters (C0 but tab and line ends, DEL, C1), terminal escape sequences among them: rejected, not
  stripped. They are residue of a terminal or of binary data, not words: normalizing turns the ESC of an ANSI
  sequence ("\\x1b[31m") into a space and leaves "[31m", which became the word "31m" inside a kept caption ("a dog
  31mruns 0m on the grass"). Stripping whole sequences would need every terminal's grammar, and an alt text that
  carries them was not written for a reader; so the row is dropped at the input stage, counted in the funnel."""
  return Reason.CONTROL_CHARACTERS if _CONTROL_CHARACTER.search(text) else None


def first_control_character(text: str) -> str | None:
  """Where `control_characters` found one, for a record's detail: "U+001B at character 7" (from 1), or None."""
  match = _CONTROL_CHARACTER.search(text)
  return f"U+{ord(match.group()):04X} at character {match.start() + 1}" if match else None


def length(a: Annotation, min_tokens: int, max_tokens: int) -> Reason | None:
  """Word tokens (not punctuation) within [min_tokens, max_tokens]."""
  n = len(a.word_indices)
  if n < min_tokens:
    return Reason.TOO_SHORT
  if n > max_tokens:
    return Reason.TOO_LONG
  return None


def profanity(a: Annotation, words: frozenset[str]) -> Reason | None:
  """Any token (lowercased, or any part of a hyphenated one) on the profanity list."""
  for token in a.tokens:
    lower = token.lower()
    if lower in words or ("-" in lower and any(part in words for part in lower.split("-"))):
      return Reason.PROFANITY
  return None


def capitalization(
    a: Annotation, max_capitalized_ratio: float, max_all_caps_ratio: float, closed_class: frozenset[str]
) -> Reason | None:
  """First word capitalized; few capitalized words; no SHOUTING; no Title Case function words."""
  words = [i for i in a.word_indices if any(c.isalpha() for c in a.tokens[i])]
  if not words:
    return Reason.NOT_CAPITALIZED
  first = a.tokens[words[0]]
  if not is_capitalized(first):
    return Reason.NOT_CAPITALIZED
  tokens = [a.tokens[i] for i in words]
  shouted = sum(1 for t in tokens if t.isupper() and len(t) >= 2 and sum(c.isalpha() for c in t) >= 2)
  if shouted > max_all_caps_ratio * len(tokens):
    return Reason.ALL_CAPS
  if sum(1 for t in tokens if is_capitalized(t)) > max_capitalized_ratio * len(tokens):
    return Reason.TOO_MANY_CAPITALS
  # Title Case: a capitalized function word ("In", "The") next to another capitalized word. Month names
  # ("in May 2018") and the pronoun "I" are not function words here.
  for i in words[1:]:
    token = a.tokens[i]
    if (is_capitalized(token) and token != "I" and token.lower() in closed_class and token.lower() not in MONTHS
        and not _after_sentence_end(a, i) and _next_to_capitalized(a, i)):
      return Reason.TITLE_CASE
  return None


def _next_to_capitalized(a: Annotation, i: int) -> bool:
  return (i > 0 and is_capitalized(a.tokens[i - 1]) and a.tokens[i - 1][:1].isalpha()) or (
      i + 1 < len(a.tokens) and is_capitalized(a.tokens[i + 1]) and a.tokens[i + 1][:1].isalpha())


def _after_sentence_end(a: Annotation, i: int) -> bool:
  return i > 0 and a.tokens[i - 1] in (".", "!", "?", ":", ";", "``", "(", "-", "--", "|", "...")


def repetition(a: Annotation, max_ratio: float, max_content_repeats: int,
               closed_class: frozenset[str]) -> Reason | None:
  """Few repeated content words (function words such as "the" repeat in any sentence).

  Fails when 1 - distinct/total over lowercased content words exceeds `max_ratio`, or when one content
  word occurs `max_content_repeats` times or more.
  """
  words = [w for w in (a.tokens[i].lower() for i in a.word_indices) if w not in closed_class]
  if not words:
    return None
  counts = collections.Counter(words)
  if 1 - len(counts) / len(words) > max_ratio or max(counts.values()) >= max_content_repeats:
    return Reason.REPETITION
  return None


def determiner_noun_preposition(a: Annotation) -> Reason | None:
  """The paper's syntactic rule: at least one determiner, one noun and one preposition (universal tags)."""
  tags = set(a.upos)
  if "DET" not in tags:
    return Reason.NO_DETERMINER
  if "NOUN" not in tags:
    return Reason.NO_NOUN
  if "ADP" not in tags:
    return Reason.NO_PREPOSITION
  return None


def noun_ratio(a: Annotation, max_ratio: float) -> Reason | None:
  """Nouns / words at most `max_ratio`; a proper-noun run ("Harrison Ford") counts as one noun.

  The tagger guesses wildly on keyword lists ("sofa" as an adjective): a word tagged VERB, ADJ or ADV that
  WordNet knows only in other parts of speech, a noun among them, is counted as a noun.
  """
  in_entity = {i for span in a.entities for i in range(span.start, span.end)}
  units = len(a.entities)
  nouns = len(a.entities)
  for i in a.word_indices:
    if i in in_entity:
      continue
    units += 1
    upos = a.upos[i]
    if upos == "NOUN" or (upos in ("VERB", "ADJ", "ADV") and _only_noun(a, a.tokens[i].lower(), upos)):
      nouns += 1
  return Reason.NOUN_RATIO if units and nouns / units > max_ratio else None


def _only_noun(a: Annotation, word: str, upos: str) -> bool:
  has = a.annotator.has_pos
  return word.isalpha() and not has(word, upos) and has(word, "NOUN")


class Vocabulary:
  """A set of lowercase words with a cached membership test that also tries WordNet base forms."""

  def __init__(self, words: frozenset[str], lemma: Callable[[str, str], str]):
    self.words = words
    self._lemma = lemma
    self.contains = functools.lru_cache(maxsize=1 << 18)(self._contains)

  def _contains(self, token: str) -> bool:
    word = token.lower().strip(".")
    if not word or word in self.words or any(c.isdigit() for c in word) or not any(c.isalpha() for c in word):
      return True
    if "-" in word or "/" in word:
      return all(self.contains(part) for part in word.replace("/", "-").split("-") if part)
    if word.endswith("'s") or word.endswith("s'"):
      return self.contains(word[:-2] + ("s" if word.endswith("s'") else ""))
    return any(self._lemma(word, pos) in self.words for pos in ("NOUN", "VERB", "ADJ", "ADV"))


def vocabulary(a: Annotation, vocab: Vocabulary, check_proper_nouns: bool) -> Reason | None:
  """Every word token in the vocabulary; tokens of entity spans are left to hypernymization by default."""
  skip = set() if check_proper_nouns else {i for span in a.entities for i in range(span.start, span.end)}
  for i in a.word_indices:
    if i not in skip and not vocab.contains(a.tokens[i]):
      return Reason.OUT_OF_VOCABULARY
  return None


def sentiment(a: Annotation, analyzer: Any, max_abs: float) -> Reason | None:
  """No extreme sentiment: |VADER compound| below `max_abs`.

  VADER itself runs only when `sentiment_bound` cannot already rule the extreme out (most captions).
  """
  # VADER rounds the compound score to 4 decimals: keep a margin so the decision is exactly VADER's.
  if normalize_valence(sentiment_bound(a.text, analyzer)) < max_abs - 1e-4:
    return None
  return Reason.EXTREME_SENTIMENT if abs(analyzer.polarity_scores(a.text)["compound"]) >= max_abs else None


def normalize_valence(total: float, alpha: float = 15.0) -> float:
  """VADER's map from a valence sum to the compound score in [-1, 1] (monotone in |total|)."""
  return abs(total) / (total * total + alpha) ** 0.5


def sentiment_bound(text: str, analyzer: Any) -> float:
  """An upper bound on |valence sum| VADER can give `text` (so on its |compound|), from word lookups alone.

  VADER scores only lexicon words: each adds at most |valence| + 0.733 (ALL CAPS) + 1.026 per booster
  among its 3 predecessors; "never/so/this" multiply by at most 1.875 and "but" by 1.5; "!" and "?" add at
  most 2.128; an idiom ("the bomb") can set a valence to 3.293. Returns 0 when no word is in the lexicon.
  """
  lexicon, boosters = analyzer.lexicon, analyzer.constants.BOOSTER_DICT
  lower = text.lower()
  total, n_lexicon, n_boosters, multiplier = 0.0, 0, 0, 1.0
  words: set[str] = set()
  for item in text.split():
    word = item.lower()
    forms = (word,) if word.isalnum() else (word, word.strip(_PUNCTUATION), _NON_WORD.sub("", word))
    words.update(forms)
    valence = max((abs(lexicon[f]) for f in forms if f in lexicon), default=None)
    if valence is not None:
      n_lexicon += 1
      total += valence + (0.733 if item.isupper() else 0.0)
    if any(f in boosters for f in forms):
      n_boosters += 1
  if not n_lexicon:
    return 0.0
  n_boosters += sum(lower.count(bigram) for bigram in _BOOSTER_BIGRAMS)
  if any(idiom in lower for idiom in analyzer.constants.SPECIAL_CASE_IDIOMS):
    total += 3.293 * n_lexicon
  if words & {"never", "so", "this"}:
    multiplier *= 1.875
  if "but" in words:
    multiplier *= 1.5
  # VADER scores a repeated word in the context of its first occurrence: each occurrence may be boosted.
  boosts = 1.026 * min(3, n_boosters) * n_lexicon
  punctuation = min(text.count("!"), 4) * 0.292 + (0.96 if text.count("?") > 1 else 0.0)
  return multiplier * (total + boosts) + punctuation


def load_vocabulary(config: FilterConfig, lemma: Callable[[str, str], str]) -> Vocabulary:
  """The user's vocabulary file (first column) + closed class when configured, else wordfreq's English list
  (Zipf >= `vocabulary_min_zipf`) + WordNet lemmas + closed class."""
  closed_class = resources.word_list("closed_class.txt")
  if config.vocabulary_path:
    with open(config.vocabulary_path, encoding="utf-8") as f:
      words = frozenset(line.split("\t")[0].strip().lower() for line in f if line.strip())
    return Vocabulary(words | closed_class, lemma)
  return Vocabulary(resources.default_vocabulary(config.vocabulary_min_zipf), lemma)


def load_profanity(config: FilterConfig) -> frozenset[str]:
  if config.profanity_path:
    with open(config.profanity_path, encoding="utf-8") as f:
      return frozenset(line.strip().lower() for line in f if line.strip() and not line.startswith("#"))
  return resources.word_list("profanity.txt")


@dataclasses.dataclass(frozen=True)
class NamedFilter:
  """A filter with the name it is reported under."""

  name: str
  fn: Filter

  def __call__(self, a: Annotation) -> Reason | None:
    return self.fn(a)


def text_filters(config: FilterConfig, lemma: Callable[[str, str], str]) -> tuple[NamedFilter, ...]:
  """The default chain, cheapest first: lexical rules, then tag-based rules, vocabulary, then VADER."""
  closed_class = resources.word_list("closed_class.txt")
  p = functools.partial
  return (
      NamedFilter("length", p(length, min_tokens=config.min_tokens, max_tokens=config.max_tokens)),
      NamedFilter("profanity", p(profanity, words=load_profanity(config))),
      NamedFilter("capitalization", p(capitalization, max_capitalized_ratio=config.max_capitalized_ratio,
                                      max_all_caps_ratio=config.max_all_caps_ratio, closed_class=closed_class)),
      NamedFilter("repetition", p(repetition, max_ratio=config.max_repetition_ratio,
                                  max_content_repeats=config.max_content_repeats, closed_class=closed_class)),
      NamedFilter("determiner_noun_preposition", determiner_noun_preposition),
      NamedFilter("noun_ratio", p(noun_ratio, max_ratio=config.max_noun_ratio)),
      NamedFilter("vocabulary", p(vocabulary, vocab=load_vocabulary(config, lemma),
                                  check_proper_nouns=config.check_proper_nouns_in_vocabulary)),
      NamedFilter("sentiment", p(sentiment, analyzer=resources.vader(), max_abs=config.max_abs_sentiment)),
  )


def first_failure(filters: Iterable[Filter], a: Annotation) -> Reason | None:
  """The reason of the first filter that rejects `a`, or None when all pass."""
  for f in filters:
    reason = f(a)
    if reason is not None:
      return reason
  return None


class FilterChain:
  """Runs filters in order, stops at the first reason and counts candidates seen and reasons given."""

  def __init__(self, filters: Iterable[Filter]):
    self.filters = tuple(filters)
    self.seen = 0
    self.counts: collections.Counter[str] = collections.Counter()

  def __call__(self, a: Annotation) -> Reason | None:
    self.seen += 1
    reason = first_failure(self.filters, a)
    if reason is not None:
      self.counts[reason] += 1
    return reason
