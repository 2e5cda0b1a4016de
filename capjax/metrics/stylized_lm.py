"""The `ppl` metric of stylized captioning: perplexity under an interpolated Kneser–Ney trigram language model
trained on one style's sentences (the paper used SRILM), its training, and its file.

Usage: python -m capjax.metrics.stylized_lm --sentences=FILE --output=LM.json [--style=romantic] [--discount=0.75]
  FILE     the style's sentences, one per line, UTF-8 (blank lines are skipped and counted)
  LM.json  the model as n-gram counts in JSON (what `python -m capjax.metrics --style=... --lm=LM.json` reads)

The model is nltk.lm's `KneserNeyInterpolated` (order 3): its vocabulary, counter, padding and scoring formula.
nltk computes each continuation count by scanning every context of the order above, on every call: 22 ms a token
with 7,000 training sentences here (measured: 7,000 Zipf-drawn 12-word sentences over 5,000 words), so scoring
5,000 generated captions would take about 20 minutes, and it grows with the corpus. `IndexedKneserNey` is nltk's
`KneserNey` smoothing with those counts indexed once when the model is built; every probability is nltk's own
(the tests compare them with an unmodified `KneserNeyInterpolated`), at 0.14 ms a token on the same corpus (4 s
to count and index it). kenlm would be faster still, but its pip package builds C++ and its estimator (lmplz)
needs Boost: not installable offline here.

Choices, each recorded in the file or stated here:
  * Tokens: `capjax.text.annotate.caption_tokens`, lowercased: the Penn Treebank tokens of the captions' CC3M form
    (`capjax.data.sources.reference_text`), punctuation included. Generated captions are tokenized the same way.
  * Discount: one absolute discount (nltk has no modified KN), 0.75 by default: nltk's default of 0.1 is far below
    the counts-of-counts estimate n1 / (n1 + 2 n2) on captions (0.76 for bigrams, 0.87 for trigrams on the 15,833
    CC3M validation captions); `--discount` changes it.
  * Perplexity as SRILM's `ngram -ppl` reports it: pooled over the corpus, each sentence scored from `<s> <s>`
    to one `</s>` (which counts as a token), and words outside the model's vocabulary skipped and counted as OOVs
    (nltk gives them probability 0, which would make every perplexity with one unknown word infinite).
  * nltk's formula, kept as it is: its back-off weights count the padding n-grams (`<s> <s>`), so a context's
    probabilities sum to 1 only nearly (within 2e-4 for every context tried on 3,000 CC3M captions). Compare
    perplexities between models trained here, not with SRILM's figures.
  * The file: JSON of the padded n-gram counts (never a pickle; nltk has no ARPA writer), from which the nltk
    model is rebuilt exactly. n-grams are keys of their tokens joined by single spaces (tokens have no spaces).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from absl import flags

from capjax import cli, files
from capjax.text import annotate
from capjax.text.lines import read_lines, undecodable

ORDER = 3
DEFAULT_DISCOUNT = 0.75
BOS, EOS = "<s>", "</s>"
FORMAT = "capjax.kneser_ney_lm"
VERSION = 1
TOKENIZATION = "capjax.text.annotate.caption_tokens, lowercased"
_WRITTEN_BY = "a file written by `python -m capjax.metrics.stylized_lm --sentences=FILE --output=LM.json`"

Ngram = tuple[str, ...]


def tokens(text: str) -> list[str]:
  """The words the language model counts and scores: the caption's Penn Treebank tokens, lowercased."""
  return [token.lower() for token in annotate.caption_tokens(text)]


def padded_ngrams(words: Sequence[str], order: int = ORDER) -> Iterable[Ngram]:
  """Every 1..order-gram of the sentence padded with order-1 `<s>` and `</s>` on each side, as nltk.lm's
  `padded_everygram_pipeline` counts them for training."""
  padded = [BOS] * (order - 1) + list(words) + [EOS] * (order - 1)
  for start in range(len(padded)):
    for n in range(1, order + 1):
      if start + n <= len(padded):
        yield tuple(padded[start:start + n])


@dataclasses.dataclass(frozen=True)
class Perplexity:
  """A corpus perplexity as SRILM reports it: `value` over `tokens` scored words (each sentence's `</s>`
  included), `oov` words skipped as outside the vocabulary, in `sentences` sentences."""

  value: float
  tokens: int
  oov: int
  sentences: int


def _indexed_kneser_ney():
  """nltk.lm's KneserNey smoothing, with its continuation counts indexed once (defined on first use: nltk.lm
  loads only when a model is built)."""
  from nltk.lm.smoothing import KneserNey  # noqa: PLC0415

  class IndexedKneserNey(KneserNey):
    """KneserNey whose `_continuation_counts(word, context)` is a look-up rather than a scan.

    nltk's count for (word, context) is the number of distinct words x such that (x, *context, word) was seen,
    over the number of distinct such n-grams (x, *context, any word): both are counted here for every n-gram in
    one pass over the counter."""

    def __init__(self, vocabulary, counter, order, discount=0.1, **kwargs):
      super().__init__(vocabulary, counter, order, discount, **kwargs)
      self._continuations: collections.Counter[Ngram] = collections.Counter()
      self._totals: collections.Counter[Ngram] = collections.Counter()
      for n in range(2, order + 1):
        for prefix, words in counter[n].items():
          for word, count in words.items():
            if count > 0:
              self._continuations[prefix[1:] + (word,)] += 1
              self._totals[prefix[1:]] += 1

    def _continuation_counts(self, word, context=()):
      return self._continuations[tuple(context) + (word,)], self._totals[tuple(context)]

  return IndexedKneserNey


@dataclasses.dataclass(frozen=True)
class StyleLanguageModel:
  """A style's interpolated Kneser–Ney n-gram model, held as its padded n-gram counts (what the file stores)."""

  counts: Mapping[Ngram, int]
  order: int = ORDER
  discount: float = DEFAULT_DISCOUNT
  style: str = ""
  sentences: int = 0

  def __post_init__(self):
    if not 0 < self.discount < 1:
      raise ValueError(f"the discount is {self.discount}, not between 0 and 1 (exclusive) — give e.g. 0.75")
    if not any(len(ngram) == 1 for ngram in self.counts):
      raise ValueError("the language model has no counts (no sentences) — train it on the style's sentences")

  @classmethod
  def train(cls, sentences: Iterable[str], style: str = "", discount: float = DEFAULT_DISCOUNT,
            order: int = ORDER) -> StyleLanguageModel:
    """The model of `sentences` (raw text, tokenized by `tokens`); blank sentences are skipped."""
    counts: collections.Counter[Ngram] = collections.Counter()
    used = 0
    for sentence in sentences:
      words = tokens(sentence)
      if words:
        counts.update(padded_ngrams(words, order))
        used += 1
    if not used:
      raise ValueError("no sentence with a word to train on — give the style's sentences, one per line")
    return cls(dict(counts), order, discount, style, used)

  @functools.cached_property
  def nltk_model(self):
    """nltk.lm's `KneserNeyInterpolated` over these counts, its smoothing indexed (`IndexedKneserNey`)."""
    from nltk.lm import KneserNeyInterpolated, NgramCounter, Vocabulary  # noqa: PLC0415

    counter = NgramCounter()
    unigrams: collections.Counter[str] = collections.Counter()
    for ngram, count in self.counts.items():
      if len(ngram) == 1:
        counter.unigrams[ngram[0]] += count
        unigrams[ngram[0]] += count
      else:
        counter[ngram[:-1]][ngram[-1]] += count
    model = KneserNeyInterpolated(self.order, discount=self.discount, vocabulary=Vocabulary(unigrams, unk_cutoff=1),
                                  counter=counter)
    model.estimator = _indexed_kneser_ney()(model.vocab, model.counts, order=self.order, discount=self.discount)
    return model

  def perplexity(self, sentences: Iterable[str]) -> Perplexity:
    """The corpus perplexity of `sentences` (raw captions, tokenized by `tokens`), as SRILM's `ngram -ppl`."""
    model = self.nltk_model
    vocabulary = model.vocab
    log_prob, scored, oov, count = 0.0, 0, 0, 0
    for sentence in sentences:
      count += 1
      context = [BOS] * (self.order - 1)
      for word in [*tokens(sentence), EOS]:
        if word in vocabulary and word != BOS:
          log_prob += math.log(model.score(word, context[len(context) - self.order + 1:]))
          scored += 1
        else:
          oov += 1
        context.append(word)
    if not count:
      raise ValueError("no sentences to score — give at least one caption")
    return Perplexity(math.exp(-log_prob / scored), scored, oov, count)

  # --- the file

  def to_json(self) -> dict[str, Any]:
    by_order: dict[str, dict[str, int]] = {str(n): {} for n in range(1, self.order + 1)}
    for ngram, count in sorted(self.counts.items(), key=lambda item: (len(item[0]), item[0])):
      by_order[str(len(ngram))][" ".join(ngram)] = count
    return {"format": FORMAT, "version": VERSION, "model": "nltk.lm.KneserNeyInterpolated", "order": self.order,
            "discount": self.discount, "style": self.style, "sentences": self.sentences,
            "tokenization": TOKENIZATION, "counts": by_order}

  def save(self, path: str | os.PathLike[str]) -> None:
    """Writes the model as JSON (written whole to a temporary file, then renamed: never half a file; a full disk
    is one `error:` line, `capjax.files`)."""
    with files.writing(path) as f:
      json.dump(self.to_json(), f, ensure_ascii=False, separators=(",", ":"))

  @classmethod
  def from_json(cls, data: Any, where: str = "the language model") -> StyleLanguageModel:
    """The model in `data` (parsed JSON); a ValueError says what is wrong with it."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
      raise ValueError(f"{where} is not a capjax language model (no \"format\": \"{FORMAT}\") — give {_WRITTEN_BY}")
    if data.get("version") != VERSION:
      raise ValueError(f"{where} has version {data.get('version')!r}, this capjax reads version {VERSION} — "
                       "train the model again with this capjax")
    order, discount = data.get("order"), data.get("discount")
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= 9:
      raise ValueError(f"{where}: \"order\" is {order!r}, not an integer from 1 to 9 — give {_WRITTEN_BY}")
    if isinstance(discount, bool) or not isinstance(discount, (int, float)) or not 0 < discount < 1:
      raise ValueError(f"{where}: \"discount\" is {discount!r}, not a number between 0 and 1 — give {_WRITTEN_BY}")
    if data.get("tokenization") != TOKENIZATION:
      raise ValueError(f"{where} was tokenized by {data.get('tokenization')!r}, not {TOKENIZATION!r} — train the "
                       "model again with this capjax")
    raw = data.get("counts")
    if not isinstance(raw, dict) or set(raw) != {str(n) for n in range(1, order + 1)}:
      raise ValueError(f"{where}: \"counts\" is not an object with the keys \"1\" to \"{order}\" — give {_WRITTEN_BY}")
    counts: dict[Ngram, int] = {}
    for n, ngrams in raw.items():
      if not isinstance(ngrams, dict):
        raise ValueError(f"{where}: counts[\"{n}\"] is not an object of n-gram: count — give {_WRITTEN_BY}")
      for key, count in ngrams.items():
        ngram = tuple(key.split(" "))
        if len(ngram) != int(n) or "" in ngram:
          raise ValueError(f"{where}: {key!r} in counts[\"{n}\"] is not {n} tokens joined by single spaces — "
                           f"give {_WRITTEN_BY}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
          raise ValueError(f"{where}: the count of {key!r} is {count!r}, not a positive integer — give {_WRITTEN_BY}")
        counts[ngram] = count
    style = data.get("style", "")
    sentences = data.get("sentences", 0)
    if not isinstance(style, str) or isinstance(sentences, bool) or not isinstance(sentences, int):
      raise ValueError(f"{where}: \"style\" must be a string and \"sentences\" an integer — give {_WRITTEN_BY}")
    return cls(counts, order, float(discount), style, sentences)

  @classmethod
  def load(cls, path: str | os.PathLike[str], flag: str = "") -> StyleLanguageModel:
    """The model in the JSON file at `path`; a ValueError names the file and what is wrong (a missing file, a FIFO,
    a device: an `error:` line naming `flag`, `capjax.files`)."""
    raw = files.read_bytes(path, flag, f"a language model ({_WRITTEN_BY})")
    try:
      data = json.loads(raw)
    except UnicodeDecodeError as error:
      raise ValueError(f"{os.fspath(path)}: byte {error.start + 1} is not UTF-8 — give {_WRITTEN_BY}") from error
    except json.JSONDecodeError as error:
      raise ValueError(f"{os.fspath(path)} is not JSON ({error.msg}: line {error.lineno}) — give {_WRITTEN_BY}") \
          from error
    except RecursionError as error:  # arrays or objects nested thousands deep
      raise ValueError(f"{os.fspath(path)} is not a style language model: its JSON is nested deeper than the parser "
                       f"follows — give {_WRITTEN_BY}") from error
    return cls.from_json(data, os.fspath(path))


def read_sentences(path: str | os.PathLike[str], flag: str = "") -> tuple[list[str], int]:
  """(sentences, blank lines skipped) of a UTF-8 text file of one sentence a line; a line that is not UTF-8 is a
  ValueError naming it (training text is the user's own: a wrong encoding should be fixed, not guessed), a FIFO,
  a device or UTF-16 text an `error:` line naming `flag` (`read_lines`)."""
  sentences, blank = [], 0
  for number, line in enumerate(read_lines(path, flag=flag), 1):
    try:
      text = line.decode("utf-8")
    except UnicodeDecodeError as error:
      raise ValueError(f"{os.fspath(path)}: line {number}, {undecodable(line, error)} is not UTF-8 — save the "
                       "sentences as UTF-8") from error
    if text.strip():
      sentences.append(text)
    else:
      blank += 1
  return sentences, blank


_FLAGS = flags.FlagValues()
_SENTENCES = flags.DEFINE_string("sentences", None, "the style's sentences, one per line (UTF-8)", flag_values=_FLAGS,
                                 required=True)
_OUTPUT = flags.DEFINE_string("output", None, "where to write the model (JSON)", flag_values=_FLAGS, required=True)
_STYLE = flags.DEFINE_string("style", "", "the style's name, recorded in the file (the metrics command checks it "
                             "against its --style)", flag_values=_FLAGS)
_DISCOUNT = flags.DEFINE_float("discount", DEFAULT_DISCOUNT, "Kneser–Ney absolute discount, in (0, 1)",
                               flag_values=_FLAGS)


def main(argv: Sequence[str]) -> int:
  cli.parse(_FLAGS, argv, __doc__)
  if not 0 < _DISCOUNT.value < 1:
    cli.fail(f"--discount={_DISCOUNT.value} is not between 0 and 1 (exclusive) — give e.g. 0.75")
  output = files.output_file(_OUTPUT.value, inputs={"--sentences": _SENTENCES.value}, example="lm.json",
                             make_folder=True)
  try:
    sentences, blank = read_sentences(_SENTENCES.value, "--sentences")
  except OSError as error:
    cli.fail(f"cannot read {error.filename}: {error.strerror} — check the path and its permissions")
  except ValueError as error:  # it names the file and the line
    cli.fail(str(error))
  try:
    model = StyleLanguageModel.train(sentences, _STYLE.value, _DISCOUNT.value)
  except ValueError as error:
    cli.fail(f"{_SENTENCES.value}: {error}")
  # Checked once the sentences are known to be good (counting them takes seconds): a bad file creates no folder.
  cli.writable_dir(os.path.dirname(os.path.abspath(output)), "--output's directory")
  model.save(output)
  print(f"wrote {output}: order {model.order}, discount {model.discount}, {model.sentences:,} sentences "
        f"({blank:,} blank lines skipped), {sum(1 for n in model.counts if len(n) == 1):,} words in the vocabulary")
  return 0


if __name__ == "__main__":
  cli.run(main)
