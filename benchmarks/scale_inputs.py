"""CC3M-shaped builder inputs of any size for benchmarks/build_scale.py, written fast enough for a million rows: the
manual dirs of cc3m, alt_text_captions and cc12m_llavanext, and the alt-text file of the text pipeline, with
failures mixed in at CC3M's rates and the counts each build must report planned beside them.

Images come from a pool of a few hundred real JPEGs (the dummy-data writers' `jpeg`), each copy made distinct by
its row number in a COM segment; tars are written member by member without `tarfile`'s per-member objects.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import random
import struct
import sys
from collections.abc import Iterator, Sequence

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tfds_builders.alt_text_captions import make_dummy_data as alt_dummy  # noqa: E402
from tfds_builders.cc3m import make_dummy_data as cc3m_dummy  # noqa: E402
from tfds_builders.cc12m_llavanext import make_dummy_data as cc12m_dummy  # noqa: E402

POOL = 256            # distinct JPEGs per image kind
PER_SHARD = 10_000    # img2dataset's default --number_sample_per_shard
# Per-row rates, as CC3M's downloads give them: about 30% of its urls no longer answer (img2dataset #391), a few
# images are not JPEGs or come cut, and a few urls appear on two rows.
CC3M_RATES = {"missing": 0.30, "truncated": 0.005, "not_jpeg": 0.005}
DUPLICATE_URL_RATE = 0.002
# alt_text_captions: what a crawl's candidates give besides the rates above (the paper's image filters' share).
ALT_TEXT_RATES = {**CC3M_RATES, "too_small": 0.10, "aspect_ratio": 0.05}


def _status(kind: str) -> str:
  return "failed_to_download" if kind == "missing" else "success"


class ImagePool:
  """Real JPEG bytes by kind, each copy tagged with its row number (a COM segment after SOI) so no two rows share
  bytes; cut and PNG copies for the corrupt kinds."""

  def __init__(self, width: int, height: int, maker=cc3m_dummy.jpeg):
    self.good = [maker(seed, width, height) for seed in range(POOL)]
    self.by_kind = {"ok": self.good, "truncated": [g[:len(g) // 2] for g in self.good],
                    "not_jpeg": [cc3m_dummy.png(seed, 16, 16) for seed in range(POOL)]}

  def add_kind(self, kind: str, images: Sequence[bytes]) -> None:
    self.by_kind[kind] = list(images)

  def image(self, kind: str, row: int) -> bytes:
    data = self.by_kind[kind][row % POOL]
    if kind == "not_jpeg":
      return data
    return data[:2] + b"\xff\xfe\x00\x0a" + struct.pack(">Q", row) + data[2:]


# ------------------------------------------------------------------------------------------------ tars


def _tar_header(name: str, size: int) -> bytes:
  """A ustar header for a regular file (mode 0644, mtime 0), as `tarfile` writes one."""
  header = bytearray(512)
  header[0:len(name)] = name.encode()
  header[100:108] = b"0000644\x00"
  header[108:116] = header[116:124] = b"0000000\x00"
  header[124:136] = b"%011o\x00" % size
  header[136:148] = b"00000000000\x00"
  header[148:156] = b" " * 8
  header[156:157] = b"0"
  header[257:265] = b"ustar\x0000"
  header[148:155] = b"%06o\x00" % sum(header)
  return bytes(header)


class TarWriter:
  """A webdataset tar written member by member: header, data, padding to 512 bytes; two zero blocks at the end."""

  def __init__(self, path: pathlib.Path):
    self._file = open(path, "wb")  # noqa: SIM115 (closed by close())

  def add(self, name: str, data: bytes) -> None:
    self._file.write(_tar_header(name, len(data)))
    self._file.write(data)
    self._file.write(b"\x00" * (-len(data) % 512))

  def sample(self, key: str, image: bytes, meta: dict, caption: str) -> None:
    """img2dataset's members of one downloaded sample: KEY.jpg, KEY.txt, KEY.json."""
    self.add(f"{key}.jpg", image)
    self.add(f"{key}.txt", caption.encode())
    self.add(f"{key}.json", json.dumps(meta).encode())

  def close(self) -> None:
    self._file.write(b"\x00" * 1024)
    self._file.close()


def _key(row: int) -> str:
  return f"{row // PER_SHARD:05d}{row % PER_SHARD:04d}"


def _kinds(n: int, seed: int, rates: dict[str, float]) -> np.ndarray:
  names = ["ok", *rates]
  p = [1 - sum(rates.values()), *rates.values()]
  return np.asarray(names)[np.random.default_rng(seed).choice(len(names), size=n, p=p)]


# ------------------------------------------------------------------------------------------------ cc3m


_OBJECTS = ("dog", "cat", "car", "house", "bridge", "boat", "tree", "bicycle", "horse", "cake", "dress", "road")
_SCENES = ("the park", "the beach", "the street", "a field", "the lake", "the garden", "the city", "a forest")


def cc3m_caption(i: int) -> str:
  """A CC3M-style caption: lowercased, hypernymized (`person`, `city`)."""
  return (f"person walks a {_OBJECTS[i % 12]} along {_SCENES[(i // 12) % 8]} in city"
          if i % 3 else f"a {_OBJECTS[i % 12]} in {_SCENES[(i // 7) % 8]} on a sunny day")


@dataclasses.dataclass
class Plan:
  """What a generated input must build to: the report's counts as the join rule gives them for the rows written."""
  counts: dict[str, int]
  reasons: dict[str, int]


def _join_plan(kinds: np.ndarray, base: np.ndarray) -> Plan:
  """cc3m's join rule over the planned rows: every row with its url's first row; a first row with a good image
  is an example (its other images duplicate_image), with only bad ones corrupt_image, with none missing_image."""
  images: dict[int, list[str]] = collections.defaultdict(list)
  for row, kind in enumerate(kinds):
    if kind != "missing":
      images[int(base[row])].append(str(kind))
  counts = collections.Counter(tsv_rows=len(kinds), duplicate_url=int((base != np.arange(len(kinds))).sum()))
  reasons: collections.Counter = collections.Counter()
  for row in np.flatnonzero(base == np.arange(len(kinds))):
    got = images.get(int(row), [])
    counts["duplicate_image"] += max(0, len(got) - 1)
    if "ok" in got:
      counts["examples"] += 1
    elif got:
      counts["corrupt_image"] += 1
      reasons[got[0]] += 1  # one bad image per row here: its reason
    else:
      counts["missing_image"] += 1
  return Plan(dict(counts), dict(reasons))


def write_cc3m(root: pathlib.Path, n: int, seed: int = 0, rates: dict[str, float] | None = None,
               duplicate_rate: float = DUPLICATE_URL_RATE) -> Plan:
  """A cc3m manual dir of `n` train rows (the validation TSV empty: that split is left out, as without images) in
  img2dataset's webdataset layout, and the report its build must give."""
  rates = CC3M_RATES if rates is None else rates
  kinds = _kinds(n, seed, rates)
  duplicate = np.random.default_rng(seed + 1).random(n) < duplicate_rate
  duplicate[0] = False
  base = np.arange(n)
  for row in np.flatnonzero(duplicate):
    base[row] = base[row - 1]  # a url seen on the row before (or that row's own first row)
  pool = ImagePool(64, 48)
  root.mkdir(parents=True, exist_ok=True)
  (root / cc3m_dummy.VALIDATION_TSV).write_bytes(b"")
  folder = root / "images" / "train"
  folder.mkdir(parents=True, exist_ok=True)
  with open(root / cc3m_dummy.TRAIN_TSV, "w", encoding="utf-8") as tsv:
    for start in range(0, n, PER_SHARD):
      tar, metas = TarWriter(folder / f"{start // PER_SHARD:05d}.tar"), []
      for row in range(start, min(start + PER_SHARD, n)):
        caption, url = cc3m_caption(row), cc3m_dummy.url(int(base[row]))
        tsv.write(f"{caption}\t{url}\n")
        kind = str(kinds[row])
        meta = cc3m_dummy._meta(_key(row), url, caption, _status(kind))
        metas.append(meta)
        if kind != "missing":
          tar.sample(_key(row), pool.image(kind, row), meta, caption)
      tar.close()
      cc3m_dummy.write_parquet(folder / f"{start // PER_SHARD:05d}.parquet", metas)
  plan = _join_plan(kinds, base)
  plan.counts["shards"] = -(-n // PER_SHARD)
  return plan


# ------------------------------------------------------------------------------------------------ alt-texts


def alt_texts(n: int, seed: int) -> list[str]:
  """`n` web alt-texts in the proportions of benchmarks/text_pipeline_speed.py's realistic mix."""
  sys.path.insert(0, str(REPO / "benchmarks"))
  import text_pipeline_speed
  cc3m = [cc3m_caption(i) for i in range(200)]
  return [text.replace("\t", " ").replace("\n", " ").replace("\r", " ").replace("\x00", "")
          for _, text in text_pipeline_speed.realistic_mix(n, seed, cc3m)]


def write_text_input(path: pathlib.Path, n: int, seed: int = 0) -> None:
  """The text pipeline's input: one alt-text a line."""
  with open(path, "w", encoding="utf-8") as f:
    for text in alt_texts(n, seed):
      f.write(text + "\n")


def write_alt_text(root: pathlib.Path, n: int, seed: int = 0) -> dict[str, int]:
  """An alt_text_captions manual dir (img2dataset's output for `n` harvested candidates: 480x440 JPEGs that pass
  the paper's image filters, small and wide ones that do not, the cc3m failures); returns the planned kinds."""
  kinds = _kinds(n, seed, ALT_TEXT_RATES)
  pool = ImagePool(480, 440, alt_dummy.jpeg)
  pool.add_kind("too_small", [alt_dummy.jpeg(seed, 64, 48) for seed in range(POOL)])
  pool.add_kind("aspect_ratio", [alt_dummy.jpeg(seed, 1000, 420) for seed in range(POOL)])
  texts = alt_texts(n, seed)
  root.mkdir(parents=True, exist_ok=True)
  for start in range(0, n, PER_SHARD):
    tar, metas = TarWriter(root / f"{start // PER_SHARD:05d}.tar"), []
    for row in range(start, min(start + PER_SHARD, n)):
      kind = str(kinds[row])
      meta = alt_dummy.meta(_key(row), texts[row], _status(kind))
      metas.append(meta)
      if kind != "missing":
        tar.sample(_key(row), pool.image(kind, row), meta, texts[row])
    tar.close()
    cc3m_dummy.write_parquet(root / f"{start // PER_SHARD:05d}.parquet", metas)
  return dict(collections.Counter(kinds.tolist()))


# ------------------------------------------------------------------------------------------------ cc12m


def _cc12m_rows(n: int, kinds: np.ndarray, duplicate: np.ndarray) -> Iterator[dict]:
  rng = random.Random(0)
  for row in range(n):
    colour, thing = rng.choice(cc12m_dummy._COLOURS), _OBJECTS[row % 12]
    place = cc12m_dummy._PLACES[row % 4]
    long = (f"A {colour} {thing} stands {place} on a bright day. Behind the {thing} there are trees and a fence, "
            f"and the sky is clear. The {colour} {thing} is the main subject of the photograph.")
    yield cc12m_dummy.row(_key(row), long, f"A {colour} {thing} {place}.", f"{colour} {thing} photo {row % 7}", 64,
                          48)
    if duplicate[row]:
      yield cc12m_dummy.row(_key(row), long, "Another short caption.", "the same key again", 64, 48)


def write_cc12m(root: pathlib.Path, n: int, seed: int = 0) -> dict[str, int]:
  """A cc12m_llavanext manual dir: train.jsonl.gz (a few keys on two lines) and cc12m-wds tars without the rows that
  were never downloaded; returns the planned kinds."""
  kinds = _kinds(n, seed, CC3M_RATES)
  duplicate = np.random.default_rng(seed + 1).random(n) < DUPLICATE_URL_RATE
  root.mkdir(parents=True, exist_ok=True)
  cc12m_dummy.write_rows(root / cc12m_dummy.JSONL, _cc12m_rows(n, kinds, duplicate))
  pool = ImagePool(64, 48)
  for start in range(0, n, PER_SHARD):
    tar = TarWriter(root / cc12m_dummy.shard_name(start // PER_SHARD))
    for row in range(start, min(start + PER_SHARD, n)):
      kind, key = str(kinds[row]), _key(row)
      if kind != "missing":
        url = cc12m_dummy.url(key)
        tar.sample(key, pool.image(kind, row), {"key": key, "url": url, "caption": "", "status": "success",
                                                "error_message": None}, "")
    tar.close()
  return {**collections.Counter(kinds.tolist()), "duplicate_key": int(duplicate.sum())}


def main(argv: Sequence[str]) -> None:
  """`python benchmarks/scale_inputs.py cc3m|alt_text|cc12m|text N DIR`: one input, for a look at it."""
  what, n, out = argv[1], int(argv[2]), pathlib.Path(argv[3])
  writer = {"cc3m": write_cc3m, "alt_text": write_alt_text, "cc12m": write_cc12m}.get(what)
  result = writer(out, n) if writer else write_text_input(out, n)
  print(json.dumps(dataclasses.asdict(result) if isinstance(result, Plan) else result))


if __name__ == "__main__":
  main(sys.argv)
