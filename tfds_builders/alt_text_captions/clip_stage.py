"""The clip stage of alt_text_captions, beyond the paper: its cut-off setting (`--set=clip_threshold`), the scoring of
a batch of pairs with capjax.text_models.clip_score, and the histogram of the scores that the build report keeps.

JAX and the CLIP are imported on first use: a build without the stage never loads them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from capjax.image import io as image_io
from tfds_builders import report as report_lib

DEFAULT_THRESHOLD = "datacomp_b32"  # the cut-off when --set=clip_weights comes without --set=clip_threshold
BATCH = 32  # pairs per CLIP call, on both paths (clip_score.Scorer pads a short batch to it)
SCORES = "clip_scores"  # the report's histogram of the pairs' CLIP scores, per BIN wide bin
BIN = 0.05


def parse_threshold(text: str) -> Any:
  """`--set=clip_threshold` → clip_score.Threshold with a minimum: a published name (clip_score.THRESHOLDS) or a
  number in [-1, 1] (min=X too). A top fraction of the pool (datacomp_l14_top30, top=F) is refused: its cut-off is
  known only once the whole build is scored, and the stage decides each pair as it comes. Raises ValueError."""
  from capjax.text_models import clip_score  # noqa: PLC0415
  names = ", ".join(name for name, t in clip_score.THRESHOLDS.items() if t.minimum is not None)
  try:
    number = float(text)
  except ValueError:
    number = None
  if number is not None:
    if not -1 <= number <= 1:  # nan too
      raise ValueError(f"clip_threshold={text} is out of range — a CLIP score is a cosine: give a number in [-1, 1] "
                       f"or one of {names}")
    return clip_score.Threshold(text, minimum=number)
  try:
    threshold = clip_score.parse_threshold(text)
  except ValueError:
    raise ValueError(f"clip_threshold={text} is not a CLIP cut-off — give one of {names}, or a number in "
                     "[-1, 1]") from None
  if threshold.minimum is None:
    raise ValueError(f"clip_threshold={text} keeps a top share of the whole build's scores, which the clip stage "
                     f"cannot know while it decides each pair — give a minimum score: one of {names}, or a number "
                     "in [-1, 1]")
  return threshold


def load_scorer(path: str) -> Any:
  """The CLIP scorer (clip_score.Scorer) of converted weights in `path`, scoring BATCH pairs a call."""
  from capjax.text_models import clip_score  # noqa: PLC0415
  return clip_score.Scorer.load(path, batch_size=BATCH)


def score(scorer: Any, images: Sequence[bytes], alt_texts: Sequence[str], cutoff: float,
          max_pixels: int) -> list[tuple[str | None, float]]:
  """(reason or None, CLIP score) of each image (JPEG bytes the image stage decoded whole under `max_pixels`) with
  its alt-text as harvested (DataComp scores the raw alt-text): a reject below `cutoff`."""
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


def format_histogram(bins: Mapping[str, int]) -> str:
  """The CLIP scores' histogram as one line: `[low, high) pairs` per bin."""
  text = ", ".join(f"[{edge}, {float(edge) + BIN:.2f}) {n}" for edge, n in bins.items())
  return f"clip scores (cosine) of the {sum(bins.values()):,} pairs scored: {text or 'none'}"
