"""Corpus BLEU-1..4 exactly as pycocoevalcap's bleu_scorer computes it (clipped counts and lengths pooled over the
corpus, closest reference length with ties to the shorter, 1e-15/1e-9 smoothing), on interned n-grams.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from capjax.metrics.ngrams import count_ngrams, group_starts

K = TypeVar("K", bound=Hashable)
_TINY, _SMALL = 1e-15, 1e-9


class Bleu:
  """pycocoevalcap's `Bleu(n)` with the "closest" reference length."""

  def __init__(self, n: int = 4):
    self.n = n

  def method(self) -> str:
    return "Bleu"

  def compute_score(self, gts: Mapping[K, Sequence[str]], res: Mapping[K, Sequence[str]]
                    ) -> tuple[list[float], list[list[float]]]:
    """{image: [references]}, {image: [hypothesis]} -> ([BLEU-1..n], [[per-image BLEU-k] for k in 1..n])."""
    if set(gts) != set(res):
      raise ValueError("references and hypotheses cover different images")
    images = list(gts)
    for image in images:
      if isinstance(res[image], str) or len(res[image]) != 1:
        raise ValueError(f"image {image!r}: expected a list of exactly one hypothesis, got {res[image]!r}")
      if not gts[image]:
        raise ValueError(f"image {image!r} has no reference caption")
    return self.scores([res[image][0] for image in images], [list(gts[image]) for image in images])

  def scores(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]
             ) -> tuple[list[float], list[list[float]]]:
    """Corpus BLEU-1..n and the per-image values, of tokenized `hypotheses[i]` against `references[i]`."""
    n, num_images = self.n, len(hypotheses)
    num_refs = np.fromiter(map(len, references), dtype=np.int64, count=len(references))
    counts = count_ngrams(list(hypotheses) + [r for refs in references for r in refs], n)
    ref_image = np.repeat(np.arange(num_images, dtype=np.int64), num_refs)
    is_ref = counts.caption >= num_images
    # The most times each n-gram occurs in one reference of the image clips its hypothesis count. Rows are
    # sorted by (n-gram, caption) and an image's references are contiguous, so both key arrays are sorted.
    ref_rows = np.flatnonzero(is_ref)
    ref_keys = counts.gram[ref_rows] * num_images + ref_image[counts.caption[ref_rows] - num_images]
    first = group_starts(ref_keys)
    ref_max = np.maximum.reduceat(counts.count[ref_rows], first) if len(first) else first
    ref_keys = ref_keys[first]
    hyp_rows = np.flatnonzero(~is_ref)
    hyp_keys = counts.gram[hyp_rows] * num_images + counts.caption[hyp_rows]
    found = np.minimum(np.searchsorted(ref_keys, hyp_keys), max(len(ref_keys) - 1, 0))
    clip = np.where(ref_keys[found] == hyp_keys, ref_max[found], 0) if len(ref_keys) else np.zeros(len(hyp_keys))
    correct = np.bincount(counts.caption[hyp_rows] * n + counts.order[hyp_rows],
                          weights=np.minimum(counts.count[hyp_rows], clip), minlength=num_images * n)
    correct = np.rint(correct).astype(np.int64).reshape(num_images, n)
    test_length = counts.lengths[:num_images]
    guess = np.maximum(0, test_length[:, None] - np.arange(n)[None, :])
    ref_length = _closest_lengths(test_length, counts.lengths[num_images:], ref_image, num_images)
    corpus = _bleu(correct.sum(axis=0).tolist(), guess.sum(axis=0).tolist(), int(test_length.sum()),
                   int(ref_length.sum()))
    return corpus, _per_image_bleu(correct, guess, test_length, ref_length)


def _closest_lengths(test: np.ndarray, refs: np.ndarray, ref_image: np.ndarray, num_images: int) -> np.ndarray:
  """Per image, min over its references of (|ref - test|, ref), i.e. the closest length, ties to the shorter."""
  if not len(refs):
    return np.zeros(num_images, dtype=np.int64)
  scale = int(refs.max()) + 1
  key = np.abs(refs - test[ref_image]) * scale + refs
  best = np.full(num_images, np.iinfo(np.int64).max)
  np.minimum.at(best, ref_image, key)
  return best % scale


def _bleu(correct: Sequence[int], guess: Sequence[int], test_length: int, ref_length: int) -> list[float]:
  """bleu_scorer.compute_score's pooled formula, operation for operation (Python floats)."""
  scores, product = [], 1.0
  for k in range(len(correct)):
    product *= float(correct[k] + _TINY) / (guess[k] + _SMALL)
    scores.append(product ** (1.0 / (k + 1)))
  ratio = (test_length + _TINY) / (ref_length + _SMALL)
  if ratio < 1:
    scores = [s * math.exp(1 - 1 / ratio) for s in scores]
  return scores


def _per_image_bleu(correct: np.ndarray, guess: np.ndarray, test_length: np.ndarray,
                    ref_length: np.ndarray) -> list[list[float]]:
  """bleu_scorer's per-image values (its `bleu_list`), vectorized over images."""
  product = np.cumprod((correct + _TINY) / (guess + _SMALL), axis=1)
  scores = product ** (1.0 / np.arange(1, correct.shape[1] + 1))[None, :]
  ratio = (test_length + _TINY) / (ref_length + _SMALL)
  penalty = np.where(ratio < 1, np.exp(1 - 1 / ratio), 1.0)
  return (scores * penalty[:, None]).T.tolist()
