"""The stylized captioning metrics of the ERG paper in one call: BLEU-1/3, METEOR and CIDEr against the style's
references, `ppl` under the style's language model (`stylized_lm`), and `cls`, the share of captions the style
classifier assigns to the style, when the caller has the classifier's predictions.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from capjax.metrics.coco import evaluate
from capjax.metrics.stylized_lm import StyleLanguageModel

if TYPE_CHECKING:
  from capjax.metrics.meteor import Meteor

K = TypeVar("K", bound=Hashable)
# The styles of the paper's datasets: FlickrStyle10K (romantic, humorous) and SentiCap (positive, negative).
STYLES: tuple[str, ...] = ("romantic", "humorous", "positive", "negative")
COCO_KEYS: tuple[str, ...] = ("Bleu_1", "Bleu_3", "METEOR", "CIDEr")  # the paper's columns, in its order


def check_style(style: str) -> str:
  """`style`, or a ValueError naming the known styles."""
  if style not in STYLES:
    raise ValueError(f"unknown style {style!r} — choose one of {', '.join(STYLES)}")
  return style


def cls_share(predicted_styles: Sequence[str], style: str) -> float:
  """`cls`: the share of captions whose predicted style (one per caption, from the style classifier) is `style`."""
  if not predicted_styles:
    raise ValueError("no predicted styles — give the classifier's style for each caption")
  return sum(predicted == style for predicted in predicted_styles) / len(predicted_styles)


def stylized_scores(refs: Mapping[K, Sequence[str]], preds: Mapping[K, str], style: str, lm: StyleLanguageModel,
                    predicted_styles: Sequence[str] | None = None, tokenize: bool = True,
                    meteor: Meteor | None = None, with_meteor: bool = True) -> dict[str, float | int]:
  """Bleu_1, Bleu_3, METEOR, CIDEr (COCO's, as `coco.evaluate`), ppl of the predictions under `lm` with the tokens
  it scored and the out-of-vocabulary words it skipped (ppl_tokens, ppl_oov), and `cls` when `predicted_styles`
  (one per prediction, in `refs` order) is given. An `lm` trained for another style is a ValueError.

  `with_meteor=False` leaves METEOR out (it starts a JVM: seconds, where the rest takes milliseconds)."""
  check_style(style)
  if lm.style and lm.style != style:
    raise ValueError(f"the language model was trained on {lm.style} sentences, not {style} ones — give the "
                     f"{style} model, or train one with `python -m capjax.metrics.stylized_lm --style={style}`")
  coco = evaluate(refs, preds, ("Bleu", "METEOR", "CIDEr") if with_meteor else ("Bleu", "CIDEr"), tokenize=tokenize,
                  meteor=meteor)
  scores: dict[str, float | int] = {key: coco[key] for key in COCO_KEYS if key in coco}
  perplexity = lm.perplexity(preds[image] for image in refs)
  scores.update(ppl=perplexity.value, ppl_tokens=perplexity.tokens, ppl_oov=perplexity.oov)
  if predicted_styles is not None:
    if len(predicted_styles) != len(refs):
      raise ValueError(f"{len(predicted_styles)} predicted styles for {len(refs)} captions — give one per caption")
    scores["cls"] = cls_share(predicted_styles, style)
  return scores
