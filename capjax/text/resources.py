"""The one access point to NLTK data and the word lists shipped in `capjax/text/data/`.

Each resource is loaded once per process; a missing one raises `MissingNltkResource` that says how to get it.
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

from capjax.text import lines as lines_lib

SETUP_HINT = "run `python -m capjax.setup_nltk` (needs network once) or set NLTK_DATA to a folder that has it"


class MissingNltkResource(LookupError):
  """An NLTK resource the text pipeline needs is not on `nltk.data.path`."""

  def __init__(self, resource: str):
    super().__init__(f"NLTK resource {resource!r} not found: {SETUP_HINT}.")
    self.resource = resource


def find(resource: str) -> str:
  """Locates `resource` (e.g. "corpora/wordnet") zipped or unzipped; raises MissingNltkResource."""
  import nltk

  for candidate in (resource, resource + ".zip"):
    try:
      nltk.data.find(candidate)
      return candidate
    except LookupError:
      continue
  raise MissingNltkResource(resource)


@functools.cache
def wordnet() -> Any:
  """Princeton WordNet 3.0, fully loaded (about 5 s, once per process)."""
  find("corpora/wordnet")
  from nltk.corpus import wordnet as wn

  wn.ensure_loaded()
  return wn


@functools.cache
def perceptron_weights() -> tuple[dict[str, dict[str, float]], dict[str, str], frozenset[str]]:
  """The English averaged-perceptron POS model: (feature weights, tag dictionary, classes)."""
  find("taggers/averaged_perceptron_tagger_eng")
  from nltk.tag.perceptron import PerceptronTagger

  tagger = PerceptronTagger(lang="eng")
  return tagger.model.weights, tagger.tagdict, frozenset(tagger.classes)


@functools.cache
def universal_tag_map() -> dict[str, str]:
  """Penn Treebank tag -> universal tag (12 tags); unknown Penn tags map to "X"."""
  find("taggers/universal_tagset")
  from nltk.tag.mapping import tagset_mapping

  return dict(tagset_mapping("en-ptb", "universal"))


@functools.cache
def wordfreq_words(min_zipf: float) -> frozenset[str]:
  """wordfreq's English "large" list (a blend of Wikipedia, subtitles, news, books, web and social text) down to
  `min_zipf` (log10 of occurrences per billion words), words with at least one letter; 0.2 s, ~25 MB, once."""
  import wordfreq

  min_frequency = 10.0 ** (min_zipf - 9)
  return frozenset(word for word, frequency in wordfreq.get_frequency_dict("en", wordlist="large").items()
                   if frequency >= min_frequency and any(c.isalpha() for c in word))


@functools.cache
def default_vocabulary(min_zipf: float) -> frozenset[str]:
  """The default vocabulary: wordfreq's English list from `min_zipf` up, WordNet lemmas, the closed-class list."""
  return wordfreq_words(min_zipf) | wordnet_lemma_words() | word_list("closed_class.txt")


@functools.cache
def wordnet_lemma_words() -> frozenset[str]:
  """Every WordNet lemma name, lowercased and split on "_" and "-" into single words."""
  wn = wordnet()
  out: set[str] = set()
  for name in wn.all_lemma_names():
    out.update(part for part in name.replace("-", "_").split("_") if part)
  return frozenset(out)


@functools.cache
def first_names() -> frozenset[str]:
  """The NLTK `names` corpus (7,944 first names), as written (capitalized)."""
  find("corpora/names")
  from nltk.corpus import names

  return frozenset(names.words())


@functools.cache
def gazetteer(fileid: str) -> tuple[str, ...]:
  """One NLTK gazetteer list, e.g. "countries.txt", "usstates.txt", "uscities.txt"."""
  find("corpora/gazetteers")
  from nltk.corpus import gazetteers

  return tuple(gazetteers.words(fileid))


@functools.cache
def treebank_tagged_sents() -> tuple[tuple[tuple[str, str], ...], ...]:
  """NLTK's 10% sample of the Penn Treebank (3,914 WSJ sentences), with Penn tags."""
  find("corpora/treebank")
  from nltk.corpus import treebank

  return tuple(tuple(s) for s in treebank.tagged_sents())


@functools.cache
def conll2000_tagged_sents(fileid: str = "test.txt") -> tuple[tuple[tuple[str, str], ...], ...]:
  """CoNLL-2000 chunking data (WSJ sections 15-18 train, 20 test) with Penn tags."""
  find("corpora/conll2000")
  from nltk.corpus import conll2000

  return tuple(tuple(s) for s in conll2000.tagged_sents(fileid))


@functools.cache
def vader() -> Any:
  """A VADER `SentimentIntensityAnalyzer` over the NLTK lexicon."""
  find("sentiment/vader_lexicon")
  from nltk.sentiment import SentimentIntensityAnalyzer

  return SentimentIntensityAnalyzer()


def read_lines(name: str) -> tuple[str, ...]:
  """Non-empty, non-comment lines of a file shipped in `capjax/text/data/`."""
  text = importlib.resources.files("capjax.text").joinpath("data", name).read_text(encoding="utf-8")
  return tuple(line.strip() for line in lines_lib.split_lines(text) if line.strip() and not line.startswith("#"))


@functools.cache
def word_list(name: str) -> frozenset[str]:
  """A shipped one-word-a-line list (e.g. "closed_class.txt", "profanity.txt"), lowercased."""
  return frozenset(line.lower() for line in read_lines(name))


@functools.cache
def entity_table(name: str = "entities.tsv") -> dict[str, str]:
  """A shipped `entity<TAB>hypernym` table, keys lowercased."""
  return parse_entity_table(read_lines(name))


def parse_entity_table(lines: tuple[str, ...] | list[str]) -> dict[str, str]:
  """Parses `entity<TAB>hypernym` lines into {lowercased entity: hypernym}."""
  table: dict[str, str] = {}
  for line in lines:
    entity, _, hypernym = line.partition("\t")
    if entity.strip() and hypernym.strip():
      table[" ".join(entity.lower().split())] = hypernym.strip().lower()
  return table
