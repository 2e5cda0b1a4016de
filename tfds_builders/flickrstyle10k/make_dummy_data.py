"""Writes a flickrstyle10k manual dir in the released layout: FlickrStyle_v0.9/ (caption files one line per image,
humor/train.p a protocol-0 pickle of the image names, one `V<name>` line each, as readers of the released file
parse it) and flickr30k-images/ with real JPEGs. `python -m tfds_builders.flickrstyle10k.make_dummy_data` rewrites
`dummy_data/`, which holds one of every defect the builder counts; tests read the constants below.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from tfds_builders.cc3m.make_dummy_data import jpeg, png, rewrite

HERE = pathlib.Path(__file__).resolve().parent
NUM_IMAGES = 14
# Splits of the 14 positions (flickrstyle10k_dataset_builder.split_of): validation 3; test 1 and 8; train the rest.
MISSING_IMAGE, TRUNCATED_IMAGE, PNG_IMAGE, EMPTY_ROMANTIC, CP1252_HUMOROUS = 2, 4, 5, 6, 7


def flickr_id(i: int) -> str:
  return str(1000092795 + 1000 * i)


def released_name(i: int) -> str:
  """The name as train.p holds it: Flickr id, underscore, the photo's secret."""
  return f"{flickr_id(i)}_{i:02x}3e5c0a1b.jpg"


def protocol0_pickle(names: Sequence[str]) -> bytes:
  """A list of names pickled with protocol 0 and UNICODE opcodes: b"(lp0\\nV<name>\\np1\\naV<name>\\np2\\na...",
  the form of the released train.p (written here by hand: nothing in this project calls pickle)."""
  body = b"".join((b"V" if k == 0 else b"aV") + n.encode("raw_unicode_escape") + b"\np" + str(k + 1).encode() + b"\n"
                  for k, n in enumerate(names))
  return b"(lp0\n" + body + (b"a." if names else b".")


def humorous(i: int) -> str:
  return f"a dog number {i} runs on the grass looking for its lost sock"


def romantic(i: int) -> str:
  return f"a dog number {i} runs on the grass to meet his love"


def factual(i: int, k: int) -> str:
  return f"A dog , number {i} , runs on the grass ( caption {k} ) ."


def write_manual_dir(root: pathlib.Path, num_images: int = NUM_IMAGES, defects: bool = True,
                     release_folder: bool = True) -> None:
  """A manual dir of `num_images` images; with `defects`, the ones named by the constants above."""
  release = root / "FlickrStyle_v0.9" if release_folder else root
  (release / "humor").mkdir(parents=True)
  (release / "romantic").mkdir(parents=True)
  images = root / "flickr30k-images"
  images.mkdir(parents=True)
  funny, love = [humorous(i).encode() for i in range(num_images)], [romantic(i).encode() for i in range(num_images)]
  if defects:
    funny[CP1252_HUMOROUS] = "a dog at the café – it wants a croissant".encode("cp1252")
    love[EMPTY_ROMANTIC] = b" "
  (release / "humor" / "train.p").write_bytes(protocol0_pickle([released_name(i) for i in range(num_images)]))
  (release / "humor" / "funny_train.txt").write_bytes(b"\n".join(funny) + b"\n")
  (release / "romantic" / "romantic_train.txt").write_bytes(b"\r\n".join(love) + b"\r\n")
  for i in range(num_images):
    if defects and i == MISSING_IMAGE:
      continue
    data = jpeg(i, 40 + i, 32)
    if defects and i == TRUNCATED_IMAGE:
      data = data[:len(data) // 2]
    elif defects and i == PNG_IMAGE:
      data = png(i)
    (images / f"{flickr_id(i)}.jpg").write_bytes(data)
  (images / "readme.txt").write_text("Flickr30K's folder holds a readme too.\n")
  if defects:  # Flickr30K's captions: five per image, image 7's in reverse order, none for images 0 and 13
    lines = [f"{flickr_id(i)}.jpg#{k}\t{factual(i, k)}" for i in range(1, num_images - 1) for k in range(5)]
    lines[30:35] = reversed(lines[30:35])
    (root / "results_20130124.token").write_bytes(("\n".join(lines) + "\nnot a caption line\n").encode())


if __name__ == "__main__":
  rewrite(HERE / "dummy_data", write_manual_dir)
