"""Writes cc12m_llavanext manual dirs as users have them: train.jsonl.gz with the release's fields and the cc12m-wds
tars (KEY.jpg, KEY.json, KEY.txt), with real JPEG bytes from Pillow. `python -m
tfds_builders.cc12m_llavanext.make_dummy_data` rewrites `dummy_data/`, which holds one of every case the builder
must count or clean; tests also call `write_rows`, `write_tar` and `write_clean`.
"""

from __future__ import annotations

import gzip
import json
import pathlib
import shutil
from collections.abc import Iterable, Sequence
from typing import Any

from tfds_builders.cc3m import make_dummy_data as cc3m_dummy

HERE = pathlib.Path(__file__).resolve().parent
JSONL = "train.jsonl.gz"
jpeg = cc3m_dummy.jpeg  # a real JPEG: seeded gradient and noise


def shard_name(number: int) -> str:
  return f"cc12m-train-{number:04d}.tar"


def url(key: str) -> str:
  return f"https://images.example.com/cc12m/{key}.jpg?w=1024&q=\"{int(key) % 97}\""


def row(key: str, caption_llava: str, caption_llava_short: str, alt_text: str, width: int = 48, height: int = 40,
        row_url: str | None = None) -> dict[str, Any]:
  """A row with every field of the release (`caption` is the alt-text; width/height the stored image's)."""
  return {"caption_llava": caption_llava, "caption_llava_short": caption_llava_short, "caption": alt_text,
          "url": row_url or url(key), "key": key, "status": "success", "error_message": None, "width": width,
          "height": height, "exif": "{}", "original_width": width * 10, "original_height": height * 10}


def write_rows(path: pathlib.Path, lines: Iterable[dict[str, Any] | str]) -> None:
  """train.jsonl.gz: one JSON object a line (a str is written as the line itself, for bad input); no name or time
  in the gzip header, so the same rows give the same bytes."""
  with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
    for line in lines:
      f.write(((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n").encode("utf-8"))


def write_tar(path: pathlib.Path, samples: Sequence[tuple[str, bytes, str, str]]) -> None:
  """A cc12m-wds shard: (key, image bytes, url, alt-text) → KEY.jpg, KEY.json, KEY.txt."""
  cc3m_dummy.write_tar(path, [(key, image, {"key": key, "url": image_url, "caption": alt, "status": "success",
                                            "error_message": None})
                              for key, image, image_url, alt in samples])


# The dummy data's rows: (key, caption_llava, caption_llava_short, alt-text), what each is for beside it.
ROWS = [
    ("000000000",  # a boilerplate opening: trimmed (a repair, not a failure)
     "The image shows a golden retriever running along a sandy beach at sunset. The dog's fur is wet and the "
     "waves behind it catch the orange light.",
     "A golden retriever runs along a sandy beach at sunset.", "dog running on the beach at sunset"),
    ("000000001",  # a repetition loop at the end: cut to one copy
     "A red double-decker bus is parked on a city street beside a row of shops. The bus is parked. The bus is "
     "parked. The bus is parked. The bus is",
     "A red double-decker bus parked on a city street.", "london bus"),
    ("000000002",  # trailing whitespace and newlines: stripped, no flag
     "A bowl of ramen topped with a soft-boiled egg, sliced pork and green onions sits on a wooden table.\n\n",
     "A bowl of ramen with a soft-boiled egg.\n", "  homemade ramen recipe \n"),
    ("000000003",  # the "An image" placeholder in the short caption: flagged
     "A snowy mountain peak rises above a pine forest under a clear blue sky.", "An image",
     "mountain landscape wallpaper"),
    ("000000004",  # its tar member is a cut JPEG: corrupt_image (truncated)
     "A plate of pancakes with blueberries and syrup.", "Pancakes with blueberries.", "pancake breakfast"),
    ("000010000",  # a dataset-card failure (says there is no text): flagged, the opening trimmed
     "In this image, we can see a white cat sleeping on a grey sofa. There is no text visible in the image.",
     "A white cat sleeping on a grey sofa.", "cute cat nap"),
    ("000010001",  # clean, with quotes and non-ASCII letters kept
     'A small café on a cobbled street in Paris with a sign reading "Le Petit Café" and tables outside.',
     'A café in Paris with a sign reading "Le Petit Café".', "café à paris"),
    ("000099999",  # no image in any tar: row_without_image
     "A lighthouse on a rocky coast.", "A lighthouse on a rocky coast.", "lighthouse"),
    ("000010003",  # its image's .json names another url: url_mismatch, and the row is row_without_image
     "A vintage bicycle leaning against a brick wall.", "A vintage bicycle against a brick wall.", "old bike"),
]
ABSENT_KEY = "000010002"  # an image in the tars whose key no row has: image_without_row


def write_dummy(root: pathlib.Path) -> None:
  """dummy_data/: the rows above, and two tars holding real JPEGs (one cut short) and an image without a row."""
  if root.exists():
    shutil.rmtree(root)
  root.mkdir(parents=True)
  write_rows(root / JSONL, [row(key, long, short, alt, 48 + i, 40 + (i % 3) * 8)
                            for i, (key, long, short, alt) in enumerate(ROWS)])
  by_key = {key: (i, alt) for i, (key, _, _, alt) in enumerate(ROWS)}

  def sample(key: str, image: bytes | None = None, image_url: str | None = None) -> tuple[str, bytes, str, str]:
    i, alt = by_key.get(key, (len(ROWS), "no row for this image"))
    return key, image or jpeg(i, 48 + i, 40 + (i % 3) * 8, mode="L" if key == "000000002" else "RGB"), \
        image_url or url(key), alt

  cut = jpeg(4)
  write_tar(root / shard_name(0), [sample("000000000"), sample("000000001"), sample("000000002"),
                                   sample("000000003"), sample("000000004", cut[:len(cut) // 2])])
  write_tar(root / shard_name(1), [sample("000010000"), sample("000010001"), sample(ABSENT_KEY),
                                   sample("000010003", image_url="https://images.example.com/another/photo.jpg")])


# Words for write_clean's captions: enough variety for a vocabulary, few enough to repeat.
_COLOURS = ("red", "blue", "green", "yellow", "white")
_THINGS = ("car", "dog", "house", "boat", "bird", "chair")
_PLACES = ("on a street", "in a park", "by the sea", "in a garden")


def clean_rows(n: int) -> list[dict[str, Any]]:
  """`n` rows whose captions pass every rule: a long caption of three sentences, a short one, an alt-text."""
  rows = []
  for i in range(n):
    colour, thing, place = _COLOURS[i % 5], _THINGS[i % 6], _PLACES[i % 4]
    long = (f"A {colour} {thing} stands {place} on a bright day. Behind the {thing} there are trees and a "
            f"fence, and the sky is clear. The {colour} {thing} is the main subject of the photograph.")
    rows.append(row(f"{i:09d}", long, f"A {colour} {thing} {place}.", f"{colour} {thing} photo {i % 7}", 64, 48))
  return rows


def write_clean(root: pathlib.Path, n: int, per_shard: int = 16) -> None:
  """A manual dir of `n` good rows and their 64x48 JPEGs, in tars of `per_shard`."""
  root.mkdir(parents=True, exist_ok=True)
  rows = clean_rows(n)
  write_rows(root / JSONL, rows)
  for number, start in enumerate(range(0, n, per_shard)):
    write_tar(root / shard_name(number), [(r["key"], jpeg(i, 64, 48), r["url"], r["caption"])
                                          for i, r in enumerate(rows[start:start + per_shard], start)])



def generated_defect(i: int) -> str:
  """The defect `write_generated` gives row i, at fixed rates: no_image (2%), truncated (1%: corrupt_image), twice
  (1%: its image again in the next tar: duplicate_image), other_url (1%: its image's .json names another url:
  url_mismatch), duplicate_key (1%: the previous row's key again) and placeholder (1%: a flagged caption)."""
  return {7: "no_image", 57: "no_image", 13: "truncated", 33: "twice", 41: "other_url", 71: "duplicate_key",
          88: "placeholder"}.get(i % 100, "")


def write_generated(root: pathlib.Path, n: int, per_shard: int = 16, image=None) -> None:
  """A manual dir of `n` rows with `generated_defect`'s defects, in tars of `per_shard`; `image(i)` gives row i's
  JPEG bytes (64x48 by default)."""
  image = image or (lambda i: jpeg(i, 64, 48))
  root.mkdir(parents=True, exist_ok=True)
  rows = clean_rows(n)
  tars: list[list[tuple[str, bytes, str, str]]] = [[] for _ in range(0, n, per_shard)]
  for i, r in enumerate(rows):
    defect, number = generated_defect(i), i // per_shard
    if defect == "placeholder":
      r["caption_llava_short"] = "An image"
    if defect == "duplicate_key":
      r.update(key=rows[i - 1]["key"], url=rows[i - 1]["url"])
      continue
    if defect == "no_image":
      continue
    data = image(i)
    data = data[:len(data) // 2] if defect == "truncated" else data
    image_url = "https://images.example.com/another/photo.jpg" if defect == "other_url" else r["url"]
    tars[number].append((r["key"], data, image_url, r["caption"]))
    if defect == "twice":
      tars[min(number + 1, len(tars) - 1)].append((r["key"], image(i + 1), r["url"], r["caption"]))
  write_rows(root / JSONL, rows)
  for number, samples in enumerate(tars):
    write_tar(root / shard_name(number), samples)


if __name__ == "__main__":
  write_dummy(HERE / "dummy_data")
  print(f"wrote {HERE / 'dummy_data'}: {sorted(p.name for p in (HERE / 'dummy_data').iterdir())}")
