"""The COCO caption evaluation (pycocoevalcap's COCOEvalCap) in one call: BLEU-1..4, METEOR, ROUGE-L, CIDEr(-D)
and, when asked, SPICE; plus `cider_d`, the quick Java-free CIDEr-D the trainer calls on tokenized captions.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from capjax.metrics import tokenizer
from capjax.metrics.bleu import Bleu
from capjax.metrics.cider import CiderD, DocumentFrequency
from capjax.metrics.rouge import Rouge

if TYPE_CHECKING:
  from capjax.metrics.meteor import Meteor

K = TypeVar("K", bound=Hashable)
METRICS = ("Bleu", "METEOR", "ROUGE_L", "CIDEr", "SPICE")
DEFAULT_METRICS = ("Bleu", "METEOR", "ROUGE_L", "CIDEr")


def check_images(refs: Mapping[K, Sequence[str]], preds: Mapping[K, str]) -> None:
  """ValueError naming the images that have references but no prediction, or the reverse, or no references."""
  problems = []
  no_prediction = [image for image in refs if image not in preds]
  no_reference = [image for image in preds if image not in refs]
  empty = [image for image, captions in refs.items() if isinstance(captions, str) or not captions]
  for ids, what in ((no_prediction, "no prediction"), (no_reference, "no references"),
                    (empty, "an empty reference list (or a string, not a list)")):
    if ids:
      shown = ", ".join(repr(i) for i in ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
      problems.append(f"{len(ids)} image(s) with {what}: {shown}")
  if problems:
    raise ValueError("; ".join(problems) + " — give one prediction for each image of the references, and at least "
                     "one reference caption for each")
  bad = [image for image, caption in preds.items() if not isinstance(caption, str)]
  if bad:
    raise ValueError(f"the predictions of {bad[:20]} are not strings — give one caption string per image")


def evaluate(refs: Mapping[K, Sequence[str]], preds: Mapping[K, str], metrics: Iterable[str] = DEFAULT_METRICS,
             tokenize: bool = True, meteor: Meteor | None = None) -> dict[str, float]:
  """COCO caption metrics of `preds` (one caption per image) against `refs` (one or more per image).

  Returns the keys Bleu_1..Bleu_4, METEOR, ROUGE_L, CIDEr, SPICE for the `metrics` asked ("Bleu" gives the four
  BLEU keys). `tokenize` runs pycocoevalcap's PTB tokenization first (refs and preds separately, images in `refs`
  order, as COCOEvalCap does); pass False for captions already tokenized. `meteor` may be a running
  `capjax.metrics.meteor.Meteor` to reuse; otherwise one is started and closed here.
  """
  metrics = tuple(metrics)
  unknown = [m for m in metrics if m not in METRICS]
  if unknown:
    raise ValueError(f"unknown metrics {unknown} — choose from {METRICS}")
  check_images(refs, preds)
  if not refs:
    raise ValueError("nothing to evaluate: no images — give references with at least one image")
  images = list(refs)
  gts = {image: list(refs[image]) for image in images}
  res = {image: [preds[image]] for image in images}
  if tokenize:
    gts, res = tokenizer.tokenize(gts), tokenizer.tokenize(res)
  scores: dict[str, float] = {}
  if "Bleu" in metrics:
    bleu, _ = Bleu(4).compute_score(gts, res)
    scores.update({f"Bleu_{k + 1}": float(value) for k, value in enumerate(bleu)})
  if "METEOR" in metrics:
    if meteor is not None:
      scores["METEOR"] = meteor.compute_score(gts, res)[0]
    else:
      from capjax.metrics.meteor import Meteor  # noqa: PLC0415 (at call time: tests replace meteor.Meteor)

      with Meteor() as owned:
        scores["METEOR"] = owned.compute_score(gts, res)[0]
  if "ROUGE_L" in metrics:
    scores["ROUGE_L"] = Rouge().compute_score(gts, res)[0]
  if "CIDEr" in metrics:
    scores["CIDEr"] = CiderD().compute_score(gts, res)[0]
  if "SPICE" in metrics:
    from capjax.metrics.spice import Spice  # noqa: PLC0415 (only when SPICE is asked for)

    scores["SPICE"] = float(Spice().compute_score(gts, res)[0])
  return scores


def cider_d(refs: Mapping[K, Sequence[str]], preds: Mapping[K, str], df: DocumentFrequency | None = None) -> float:
  """CIDEr-D of `preds` against `refs`, both already tokenized and lowercased (split on white space): numpy only,
  no Java, a few milliseconds for 1,000 images. `df` fixes the document frequencies (see `DocumentFrequency`)."""
  check_images(refs, preds)
  if not refs:
    return 0.0
  images = list(refs)
  return float(CiderD(df).scores([preds[image] for image in images], [list(refs[image]) for image in images]).mean())
