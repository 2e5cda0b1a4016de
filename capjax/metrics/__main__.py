"""COCO caption metrics of a COCO results file against COCO caption annotations, printed as one JSON object.

Usage: python -m capjax.metrics REFS.json PREDS.json [--metrics=Bleu,METEOR,ROUGE_L,CIDEr[,SPICE]] [--notokenize]
  REFS.json   COCO caption annotations (a JSON object with "images" and "annotations")
  PREDS.json  COCO results (a JSON list of {"image_id", "caption"} objects, one per image)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from absl import flags

from capjax import cli
from capjax.metrics.coco import DEFAULT_METRICS, METRICS, evaluate

_FLAGS = flags.FlagValues()
_METRICS = flags.DEFINE_list("metrics", list(DEFAULT_METRICS), f"Comma-separated subset of {','.join(METRICS)}.",
                             flag_values=_FLAGS)
_TOKENIZE = flags.DEFINE_bool("tokenize", True, "Run pycocoevalcap's PTB tokenization first (--notokenize: the "
                              "captions are already PTB-tokenized).", flag_values=_FLAGS)


def load_references(path: str) -> dict[Any, list[str]]:
  """COCO caption annotations -> {image id: [captions]}, images in the file's "images" order."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  if not isinstance(data, dict) or "annotations" not in data:
    raise ValueError(f"{path}: expected COCO caption annotations, a JSON object with \"annotations\"")
  refs: dict[Any, list[str]] = {image["id"]: [] for image in data.get("images", [])}
  listed = bool(refs)
  for annotation in data["annotations"]:
    image = annotation["image_id"]
    if image in refs or not listed:
      refs.setdefault(image, []).append(annotation["caption"])
  return refs


def load_predictions(path: str) -> dict[Any, str]:
  """COCO results ([{"image_id": .., "caption": ..}]) -> {image id: caption}; one caption per image."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  if not isinstance(data, list):
    raise ValueError(f"{path}: expected COCO results, a JSON list of {{\"image_id\", \"caption\"}} objects")
  preds: dict[Any, str] = {}
  for result in data:
    image = result["image_id"]
    if image in preds:
      raise ValueError(f"{path}: image {image!r} has more than one predicted caption")
    preds[image] = result["caption"]
  return preds


def parse_metrics(names: Sequence[str]) -> tuple[str, ...]:
  """The --metrics list without empty entries; a ValueError names any that is not a metric."""
  metrics = tuple(name for name in names if name)
  unknown = [name for name in metrics if name not in METRICS]
  if unknown or not metrics:
    raise ValueError(f"unknown metrics {unknown}: choose from {','.join(METRICS)}")
  return metrics


def main(argv: Sequence[str]) -> int:
  files = cli.parse(_FLAGS, argv, __doc__, positional=True)
  if len(files) != 2:
    cli.fail(f"expected two files, REFS.json PREDS.json, got {len(files)} argument(s) (see --help)")
  try:
    metrics = parse_metrics(_METRICS.value)
    scores = evaluate(load_references(files[0]), load_predictions(files[1]), metrics, tokenize=_TOKENIZE.value)
  except OSError as error:
    cli.fail(f"cannot read {error.filename}: {error.strerror}")
  except (ValueError, KeyError, RuntimeError, TimeoutError) as error:
    cli.fail(str(error))
  print(json.dumps(scores))
  return 0


if __name__ == "__main__":
  cli.run(main)
