"""The clip stage of alt_text_captions, beyond the paper: its cut-off setting (`--set=clip_threshold`), the scoring of
a batch of pairs with capjax.text_models.clip_score, the histogram of the scores that the build report keeps, and a
share cut-off (top=F: the top share F of the pairs scored), which both paths compute once every pair is scored.

JAX and the CLIP are imported on first use: a build without the stage never loads them.
"""

from __future__ import annotations

import array
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from capjax.image import io as image_io
from tfds_builders import report as report_lib

DEFAULT_THRESHOLD = "datacomp_b32"  # the cut-off when --set=clip_weights comes without --set=clip_threshold
BATCH = 32  # pairs per CLIP call, on both paths (clip_score.Scorer pads a short batch to it)
SCORES = "clip_scores"  # the report's histogram of the pairs' CLIP scores, per BIN wide bin
BIN = 0.05
CUTOFF = "clip_cutoff"  # the report's cut-off the build applied: a minimum as given, a share's as computed
REASON = "clip_below_threshold"  # clip_score.REASON, without importing it (and JAX) for a build without the stage


def parse_threshold(text: str) -> Any:
  """`--set=clip_threshold` → clip_score.Threshold: a published name (clip_score.THRESHOLDS), a number in [-1, 1]
  (min=X too), the minimum score kept; or top=F, the top share F in (0, 1] of the pairs the stage scores (as
  datacomp_l14_top30 is, F = 0.3). Raises ValueError."""
  from capjax.text_models import clip_score  # noqa: PLC0415
  names = ", ".join(clip_score.THRESHOLDS)
  if _is_number(text):
    number = float(text)
    if not -1 <= number <= 1:  # nan too
      raise ValueError(f"clip_threshold={text} is out of range — a CLIP score is a cosine: give a number in [-1, 1] "
                       f"or one of {names}")
    return clip_score.Threshold(text, minimum=number)
  kind, _, value = text.partition("=")
  try:
    return clip_score.parse_threshold(text)
  except ValueError:
    if kind in ("min", "top"):
      span = "a cosine in [-1, 1]" if kind == "min" else "the share of the scored pairs kept, in (0, 1]"
      wrong = "is out of range" if _is_number(value) else "is not a number"
      raise ValueError(f"clip_threshold={text} {wrong} — give {kind}=X with X {span}") from None
    raise ValueError(f"clip_threshold={text} is not a CLIP cut-off — give one of {names}, a number in [-1, 1], or "
                     "top=F (the top share F in (0, 1] of the scored pairs)") from None


def _is_number(text: str) -> bool:
  try:
    float(text)
  except ValueError:
    return False
  return True


def share(settings: Any) -> Any:
  """The clip stage's share cut-off (clip_score.Threshold with top_fraction) of stages.Settings, or None (no clip
  stage, or a minimum score)."""
  if not settings.clip_weights:
    return None
  threshold = parse_threshold(settings.clip_threshold or DEFAULT_THRESHOLD)
  return threshold if threshold.top_fraction is not None else None


def stage_cutoff(text: str) -> float:
  """The minimum score the clip stage keeps as it scores each pair: clip_threshold's minimum; -inf for a share,
  whose cut-off is known only once every pair is scored (`pool_cutoff`, then `cut`)."""
  threshold = parse_threshold(text)
  return -math.inf if threshold.minimum is None else threshold.minimum


def pool_cutoff(scores: Sequence[float], threshold: Any) -> float:
  """A share's cut-off: clip_score's rule (the score at rank int(n * share) of the pool, high to low, ties kept)
  over `scores`, every pair the clip stage scored: the survivors of the cross filter, those the hypernym repair
  then drops included (DataComp ranks the whole pool). inf for no pair. Sorted, so the order of `scores` (a
  path's) does not matter."""
  from capjax.text_models import clip_score  # noqa: PLC0415
  return clip_score.cutoff(np.asarray(scores, np.float64), threshold)


def below(score: float | None, cutoff: float | None) -> bool:
  """Whether a pair with `score` (None: not scored) is below the build's `cutoff` (None: no clip stage)."""
  return score is not None and cutoff is not None and score < cutoff


def cut(stage: str | None, reason: str | None, score: float | None, cutoff: float) -> tuple[str | None, str | None]:
  """Where a scored pair goes once a share's cut-off is known: below it, the clip stage dropped it, whether the
  hypernym repair kept it or not (the funnel's order, as with a minimum: the build equals one with
  clip_threshold=cutoff); at or above it, where the repair sent it. Both paths call this."""
  return ("clip", REASON) if below(score, cutoff) else (stage, reason)


def recorded(cutoff: float | None) -> float | None:
  """The cut-off as the report records it (`CUTOFF`): None when no pair was scored."""
  return cutoff if cutoff is not None and math.isfinite(cutoff) else None


class Pool:
  """The plain path's share: every scored pair's score (8 bytes a pair), and per reason those of the pairs the
  hypernym repair dropped, whose stage in the funnel waits for the cut-off (`cut`)."""

  def __init__(self):
    self.scores: array.array = array.array("d")
    self.held: dict[str, array.array] = {}

  def add(self, score: float) -> None:
    self.scores.append(score)

  def hold(self, reason: str, score: float) -> None:
    self.held.setdefault(reason, array.array("d")).append(score)

  def released(self, cutoff: float) -> Iterator[tuple[str | None, str | None, float]]:
    """(stage, reason, score) of each held pair, now that the cut-off is known."""
    for reason, scores in sorted(self.held.items()):
      for score in scores:
        yield (*cut("hypernym", reason, score, cutoff), score)


def load_scorer(path: str) -> Any:
  """The CLIP scorer (clip_score.Scorer) of converted weights in `path`, scoring BATCH pairs a call, each caption
  padded to the model's full length, so that a pair's score is the same in any batch (both paths batch apart)."""
  from capjax.text_models import clip_score  # noqa: PLC0415
  return clip_score.Scorer.load(path, batch_size=BATCH, fixed_length=True)


def score(scorer: Any, images: Sequence[bytes], alt_texts: Sequence[str], cutoff: float,
          max_pixels: int) -> list[tuple[str | None, float]]:
  """(reason or None, CLIP score) of each image (JPEG bytes the image stage decoded whole under `max_pixels`) with
  its alt-text as harvested (DataComp scores the raw alt-text): a reject below `cutoff` (`stage_cutoff`)."""
  from capjax.text_models import clip_score  # noqa: PLC0415
  if not images:
    return []
  scores = scorer.score([image_io.load_rgb(image, max_pixels) for image in images], list(alt_texts))
  return [(None if s >= cutoff else clip_score.REASON, float(s)) for s in scores]


def count_score(report: report_lib.Report, value: float) -> report_lib.Report:
  """One CLIP score into the report's histogram: its bin's lower edge, a multiple of BIN."""
  return report.count(SCORES, reason=f"{math.floor(value / BIN) * BIN:.2f}")


def histogram(report: report_lib.Report) -> dict[str, int]:
  """The CLIP scores' histogram: pairs per bin (its lower edge), lowest bin first."""
  return {edge: int(n) for edge, n in sorted(report.reasons.get(SCORES, {}).items(), key=lambda e: float(e[0]))}


def format_histogram(bins: Mapping[str, int], cutoff: float | None = None, threshold: str = "") -> str:
  """The CLIP scores' histogram as one line: `[low, high) pairs` per bin, then the cut-off applied."""
  text = ", ".join(f"[{edge}, {float(edge) + BIN:.2f}) {n}" for edge, n in bins.items())
  where = "" if cutoff is None else f"; cut-off {cutoff:.6g}" + (f" (clip_threshold={threshold})" if threshold else "")
  return f"clip scores (cosine) of the {sum(bins.values()):,} pairs scored: {text or 'none'}{where}"
