"""Writes a karpathy manual dir holding every config's files in the released layout: Karpathy's
`dataset_{coco,flickr30k,flickr8k}.json` with `train2014/`, `val2014/`, `flickr30k-images/`, `Flicker8k_Dataset/`;
a COCO-format `captions.json` with `images/`; nocaps' `nocaps_val_4500_captions.json` with `validation/`; small
real JPEGs. `python -m tfds_builders.karpathy.make_dummy_data` rewrites `dummy_data/`, which holds one of every
defect the builder counts (missing, truncated and non-JPEG images, a file no entry names, malformed and duplicate
entries, a caption of no image, an image with no caption); tests read the constants below.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from tfds_builders.cc3m.make_dummy_data import jpeg, png, rewrite

HERE = pathlib.Path(__file__).resolve().parent
NOUNS = ("dog", "cat", "horse", "bird", "boat", "child", "bus", "kite", "man", "woman", "bike", "train")

# Karpathy entries per config: (image id, folder, file name, split, what is wrong). The image id is imgid for the
# Flickr sets and cocoid for COCO (whose imgid is the position).
KARPATHY = {
    "flickr30k": [
        (0, "flickr30k-images", "1000092795.jpg", "train", ""),
        (1, "flickr30k-images", "10002456.jpg", "train", ""),
        (2, "flickr30k-images", "1000268201.jpg", "train", "missing_image"),
        (3, "flickr30k-images", "1000344755.jpg", "train", "truncated"),
        (4, "flickr30k-images", "1000366164.jpg", "val", ""),
        (5, "flickr30k-images", "1000523639.jpg", "test", ""),
        (6, "flickr30k-images", "1000919630.jpg", "test", ""),
        (7, "flickr30k-images", "1001465944.jpg", "train", "malformed_entry"),  # no sentences
    ],
    "flickr8k": [
        (0, "Flicker8k_Dataset", "1000268201_693b08cb0e.jpg", "train", ""),
        (1, "Flicker8k_Dataset", "1001773457_577c3a7d70.jpg", "train", ""),
        (2, "Flicker8k_Dataset", "1002674143_1b742ab4b8.jpg", "val", ""),
        (3, "Flicker8k_Dataset", "1003163366_44323f5815.jpg", "test", ""),
        (1, "Flicker8k_Dataset", "1001773457_577c3a7d70.jpg", "train", "duplicate_entry"),
    ],
    "coco": [
        (391895, "val2014", "COCO_val2014_000000391895.jpg", "test", ""),
        (522418, "val2014", "COCO_val2014_000000522418.jpg", "restval", ""),
        (184613, "val2014", "COCO_val2014_000000184613.jpg", "val", ""),
        (318219, "val2014", "COCO_val2014_000000318219.jpg", "test", "missing_image"),
        (554625, "val2014", "COCO_val2014_000000554625.jpg", "restval", "not_jpeg"),
        (9, "train2014", "COCO_train2014_000000000009.jpg", "train", ""),
        (25, "train2014", "COCO_train2014_000000000025.jpg", "train", ""),
        (30, "test2015", "COCO_test2015_000000000030.jpg", "train", "malformed_entry"),  # no such folder
    ],
}
UNREFERENCED = {"flickr30k": ("flickr30k-images", "1001545525.jpg"),
                "coco": ("train2014", "COCO_train2014_000000000034.jpg"), "coco_format": ("images", "extra.jpg")}

# COCO-format images: (id, file name, domain, number of captions, what is wrong).
COCO_FORMAT = [
    (101, "000000000101.jpg", "", 2, ""),
    (102, "000000000102.jpg", "", 3, ""),
    (103, "000000000103.jpg", "", 0, "image_without_caption"),
    (104, "000000000104.jpg", "", 2, "missing_image"),
    (105, "", "", 2, "malformed_entry"),  # no file_name
]
NOCAPS = [
    (0, "0013ea2087020901.jpg", "in-domain", 10, ""),
    (1, "00223d6d3afd9b71.jpg", "near-domain", 10, ""),
    (2, "0045e4e17a3a5da7.jpg", "out-domain", 10, ""),
    (3, "004c2d5a4f0ba8c3.jpg", "", 10, "malformed_entry"),  # no domain
]
COCO_FORMAT_FOLDER, NOCAPS_FOLDER = "images", "validation"


def noun(image_id: int, k: int) -> str:
  return NOUNS[(image_id + k) % len(NOUNS)]


def raw_caption(image_id: int, k: int) -> str:
  return f"A {noun(image_id, k)} stands near the {NOUNS[k % len(NOUNS)]}."


def tokens(image_id: int, k: int) -> list[str]:
  return ["a", noun(image_id, k), "stands", "near", "the", NOUNS[k % len(NOUNS)]]


def karpathy_json(config: str) -> dict[str, Any]:
  images = []
  for position, (image_id, folder, name, split, defect) in enumerate(KARPATHY[config]):
    number = 0 if config == "coco" else image_id
    sentences = [{"raw": raw_caption(image_id, k), "tokens": tokens(image_id, k), "imgid": position,
                  "sentid": 10 * number + k} for k in range(5)]
    entry = {"filename": name, "imgid": number if config != "coco" else position, "split": split,
             "sentids": [s["sentid"] for s in sentences], "sentences": sentences}
    if config == "coco":
      entry = {"filepath": folder, **entry, "cocoid": image_id}
    if defect == "malformed_entry" and config != "coco":
      del entry["sentences"]
    images.append(entry)
  return {"images": images, "dataset": config}


def coco_format_json(rows: list, with_domain: bool) -> dict[str, Any]:
  images, annotations = [], []
  for image_id, name, domain, captions, defect in rows:
    image = {"id": image_id, "file_name": name, "height": 40, "width": 48}
    if with_domain and defect != "malformed_entry":
      image["domain"] = domain
    if defect == "malformed_entry" and not with_domain:
      del image["file_name"]
    images.append(image)
    annotations += [{"image_id": image_id, "id": 1000 * image_id + k, "caption": raw_caption(image_id, k)}
                    for k in range(captions)]
  if not with_domain:
    annotations.append({"image_id": 999, "id": 999000, "caption": "A caption of no image."})  # no such image
    annotations.append({"image_id": 101, "id": 101999})  # malformed: no caption
  return {"info": {}, "licenses": [], "images": images, "annotations": annotations}


def _write_image(folder: pathlib.Path, name: str, seed: int, defect: str) -> None:
  if defect in ("missing_image", "malformed_entry", "duplicate_entry", "image_without_caption") or not name:
    if defect != "image_without_caption":
      return
  folder.mkdir(parents=True, exist_ok=True)
  data = png(seed) if defect == "not_jpeg" else jpeg(seed, 48, 40)
  (folder / name).write_bytes(data[:len(data) // 2] if defect == "truncated" else data)


def write_manual_dir(root: pathlib.Path) -> None:
  root.mkdir(parents=True, exist_ok=True)
  for config, rows in KARPATHY.items():
    (root / f"dataset_{config}.json").write_text(json.dumps(karpathy_json(config)))
    for image_id, folder, name, _, defect in rows:
      _write_image(root / folder, name, image_id, defect)
  (root / "captions.json").write_text(json.dumps(coco_format_json(COCO_FORMAT, with_domain=False)))
  (root / "nocaps_val_4500_captions.json").write_text(json.dumps(coco_format_json(NOCAPS, with_domain=True)))
  for rows, folder in ((COCO_FORMAT, COCO_FORMAT_FOLDER), (NOCAPS, NOCAPS_FOLDER)):
    for image_id, name, _, _, defect in rows:
      _write_image(root / folder, name, image_id, defect)
  for config, (folder, name) in UNREFERENCED.items():
    _write_image(root / folder, name, len(name), "")


if __name__ == "__main__":
  rewrite(HERE / "dummy_data", write_manual_dir)
