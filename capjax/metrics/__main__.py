"""`python -m capjax.metrics REFS.json PREDS.json [--metrics=Bleu,METEOR,ROUGE_L,CIDEr[,SPICE]]`: COCO caption
metrics of a COCO results file against COCO caption annotations, printed as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from capjax.metrics.coco import DEFAULT_METRICS, METRICS, evaluate


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


def parse_metrics(text: str) -> tuple[str, ...]:
  metrics = tuple(m.strip() for m in text.split(",") if m.strip())
  unknown = [m for m in metrics if m not in METRICS]
  if unknown or not metrics:
    raise argparse.ArgumentTypeError(f"unknown metrics {unknown}; choose from {','.join(METRICS)}")
  return metrics


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m capjax.metrics", description=__doc__.split("\n\n")[0])
  parser.add_argument("refs", help="COCO caption annotations (JSON with images and annotations)")
  parser.add_argument("preds", help="COCO results (JSON list of image_id and caption)")
  parser.add_argument("--metrics", type=parse_metrics, default=DEFAULT_METRICS,
                      help=f"comma-separated subset of {','.join(METRICS)} (default {','.join(DEFAULT_METRICS)})")
  parser.add_argument("--no-tokenize", action="store_true", help="captions are already PTB-tokenized")
  args = parser.parse_args(argv)
  try:
    scores = evaluate(load_references(args.refs), load_predictions(args.preds), args.metrics,
                      tokenize=not args.no_tokenize)
  except (OSError, ValueError, KeyError, RuntimeError, TimeoutError) as error:
    print(f"error: {error}", file=sys.stderr)
    return 1
  print(json.dumps(scores))
  return 0


if __name__ == "__main__":
  sys.exit(main())
