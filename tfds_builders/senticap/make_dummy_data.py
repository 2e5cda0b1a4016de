"""Writes a senticap manual dir in the released layout: `senticap_dataset.json` (the fields SentiCap's own reader,
senticap_reader.py, reads: images[].filename, imgid, split train|val|test, sentences[].tokens, word_sentiment,
sentiment 0|1, raw) and COCO's val2014/ with real JPEGs. `python -m tfds_builders.senticap.make_dummy_data`
rewrites `dummy_data/`, which holds one of every defect the builder counts; tests read the constants below.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from tfds_builders.cc3m.make_dummy_data import jpeg, rewrite

HERE = pathlib.Path(__file__).resolve().parent
POSITIVE, NEGATIVE = 1, 0
ADJECTIVES = {POSITIVE: ("beautiful", "lovely", "happy"), NEGATIVE: ("sad", "dirty", "lonely")}


def filename(coco_id: int) -> str:
  return f"COCO_val2014_{coco_id:012d}.jpg"


def sentence(sentiment: int, k: int, noun: str = "dog") -> dict[str, Any]:
  adjective = ADJECTIVES[sentiment][k % 3]
  raw = f"A {adjective} {noun} sitting on the grass."
  tokens = ["a", adjective, noun, "sitting", "on", "the", "grass"]
  return {"tokens": tokens, "word_sentiment": [0, 1, 1, 0, 0, 0, 0], "sentiment": sentiment, "raw": raw}


# (COCO id, released split, positive captions, negative captions, what is wrong)
ENTRIES = [
    (42, "train", 3, 3, ""),
    (73, "train", 3, 0, ""),
    (74, "val", 2, 3, ""),
    (133, "test", 3, 3, ""),
    (136, "test", 0, 3, ""),
    (139, "train", 0, 3, "missing_image"),
    (164, "train", 3, 0, "truncated"),
    (192, "train", 3, 0, "malformed_sentence"),
    (196, "train", 0, 3, ""),
    (208, "test", 3, 0, ""),
    (241, "train", 0, 0, "malformed_entry"),   # no filename
    (42, "train", 1, 0, "duplicate_entry"),    # a second entry for image 42
]


def dataset_json() -> dict[str, Any]:
  images = []
  for imgid, (coco_id, split, positive, negative, defect) in enumerate(ENTRIES):
    sentences = ([sentence(POSITIVE, k) for k in range(positive)] + [sentence(NEGATIVE, k) for k in range(negative)])
    if defect == "malformed_sentence":
      sentences.append({**sentence(POSITIVE, 0), "word_sentiment": [1]})  # does not pair with its tokens
    entry = {"filename": filename(coco_id), "imgid": imgid, "sentences": sentences, "split": split}
    if defect == "malformed_entry":
      del entry["filename"]
    images.append(entry)
  return {"images": images}


def write_manual_dir(root: pathlib.Path) -> None:
  root.mkdir(parents=True, exist_ok=True)
  (root / "senticap_dataset.json").write_text(json.dumps(dataset_json()))
  images = root / "val2014"
  images.mkdir()
  for coco_id, _, _, _, defect in ENTRIES:
    if defect in ("missing_image", "malformed_entry", "duplicate_entry"):
      continue
    data = jpeg(coco_id, 48, 36)
    (images / filename(coco_id)).write_bytes(data[:len(data) // 2] if defect == "truncated" else data)


if __name__ == "__main__":
  rewrite(HERE / "dummy_data", write_manual_dir)
