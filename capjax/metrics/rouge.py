"""ROUGE-L as pycocoevalcap computes it: LCS F-measure with beta 1.2, best precision and best recall taken
separately over an image's references, mean over images. Tokens are split on single spaces, as there.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)
BETA = 1.2


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
  """Length of the longest common subsequence of two token lists (one DP row at a time)."""
  if len(a) < len(b):
    a, b = b, a
  previous = [0] * (len(b) + 1)
  for token in a:
    current = [0]
    for j, other in enumerate(b):
      current.append(previous[j] + 1 if token == other else max(previous[j + 1], current[j]))
    previous = current
  return previous[-1]


def rouge_l(hypothesis: str, references: Sequence[str], beta: float = BETA) -> float:
  """pycocoevalcap's Rouge.calc_score for one image."""
  if not references:
    raise ValueError("ROUGE-L needs at least one reference")
  hyp = hypothesis.split(" ")
  precisions, recalls = [], []
  for reference in references:
    ref = reference.split(" ")
    lcs = lcs_length(ref, hyp)
    precisions.append(lcs / float(len(hyp)))
    recalls.append(lcs / float(len(ref)))
  p, r = max(precisions), max(recalls)
  if p != 0 and r != 0:
    return ((1 + beta ** 2) * p * r) / float(r + beta ** 2 * p)
  return 0.0


class Rouge:
  """pycocoevalcap's `Rouge` (ROUGE-L)."""

  def method(self) -> str:
    return "Rouge"

  def compute_score(self, gts: Mapping[K, Sequence[str]], res: Mapping[K, Sequence[str]]
                    ) -> tuple[float, np.ndarray]:
    """{image: [references]}, {image: [hypothesis]} -> (mean ROUGE-L, per-image scores)."""
    if set(gts) != set(res):
      raise ValueError("references and hypotheses cover different images")
    scores = []
    for image in gts:
      hypotheses = res[image]
      if isinstance(hypotheses, str) or len(hypotheses) != 1:
        raise ValueError(f"image {image!r}: expected a list of exactly one hypothesis, got {hypotheses!r}")
      scores.append(rouge_l(hypotheses[0], gts[image]))
    array = np.array(scores)
    return float(np.mean(array)), array
