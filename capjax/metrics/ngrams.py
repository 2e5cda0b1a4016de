"""N-gram counting for BLEU and CIDEr-D: the 1..n-grams of whitespace-tokenized captions interned to integer ids
and counted per caption in a few numpy sorts, one sparse row per (n-gram, caption).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np

_MAX_KEY = np.iinfo(np.int64).max
_SEPARATOR = "\x00"  # joins captions for one split; not white space, so it stays a word of its own


@dataclasses.dataclass(frozen=True, eq=False)
class NgramCounts:
  """Counts of the 1..n-grams of whitespace-tokenized captions: one row per (n-gram, caption), sorted that way.

  N-gram ids are dense per call: unigrams first, then bigrams, and so on; `offsets[k]` is the first id of the
  (k+1)-grams. A (k+1)-gram id points at its k-gram prefix and its last word, which spells it out.
  """

  gram: np.ndarray  # int64 [E]
  caption: np.ndarray  # int64 [E]
  order: np.ndarray  # int64 [E]: n-gram length minus one
  count: np.ndarray  # int64 [E]
  lengths: np.ndarray  # int64 [C]: words per caption
  offsets: np.ndarray  # int64 [n + 1]
  prefix: tuple[np.ndarray, ...]  # per order (from bigrams on): local id of the prefix n-gram
  last: tuple[np.ndarray, ...]  # per order: id of the last word
  words: tuple[str, ...]

  @property
  def num_grams(self) -> int:
    return int(self.offsets[-1])

  def texts(self, grams: np.ndarray) -> list[str]:
    """The n-grams with these ids, words joined by single spaces."""
    grams = np.asarray(grams, dtype=np.int64)
    order = np.searchsorted(self.offsets, grams, side="right") - 1
    out: list[str] = [""] * len(grams)
    for k in range(len(self.last)):
      chosen = np.flatnonzero(order == k)
      if len(chosen):
        for index, text in zip(chosen.tolist(), self._spell(k, grams[chosen] - self.offsets[k])):
          out[index] = text
    return out

  def _spell(self, k: int, local: np.ndarray) -> list[str]:
    last = [self.words[w] for w in self.last[k][local].tolist()]
    if k == 0:
      return last
    heads = self._spell(k - 1, self.prefix[k][local])
    return [f"{head} {word}" for head, word in zip(heads, last)]


def count_ngrams(captions: Sequence[str], n: int = 4) -> NgramCounts:
  """Interns the 1..n-grams of `captions` (split on white space, as pycocoevalcap does) and counts them.

  Per order, one sort of (n-gram key, caption) gives the n-gram ids and the counts together; the key of a
  (k+1)-gram is the id of its k-gram prefix times the vocabulary size plus its last word.
  """
  ids, lengths, words = _intern_words(captions)
  num_words, num_captions, total = max(len(words), 1), max(len(captions), 1), len(ids)
  caption_of = np.repeat(np.arange(len(captions), dtype=np.int64), lengths)
  # tokens left in the caption from each position on: the n-gram of order k+1 at i exists if > k
  remaining = np.repeat(np.cumsum(lengths), lengths) - np.arange(total)
  key = ids  # key[i]: the key of the n-gram of the current order that starts at token i
  prefixes, lasts, offsets = [np.zeros(0, np.int64)], [], [0]
  rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
  for k in range(n):
    size = len(key)
    exists = remaining[:size] > k
    count = int(np.count_nonzero(exists))
    if count and int(key.max(initial=0)) >= _MAX_KEY // num_captions:
      raise OverflowError("too many distinct n-grams for 64-bit keys: score the captions in smaller batches")
    # n-grams that run past their caption sort last (key _MAX_KEY) and are cut off
    pair = np.where(exists, key * num_captions + caption_of[:size], _MAX_KEY)
    last_order = k + 1 == n
    by_pair = None if last_order else np.argsort(pair)[:count]
    pair = np.sort(pair)[:count] if last_order else pair[by_pair]
    gram_key = pair // num_captions
    new_gram = np.ones(count, dtype=bool)
    np.not_equal(gram_key[1:], gram_key[:-1], out=new_gram[1:])
    local = np.cumsum(new_gram) - 1
    unique_keys = gram_key[new_gram]
    if k:
      prefixes.append(unique_keys // num_words)
    lasts.append(unique_keys % num_words)
    first = group_starts(pair)
    rows.append((local[first] + offsets[-1], pair[first] - gram_key[first] * num_captions,
                 np.diff(np.append(first, count))))
    offsets.append(offsets[-1] + len(unique_keys))
    if not last_order and size > 1:  # the next order's n-gram at i: this one at i, then token i+k+1
      dense = np.zeros(size, dtype=np.int64)
      dense[by_pair] = local
      key = dense[:-1] * num_words + ids[k + 1:]
    elif not last_order:
      key = key[:0]
  gram = np.concatenate([r[0] for r in rows])
  order = np.repeat(np.arange(n, dtype=np.int64), [len(r[0]) for r in rows])
  return NgramCounts(gram, np.concatenate([r[1] for r in rows]), order, np.concatenate([r[2] for r in rows]),
                     lengths, np.asarray(offsets, dtype=np.int64), tuple(prefixes), tuple(lasts), words)


def _intern_words(captions: Sequence[str]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
  """Word ids of all captions end to end, words per caption, and the words (split on white space).

  One `split` of all captions joined by a separator word is several times faster than a split per caption.
  """
  joined = f" {_SEPARATOR} ".join(captions)
  if joined.count(_SEPARATOR) != max(len(captions) - 1, 0):  # a caption holds the separator: split one by one
    return _intern_each(captions)
  tokens = joined.split()
  words = tuple(dict.fromkeys(itertools.chain((_SEPARATOR,), tokens)))
  vocabulary = {word: i for i, word in enumerate(words)}
  ids = np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64, count=len(tokens))
  separators = np.flatnonzero(ids == 0)
  lengths = np.diff(np.concatenate(([-1], separators, [len(ids)]))) - 1 if len(captions) else np.zeros(0, np.int64)
  return ids[ids != 0], lengths.astype(np.int64), words


def _intern_each(captions: Sequence[str]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
  """`_intern_words` by one split per caption."""
  split = [caption.split() for caption in captions]
  flat = list(itertools.chain.from_iterable(split))
  words = tuple(dict.fromkeys(flat))
  vocabulary = {word: i for i, word in enumerate(words)}
  ids = np.fromiter(map(vocabulary.__getitem__, flat), dtype=np.int64, count=len(flat))
  return ids, np.fromiter(map(len, split), dtype=np.int64, count=len(split)), words


def group_starts(sorted_keys: np.ndarray) -> np.ndarray:
  """Indices where a run of equal values begins in a sorted array."""
  if not len(sorted_keys):
    return np.zeros(0, np.int64)
  return np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
