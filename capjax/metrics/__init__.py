"""COCO caption metrics at parity with pycocoevalcap: PTB tokenizer, BLEU, METEOR, ROUGE-L, CIDEr-D, SPICE; and
the stylized captioning metrics (`stylized`: those, `ppl` under a style's Kneser-Ney language model, `cls`).
Importing is cheap: modules load on first use, and the Java scorers start a JVM only when constructed.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "evaluate": "capjax.metrics.coco",
    "cider_d": "capjax.metrics.coco",
    "Bleu": "capjax.metrics.bleu",
    "Rouge": "capjax.metrics.rouge",
    "CiderD": "capjax.metrics.cider",
    "DocumentFrequency": "capjax.metrics.cider",
    "Meteor": "capjax.metrics.meteor",
    "Spice": "capjax.metrics.spice",
    "ptb_tokenize": "capjax.metrics.tokenizer",
    "stylized_scores": "capjax.metrics.stylized",
    "StyleLanguageModel": "capjax.metrics.stylized_lm",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
  if name in _EXPORTS:
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
