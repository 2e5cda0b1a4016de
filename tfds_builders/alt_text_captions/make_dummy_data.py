"""Writes an alt_text_captions manual dir as img2dataset leaves it for harvested candidates: a webdataset shard
with parquet sidecar and a files-layout shard, with one of every defect each stage must count.
`python -m tfds_builders.alt_text_captions.make_dummy_data` rewrites `dummy_data/`; tests read EXPECTED.
"""

from __future__ import annotations

import io
import pathlib
import shutil
import struct
import numpy as np
from PIL import Image, ImageDraw

from tfds_builders.cc3m.make_dummy_data import write_files_shard, write_tar

HERE = pathlib.Path(__file__).resolve().parent
LABELS_TSV = "labels.tsv"


def jpeg(seed: int, width: int = 480, height: int = 440, mode: str = "RGB") -> bytes:
  """A real, small JPEG (a smooth seeded gradient compresses to a few KB even at 480 x 440)."""
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[0:height, 0:width]
  base = rng.integers(0, 256, 3)
  pixels = (base + np.stack([x // 4, y // 4, (x + y) // 8], -1)) % 256
  buffer = io.BytesIO()
  Image.fromarray(pixels.astype(np.uint8)).convert(mode).save(buffer, "JPEG", quality=50)
  return buffer.getvalue()


def scene(seed: int, width: int = 480, height: int = 440, quality: int = 90) -> bytes:
  """A JPEG of a seeded scene of a dozen coloured rectangles and ellipses: structure that a perceptual hash sees
  (the smooth gradients of `jpeg` all look alike to it)."""
  rng = np.random.default_rng(seed)
  image = Image.new("RGB", (640, 480), tuple(int(v) for v in rng.integers(0, 256, 3)))
  draw = ImageDraw.Draw(image)
  for _ in range(12):
    x, y = int(rng.integers(0, 640)), int(rng.integers(0, 480))
    box = (x, y, x + int(rng.integers(20, 320)), y + int(rng.integers(20, 240)))
    (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
  buffer = io.BytesIO()
  image.resize((width, height), Image.Resampling.LANCZOS).save(buffer, "JPEG", quality=quality)
  return buffer.getvalue()


def cropped(data: bytes, share: float) -> bytes:
  """A JPEG of `data` with `share` of each side cut off (half at each edge), saved again at quality 90."""
  with Image.open(io.BytesIO(data)) as image:
    width, height = image.size
    dx, dy = round(width * share / 2), round(height * share / 2)
    buffer = io.BytesIO()
    image.crop((dx, dy, width - dx, height - dy)).save(buffer, "JPEG", quality=90)
  return buffer.getvalue()


def near_copies(i: int) -> bytes:
  """`write_generated`'s images for the dedup stage: groups of ten, each opening with scene i (480 x 440, i % 10
  = 0), then three near-copies of it: larger (640 x 587, more pixels: it ranks first), re-encoded at quality 30
  (as many pixels), cropped by 5%; the other six are scenes of their own."""
  first = i - i % 10
  return {1: scene(first, 640, 587), 2: scene(first, quality=30), 3: cropped(scene(first), 0.05)}.get(
      i % 10, scene(i))


def png(width: int = 480, height: int = 440) -> bytes:
  buffer = io.BytesIO()
  Image.fromarray(np.full((height, width, 3), 90, np.uint8)).save(buffer, "PNG")
  return buffer.getvalue()


def bomb(width: int = 30_000, height: int = 30_000) -> bytes:
  """A decompression bomb small on disk: a 16 x 16 JPEG whose frame header (SOF0) claims width x height."""
  data = bytearray(jpeg(0, 16, 16))
  sof = data.index(b"\xff\xc0")
  struct.pack_into(">HH", data, sof + 5, height, width)
  return bytes(data)


def url(key: str) -> str:
  return f"http://images.example.com/{key}.jpg"


def meta(key: str, caption: str, status: str = "success", **extra) -> dict:
  return {"key": key, "url": url(key), "caption": caption, "status": status,
          "error_message": None if status == "success" else "HTTP Error 404: Not Found", **extra}


# (key, image, caption, stage that drops it, reason); stage None: an example.
_GOOD = "A dog runs along the beach."
CANDIDATES: list[tuple[str, str, str, str | None, str | None]] = [
    ("000000000", "jpeg", "A dog runs along the beach.", None, None),
    ("000000001", "jpeg", "Two children play football in the park.", None, None),
    ("000000002", "resized", "A red car is parked on the street.", None, None),  # 240x220 stored, 960x880 original
    ("000000003", "png", _GOOD, "image", "not_jpeg"),
    ("000000004", "small", _GOOD, "image", "too_small"),                # 300 x 300
    ("000000005", "one", _GOOD, "image", "too_small"),                  # 1 x 1
    ("000000006", "strip", _GOOD, "image", "too_small"),                # 20000 x 100
    ("000000007", "wide", _GOOD, "image", "aspect_ratio"),              # 3:1, 1500 x 500
    ("000000008", "truncated", _GOOD, "image", "truncated"),
    ("000000009", "cmyk", _GOOD, "image", "not_rgb"),
    ("000000010", "bomb", _GOOD, "image", "decompression_bomb"),
    ("000000011", "garbage", _GOOD, "image", "undecodable"),            # JPEG magic, then noise
    ("000000012", "failed", _GOOD, "image", "download_failed"),         # parquet only
    ("000000013", "lost", _GOOD, "image", "missing_image"),             # parquet says success, shard has no image
    ("000000014", "jpeg", "IMG_1234.jpg", "text", "boilerplate_only"),
    ("000000015", "jpeg", "click here", "text", "too_short"),
    ("000000016", "jpeg", "BEST DEALS ON SHOES", "text", "all_caps"),
    ("000000017", "jpeg", "Zxqwv Blorftson attends the party at the club.", "hypernym", "unresolved_entity"),
    ("000000018", "jpeg", "Harrison Ford attends the premiere of the film.", "concepts", "rare_concept"),
    # The files-layout shard.
    ("000010000", "jpeg", "A woman walks with a dog in the snow.", None, None),
    ("000010001", "jpeg", "An old man sits on a bench near the lake.", None, None),
    ("000010002", "jpeg", "A cat sleeps on a sofa in the living room.", None, None),
]
# The labels file (CC3M image-labels format) for --set=cross_filter=labels: key → labels; missing: no_labels.
LABELS = {
    "000000000": "dog,sand,beach", "000000001": "sport,child", "000000002": "vehicle,wheel",
    "000010000": "woman,snow", "000010001": "lake,bench", "000010002": "dog,pet",
    "000000017": "balloon", "000000018": "film,premiere",
}


def _image(kind: str, seed: int) -> bytes | None:
  good = jpeg(seed)
  return {
      "jpeg": good, "resized": jpeg(seed, 240, 220), "png": png(), "small": jpeg(seed, 300, 300),
      "one": jpeg(seed, 1, 1), "strip": jpeg(seed, 20_000, 100), "wide": jpeg(seed, 1500, 500),
      "truncated": good[:len(good) // 2], "cmyk": jpeg(seed, mode="CMYK"), "bomb": bomb(),
      "garbage": b"\xff\xd8\xff" + np.random.default_rng(seed).bytes(500), "failed": None, "lost": None,
  }[kind]


def write_dummy(root: pathlib.Path) -> None:
  from tfds_builders.cc3m.make_dummy_data import write_parquet  # noqa: PLC0415
  if root.exists():
    shutil.rmtree(root)
  root.mkdir(parents=True)
  shards: dict[str, list[tuple[str, bytes | None, dict]]] = {"00000": [], "00001": []}
  for seed, (key, kind, caption, _, _) in enumerate(CANDIDATES):
    extra = {"original_width": 960, "original_height": 880} if kind == "resized" else {}
    status = "failed_to_download" if kind == "failed" else "success"
    shards["00001" if key.startswith("00001") else "00000"].append(
        (key, _image(kind, seed), meta(key, caption, status, **extra)))
  write_tar(root / "00000.tar", shards["00000"])
  write_parquet(root / "00000.parquet", [m for _, _, m in shards["00000"]])
  write_files_shard(root / "00001", shards["00001"])
  write_parquet(root / "00001.parquet", [m for _, _, m in shards["00001"]])
  (root / LABELS_TSV).write_text("".join(
      f"{caption}\t{url(key)}\t{LABELS[key]}\t{','.join('/m/0' for _ in LABELS[key].split(','))}\t"
      f"{','.join('0.9' for _ in LABELS[key].split(','))}\n"
      for key, _, caption, _, _ in CANDIDATES if key in LABELS), encoding="utf-8")



# write_generated's captions: common words, so their concepts pass pruning at any size; one rare one.
_GENERATED_CAPTIONS = ("A dog runs along the beach.", "Two children play football in the park.",
                       "A red car is parked on the street.", "A woman walks with a dog in the snow.",
                       "An old man sits on a bench near the lake.", "A cat sleeps on a sofa in the living room.")


def generated_defect(i: int) -> str:
  """The defect `write_generated` gives candidate i, at fixed rates: failed (2%: download_failed), small (1%:
  too_small), boilerplate (1%: a text reject), unresolved (1%: a hypernym reject), rare (1%: a concept seen once
  per 100) and twice (1%: its key again at the shard's end: duplicate_image)."""
  return {7: "failed", 57: "failed", 13: "small", 21: "boilerplate", 41: "unresolved", 64: "rare",
          33: "twice"}.get(i % 100, "")


def write_generated(root: pathlib.Path, n: int, per_shard: int = 16, image=None, captions=None) -> None:
  """A manual dir of `n` candidates with `generated_defect`'s defects, webdataset shards of `per_shard` with
  parquet sidecars; `image(i)` gives candidate i's JPEG bytes (480x440 by default: they pass the image stage), and
  `captions` (i → alt-text) replaces some alt-texts."""
  from tfds_builders.cc3m.make_dummy_data import write_parquet  # noqa: PLC0415
  image = image or jpeg
  root.mkdir(parents=True, exist_ok=True)
  shards: list[list[tuple[str, bytes | None, dict]]] = [[] for _ in range(0, n, per_shard)]
  again: list[list[tuple[str, bytes | None, dict]]] = [[] for _ in shards]
  for i in range(n):
    defect, number = generated_defect(i), i // per_shard
    key = f"{number:05d}{i % per_shard:04d}"
    caption = {"boilerplate": "click here", "unresolved": "Zxqwv Blorftson attends the party at the club.",
               "rare": "Harrison Ford attends the premiere of the film."}.get(
                   defect, _GENERATED_CAPTIONS[i % len(_GENERATED_CAPTIONS)])
    caption = (captions or {}).get(i, caption)
    data = None if defect == "failed" else jpeg(i, 300, 300) if defect == "small" else image(i)
    entry = (key, data, meta(key, caption, "failed_to_download" if data is None else "success"))
    shards[number].append(entry)
    if defect == "twice":
      again[number].append(entry)
  for number, samples in enumerate(shards):
    samples += again[number]  # at the shard's end: apart from the first, so a sample of its own
    write_tar(root / f"{number:05d}.tar", samples)
    write_parquet(root / f"{number:05d}.parquet", [m for _, _, m in samples])


def near_copies_and_leaks(i: int) -> bytes:
  """`near_copies`, except candidates 4 and 5: the images of dummy_data's 000000000 and 000010000 (kept by its
  paper build) saved again at quality 90, leaks of that build's train split when it is excluded."""
  if i not in (4, 5):
    return near_copies(i)
  keys = [key for key, *_ in CANDIDATES]
  buffer = io.BytesIO()
  Image.open(io.BytesIO(jpeg(keys.index({4: "000000000", 5: "000010000"}[i])))).save(buffer, "JPEG", quality=90)
  return buffer.getvalue()


def write_near_copies(root: pathlib.Path) -> None:
  """The dedup stage's set: 40 candidates in 2 shards, `generated_defect`'s defects, `near_copies_and_leaks`'
  images, and the alt-text of a rare concept (actor) on candidates 30-33, one scene and its copies, and 35."""
  actor = "Harrison Ford attends the premiere of the film."
  write_generated(root, 40, per_shard=20, image=near_copies_and_leaks, captions=dict.fromkeys((30, 31, 32, 33, 35),
                                                                                              actor))


if __name__ == "__main__":
  import sys
  if len(sys.argv) > 1:  # python -m tfds_builders.alt_text_captions.make_dummy_data DIR: the near-copies set
    write_near_copies(pathlib.Path(sys.argv[1]))
    print(f"wrote {sys.argv[1]}")
  else:
    write_dummy(HERE / "dummy_data")
    print(f"wrote {HERE / 'dummy_data'}")
