"""Writes cc3m manual dirs as users have them: the released TSVs and img2dataset's shards (webdataset tars with
parquet sidecars, or the files layout), and pixparse's cc3m-wds mirror (`write_wds`), with real JPEG bytes from
Pillow. `python -m tfds_builders.cc3m.make_dummy_data` rewrites `dummy_data/`, which holds one of every defect the
builder must count; tests also call `write_clean`, and tests and benchmarks/build_speed.py `write_generated` (any
size, defects at fixed rates).
"""

from __future__ import annotations

import io
import json
import pathlib
import shutil
import tarfile
from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
TRAIN_TSV = "Train_GCC-training.tsv"
VALIDATION_TSV = "Validation_GCC-1.1.0-Validation.tsv"
LABELS_TSV = "Image_Labels_Subset_Train_GCC-Labels-training.tsv"


def jpeg(seed: int, width: int = 48, height: int = 40, mode: str = "RGB", quality: int = 85) -> bytes:
  """A real JPEG: a gradient with a seeded colour and noise (so images differ and decode to distinct arrays)."""
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[0:height, 0:width]
  base = rng.integers(0, 256, 3)
  pixels = (base + np.stack([x * 3, y * 3, (x + y) * 2], -1) + rng.integers(0, 24, (height, width, 3))) % 256
  image = Image.fromarray(pixels.astype(np.uint8)).convert(mode)
  buffer = io.BytesIO()
  image.save(buffer, "JPEG", quality=quality)
  return buffer.getvalue()


def png(seed: int, width: int = 32, height: int = 32) -> bytes:
  buffer = io.BytesIO()
  Image.fromarray(np.full((height, width, 3), seed % 256, np.uint8)).save(buffer, "PNG")
  return buffer.getvalue()


def url(i: int, split: str = "train") -> str:
  return f"http://example.com/{split}/{i:04d}.jpg?size=large&v=\"{i}\""


def write_tsv(path: pathlib.Path, rows: Sequence[Sequence[str]]) -> None:
  """As released: TAB-separated fields, no header, no quoting (captions keep their quotes as typed)."""
  path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def _meta(key: str, row_url: str, caption: str, status: str = "success") -> dict:
  return {"key": key, "url": row_url, "caption": caption, "status": status,
          "error_message": None if status == "success" else "HTTP Error 404: Not Found"}


def write_parquet(path: pathlib.Path, entries: Sequence[dict]) -> None:
  """img2dataset's sidecar: one row per input row of the shard, failures included."""
  import pyarrow as pa  # noqa: PLC0415
  import pyarrow.parquet as pq  # noqa: PLC0415
  columns = ("key", "url", "caption", "status", "error_message")
  pq.write_table(pa.table({c: [e[c] for e in entries] for c in columns}), path)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
  info = tarfile.TarInfo(name)
  info.size, info.mtime = len(data), 0
  tar.addfile(info, io.BytesIO(data))


def write_tar(path: pathlib.Path, samples: Sequence[tuple[str, bytes | None, dict]]) -> None:
  """A webdataset shard: KEY.jpg, KEY.json, KEY.txt per downloaded sample (img2dataset's member order)."""
  with tarfile.open(path, "w") as tar:
    for key, image, meta in samples:
      if image is None:
        continue  # failed downloads are in the parquet only
      _add(tar, f"{key}.jpg", image)
      _add(tar, f"{key}.json", json.dumps(meta).encode())
      _add(tar, f"{key}.txt", meta["caption"].encode())


def write_files_shard(folder: pathlib.Path, samples: Sequence[tuple[str, bytes | None, dict]]) -> None:
  """img2dataset's files layout: NNNNN/KEY.jpg + KEY.json (+ KEY.txt)."""
  folder.mkdir(parents=True)
  for key, image, meta in samples:
    if image is None:
      continue
    (folder / f"{key}.jpg").write_bytes(image)
    (folder / f"{key}.json").write_text(json.dumps(meta))
    (folder / f"{key}.txt").write_text(meta["caption"])


def cut_last_member(path: pathlib.Path, keep_bytes: int = 100) -> None:
  """Cuts the tar in the middle of its last member's data, as an interrupted download or copy leaves it."""
  with tarfile.open(path) as tar:
    last = tar.getmembers()[-1]
  data = path.read_bytes()
  path.write_bytes(data[:last.offset_data + min(keep_bytes, last.size // 2)])


# The dummy data's rows: every defect the builder counts, and the count each gives (tests read these).
TRAIN_CAPTIONS = [
    "a dog runs along the beach",
    'actor attends the premiere of "film" at the theatre',
    "café on a street in city — at night",
]


def write_dummy(root: pathlib.Path) -> None:
  """dummy_data/: train (webdataset) with every defect, validation (files layout), the labeled subset."""
  if root.exists():
    shutil.rmtree(root)
  images = root / "images"
  (images / "train").mkdir(parents=True)
  caps = TRAIN_CAPTIONS + [f"caption of picture {i}" for i in range(3, 12)]
  rows = [[caps[i], url(i)] for i in range(12)]
  rows[3] = [caps[3], url(3), "an extra field after a tab"]  # malformed_row
  rows[7] = [caps[7], url(0)]  # duplicate_url: the same url as row 0
  write_tsv(root / TRAIN_TSV, rows)

  def sample(key: str, i: int, image: bytes | None, status: str = "success"):
    return key, image, _meta(key, url(i), caps[i], status)

  good = jpeg(5)
  shard0 = [sample("000000000", 0, jpeg(0)), sample("000000001", 1, jpeg(1, 40, 56)),
            sample("000000002", 2, jpeg(2, mode="L")),
            sample("000000003", 4, None, "failed_to_download"),              # missing_image
            sample("000000004", 5, good[:len(good) // 2]),                   # corrupt_image: truncated
            sample("000000005", 6, png(6))]                                  # corrupt_image: not_jpeg
  shard1 = [sample("000010000", 0, jpeg(100)),                               # duplicate_image (url of row 0)
            sample("000010001", 8, jpeg(8)),
            ("000010002", jpeg(99), _meta("000010002", "http://example.com/in/no/row.jpg", "?"))]  # no row
  shard2 = [sample("000020000", 9, jpeg(9))]                                 # shard_without_parquet
  shard3 = [sample("000030000", 10, jpeg(10)), sample("000030001", 11, jpeg(11))]  # last member cut
  for number, shard in enumerate((shard0, shard1, shard2, shard3)):
    write_tar(images / "train" / f"{number:05d}.tar", shard)
    if number != 2:
      write_parquet(images / "train" / f"{number:05d}.parquet", [s[2] for s in shard])
  # Cut inside 000030001.jpg: reorder so its image is the last member, its json and txt lost with the cut.
  with tarfile.open(images / "train" / "00003.tar", "w") as tar:
    for key, image, meta in shard3:
      if key == "000030001":
        continue
      _add(tar, f"{key}.jpg", image)
      _add(tar, f"{key}.json", json.dumps(meta).encode())
    _add(tar, "000030001.jpg", shard3[1][1])
  cut_last_member(images / "train" / "00003.tar")

  validation = [[f"validation caption {i} with \"quotes\" and ünïcödé", url(i, "validation")] for i in range(3)]
  write_tsv(root / VALIDATION_TSV, validation)
  vsamples = [("000000000", jpeg(200), _meta("000000000", url(0, "validation"), validation[0][0])),
              ("000000001", jpeg(201, 56, 40, mode="L"), _meta("000000001", url(1, "validation"), validation[1][0])),
              ("000000002", None, _meta("000000002", url(2, "validation"), validation[2][0], "failed_to_download"))]
  write_files_shard(images / "validation" / "00000", vsamples)
  write_parquet(images / "validation" / "00000.parquet", [s[2] for s in vsamples])

  labels = [[caps[0], url(0), "dog,beach,sand", "/m/0bt9lr,/m/0b3yr,/m/06z0n", "0.98,0.91,0.7"],
            [caps[1], url(1), "actor,event", "/m/02hrk,/m/081pkj", "0.93,0.88"],
            [caps[8], url(8), "picture", "/m/05qdh", "0.65"],
            [caps[4], url(4), "lost", "/m/00001", "0.5"],                      # missing_image
            [caps[9], url(9), "two,labels", "/m/1", "0.5,0.6"]]               # malformed: 2 labels, 1 mid
  write_tsv(root / LABELS_TSV, labels)
  write_wds(root)


WDS_TRAIN = ["a dog runs along the beach", "café on a street in city — at night", "a boat on the lake",
             "a red car parked outside"]


def write_wds(root: pathlib.Path) -> None:
  """pixparse's cc3m-wds mirror beside the rest (for cc3m/wds): `cc3m-SPLIT-NNNN.tar` of KEY.jpg, KEY.txt and
  KEY.json. Train: four examples (one without its .json: no url), a PNG saved as .jpg (corrupt_image: not_jpeg), an
  image with an empty caption (no_caption), a member named `../` and a symlink (unsafe_member, never read), and a
  second tar. Validation: two examples."""

  def sample(tar: tarfile.TarFile, key: str, image: bytes, caption: str, with_json: bool = True) -> None:
    _add(tar, f"{key}.jpg", image)
    _add(tar, f"{key}.txt", caption.encode())
    if with_json:
      _add(tar, f"{key}.json", json.dumps({"key": key, "url": url(int(key), "mirror"), "status": "success"}).encode())

  with tarfile.open(root / "cc3m-train-0000.tar", "w") as tar:
    sample(tar, "000000000", jpeg(300), WDS_TRAIN[0])
    sample(tar, "000000001", jpeg(301, 40, 56), WDS_TRAIN[1])
    sample(tar, "000000002", png(302), "a png saved as jpg")                   # corrupt_image: not_jpeg
    sample(tar, "000000003", jpeg(303), "  \n")                                # no_caption
    _add(tar, "../000000004.jpg", jpeg(304))                                   # unsafe_member
    link = tarfile.TarInfo("000000005.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"                  # unsafe_member
    tar.addfile(link)
  with tarfile.open(root / "cc3m-train-0001.tar", "w") as tar:
    sample(tar, "000010000", jpeg(310), WDS_TRAIN[2])
    sample(tar, "000010001", jpeg(311, mode="L"), WDS_TRAIN[3], with_json=False)  # no url
  with tarfile.open(root / "cc3m-validation-0000.tar", "w") as tar:
    sample(tar, "000000000", jpeg(320), "a cat sleeps on a sofa")
    sample(tar, "000000001", jpeg(321), "two children play football")


def write_clean(root: pathlib.Path, num_train: int, num_validation: int, per_shard: int = 16,
                width: int = 64, height: int = 48) -> None:
  """A manual dir with only good rows: `num_*` JPEGs of width x height, webdataset shards of `per_shard`."""
  root.mkdir(parents=True, exist_ok=True)
  for split, n, tsv in (("train", num_train, TRAIN_TSV), ("validation", num_validation, VALIDATION_TSV)):
    rows = [[f"a {['red', 'blue', 'green'][i % 3]} picture number {i % 5} of the {split}", url(i, split)]
            for i in range(n)]
    write_tsv(root / tsv, rows)
    folder = root / "images" / split
    folder.mkdir(parents=True)
    for number, start in enumerate(range(0, n, per_shard)):
      samples = [(f"{number:05d}{i:04d}", jpeg(i + (0 if split == "train" else 10**6), width, height),
                  _meta(f"{number:05d}{i:04d}", url(i, split), rows[i][0]))
                 for i in range(start, min(start + per_shard, n))]
      write_tar(folder / f"{number:05d}.tar", samples)
      write_parquet(folder / f"{number:05d}.parquet", [s[2] for s in samples])



def generated_defect(i: int) -> str:
  """The defect `write_generated` gives row i, at fixed rates: failed (2%: never downloaded), truncated (1%:
  corrupt_image), duplicate_url (1%: the previous row's url, whose image it downloads again: duplicate_image) and
  twice (1%: downloaded again under a larger key in the next shard: duplicate_image); "" for a good row."""
  return {7: "failed", 57: "failed", 13: "truncated", 21: "duplicate_url", 33: "twice"}.get(i % 100, "")


def _generated_split(root: pathlib.Path, split: str, n: int, per_shard: int, image) -> None:
  rows = [[f"a photo number {i} of a scene in the {split}", url(i - (generated_defect(i) == "duplicate_url"), split)]
          for i in range(n)]
  write_tsv(root / (TRAIN_TSV if split == "train" else VALIDATION_TSV), rows)
  shards: list[list[tuple[str, bytes | None, dict]]] = [[] for _ in range(0, n, per_shard)]
  for i, (caption, row_url) in enumerate(rows):
    number, defect = i // per_shard, generated_defect(i)
    key = f"{number:05d}{i % per_shard:04d}"
    data = None if defect == "failed" else image(i)
    if defect == "truncated":
      data = data[:len(data) // 2]
    shards[number].append((key, data, _meta(key, row_url, caption, "failed_to_download" if data is None else
                                            "success")))
    if defect == "twice":
      again = min(number + 1, len(shards) - 1)
      key = f"{again:05d}9{i % 1000:03d}"
      shards[again].append((key, image(i + 1), _meta(key, row_url, caption)))
  folder = root / "images" / split
  folder.mkdir(parents=True)
  for number, samples in enumerate(shards):
    write_tar(folder / f"{number:05d}.tar", samples)
    write_parquet(folder / f"{number:05d}.parquet", [s[2] for s in samples])


def write_generated(root: pathlib.Path, num_train: int, per_shard: int = 16, image=None) -> None:
  """A manual dir of `num_train` train rows (validation: a twentieth, at least 2) with `generated_defect`'s
  failures, duplicate urls and images downloaded twice; `image(i)` gives row i's JPEG bytes (64x48 by default)."""
  image = image or (lambda i: jpeg(i, 64, 48))
  root.mkdir(parents=True, exist_ok=True)
  _generated_split(root, "train", num_train, per_shard, image)
  _generated_split(root, "validation", max(2, num_train // 20), per_shard, lambda i: image(i + 10**6))


def rewrite(target: pathlib.Path, write: Callable[[pathlib.Path], None]) -> None:
  """A builder's dummy_data/ written afresh by `write` (the old folder removed first), and how many files it holds:
  what each builder's `python -m tfds_builders.NAME.make_dummy_data` does."""
  if target.exists():
    shutil.rmtree(target)
  write(target)
  print(f"wrote {target}: {sum(1 for p in target.rglob('*') if p.is_file())} files")


if __name__ == "__main__":
  write_dummy(HERE / "dummy_data")
  print(f"wrote {HERE / 'dummy_data'}: {sum(1 for _ in (HERE / 'dummy_data').rglob('*') if _.is_file())} files")

