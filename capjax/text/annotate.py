"""One annotation layer over NLTK: normalization, tokens, Penn/universal tags, lemmas, entity spans, hypernyms.

An `Annotator` holds the loaded resources and per-word caches; an `Annotation` computes its layers on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import re
import unicodedata
from functools import cached_property
from typing import Any

from capjax.text import resources
from capjax.text.tagger import PerceptronTagger

CACHE_SIZE = 1 << 18  # distinct words remembered per lookup; bounded so billions of inputs keep memory flat

# Treebank conventions in one pass: clitics split ("Ford's" -> "Ford 's", "don't" -> "do n't"), a final
# period split, commas/colons kept inside numbers, hyphenated words and internal periods kept ("U.S.").
_W = r"[\w£€¥+=*~^/\\|]"
_CLITIC = r"(?:s|m|d|ll|re|ve)\b"
_TOKEN = re.compile(
    rf"""
    https?://\S+|www\.\S+
    |\.\.\.|--
    |{_W}+(?=n't\b)
    |n't\b
    |'{_CLITIC}
    |{_W}+(?:(?:-+|'(?!{_CLITIC}|t\b)|\.|[,:](?=\d)){_W}+)*(?:\.(?!\.|[\s\])}}>"']*$))?
    |\S
    """,
    re.VERBOSE | re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff]")
_SPACE = re.compile(r"\s+")
_YEARLIKE = re.compile(r"^(?:1[5-9]|20)\d\d$")
_CAMEL_CASE = re.compile(r"^[a-z]{1,2}[A-Z][a-z]+[A-Za-z\d]*$")

PROPER_TAGS = frozenset({"NNP", "NNPS"})
DETERMINER_TAGS = frozenset({"DT", "PRP$", "POS"})  # determiners and possessives: "the", "her", "'s"
SENTENCE_END = frozenset({".", "!", "?"})
MONTHS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
_ENTITY_CONNECTORS = frozenset({"of", "&", "de", "da", "del", "la", "von", "van"})


def normalize_text(text: str) -> str:
  """Unescapes HTML entities, applies NFKC, drops control/format characters and emoji, collapses spaces."""
  text = html.unescape(html.unescape(text)) if "&" in text else text
  text = unicodedata.normalize("NFKC", text)
  text = _CONTROL.sub(" ", text)
  if not text.isascii():
    # Emoji and other pictographs (category So) carry no words; keep letters, marks, numbers, punctuation.
    text = "".join(" " if unicodedata.category(ch) in ("So", "Cs", "Co", "Cn") else ch for ch in text)
  return _SPACE.sub(" ", text).strip()


def tokenize(text: str) -> tuple[str, ...]:
  """Penn-Treebank-style tokens of one (normalized) sentence; double quotes become `` and ''."""
  tokens = _TOKEN.findall(text)
  if '"' in text:
    opened = False
    for i, token in enumerate(tokens):
      if token == '"':
        tokens[i] = "''" if opened else "``"
        opened = not opened
  return tuple(tokens)


# Between sentences: after . ! or ?, before a capital, a digit or an opening quote or bracket.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def caption_tokens(text: str) -> tuple[str, ...]:
  """Penn-Treebank-style tokens of a caption of one or more sentences, normalized first; each sentence's final
  period is split off as `tokenize` does for one ("It is red. It is parked." -> ... "red", ".", "It", ...)."""
  return tuple(token for sentence in _SENTENCE_BREAK.split(normalize_text(text)) for token in tokenize(sentence))


def is_word(token: str) -> bool:
  """A token with at least one letter or digit (not punctuation)."""
  return token[:1].isalnum() or any(ch.isalnum() for ch in token)


def is_capitalized(token: str) -> bool:
  return token[:1].isupper()


@dataclasses.dataclass(frozen=True)
class Span:
  """Tokens [start, end) of an annotation."""

  start: int
  end: int

  def __len__(self) -> int:
    return self.end - self.start


class Annotator:
  """Loads NLTK resources once and caches every per-word lookup (lemmas, synsets, hypernyms)."""

  def __init__(self, cache_size: int = CACHE_SIZE):
    cache = functools.lru_cache(maxsize=cache_size)
    self.lemma = cache(self._lemma)
    self.noun_synsets = cache(self._noun_synsets)
    self.is_common_noun = cache(self._is_common_noun)
    self.hypernym_path = cache(self._hypernym_path)
    self.hypernyms = cache(self._hypernyms)
    self.has_pos = cache(self._has_pos)
    self.is_common_word = cache(self._is_common_word)

  @cached_property
  def tagger(self) -> PerceptronTagger:
    return PerceptronTagger(*resources.perceptron_weights())

  @cached_property
  def universal_map(self) -> dict[str, str]:
    return resources.universal_tag_map()

  @cached_property
  def wordnet(self) -> Any:
    return resources.wordnet()

  def annotate(self, text: str) -> Annotation:
    """Annotation of one normalized text (see `normalize_text`)."""
    return Annotation(text=text, tokens=tokenize(text), annotator=self)

  def tag(self, tokens: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(self.tagger.tag(tokens)) if tokens else ()

  def universal(self, penn: str) -> str:
    return self.universal_map.get(penn, "X")

  def _lemma(self, word: str, upos: str) -> str:
    """WordNet base form (`wn.morphy`) of a lowercased word for its universal tag; the word if none."""
    pos = _WORDNET_POS.get(upos)
    if pos is None or not word.isalpha():
      return word
    return self.wordnet.morphy(word, pos) or word

  def _has_pos(self, word: str, upos: str) -> bool:
    """True when WordNet knows `word` (lowercase) in that universal part of speech: has_pos("performs", "VERB")."""
    return word.isalpha() and self.wordnet.morphy(word, _WORDNET_POS[upos]) is not None

  def _noun_synsets(self, phrase: str) -> tuple[Any, ...]:
    """WordNet noun synsets of a phrase as written in WordNet (words joined by "_"), most frequent first."""
    if not phrase or len(phrase) > 80:
      return ()
    return tuple(self.wordnet.synsets(phrase, pos="n"))

  def _is_common_noun(self, word: str) -> bool:
    """True when a lowercase WordNet noun lemma spells `word` (or its base form): "woman", "airport"."""
    lower = word.lower()
    base = self.lemma(lower, "NOUN")
    return any(
        lemma.name() in (lower, base) for synset in self.noun_synsets(lower) for lemma in synset.lemmas()
    )

  def _is_common_word(self, word: str) -> bool:
    """A lowercase WordNet lemma in any part of speech spells `word` or its base form ("healthy", "musician"),
    or every part of a hyphenated `word` is one ("close-up"); WordNet spells "Pakistani" and "Paris" capitalized."""
    lower = word.lower()
    if "-" in lower.strip("-"):
      return all(self.is_common_word(part) for part in lower.split("-") if part)
    if not lower.isalpha():
      return False
    for pos in "nvar":
      base = self.wordnet.morphy(lower, pos)
      if base is not None and any(
          lemma.name() in (lower, base) for synset in self.wordnet.synsets(base, pos=pos) for lemma in synset.lemmas()):
        return True
    return False

  def _hypernym_path(self, synset_name: str) -> frozenset[str]:
    """Names of the synset and of everything above it (hypernyms and instance hypernyms)."""
    seen = {synset_name}
    frontier = [self.wordnet.synset(synset_name)]
    while frontier:
      synset = frontier.pop()
      for parent in synset.hypernyms() + synset.instance_hypernyms():
        if parent.name() not in seen:
          seen.add(parent.name())
          frontier.append(parent)
    return frozenset(seen)

  def _hypernyms(self, word: str) -> tuple[str, ...]:
    """Hypernym chain (first sense, nearest first) of a common noun: "actor" -> ("performer", ...)."""
    synsets = self.noun_synsets(word.lower())
    if not synsets:
      return ()
    chain, synset = [], synsets[0]
    while True:
      parents = sorted(synset.hypernyms() or synset.instance_hypernyms(), key=lambda p: p.name())
      if not parents:
        return tuple(chain)
      synset = parents[0]
      chain.append(synset.lemma_names()[0].replace("_", " "))


@dataclasses.dataclass(frozen=True, eq=False)
class Annotation:
  """A tokenized text whose tags, lemmas and entity spans are computed on first access."""

  text: str
  tokens: tuple[str, ...]
  annotator: Annotator = dataclasses.field(repr=False, compare=False)

  @cached_property
  def penn(self) -> tuple[str, ...]:
    return self.annotator.tag(self.tokens)

  @cached_property
  def upos(self) -> tuple[str, ...]:
    return tuple(self.annotator.universal(t) for t in self.penn)

  @cached_property
  def lemmas(self) -> tuple[str, ...]:
    return tuple(self.annotator.lemma(w.lower(), u) for w, u in zip(self.tokens, self.upos))

  @cached_property
  def word_indices(self) -> tuple[int, ...]:
    return tuple(i for i, t in enumerate(self.tokens) if is_word(t))

  @cached_property
  def entities(self) -> tuple[Span, ...]:
    return entity_spans(self.tokens, self.penn, self.annotator)


def is_temporal_word(token: str, penn: str) -> bool:
  """Month and weekday names (an "May" tagged as a modal verb is not a month)."""
  lower = token.lower().rstrip(".")
  return (lower in MONTHS and penn != "MD") or lower in WEEKDAYS


def entity_spans(tokens: tuple[str, ...], penn: tuple[str, ...], annotator: Annotator) -> tuple[Span, ...]:
  """Named-entity candidates: maximal runs of proper nouns (NNP/NNPS, or capitalized mid-sentence words).

  Runs may contain "of"/"&" between proper nouns ("Bank of America"); month and weekday names are
  temporal, not entities; a lone sentence-initial capitalized common noun ("Woman walking ...") is not one.
  """
  n = len(tokens)
  sentence_starts = _sentence_starts(tokens)
  closed_class = resources.word_list("closed_class.txt")

  def proper(i: int) -> bool:
    token, tag = tokens[i], penn[i]
    if not is_word(token) or is_temporal_word(token, tag):
      return False
    if _CAMEL_CASE.match(token):  # brand names written "iPhone", "eBay", "iPad"
      return True
    if not (is_capitalized(token) or (tag in PROPER_TAGS and any(c.isdigit() for c in token))):
      return False
    if tag in PROPER_TAGS:
      return True
    if i in sentence_starts or token.lower() in closed_class:
      return False
    return tag in ("JJ", "NN", "NNS", "VBG", "VBN", "FW", "CD") or token.isupper()

  spans: list[Span] = []
  i = 0
  while i < n:
    if not proper(i):
      i += 1
      continue
    j = i + 1
    while j < n and (proper(j) or (tokens[j].lower() in _ENTITY_CONNECTORS and j + 1 < n and proper(j + 1))
                     or _model_number(tokens, penn, j)):
      j += 1
    if not (j - i == 1 and i in sentence_starts and annotator.is_common_word(tokens[i])):
      spans.append(Span(i, j))
    i = j
  # A first name opening the sentence and followed by "and" or a verb is a person whatever the tagger says
  # ("Sydney and her sister ...", "Chelsea and her friends ..."), unless it is also a common word: "Cat",
  # "Love", "Bride" and "Fan" are first names too.
  first = min(sentence_starts, default=-1)
  if (first >= 0 and tokens[first] in resources.first_names() and not annotator.is_common_word(tokens[first])
      and first + 1 < n
      and (tokens[first + 1].lower() in ("and", "&", ",") or penn[first + 1] in ("VBZ", "VBD", "VBP"))
      and not any(s.start == first for s in spans)):
    spans.insert(0, Span(first, first + 1))
  return tuple(spans)


def _model_number(tokens: tuple[str, ...], penn: tuple[str, ...], j: int) -> bool:
  """A number right after a name is its model ("Boeing 747", "iPhone 7"), unless it is a year or a count."""
  token = tokens[j]
  return (penn[j] == "CD" and token.isalnum() and any(c.isdigit() for c in token) and not _YEARLIKE.match(token)
          and not (j + 1 < len(tokens) and penn[j + 1] in ("NNS", "NNPS")))


def _sentence_starts(tokens: tuple[str, ...]) -> frozenset[int]:
  starts, expect = set(), True
  for i, token in enumerate(tokens):
    if token in ("``", "''", "(", "[", "'"):
      continue
    if expect and is_word(token):
      starts.add(i)
      expect = False
    if token in (".", "!", "?", ":", "...", "-", "--", "|"):
      expect = True
  return frozenset(starts)
