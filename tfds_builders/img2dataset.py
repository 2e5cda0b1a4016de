"""img2dataset's output (webdataset tars or the files layout, with parquet sidecars) read as streams and joined by
url to a caption TSV, with every row and image accounted for; the plain and the Beam paths share it.

Builders import this module by its package name: `tfds build tfds_builders/cc3m` loads the builder module under
another name (`cc3m.cc3m_dataset_builder`), which Beam workers could not import back to run its functions.
Over 450 lines, not split: the reader, the join rule and the two paths that apply it are one contract, and kept
together the plain and the Beam paths cannot drift apart.
"""

from __future__ import annotations

import array
import collections
import dataclasses
import functools
import hashlib
import io
import json
import mmap
import os
import pathlib
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

from capjax.image import io as image_io
from tfds_builders import report as report_lib

IMAGES_DIR = "images"
# A tar member or file over this is not read (its image counts as too_large): a hostile shard cannot make the
# build hold a huge member. Full-size photos are a few MB; cc12m-wds's resized ones about 100 kB.
MAX_MEMBER_BYTES = 64 << 20
_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")  # img2dataset names every file .jpg; the bytes decide
# Row reasons add up: tsv_rows = examples + missing_image + corrupt_image + duplicate_url + malformed_row.
ROW_KEYS = ("tsv_rows", "examples", "missing_image", "corrupt_image", "duplicate_url", "malformed_row")
# Image-side and shard-side counts: images that became no example, and shards read only in part.
IMAGE_KEYS = ("image_without_row", "duplicate_image", "unsafe_member", "shards", "shard_without_parquet",
              "truncated_shard")
REPORT_KEYS = ROW_KEYS + IMAGE_KEYS


def image_features(image_doc: str = "The JPEG bytes as downloaded, never re-encoded.",
                   ) -> dict[str, tfds.features.FeatureConnector]:
  """The image fields every builder over img2dataset shards writes: the JPEG bytes, the url and the key."""
  return {
      "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg", doc=image_doc),
      "url": tfds.features.Text(),
      "key": tfds.features.Text(doc="img2dataset's key of the image."),
  }


def image_caption_features(caption_doc: str) -> dict[str, tfds.features.FeatureConnector]:
  """`image_features` plus the caption and `captions`, the one-element references list the trainer reads."""
  features = image_features()
  return {
      "image": features.pop("image"),
      "caption": tfds.features.Text(doc=caption_doc),
      "captions": tfds.features.Sequence(tfds.features.Text(), doc="[caption]: the references field."),
      **features,
  }


# ------------------------------------------------------------------------------------------------ TSV index


def _url_hash(url: bytes) -> int:
  return int.from_bytes(hashlib.blake2b(url, digest_size=8).digest(), "little")


def _parse_row(line: bytes, labeled: bool) -> tuple[str, ...] | None:
  """The fields of one TSV line (caption, url[, labels, mids, confidences]), or None when malformed."""
  fields = line.rstrip(b"\r\n").split(b"\t")
  if len(fields) != (5 if labeled else 2) or not fields[0].strip() or not fields[1].strip():
    return None
  try:
    texts = tuple(f.decode("utf-8") for f in fields)
  except UnicodeDecodeError:
    return None
  if labeled:
    labels, mids, confidences = (texts[i].split(",") for i in (2, 3, 4))
    try:
      [float(c) for c in confidences]
    except ValueError:
      return None
    if not len(labels) == len(mids) == len(confidences):
      return None
  return texts


class TsvIndex:
  """url → row of one released TSV, in bounded memory: 8-byte url hashes sorted beside each row's byte offset
  and length; a row's text is read back from the memory-mapped file
  (the OS page cache, not this heap) and its url compared, so a hash collision cannot pair the wrong caption.
  That is 20 bytes a row once built (66 MB at 3.3M rows); while reading, C arrays (not Python lists) hold them.
  A later row with a url seen before, and a malformed row (wrong number of fields, an extra tab, no url), are
  counted and left out."""

  def __init__(self, path: str, labeled: bool):
    self.path, self.labeled = path, labeled
    # epath: the manual dir may be on GCS (Dataflow); a local file is memory-mapped, a remote one read by seeks.
    self._file = epath.Path(path).open("rb")
    try:
      self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # no file descriptor, or empty
      self._map = None
    hashes, offsets, lengths = array.array("Q"), array.array("q"), array.array("i")
    self.tsv_rows = self.malformed_row = 0
    offset = 0
    for number, line in enumerate(iter(functools.partial(self._file.readline), b"")):
      start, offset = offset, offset + len(line)
      if number == 0 and line.rstrip(b"\r\n").lower().split(b"\t")[:2] == [b"caption", b"url"]:
        continue  # a header line added for img2dataset: not a row
      if not line.strip():
        continue
      self.tsv_rows += 1
      fields = _parse_row(line, labeled)
      if fields is None:
        self.malformed_row += 1
        continue
      hashes.append(_url_hash(fields[1].encode("utf-8")))
      offsets.append(start)
      lengths.append(len(line))
    hashes_np = np.frombuffer(hashes, np.uint64)
    offsets_np = np.frombuffer(offsets, np.int64)
    # Stable sort: of rows with one url, the first in the file comes first and is the one kept.
    order = np.argsort(hashes_np, kind="stable")
    hashes_np, offsets_np, lengths_np = hashes_np[order], offsets_np[order], np.frombuffer(lengths, np.int32)[order]
    first = np.ones(len(hashes_np), bool)
    first[1:] = hashes_np[1:] != hashes_np[:-1]
    # Equal 64-bit hashes of different urls: about 3e-7 expected pairs at 3.3M rows; counted as duplicates.
    self.duplicate_url = int((~first).sum())
    self._hashes, self._offsets, self._lengths = hashes_np[first], offsets_np[first], lengths_np[first]

  def __len__(self) -> int:
    return len(self._hashes)

  @property
  def nbytes(self) -> int:
    return self._hashes.nbytes + self._offsets.nbytes + self._lengths.nbytes

  def lookup(self, url: str) -> tuple[int, int, tuple[str, ...]] | None:
    """(position, row id, fields) of the row with this url, or None. The position (0..len-1) indexes per-row
    state; the row id, the row's byte offset in the TSV, is the example's key: unique and stable."""
    target = _url_hash(url.encode("utf-8"))
    i = int(np.searchsorted(self._hashes, np.uint64(target)))
    if i == len(self._hashes) or int(self._hashes[i]) != target:
      return None
    offset, length = int(self._offsets[i]), int(self._lengths[i])
    if self._map is not None:
      line = self._map[offset:offset + length]
    else:
      self._file.seek(offset)
      line = self._file.read(length)
    fields = _parse_row(line, self.labeled)
    if fields is None or fields[1] != url:
      return None
    return i, offset, fields


@functools.lru_cache(maxsize=4)
def _cached_index(path: str, labeled: bool, size: int, mtime: float) -> TsvIndex:
  del size, mtime  # part of the cache key: a changed file is indexed again
  return TsvIndex(path, labeled)


def tsv_index(path: str, labeled: bool) -> TsvIndex:
  """The index of `path`, built once per process (Beam workers build it in their first work item)."""
  stat = epath.Path(path).stat()
  return _cached_index(os.fspath(path), labeled, stat.length, stat.mtime)


# ------------------------------------------------------------------------------------------------ shards


@dataclasses.dataclass
class Sample:
  """One downloaded image: its key, the bytes of its image member, and its img2dataset metadata."""
  key: str
  image: bytes | None = None
  meta: dict[str, Any] | None = None
  truncated: bool = False
  text: bytes | None = None  # KEY.txt, read only when asked (`with_text`): the caption img2dataset saw
  too_large: bool = False  # the image member is over MAX_MEMBER_BYTES: not read


@dataclasses.dataclass(frozen=True)
class Event:
  """What one image or shard contributed: an example for a row, a bad image for a row, or (kind "counts") a
  shard's image-side counts (IMAGE_KEYS) as one Report."""
  kind: str                   # "example" | "bad" | "counts"
  row: int = -1               # the row id (the example key)
  position: int = -1          # the row's position in the TsvIndex
  key: str = ""
  reason: str = ""
  example: dict[str, Any] | None = None
  order: tuple[int, int] = (0, 0)  # (shard number, sample number): breaks ties of equal keys the same way anywhere
  counts: report_lib.Report | None = None


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


def _parquet_path(shard: str) -> str:
  return (shard[:-len(".tar")] if shard.endswith(".tar") else shard.rstrip("/")) + ".parquet"


def _read_parquet(path: str) -> dict[str, str] | None:
  """key → url of the successful downloads img2dataset listed beside a shard, or None without the file."""
  if not epath.Path(path).exists():
    return None
  import pyarrow.parquet as pq  # noqa: PLC0415
  with epath.Path(path).open("rb") as f:
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
  """The samples of a webdataset tar, read as a stream: members are never extracted, links never followed."""
  current: Sample | None = None
  try:
    with epath.Path(path).open("rb") as f, tarfile.open(fileobj=f, mode="r|*") as tar:
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
        if extension == "json":
          current.meta = _json_or_none(data)
        elif extension == "txt":
          current.text = data
        else:
          current.image = data
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
    link = _is_link(full)
    if link or parsed is None or not full.is_file():
      counts["unsafe_member"] += link or parsed is None
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
      data = full.read_bytes()
      if extension == "json":
        sample.meta = _json_or_none(data)
      elif extension == "txt":
        sample.text = data
      else:
        sample.image = data
    yield sample


def shard_samples(shard: str, counts: collections.Counter, with_text: bool = False,
                  with_images: bool = True) -> Iterator[Sample]:
  """The samples of a shard, a webdataset tar (`NNNNN.tar`) or a files-layout folder, read one at a time; links,
  names that could escape and members over MAX_MEMBER_BYTES are never read (`counts`: unsafe_member,
  truncated_shard). Without `with_images` an image member is skipped and its sample's image is b""."""
  if shard.endswith(".tar"):
    return _tar_samples(shard, counts, with_text, with_images)
  return _file_samples(shard, counts, with_text, with_images)


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


def shard_events(shard: str, tsv_path: str, labeled: bool, number: int = 0,
                 with_images: bool = True) -> Iterator[Event]:
  """Every event of one shard (`number` in the split's sorted list): joins each image to its TSV row by the url
  in its .json (or its parquet row), then one "counts" event with the shard's image-side counts. Without
  `with_images` no image is read nor checked: each row event is a "bad" one, for counting a row's images."""
  index = tsv_index(tsv_path, labeled)
  counts: collections.Counter = collections.Counter(shards=1)
  parquet_urls = _read_parquet(_parquet_path(shard))
  if parquet_urls is None:
    counts["shard_without_parquet"] += 1
  for sample_number, sample in enumerate(shard_samples(shard, counts, with_images=with_images)):
    url = (sample.meta or {}).get("url") or (parquet_urls or {}).get(sample.key)
    found = index.lookup(url) if isinstance(url, str) else None
    if found is None:
      if sample.image is not None or sample.truncated or sample.too_large:
        counts["image_without_row"] += 1
      continue
    position, row, fields = found
    order = (number, sample_number)
    if sample.truncated or sample.too_large:
      yield Event("bad", row, position, sample.key, "truncated" if sample.truncated else "too_large", order=order)
      continue
    if sample.image is None:
      continue  # a .json with no image: img2dataset writes none for failed downloads
    if not with_images:
      yield Event("bad", row, position, sample.key, "unchecked", order=order)
      continue
    try:
      header = verify_image(sample.image)
    except image_io.ImageError as e:
      yield Event("bad", row, position, sample.key, e.reason, order=order)
      continue
    yield Event("example", row, position, sample.key, example=_example(fields, url, sample, header, labeled),
                order=order)
  yield Event("counts", counts=report_lib.Report(collections.Counter(counts)))


def _example(fields: tuple[str, ...], url: str, sample: Sample, header: image_io.Header,
             labeled: bool) -> dict[str, Any]:
  example = {
      "image": sample.image,  # the bytes as downloaded: Image(encoding_format="jpeg") stores them unchanged
      "caption": fields[0],
      "captions": [fields[0]],  # the trainer's references field (one per image in CC3M)
      "url": url,
      "key": sample.key,
      "width": header.width,
      "height": header.height,
  }
  if labeled:
    example["labels"] = fields[2].split(",")
    example["mids"] = fields[3].split(",")
    example["confidences"] = np.asarray([float(c) for c in fields[4].split(",")], np.float32)
  return example


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


def _read_parquet_rows(path: str) -> dict[str, dict[str, Any]] | None:
  """key → row of img2dataset's sidecar (every input row of the shard, failures too), or None without it."""
  if not epath.Path(path).exists():
    return None
  import pyarrow.parquet as pq  # noqa: PLC0415
  with epath.Path(path).open("rb") as f:
    table = pq.read_table(f)
  columns = [c for c in _PARQUET_COLUMNS if c in table.column_names]
  data = table.select(columns).to_pydict()
  return {k: {c: data[c][i] for c in columns} for i, k in enumerate(data["key"]) if k}


def shard_candidates(shard: str, counts: collections.Counter) -> Iterator[Candidate]:
  """Every row of one shard: samples in stream order, then parquet rows without a sample (failed downloads, and
  successes whose image is not in the shard: status `missing_image`). The caption is the sample's .txt, else its
  .json or parquet `caption`. Shard-side counts (IMAGE_KEYS) go into `counts`."""
  counts["shards"] += 1
  rows = _read_parquet_rows(_parquet_path(shard))
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


# ------------------------------------------------------------------------------------------------ report


CC3M_BREAKDOWNS = {"corrupt_image": "corrupt_reasons"}


def split_report(counts: report_lib.Report, index: TsvIndex) -> dict[str, Any]:
  """A split's report as builds write it, from its summed Report: the TSV's own counts added, and the rows
  neither given an example nor a bad image are missing_image (never downloaded, or their shard is gone)."""
  total = report_lib.Report().merge(counts)
  total.counts.update(tsv_rows=index.tsv_rows, duplicate_url=index.duplicate_url, malformed_row=index.malformed_row)
  total.counts["missing_image"] = len(index) - total.counts["examples"] - total.counts["corrupt_image"]
  return total.as_dict(REPORT_KEYS, CC3M_BREAKDOWNS)


def format_report(reports: Mapping[str, Mapping[str, Any]], title: str = "cc3m build report",
                  keys: tuple[str, ...] = REPORT_KEYS,
                  breakdowns: Mapping[str, str] = CC3M_BREAKDOWNS) -> str:
  """A build report as a table: one column per split, one line per count in `keys`, each count followed by its
  breakdown (`breakdowns`: count → the report's dict of name → number, e.g. the corrupt-image reasons)."""
  splits = list(reports)
  rows: list[tuple[str, list[int]]] = []
  for key in keys:
    rows.append((key, [reports[s][key] for s in splits]))
    detail = breakdowns.get(key)
    for name in sorted({n for s in splits for n in reports[s][detail]}) if detail else ():
      rows.append((f"  {name}", [reports[s][detail].get(name, 0) for s in splits]))
  width = max(len(title), *(len(label) for label, _ in rows)) + 2
  lines = [title.ljust(width) + "".join(s.rjust(12) for s in splits)]
  lines += [label.ljust(width) + "".join(f"{n:>12,}" for n in numbers) for label, numbers in rows]
  return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the join rule


def _rule_order(event: Event) -> tuple:
  image = event.example["image"] if event.example is not None else b""
  return event.kind != "example", event.key, event.order, event.reason, image


def row_outcome(events: Iterable[Event]) -> tuple[tuple[int, dict[str, Any]] | None, report_lib.Report]:
  """The one join rule, for one row and all of its images (both paths call it): the good image with the smallest
  key is its example (equal keys: the first in (shard, sample) order); its other images count as
  duplicate_image; a row with only bad images is corrupt_image, under the reason of its smallest key's image.
  Deterministic: it does not depend on the order images arrive in, which Beam does not keep."""
  events = sorted(events, key=_rule_order)
  first = events[0]
  counts = report_lib.Report().count("duplicate_image", len(events) - 1)
  if first.kind == "example":
    return (first.row, first.example), counts.count("examples")
  return None, counts.count("corrupt_image", reason=first.reason)


def plain_split(shards: list[str], tsv_path: str, labeled: bool,
                counts: report_lib.Report) -> Iterator[tuple[int, dict[str, Any]]]:
  """The plain path of one split: examples under the join rule, every count added to `counts`. A first pass
  counts each row's images without reading them (tar members are skipped in the stream); then a row with one
  image is decided as its image comes, and a row with more is held only until its last image has come."""
  index = tsv_index(tsv_path, labeled)
  expected = np.zeros(len(index), np.uint32)
  for number, shard in enumerate(shards):
    for event in shard_events(shard, tsv_path, labeled, number, with_images=False):
      if event.kind != "counts":
        expected[event.position] += 1
  waiting: dict[int, list[Event]] = {}
  decided = np.zeros(len(index), bool)
  for number, shard in enumerate(shards):
    for event in shard_events(shard, tsv_path, labeled, number):
      if event.kind == "counts":
        counts.merge(event.counts)
        continue
      if decided[event.position]:  # an image the first pass did not see (its shard changed): one more duplicate
        counts.count("duplicate_image")
        continue
      held = waiting.setdefault(event.position, [])
      held.append(event)
      if len(held) < expected[event.position]:
        continue
      del waiting[event.position]
      decided[event.position] = True
      example, row_counts = row_outcome(held)
      counts.merge(row_counts)
      if example is not None:
        yield example
  for held in waiting.values():  # a shard that changed between the passes: its rows are decided at the end
    example, row_counts = row_outcome(held)
    counts.merge(row_counts)
    if example is not None:
      yield example


_UNSEEN, _OK, _BAD = 0, 1, 2


def row_outcomes(events: Iterable[Event], num_rows: int,
                 report: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
  """A stream of events into examples and counts, one byte of state per row: a row's first good image is its
  example. This is the join rule only where every image of a row has the same key and events come in (shard,
  sample) order, as in cc12m_llavanext (joined on key); cc3m's rows are joined by url, and use `plain_split`."""
  state = np.zeros(num_rows, np.uint8)
  bad_reason: dict[int, str] = {}  # position -> reason, while the row has only bad images
  for event in events:
    if event.kind not in ("example", "bad"):
      report[event.kind] += 1
      continue
    before = state[event.position]
    if before != _UNSEEN:
      report["duplicate_image"] += 1
    if event.kind == "example" and before != _OK:
      state[event.position] = _OK
      bad_reason.pop(event.position, None)
      yield event.row, event.example
    elif event.kind == "bad" and before == _UNSEEN:
      state[event.position] = _BAD
      bad_reason[event.position] = event.reason
  report["examples"] = int((state == _OK).sum())
  report["corrupt_image"] = len(bad_reason)
  report["corrupt_reasons"] = dict(collections.Counter(bad_reason.values()))


# ------------------------------------------------------------------------------------------------ Beam


def _read_shard(item: tuple[int, str], tsv_path: str, labeled: bool) -> Iterator[Event]:
  number, shard = item
  return shard_events(shard, tsv_path, labeled, number)


def _beam_row(item: tuple[int, Iterable[Event]]) -> Iterator[Any]:
  """One row's grouped images under the join rule: ("example", (row, example)) when it makes one, then
  ("counts", Report)."""
  example, counts = row_outcome(item[1])
  if example is not None:
    yield "example", example
  yield "counts", counts


def _write_split_report(counts: report_lib.Report, tsv_path: str, labeled: bool, data_dir: str, split: str) -> None:
  report_lib.write_part(data_dir, split, split_report(counts, tsv_index(tsv_path, labeled)))


def _beam_split(pipeline_input, shards: list[str], tsv_path: str, labeled: bool, data_dir: str, split: str):
  """One split as a Beam graph: one work item per shard, images grouped by row and joined by the rule, every
  Report summed by one combine and written as the split's part of the build report."""
  beam = tfds.core.lazy_imports.apache_beam
  events = (pipeline_input
            | "Shards" >> beam.Create(list(enumerate(shards)))
            | "OneShardPerWorker" >> beam.Reshuffle()
            | "ReadShard" >> beam.FlatMap(_read_shard, tsv_path=tsv_path, labeled=labeled))
  rows = (events
          | "RowEvents" >> beam.Filter(lambda e: e.kind != "counts")
          | "ByRow" >> beam.Map(lambda e: (e.row, e))
          | "GroupByRow" >> beam.GroupByKey()
          | "JoinRule" >> beam.FlatMap(_beam_row))
  shard_counts = events | "ShardEvents" >> beam.Filter(lambda e: e.kind == "counts") | "ShardCounts" >> beam.Map(
      lambda e: e.counts)
  row_counts = rows | "RowOutcomes" >> beam.Filter(lambda kv: kv[0] == "counts") | "RowCounts" >> beam.Map(
      lambda kv: kv[1])
  _ = ((row_counts, shard_counts)
       | "AllCounts" >> beam.Flatten()
       | "SumReports" >> beam.CombineGlobally(report_lib.combine)
       | "WriteReport" >> beam.Map(_write_split_report, tsv_path=tsv_path, labeled=labeled, data_dir=data_dir,
                                   split=split))
  return rows | "Examples" >> beam.Filter(lambda kv: kv[0] == "example") | "KeyExample" >> beam.Map(lambda kv: kv[1])


def beam_split_transform(shards: list[str], tsv: str, labeled: bool, data_dir: str, split: str):
  """The Beam path of one split, as the PTransform a builder's `_generate_examples` returns; its report part is
  written into `data_dir`, the dataset's folder being built."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.ptransform_fn(_beam_split)(shards, tsv, labeled, data_dir, split)
