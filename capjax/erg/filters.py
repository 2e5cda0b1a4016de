"""ERG's three quality filters on generated stylized captions, a fourth on their content, and the funnel of what
they keep.

The paper keeps a generated caption only when (1) the style classifier gives it the target style, (2) its trigram
perplexity under the style's language model is below 80, and (3) the retrieval similarity of the scene its phrase
came from is above 0.6. None of these checks that the generator kept the factual caption's content, which a
generator trained on a small stylized set often changes (docs/erg.md, "ERG demo": a colour, a size or an object in 1,259
of its 4,000 captions). (4) The content filter, off by default as in the paper, keeps a caption when it holds at least
`min_content` of the factual caption's words in their order (1.0: the generator only inserted words).
The filters are independent tests on each caption, so the order below only shapes the funnel.

Counting convention (so that the counts add up whatever fails together):
  * `rejected[reason]` counts every caption failing that filter, so a caption failing two filters is counted under
    both; these counts may sum to more than the rejects.
  * `rejected_total` counts each rejected caption once: `generated == kept + rejected_total`.
  * the funnel is cumulative, in `REASONS` order: generated, then those passing the style filter, then those also
    passing perplexity, then those also passing similarity (= kept).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from capjax.erg.settings import MAX_PERPLEXITY, MIN_CONTENT, MIN_SIMILARITY

REASONS = ("style", "perplexity", "similarity", "content")  # the filters, in funnel order
FUNNEL_STEPS = ("generated", "after_style", "after_perplexity", "after_similarity", "after_content")


@dataclasses.dataclass(frozen=True)
class Counts:
  """The filters' counts over some captions (add shards' counts with `+`).

  Attributes:
    generated: captions tested.
    kept: captions passing every filter.
    rejected: captions failing each filter (a caption failing several counts under each).
    rejected_total: captions failing at least one filter (each once): generated - kept.
    funnel: cumulative survivors in `FUNNEL_STEPS` order (the last is `kept`).
  """

  generated: int = 0
  kept: int = 0
  rejected: Mapping[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(REASONS, 0))
  rejected_total: int = 0
  funnel: Mapping[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(FUNNEL_STEPS, 0))

  def __add__(self, other: Counts) -> Counts:
    return Counts(self.generated + other.generated, self.kept + other.kept,
                  {r: self.rejected[r] + other.rejected[r] for r in REASONS},
                  self.rejected_total + other.rejected_total,
                  {s: self.funnel[s] + other.funnel[s] for s in FUNNEL_STEPS})

  def to_json(self) -> dict[str, Any]:
    return {"generated": self.generated, "kept": self.kept, "rejected": dict(self.rejected),
            "rejected_total": self.rejected_total, "funnel": dict(self.funnel),
            "thresholds": {"max_perplexity": MAX_PERPLEXITY, "min_similarity": MIN_SIMILARITY}}

  @classmethod
  def from_json(cls, data: Mapping[str, Any]) -> Counts:
    """Counts written before the content filter existed read as all passing it."""
    return cls(int(data["generated"]), int(data["kept"]), {r: int(data["rejected"].get(r, 0)) for r in REASONS},
               int(data["rejected_total"]), {s: int(data["funnel"].get(s, data["kept"])) for s in FUNNEL_STEPS})

  def lines(self) -> list[str]:
    """The funnel as text, one step a line, with the rejects by reason."""
    out = [f"{step:>17}: {self.funnel[step]}" for step in FUNNEL_STEPS]
    out.append(f"{'kept':>17}: {self.kept}")
    out.append("rejected by reason (a caption failing several counts under each): "
               + ", ".join(f"{r} {self.rejected[r]}" for r in REASONS) + f"; rejected in all: {self.rejected_total}")
    return out


@dataclasses.dataclass(frozen=True)
class Verdicts:
  """Per caption, whether it passes each filter, and the counts they make."""

  passes: Mapping[str, np.ndarray]  # reason -> [N] bool

  @property
  def kept(self) -> np.ndarray:
    return np.logical_and.reduce([self.passes[r] for r in REASONS])

  def counts(self) -> Counts:
    n = len(self.kept)
    survivors = np.ones(n, bool)
    funnel = {"generated": n}
    for reason, step in zip(REASONS, FUNNEL_STEPS[1:]):
      survivors &= self.passes[reason]
      funnel[step] = int(survivors.sum())
    kept = int(self.kept.sum())
    return Counts(n, kept, {r: int((~self.passes[r]).sum()) for r in REASONS}, n - kept, funnel)


def content_kept(factual: str, generated: str) -> float:
  """The share of the factual caption's words that the generated caption keeps in their order: the longest common
  subsequence of the two word lists over the factual caption's length (1.0 for an empty factual caption)."""
  want, got = factual.split(), generated.split()
  if not want:
    return 1.0
  row = [0] * (len(got) + 1)  # the LCS table, one row at a time
  for w in want:
    diagonal = 0
    for j, g in enumerate(got, 1):
      diagonal, row[j] = row[j], diagonal + 1 if w == g else max(row[j], row[j - 1])
  return row[-1] / len(want)


def apply(predicted_styles: Sequence[str], target_style: str, perplexities: Sequence[float],
          similarities: Sequence[float], max_perplexity: float = MAX_PERPLEXITY,
          min_similarity: float = MIN_SIMILARITY, contents: Sequence[float] | None = None,
          min_content: float = MIN_CONTENT) -> Verdicts:
  """The filters on N captions: the classifier's style of each, its perplexity under the target style's LM, the
  similarity of the scene its phrase was retrieved from, and (`contents`, from `content_kept`; None: all pass) the
  share of its factual caption it kept. A perplexity that is not finite fails."""
  predicted = np.asarray(list(predicted_styles), dtype=object)
  ppl = np.asarray(perplexities, np.float64)
  sim = np.asarray(similarities, np.float64)
  kept = np.ones(len(predicted)) if contents is None else np.asarray(contents, np.float64)
  if not len(predicted) == len(ppl) == len(sim) == len(kept):
    raise ValueError(f"{len(predicted)} styles, {len(ppl)} perplexities, {len(sim)} similarities and {len(kept)} "
                     "content shares — give one of each per caption")
  return Verdicts({"style": predicted == target_style, "perplexity": np.isfinite(ppl) & (ppl < max_perplexity),
                   "similarity": sim > min_similarity, "content": kept >= min_content})


def funnel_html(counts: Counts, title: str) -> str:
  """A self-contained HTML bar chart of the funnel (one bar per step, its width the share of generated)."""
  total = max(counts.generated, 1)
  rows = []
  for step in FUNNEL_STEPS:
    value = counts.funnel[step]
    rows.append(f"<tr><td>{step}</td><td><div style='background:#4a7;height:1em;width:{400 * value / total:.0f}px'>"
                f"</div></td><td>{value}</td></tr>")
  rejects = ", ".join(f"{r}: {counts.rejected[r]}" for r in REASONS)
  return (f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title><h1>{html.escape(title)}</h1>"
          f"<table>{''.join(rows)}</table><p>kept {counts.kept} of {counts.generated}; rejected by reason (a caption "
          f"failing several counts under each): {rejects}; rejected in all: {counts.rejected_total}</p>\n")
