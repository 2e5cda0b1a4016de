"""NLTK's English averaged-perceptron POS tagger, re-run over a dense weight matrix for speed.

Same model, features, tag dictionary and tie-breaking as `nltk.tag.PerceptronTagger.tag`: same tags, ~5x faster.

usage: python -m capjax.text.tagger
  prints, as JSON, the tagger's accuracy in universal tags on NLTK's treebank sample and on CoNLL-2000's test set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from absl import flags

from capjax import cli

FLAGS = flags.FlagValues()

START = ("-START-", "-START2-")
END = ("-END-", "-END2-")


def normalize(word: str) -> str:
  """The tagger's context normalization (NLTK's `PerceptronTagger.normalize`)."""
  if "-" in word and word[0] != "-":
    return "!HYPHEN"
  if word.isdigit() and len(word) == 4:
    return "!YEAR"
  if word and word[0].isdigit():
    return "!DIGITS"
  return word.lower()


class PerceptronTagger:
  """Greedy left-to-right Penn tagging with NLTK's trained weights held as one (features, classes) matrix.

  Feature rows that depend on one word or on the previous tags are looked up once and remembered.
  """

  def __init__(
      self, weights: dict[str, dict[str, float]], tagdict: dict[str, str], classes: frozenset[str],
      cache_size: int = 1 << 18,
  ):
    # NLTK breaks score ties by the alphabetically largest tag: sort descending so argmax's first wins.
    self.classes = tuple(sorted(classes, reverse=True))
    column = {c: j for j, c in enumerate(self.classes)}
    self.feature_row = {feature: i for i, feature in enumerate(weights)}
    matrix = np.zeros((len(weights), len(self.classes)), dtype=np.float64)
    for feature, row in self.feature_row.items():
      for label, weight in weights[feature].items():
        matrix[row, column[label]] = weight
    self.matrix = matrix
    self.tagdict = tagdict
    self.bias = self.feature_row.get("bias")
    self.cache_size = cache_size
    self._own: dict[str, tuple[int | None, ...]] = {}
    self._context: dict[str, tuple[int | None, ...]] = {}
    self._history: dict[tuple[str, str], tuple[int | None, ...]] = {}

  def _own_rows(self, word: str) -> tuple[int | None, ...]:
    rows = self._own.get(word)
    if rows is None:
      get = self.feature_row.get
      rows = (get("i suffix " + word[-3:]), get("i pref1 " + word[:1]))
      if len(self._own) >= self.cache_size:
        self._own.clear()
      self._own[word] = rows
    return rows

  def _context_rows(self, w: str) -> tuple[int | None, ...]:
    """Rows of a normalized word in each position role: i, i-1, i-1 suffix, i-2, i+1, i+1 suffix, i+2."""
    rows = self._context.get(w)
    if rows is None:
      get = self.feature_row.get
      rows = (get("i word " + w), get("i-1 word " + w), get("i-1 suffix " + w[-3:]), get("i-2 word " + w),
              get("i+1 word " + w), get("i+1 suffix " + w[-3:]), get("i+2 word " + w))
      if len(self._context) >= self.cache_size:
        self._context.clear()
      self._context[w] = rows
    return rows

  def _history_rows(self, prev: str, prev2: str) -> tuple[int | None, ...]:
    rows = self._history.get((prev, prev2))
    if rows is None:
      get = self.feature_row.get
      rows = (get("i-1 tag " + prev), get("i-2 tag " + prev2), get("i tag+i-2 tag " + prev + " " + prev2))
      self._history[(prev, prev2)] = rows
    return rows

  def tag(self, tokens: Sequence[str]) -> list[str]:
    """Penn tags for `tokens`."""
    context = [*START, *(normalize(w) for w in tokens), *END]
    rows = [self._context_rows(w) for w in context]
    get = self.feature_row.get
    tags: list[str] = []
    prev, prev2 = START
    for i, word in enumerate(tokens):
      tag = self.tagdict.get(word)
      if not tag:
        c = i + 2
        suffix, pref1 = self._own_rows(word)
        history = self._history_rows(prev, prev2)
        # The order of NLTK's `_get_features`, so float sums add up in the same order.
        features = (
            self.bias, suffix, pref1, history[0], history[1], history[2], rows[c][0],
            get("i-1 tag+i word " + prev + " " + context[c]), rows[c - 1][1], rows[c - 1][2], rows[c - 2][3],
            rows[c + 1][4], rows[c + 1][5], rows[c + 2][6],
        )
        found = [r for r in features if r is not None]
        tag = self.classes[int(np.argmax(self.matrix[found].sum(axis=0)))] if found else max(self.classes)
      tags.append(tag)
      prev2, prev = prev, tag
    return tags


def evaluate(
    tagger: PerceptronTagger, tagged_sents: Sequence[Sequence[tuple[str, str]]], universal: dict[str, str]
) -> dict[str, float]:
  """Accuracy against gold Penn tags (traces "-NONE-" removed), and how often the det/noun/prep rule agrees.

  `rule_agreement`: share of sentences where "has a DET, a NOUN and an ADP" is decided the same from
  predicted and from gold tags; the paper's syntactic filter cannot be more reliable than that.
  """
  tokens = correct = correct_universal = rule_same = 0
  for sent in tagged_sents:
    words = [w for w, t in sent if t != "-NONE-"]
    gold = [t for _, t in sent if t != "-NONE-"]
    predicted = tagger.tag(words)
    tokens += len(words)
    correct += sum(p == g for p, g in zip(predicted, gold))
    correct_universal += sum(universal.get(p, "X") == universal.get(g, "X") for p, g in zip(predicted, gold))
    rule_same += _det_noun_prep(predicted, universal) == _det_noun_prep(gold, universal)
  return {
      "sentences": len(tagged_sents),
      "tokens": tokens,
      "penn_accuracy": round(correct / tokens, 4),
      "universal_accuracy": round(correct_universal / tokens, 4),
      "rule_agreement": round(rule_same / len(tagged_sents), 4),
  }


def _det_noun_prep(tags: Sequence[str], universal: dict[str, str]) -> bool:
  found = {universal.get(t, "X") for t in tags}
  return {"DET", "NOUN", "ADP"} <= found


def main(argv: Sequence[str]) -> int:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  import json  # noqa: PLC0415

  from capjax.text import resources  # noqa: PLC0415 (NLTK's corpora: not for --help)

  tagger = PerceptronTagger(*resources.perceptron_weights())
  universal = resources.universal_tag_map()
  report = {
      "treebank_sample": evaluate(tagger, resources.treebank_tagged_sents(), universal),
      "conll2000_test": evaluate(tagger, resources.conll2000_tagged_sents("test.txt"), universal),
  }
  print(json.dumps(report, indent=2))
  return 0


if __name__ == "__main__":
  cli.run(main)
