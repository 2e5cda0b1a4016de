"""CIDEr-D, the "CIDEr" of pycocoevalcap, on numpy arrays (n-grams counted by `capjax.metrics.ngrams`, sparse
rows): the same numbers much faster, and optionally a fixed document-frequency table instead of the corpus.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from capjax.metrics.ngrams import NgramCounts, count_ngrams, group_starts

K = TypeVar("K", bound=Hashable)
_FORMAT = "capjax.metrics.cider.DocumentFrequency/1"


@dataclasses.dataclass(frozen=True)
class DocumentFrequency:
  """In how many documents (images: the union of their reference n-grams) each n-gram occurs.

  CIDEr-D weighs an n-gram by log(num_documents / max(1, df)). pycocoevalcap takes df from the references being
  evaluated, which breaks down when there are few images or one reference each (every n-gram of a reference is
  then "rare"). A table built once from a training split gives stable weights across evaluations.
  """

  num_documents: int
  counts: Mapping[str, int]  # n-gram (words joined by one space) -> df
  n: int = 4

  @classmethod
  def from_references(cls, references: Iterable[Sequence[str]], n: int = 4) -> DocumentFrequency:
    """`references`: per image, its tokenized reference captions."""
    per_image = [list(captions) for captions in references]
    if not per_image:
      raise ValueError("a document-frequency table needs the references of at least one image")
    counts = count_ngrams([c for captions in per_image for c in captions], n)
    image_of = np.repeat(np.arange(len(per_image)), [len(captions) for captions in per_image])
    df = _document_frequency(counts, image_of[counts.caption] if len(counts.caption) else counts.caption)
    grams = np.flatnonzero(df)
    return cls(len(per_image), dict(zip(counts.texts(grams), df[grams].tolist())), n)

  def save(self, path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
      json.dump({"format": _FORMAT, "n": self.n, "num_documents": self.num_documents,
                 "document_frequency": dict(self.counts)}, f, ensure_ascii=False)

  @classmethod
  def load(cls, path: str | os.PathLike[str]) -> DocumentFrequency:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
    if data.get("format") != _FORMAT:
      raise ValueError(f"{path} is not a CIDEr-D document-frequency table (format {data.get('format')!r})")
    return cls(int(data["num_documents"]), data["document_frequency"], int(data["n"]))


def _document_frequency(counts: NgramCounts, document: np.ndarray) -> np.ndarray:
  """df of every n-gram id: the number of distinct documents among its rows (`document[i]`: that of row i).

  Rows are sorted by (n-gram, caption) and a document's captions are contiguous: (n-gram, document) is sorted.
  """
  pairs = counts.gram * (int(document.max()) + 1 if len(document) else 1) + document
  return np.bincount(counts.gram[group_starts(pairs)], minlength=counts.num_grams).astype(np.float64)


class CiderD:
  """pycocoevalcap's CIDEr-D: n = 1..4, tf-idf cosine with clipped hypothesis weights, Gaussian length penalty
  (sigma 6) on the difference in bigram counts, mean over n and over references, times 10.

  `df=None` takes document frequencies from the references being scored (pycocoevalcap's behaviour);
  a `DocumentFrequency` fixes them.
  """

  def __init__(self, df: DocumentFrequency | None = None, n: int = 4, sigma: float = 6.0):
    if df is not None and df.n < n:
      raise ValueError(f"the document-frequency table counts {df.n}-grams, CIDEr-D here needs {n}")
    self.df, self.n, self.sigma = df, n, sigma

  def method(self) -> str:
    return "CIDEr"

  def compute_score(self, gts: Mapping[K, Sequence[str]], res: Mapping[K, Sequence[str]]
                    ) -> tuple[float, np.ndarray]:
    """pycocoevalcap's signature: {image: [references]}, {image: [hypothesis]} -> (mean, per-image scores)."""
    _check_same_images(gts, res)
    images = list(gts)
    hypotheses = [_single(res[image], image) for image in images]
    references = [list(gts[image]) for image in images]
    scores = self.scores(hypotheses, references)
    return float(np.mean(scores)), scores

  def scores(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
    """Per-image CIDEr-D of tokenized `hypotheses[i]` against `references[i]` (at least one each)."""
    if len(hypotheses) != len(references):
      raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} reference lists")
    num_refs = np.fromiter(map(len, references), dtype=np.int64, count=len(references))
    if len(num_refs) and num_refs.min() == 0:
      raise ValueError(f"image #{int(np.argmin(num_refs))} has no reference caption")
    num_images = len(hypotheses)
    counts = count_ngrams(list(hypotheses) + [r for refs in references for r in refs], self.n)
    ref_image = np.repeat(np.arange(num_images, dtype=np.int64), num_refs)
    # (n-gram, image) of every row. Rows are sorted by (n-gram, caption), and an image's references are
    # contiguous, so the keys of the hypothesis rows and those of the reference rows are each sorted.
    is_ref = counts.caption >= num_images
    key = counts.gram * num_images + np.concatenate([np.arange(num_images, dtype=np.int64), ref_image])[
        counts.caption]
    hyp_keys, ref_keys = key[~is_ref], key[is_ref]
    if self.df is None:  # an image's references form one document; hypotheses are not counted
      df = np.bincount(ref_keys[group_starts(ref_keys)] // num_images, minlength=counts.num_grams)
      log_documents = np.log(float(num_images))
    else:
      table = self.df.counts
      df = np.array([table.get(text, 0) for text in counts.texts(np.arange(counts.num_grams))], dtype=np.float64)
      log_documents = np.log(float(self.df.num_documents))
    weight = counts.count * (log_documents - np.log(np.maximum(1.0, df)))[counts.gram]
    num_captions = len(counts.lengths)
    slot = counts.caption * self.n + counts.order
    norm = np.sqrt(np.bincount(slot, weights=weight * weight, minlength=num_captions * self.n))
    norm = norm.reshape(num_captions, self.n)
    # pycocoevalcap's "length" sums the term frequencies of n-gram index 1: the bigram count.
    bigrams = np.maximum(counts.lengths - 1, 0) if self.n >= 2 else np.zeros_like(counts.lengths)
    # Match every reference row with the hypothesis row of its image holding the same n-gram.
    found = np.minimum(np.searchsorted(hyp_keys, ref_keys), max(len(hyp_keys) - 1, 0))
    matched = np.flatnonzero(hyp_keys[found] == ref_keys) if len(hyp_keys) else np.zeros(0, np.int64)
    w_hyp, w_ref = weight[~is_ref][found[matched]], weight[is_ref][matched]
    similarity = np.bincount(slot[is_ref][matched] - num_images * self.n,
                             weights=np.minimum(w_hyp, w_ref) * w_ref, minlength=len(ref_image) * self.n)
    similarity = similarity.reshape(len(ref_image), self.n)
    denominator = norm[ref_image] * norm[num_images:]
    similarity = np.where(denominator != 0, similarity / np.where(denominator != 0, denominator, 1.0), similarity)
    delta = (bigrams[ref_image] - bigrams[num_images:]).astype(np.float64)
    similarity *= np.exp(-(delta ** 2) / (2 * self.sigma ** 2))[:, None]
    per_image = np.stack([np.bincount(ref_image, weights=similarity[:, k], minlength=num_images)
                          for k in range(self.n)], axis=1)
    return per_image.mean(axis=1) / num_refs * 10.0


def _single(hypotheses: Sequence[str], image: Hashable) -> str:
  if isinstance(hypotheses, str) or len(hypotheses) != 1:
    raise ValueError(f"image {image!r}: expected a list of exactly one hypothesis, got {hypotheses!r}")
  return hypotheses[0]


def _check_same_images(gts: Mapping[K, Sequence[str]], res: Mapping[K, Sequence[str]]) -> None:
  missing, extra = [k for k in gts if k not in res], [k for k in res if k not in gts]
  if missing or extra:
    raise ValueError(f"references and hypotheses cover different images: no hypothesis for {missing[:20]}, "
                     f"no references for {extra[:20]}")


def cider_d(references: Sequence[Sequence[str]], hypotheses: Sequence[str],
            df: DocumentFrequency | None = None) -> float:
  """Corpus CIDEr-D of tokenized `hypotheses[i]` against `references[i]`: the mean of the per-image scores."""
  return float(np.mean(CiderD(df).scores(hypotheses, references))) if len(hypotheses) else 0.0

