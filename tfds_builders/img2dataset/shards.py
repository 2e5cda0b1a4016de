"""img2dataset's shards read as streams: webdataset tars or the files layout, with their parquet sidecars; links,
names that could escape, FIFOs and devices (`capjax.files`' rule: their read would hang or never end) and members
over MAX_MEMBER_BYTES are never read. `shard_samples` gives a shard's images,
`shard_candidates` every row img2dataset was given (for captions that travel with the shards); `Where` and
`read_images`, a second read of chosen samples' image bytes (the Beam paths' second pass)."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from etils import epath

from capjax import files
from capjax.image import io as image_io

IMAGES_DIR = "images"
# A tar member or file over this is not read (its image counts as too_large): a hostile shard cannot make the
# build hold a huge member. Full-size photos are a few MB; cc12m-wds's resized ones about 100 kB.
MAX_MEMBER_BYTES = 64 << 20
_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")  # img2dataset names every file .jpg; the bytes decide


@dataclasses.dataclass
class Sample:
  """One downloaded image: its key, the bytes of its image member, and its img2dataset metadata."""
  key: str
  image: bytes | None = None
  meta: dict[str, Any] | None = None
  truncated: bool = False
  text: bytes | None = None  # KEY.txt, read only when asked (`with_text`): the caption img2dataset saw
  too_large: bool = False  # the image member is over MAX_MEMBER_BYTES: not read
  offset: int = -1  # where the image member's bytes start in an uncompressed tar; -1 otherwise

  def add(self, extension: str, data: bytes) -> None:
    """A member's bytes, by its extension: KEY.json (parsed), KEY.txt, or the image."""
    if extension == "json":
      self.meta = _json_or_none(data)
    elif extension == "txt":
      self.text = data
    else:
      self.image = data


def _is_link(path: epath.Path) -> bool:
  """A symlink on a local disk (object stores have none)."""
  return "://" not in os.fspath(path) and pathlib.Path(path).is_symlink()


def list_shards(images_dir: str) -> list[str]:
  """img2dataset's shards in a split folder: `NNNNN.tar` (webdataset) or `NNNNN/` (files), sorted."""
  folder = epath.Path(images_dir)
  if not folder.is_dir():
    return []
  shards = []
  for path in sorted(folder.iterdir()):
    if _is_link(path):
      continue
    # img2dataset also leaves NNNNN_stats.json files and a _tmp folder beside its shards.
    if path.name.endswith(".tar") and path.is_file() or path.name.isdigit() and path.is_dir():
      shards.append(os.fspath(path))
  return shards


def split_shards(images_root: str, split: str) -> list[str]:
  """The shards of a split that may have been downloaded in several goes: `ROOT/SPLIT/` first, then each
  `ROOT/SPLIT.*/` folder by name (e.g. `train.retry/`, img2dataset's run over the rows the first one missed: the
  join rule takes a row's good image from whichever folder holds it)."""
  root = epath.Path(images_root)
  folders = [root / split]
  if root.is_dir():
    folders += sorted(p for p in root.iterdir() if p.name.startswith(f"{split}.") and p.is_dir())
  return [shard for folder in folders for shard in list_shards(os.fspath(folder))]


def parquet_path(shard: str) -> str:
  return (shard[:-len(".tar")] if shard.endswith(".tar") else shard.rstrip("/")) + ".parquet"


def _sidecar(path: str) -> bool:
  """Whether a shard's parquet sidecar is there to read: a FIFO or a device in its place counts as no sidecar."""
  return epath.Path(path).exists() and not files.special_kind(path)


def read_parquet(path: str) -> dict[str, str] | None:
  """key → url of the successful downloads img2dataset listed beside a shard, or None without the file."""
  if not _sidecar(path):
    return None
  import pyarrow.parquet as pq  # noqa: PLC0415
  with files.open_regular(path) as f:
    table = pq.read_table(f, columns=["key", "url", "status"]).to_pydict()
  return {k: u for k, u, s in zip(table["key"], table["url"], table["status"]) if s == "success" and k and u}


def _member_key(name: str) -> tuple[str, str] | None:
  """(key, extension) of a member `KEY.ext`; None for names that could reach outside a folder."""
  if name.startswith("/") or "\\" in name or ".." in name.split("/"):
    return None
  base = name.rsplit("/", 1)[-1]
  if "." not in base:
    return None
  key, extension = base.split(".", 1)
  return key, extension.lower()


def _tar_samples(path: str, counts: collections.Counter, with_text: bool = False,
                 with_images: bool = True) -> Iterator[Sample]:
  """The samples of a webdataset tar, read as a stream: members are never extracted, links never followed. A shard
  that is a FIFO or a device (epath's `is_file()` lists it) is never read: an unsafe_member."""
  current: Sample | None = None
  try:
    shard = files.open_regular(path)
  except files.NotRegularError:
    counts["unsafe_member"] += 1
    return
  except OSError:  # gone since it was listed
    counts["truncated_shard"] += 1
    return
  try:
    with shard as f, tarfile.open(fileobj=f, mode="r|*") as tar:
      plain_tar = getattr(tar.fileobj, "comptype", "") == "tar"  # offsets in a compressed one are not the file's
      for member in tar:
        parsed = _member_key(member.name)
        if not member.isfile() or parsed is None:
          counts["unsafe_member"] += not member.isdir()
          continue
        key, extension = parsed
        if current is not None and current.key != key:
          yield current
          current = None
        current = current or Sample(key)
        if extension not in _IMAGE_EXTENSIONS and extension != "json" and not (with_text and extension == "txt"):
          continue  # KEY.txt (the caption img2dataset saw): for cc3m the TSV is the source of truth
        if member.size > MAX_MEMBER_BYTES:
          current.too_large = current.too_large or extension in _IMAGE_EXTENSIONS
          continue  # the stream skips its bytes without holding them
        if not with_images and extension in _IMAGE_EXTENSIONS:
          current.image = b""  # there is an image: its bytes are skipped, not held
          continue
        try:
          data = tar.extractfile(member).read()
        except (tarfile.ReadError, EOFError, OSError):
          current.truncated = True
          raise
        current.add(extension, data)
        if extension in _IMAGE_EXTENSIONS and plain_tar:
          current.offset = member.offset_data
  except (tarfile.ReadError, EOFError, OSError, tarfile.StreamError):
    counts["truncated_shard"] += 1
  if current is not None:
    yield current


def _file_samples(path: str, counts: collections.Counter, with_text: bool = False,
                  with_images: bool = True) -> Iterator[Sample]:
  """The samples of img2dataset's files layout `NNNNN/KEY.jpg` + `KEY.json`; symlinks are not followed."""
  names: dict[str, list[tuple[epath.Path, str]]] = collections.defaultdict(list)  # key -> [(file, extension)]
  for full in sorted(epath.Path(path).iterdir()):
    parsed = _member_key(full.name)
    unsafe = _is_link(full) or parsed is None or bool(files.special_kind(full))  # a FIFO would hang its read
    if unsafe or not full.is_file():
      counts["unsafe_member"] += unsafe
      continue
    if parsed[1] in _IMAGE_EXTENSIONS or parsed[1] == "json" or (with_text and parsed[1] == "txt"):
      names[parsed[0]].append((full, parsed[1]))
  # Only the names are held for the whole folder; the bytes are read one sample at a time.
  for key, parts in names.items():
    sample = Sample(key)
    for full, extension in parts:
      if full.stat().length > MAX_MEMBER_BYTES:
        sample.too_large = sample.too_large or extension in _IMAGE_EXTENSIONS
        continue
      if not with_images and extension in _IMAGE_EXTENSIONS:
        sample.image = b""  # there is an image: not read
        continue
      data = files.read_regular(full)
      sample.add(extension, data)
    yield sample


def shard_samples(shard: str, counts: collections.Counter, with_text: bool = False,
                  with_images: bool = True) -> Iterator[Sample]:
  """The samples of a shard, a webdataset tar (`NNNNN.tar`) or a files-layout folder, read one at a time; links,
  names that could escape and members over MAX_MEMBER_BYTES are never read (`counts`: unsafe_member,
  truncated_shard). Without `with_images` an image member is skipped and its sample's image is b""."""
  if shard.endswith(".tar"):
    return _tar_samples(shard, counts, with_text, with_images)
  return _file_samples(shard, counts, with_text, with_images)


@dataclasses.dataclass(frozen=True)
class Where:
  """Where a checked sample's image bytes lie, for a second read (`read_images`): its number in the shard's
  stream, its key, the offset of its bytes in an uncompressed tar (-1: stream the shard again), their length and
  CRC-32 (so that a shard changed since is an error, never another image)."""
  number: int
  key: str
  offset: int
  size: int
  crc: int

  @classmethod
  def of(cls, number: int, sample: Sample) -> Where:
    return cls(number, sample.key, sample.offset, len(sample.image), zlib.crc32(sample.image))


def read_images(shard: str, wanted: Iterable[Where]) -> Iterator[tuple[Where, bytes]]:
  """The image bytes of `wanted` samples of one shard, in stream order: read at their offsets in a tar (a seek and
  a read each, no member headers parsed), else by streaming the shard again. Raises ValueError when the shard
  changed since `wanted` was taken (a key, length or CRC-32 differs, or a sample is gone)."""
  wanted = sorted(wanted, key=lambda w: w.number)
  if wanted and all(w.offset >= 0 for w in wanted):
    with files.open_regular(shard) as f:
      for where in wanted:
        f.seek(where.offset)
        yield where, _checked(shard, where, f.read(where.size))
    return
  by_number = {w.number: w for w in wanted}
  for number, sample in enumerate(shard_samples(shard, collections.Counter())):
    where = by_number.pop(number, None)
    if where is not None:
      if sample.key != where.key:
        raise ValueError(f"{shard} changed during the build: sample {number} is {sample.key}, not {where.key}")
      yield where, _checked(shard, where, sample.image or b"")
    if not by_number:
      return
  if by_number:
    raise ValueError(f"{shard} changed during the build: {len(by_number)} of its images are gone")


def _checked(shard: str, where: Where, data: bytes) -> bytes:
  if len(data) != where.size or zlib.crc32(data) != where.crc:
    raise ValueError(f"{shard} changed during the build: the image of {where.key} is not the one checked")
  return data


def verify_image(data: bytes) -> image_io.Header:
  """The header of a JPEG that decodes whole, in a mode the trainer reads (RGB or grey); raises ImageError with
  reason not_jpeg, undecodable, truncated, too_many_pixels or mode_cmyk (TFDS's decoder would hand the trainer 4
  channels)."""
  header = image_io.verify_jpeg(data)
  if header.mode not in ("RGB", "L"):
    raise image_io.ImageError(f"mode_{header.mode.lower()}", f"a {header.mode} JPEG, not RGB or grey")
  return header


def _json_or_none(data: bytes) -> dict[str, Any] | None:
  try:
    value = json.loads(data)
  except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: hostile nesting ([[[[...)
    return None
  return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------------------------------ candidates


@dataclasses.dataclass
class Candidate:
  """One row img2dataset was given, with or without its image: for datasets whose captions travel with the
  shards (harvested alt-texts, LAION-style parquet) rather than in a released TSV to join."""
  key: str
  url: str
  caption: str
  image: bytes | None
  meta: dict[str, Any]       # the .json (or parquet row): status, original_width/height, error_message, ...
  status: str = "success"    # img2dataset's status; "truncated" when the shard ended inside the sample


_PARQUET_COLUMNS = ("key", "url", "caption", "status", "error_message", "width", "height", "original_width",
                    "original_height")


def read_parquet_rows(path: str) -> dict[str, dict[str, Any]] | None:
  """key → row of img2dataset's sidecar (every input row of the shard, failures too), or None without it."""
  if not _sidecar(path):
    return None
  import pyarrow.parquet as pq  # noqa: PLC0415
  with files.open_regular(path) as f:
    table = pq.read_table(f)
  columns = [c for c in _PARQUET_COLUMNS if c in table.column_names]
  data = table.select(columns).to_pydict()
  return {k: {c: data[c][i] for c in columns} for i, k in enumerate(data["key"]) if k}


def shard_candidates(shard: str, counts: collections.Counter) -> Iterator[Candidate]:
  """Every row of one shard: samples in stream order, then parquet rows without a sample (failed downloads, and
  successes whose image is not in the shard: status `missing_image`). The caption is the sample's .txt, else its
  .json or parquet `caption`. Shard-side counts (IMAGE_KEYS) go into `counts`."""
  counts["shards"] += 1
  rows = read_parquet_rows(parquet_path(shard))
  if rows is None:
    counts["shard_without_parquet"] += 1
    rows = {}
  seen: set[str] = set()
  for sample in shard_samples(shard, counts, with_text=True):
    if sample.key in seen:
      counts["duplicate_image"] += 1
      continue
    seen.add(sample.key)
    meta = {**rows.get(sample.key, {}), **(sample.meta or {})}
    caption = sample.text.decode("utf-8", "replace") if sample.text is not None else meta.get("caption")
    url = meta.get("url")
    if not isinstance(url, str) or not isinstance(caption, str):
      counts["image_without_row"] += sample.image is not None
      continue
    status = ("truncated" if sample.truncated else "too_large" if sample.too_large else
              "success" if sample.image is not None else meta.get("status") or "missing_image")
    if sample.truncated or sample.too_large:
      meta["status"] = status
    yield Candidate(sample.key, url, caption, sample.image if status == "success" else None, meta, status)
  for key, row in rows.items():
    if key in seen or not isinstance(row.get("url"), str):
      continue
    status = row.get("status") or "missing_image"
    # img2dataset lists a success it wrote into the shard: a success without a sample lost its image.
    yield Candidate(key, row["url"], row.get("caption") or "", None, row,
                    "missing_image" if status == "success" else status)
