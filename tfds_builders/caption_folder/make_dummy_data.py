"""Writes caption_folder manual dirs in every layout, with tiny real images and one of every defect the builder
counts. `python -m tfds_builders.caption_folder.make_dummy_data` rewrites `dummy_data/` (train: metadata.jsonl,
validation: metadata.csv, test: img2dataset's files layout, `.txt` beside each image) and `dummy_data_wds/` (train
and validation as img2dataset's webdataset tars); tests read the constants below.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import tarfile

import numpy as np
from PIL import Image

from tfds_builders.cc3m.make_dummy_data import jpeg, rewrite

HERE = pathlib.Path(__file__).resolve().parent


def image(seed: int, fmt: str, mode: str = "RGB", size: int = 16) -> bytes:
  """A tiny real image in `fmt` (PNG, WEBP) and `mode` (RGBA: half transparent)."""
  rng = np.random.default_rng(seed)
  pixels = rng.integers(0, 256, (size, size, 4 if mode == "RGBA" else 3), dtype=np.uint8)
  if mode == "RGBA":
    pixels[..., 3] = 128
  buffer = io.BytesIO()
  Image.fromarray(pixels, "RGBA" if mode == "RGBA" else "RGB").save(buffer, fmt)
  return buffer.getvalue()


# train/metadata.jsonl: its rows as written (a str is a line that is not JSON), and the files beside it.
TRAIN_ROWS: list[dict | str] = [
    {"file_name": "a.jpg", "text": "a red square on a white wall"},
    {"file_name": "a.jpg", "text": "  a second reference, with \"quotes\" and ünïcödé — kept exactly "},
    {"file_name": "nested/deeper/b.png", "text": ["the first of a list", "the second of a list"]},
    {"file_name": "./c.webp", "caption": "a webp picture, its column named caption"},
    {"file_name": "d.jpg", "text": "a truncated jpeg"},                  # corrupt_image (cut in half)
    {"file_name": "e.jpg", "text": "a grey picture"},
    {"file_name": "e.jpg"},                                              # no_text (e.jpg has another row)
    {"file_name": "missing.jpg", "text": "no such file"},                # missing_image
    {"file_name": "../validation/v1.jpg", "text": "leaves the folder"},  # unsafe_name, never opened
    {"file_name": "/etc/passwd", "text": "an absolute path"},            # unsafe_name, never opened
    {"file_name": "link_out.jpg", "text": "a link pointing outside"},   # unsafe_name: a link to ../validation/
    {"file_name": "notext.jpg", "text": ""},                             # no_text
    "{not json",                                                         # malformed_row
    {"text": "a row without a file name"},                               # malformed_row
]
TRAIN_CAPTIONS = {
    "a.jpg": [TRAIN_ROWS[0]["text"], TRAIN_ROWS[1]["text"]],
    "nested/deeper/b.png": TRAIN_ROWS[2]["text"],
    "c.webp": [TRAIN_ROWS[3]["caption"]],
    "e.jpg": [TRAIN_ROWS[5]["text"]],
}
# validation/metadata.csv: file_name,text rows.
VALIDATION_ROWS = [
    ("v1.jpg", "a caption, with a comma"),
    ("v1.jpg", "another reference\non two lines"),
    ("sub/v2.png", "a plain png"),
    ("v3.jpg", ""),                                                      # no_text
    ("v4.jpg", "bytes that are no image"),                               # corrupt_image: not_image
]
VALIDATION_CAPTIONS = {"v1.jpg": [VALIDATION_ROWS[0][1], VALIDATION_ROWS[1][1]], "sub/v2.png": [VALIDATION_ROWS[2][1]]}
# test/: img2dataset's files layout, KEY.jpg beside KEY.txt (None: no .txt).
TEST_FILES = [("00000/000000000.jpg", "a cat sleeps on a sofa\n"), ("00000/000000001.jpg", None),
              ("00000/000000002.webp", "  two children play football  ")]
TEST_CAPTIONS = {"00000/000000000.jpg": ["a cat sleeps on a sofa"],
                 "00000/000000002.webp": ["two children play football"]}


def write_dummy(root: pathlib.Path) -> None:
  """dummy_data/: the three layouts that are files on disk, one split each, every defect of their kinds."""
  train, validation, test = root / "train", root / "validation", root / "test"
  for folder in (train / "nested" / "deeper", validation / "sub", test / "00000"):
    folder.mkdir(parents=True)
  (train / "a.jpg").write_bytes(jpeg(1, 24, 16))
  (train / "nested" / "deeper" / "b.png").write_bytes(image(2, "PNG", "RGBA"))
  (train / "c.webp").write_bytes(image(3, "WEBP"))
  good = jpeg(4, 24, 16)
  (train / "d.jpg").write_bytes(good[:len(good) // 2])
  (train / "e.jpg").write_bytes(jpeg(5, 16, 24, mode="L"))
  (train / "notext.jpg").write_bytes(jpeg(6, 16, 16))
  (train / "unreferenced.jpg").write_bytes(jpeg(7, 16, 16))            # unreferenced_file
  os.symlink("../validation/v1.jpg", train / "link_out.jpg")
  (train / "metadata.jsonl").write_text(
      "".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n" for row in TRAIN_ROWS),
      encoding="utf-8")
  (validation / "v1.jpg").write_bytes(jpeg(11, 24, 16))
  (validation / "sub" / "v2.png").write_bytes(image(12, "PNG"))
  (validation / "v3.jpg").write_bytes(jpeg(13, 16, 16))
  (validation / "v4.jpg").write_bytes(b"these bytes are no image")
  import csv  # noqa: PLC0415
  with (validation / "metadata.csv").open("w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["file_name", "text"])
    writer.writerows(VALIDATION_ROWS)
  for number, (name, text) in enumerate(TEST_FILES):
    data = image(20 + number, "WEBP") if name.endswith(".webp") else jpeg(20 + number, 16, 16)
    (test / name).write_bytes(data)
    if text is not None:
      (test / name).with_suffix(".txt").write_text(text, encoding="utf-8")


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
  info = tarfile.TarInfo(name)
  info.size, info.mtime = len(data), 0
  tar.addfile(info, io.BytesIO(data))


# dummy_data_wds/train/00000.tar's captions by key (img2dataset's members: KEY.jpg, KEY.txt, KEY.json).
WDS_TRAIN_CAPTIONS = {"000000000": ["a boat on the lake"], "000000001": ["a caption from the json"],
                      "000000002": ["a webp saved as .jpg"]}
WDS_VALIDATION_CAPTIONS = {"000000000": ["a red car parked outside"], "000000001": ["a bird on a wire"]}


def write_wds(root: pathlib.Path) -> None:
  """dummy_data_wds/: train and validation as webdataset tars. Train: a sample with .txt and .json, one whose
  caption is only in its .json, a WebP saved as .jpg (re-encoded), an empty .txt (no_text), a truncated JPEG
  (corrupt_image), a .txt without an image (missing_image), the first key again (duplicate_image), a member named
  `../` and a symlink member (unsafe_member, never read)."""
  for split in ("train", "validation"):
    (root / split).mkdir(parents=True)
  good = jpeg(34, 24, 16)
  with tarfile.open(root / "train" / "00000.tar", "w") as tar:
    _add(tar, "000000000.jpg", jpeg(30, 24, 16))
    _add(tar, "000000000.txt", b"a boat on the lake")
    _add(tar, "000000000.json", json.dumps({"key": "000000000", "caption": "a boat on the lake"}).encode())
    _add(tar, "000000001.jpg", jpeg(31, 16, 16))
    _add(tar, "000000001.json", json.dumps({"key": "000000001", "caption": "a caption from the json"}).encode())
    _add(tar, "000000002.jpg", image(32, "WEBP"))
    _add(tar, "000000002.txt", b"a webp saved as .jpg")
    _add(tar, "000000003.jpg", jpeg(33, 16, 16))
    _add(tar, "000000003.txt", b"   ")                                  # no_text
    _add(tar, "000000004.jpg", good[:len(good) // 2])                   # corrupt_image (cut in half)
    _add(tar, "000000004.txt", b"a truncated jpeg")
    _add(tar, "000000005.txt", b"a caption without its image")          # missing_image
    _add(tar, "000000000.jpg", jpeg(35, 16, 16))                        # duplicate_image
    _add(tar, "000000000.txt", b"the same key again")
    _add(tar, "../000000006.jpg", jpeg(36, 16, 16))                     # unsafe_member
    link = tarfile.TarInfo("000000007.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"            # unsafe_member
    tar.addfile(link)
  with tarfile.open(root / "validation" / "00000.tar", "w") as tar:
    for number, (key, captions) in enumerate(WDS_VALIDATION_CAPTIONS.items()):
      _add(tar, f"{key}.jpg", jpeg(40 + number, 16, 16))
      _add(tar, f"{key}.txt", captions[0].encode())


if __name__ == "__main__":
  rewrite(HERE / "dummy_data", write_dummy)
  rewrite(HERE / "dummy_data_wds", write_wds)
