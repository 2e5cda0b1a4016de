"""The karpathy builder's reading of its manual dir, as pure functions: Karpathy's split files
(`dataset_coco.json`, `dataset_flickr30k.json`, `dataset_flickr8k.json`) and COCO-format caption files
(`captions_val2014.json`, nocaps' `nocaps_val_4500_captions.json`) parsed into one `Entry` per image, and the
`plan` that checks every entry's image once (missing, corrupt) and counts the folder's files no entry names.
The plan is the build report: the builder computes it in `_split_generators`, before any example is written.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from tensorflow_datasets.core.utils import tqdm_utils

from capjax import files
from capjax.strings import is_utf8
from tfds_builders import image_folder
from tfds_builders import report as report_lib
from tfds_builders.builder_base import ManualDataError

REPORT_KEYS = ("images", "examples", "missing_image", "corrupt_image", "unsafe_name")
FILE_KEYS = ("entries", "malformed_entry", "duplicate_entry", "unreferenced_file")
COCO_FORMAT_KEYS = ("annotation_without_image", "image_without_caption")
NOCAPS_DOMAINS = ("in-domain", "near-domain", "out-domain")
_THREADS, _CHUNK = 8, 512  # image checks: Pillow and file reads release the GIL; at most _CHUNK in flight


@dataclasses.dataclass(frozen=True)
class Entry:
  """One image of the json with its references: `folder` is the image folder's name in the manual dir."""
  split: str
  folder: str
  file_name: str
  image_id: int
  raw_captions: tuple[str, ...]
  captions: tuple[str, ...]  # the vocabulary's form: Karpathy's tokens, or Penn Treebank tokens, joined by spaces
  caption_ids: tuple[int, ...]  # Karpathy's sentids, or the COCO annotation ids
  domain: str = ""


@dataclasses.dataclass(frozen=True)
class Plan:
  """What the build will write (`entries`, with each image's size and mtime when checked) and the report."""
  entries: dict[str, list[tuple[Entry, tuple[int, int]]]]
  report: dict[str, dict[str, Any]]


def _is_int(value: Any) -> bool:
  """An id the example can hold: an integer (not a bool) within int64, the feature's type. Checked here, where a
  bad one is counted, not when TFDS encodes it (2^63 stopped the build after the report had counted the entry)."""
  return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


def _is_text(value: Any) -> bool:
  """Non-blank text that UTF-8 can encode (a lone surrogate, JSON's "\\ud800", cannot be written)."""
  return is_utf8(value) and bool(value.strip())


def not_the_format(path: str, expected: str, what_to_do: str) -> ManualDataError:
  return ManualDataError(f"{path} is not {expected} — {what_to_do}")


def parse_karpathy(data: Any, path: str, splits: Sequence[str], folders: Sequence[str], with_filepath: bool,
                   counts: dict[str, int], what_to_do: str) -> tuple[list[Entry], set[tuple[str, str]]]:
  """The entries of a Karpathy split file, in file order, and every (folder, file name) the file names, malformed
  entries included. Each entry needs filename, imgid (cocoid and a filepath in `folders` for COCO), a split in
  `splits` and one or more sentences, each with its raw text and a list of tokens (kept as they are, even empty:
  every reference caption is kept, and one bad sentence would drop a test image); an entry without them is a
  malformed_entry (as is an id outside int64, or text with a lone surrogate: no example could hold it), a second
  entry of the same image id a duplicate_entry. A sentid that is no such id is -1, as a missing one."""
  images = data.get("images") if isinstance(data, dict) else None
  if not isinstance(images, list) or (images and not any(isinstance(e, dict) and "sentences" in e for e in images)):
    hint = (" (it is a COCO-format file: build it with karpathy/coco_format)"
            if isinstance(data, dict) and "annotations" in data else "")
    raise not_the_format(path, f"a Karpathy split file (an \"images\" list of entries with \"sentences\"){hint}",
                         what_to_do)
  entries, seen, named = [], set(), set()
  for entry in images:
    counts["entries"] += 1
    if not isinstance(entry, dict):
      counts["malformed_entry"] += 1
      continue
    image_id = entry.get("cocoid") if with_filepath else entry.get("imgid")
    folder = entry.get("filepath") if with_filepath else folders[0]
    if isinstance(folder, str) and isinstance(entry.get("filename"), str):
      named.add((folder, entry["filename"]))
    sentences = entry.get("sentences")
    well_formed = (_is_text(entry.get("filename")) and _is_int(image_id) and _is_int(entry.get("imgid"))
                   and folder in folders and entry.get("split") in splits and isinstance(sentences, list)
                   and sentences and all(isinstance(s, dict) and is_utf8(s.get("raw"))
                                         and isinstance(s.get("tokens"), list)
                                         and all(is_utf8(t) for t in s["tokens"]) for s in sentences))
    if not well_formed:
      counts["malformed_entry"] += 1
      continue
    if image_id in seen:  # the first entry of an image is kept: one example per image
      counts["duplicate_entry"] += 1
      continue
    seen.add(image_id)
    entries.append(Entry(
        split=entry["split"], folder=folder, file_name=entry["filename"], image_id=image_id,
        raw_captions=tuple(s["raw"].strip() for s in sentences),
        captions=tuple(" ".join(s["tokens"]) for s in sentences),
        caption_ids=tuple(s["sentid"] if _is_int(s.get("sentid")) else -1 for s in sentences)))
  return entries, named


def parse_coco_format(data: Any, path: str, split: str, folder: str, with_domain: bool, counts: dict[str, int],
                      what_to_do: str) -> tuple[list[Entry], set[tuple[str, str]]]:
  """The images of a COCO-format caption file that have one or more captions, in the order of its "images", each
  with its annotations' captions in file order. An image needs an int64 id and a file_name (nocaps: a domain as
  well), an annotation an int64 image_id and id and a caption, text UTF-8 can encode: otherwise each is a
  malformed_entry. Captions of an id no image entry has and images with no caption are counted
  (annotation_without_image, image_without_caption). Also returns every (folder, file name) the file names, as
  parse_karpathy does."""
  images = data.get("images") if isinstance(data, dict) else None
  annotations = data.get("annotations") if isinstance(data, dict) else None
  if not isinstance(images, list) or not isinstance(annotations, list):
    hint = (" (it is a Karpathy split file: build it with karpathy/coco, flickr30k or flickr8k)"
            if isinstance(images, list) and any(isinstance(e, dict) and "sentences" in e for e in images) else "")
    raise not_the_format(path, f"a COCO-format caption file (\"images\" and \"annotations\" lists){hint}",
                         what_to_do)
  from capjax.text.annotate import caption_tokens  # noqa: PLC0415 (its tagger tables: only for this format)
  by_image: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)
  for annotation in annotations:
    if not (isinstance(annotation, dict) and _is_int(annotation.get("image_id")) and _is_int(annotation.get("id"))
            and _is_text(annotation.get("caption"))):
      counts["malformed_entry"] += 1
      continue
    by_image[annotation["image_id"]].append((annotation["caption"].strip(), annotation["id"]))
  entries, seen, named = [], set(), set()
  ids = {image.get("id") for image in images if isinstance(image, dict) and _is_int(image.get("id"))}
  for image in images:
    counts["entries"] += 1
    if isinstance(image, dict) and isinstance(image.get("file_name"), str):
      named.add((folder, image["file_name"]))
    if not (isinstance(image, dict) and _is_int(image.get("id")) and _is_text(image.get("file_name"))
            and (not with_domain or image.get("domain") in NOCAPS_DOMAINS)):
      counts["malformed_entry"] += 1
      continue
    if image["id"] in seen:
      counts["duplicate_entry"] += 1
      continue
    seen.add(image["id"])
    captions = by_image.get(image["id"], [])
    if not captions:
      counts["image_without_caption"] += 1
      continue
    entries.append(Entry(
        split=split, folder=folder, file_name=image["file_name"], image_id=image["id"],
        raw_captions=tuple(c for c, _ in captions),
        captions=tuple(" ".join(caption_tokens(c)) for c, _ in captions),
        caption_ids=tuple(i for _, i in captions), domain=image.get("domain", "") if with_domain else ""))
  counts["annotation_without_image"] = sum(len(v) for k, v in by_image.items() if k not in ids)
  return entries, named


def _check(root: str, entry: Entry) -> tuple[str | None, tuple[int, int]]:
  """(why the image cannot be used, or None; its (size, mtime_ns) when it can)."""
  folder = os.path.join(root, entry.folder)
  data, reason = image_folder.read_jpeg(folder, entry.file_name)
  if reason:
    return reason, (0, 0)
  stat = os.stat(os.path.join(folder, entry.file_name))
  del data
  return None, (stat.st_size, stat.st_mtime_ns)


def read_checked(root: str, entry: Entry, stamp: tuple[int, int]) -> bytes:
  """The bytes of `entry`'s image, which its check found whole with (size, mtime_ns) `stamp`; a ManualDataError
  when the file has changed since, so that what is written is what the report counted."""
  path = os.path.join(root, entry.folder, entry.file_name)
  data = files.read_regular(path)
  if (len(data), os.stat(path).st_mtime_ns) != stamp:
    raise ManualDataError(f"{path} changed while the dataset was being built — build it again once nothing "
                          "writes to the image folder")
  return data


def _checked(root: str, entries: list[Entry]) -> Iterator[tuple[Entry, tuple[str | None, tuple[int, int]]]]:
  """Each entry with its check, in order: `_CHUNK` at a time over a few threads (a bounded number in flight), with
  TFDS's progress bar (none when there is nothing to check)."""
  with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool, \
      tqdm_utils.tqdm(total=len(entries), desc="Checking images", unit=" images", disable=not entries) as bar:
    for start in range(0, len(entries), _CHUNK):
      chunk = entries[start:start + _CHUNK]
      yield from zip(chunk, pool.map(lambda e: _check(root, e), chunk))
      bar.update(len(chunk))


def unreferenced_files(root: str, folders: Iterable[str], named: Collection[tuple[str, str]]) -> int:
  """The files in the image folders (links and dot-files aside) that no json entry names (`named`: (folder, file
  name) pairs, malformed entries' included): they are counted, never built."""
  count = 0
  for folder in folders:
    path = os.path.join(root, folder)
    if not os.path.isdir(path):
      continue
    with os.scandir(path) as items:
      for item in items:
        if item.is_file(follow_symlinks=False) and not item.name.startswith(".") \
            and (folder, item.name) not in named:
          count += 1
  return count


def plan(root: str, entries: list[Entry], named: Collection[tuple[str, str]], splits: Sequence[str],
         folders: Sequence[str], file_counts: Mapping[str, int]) -> Plan:
  """Checks each entry's image (read whole and decoded at 1/8 scale, `image_folder.read_jpeg`; a few threads, the
  bytes dropped at once: memory does not grow with the image count) and counts the image folders' other files.
  The report: per split, images listed, examples, and each reason an image was left out; under "file", the
  json's entries and what was wrong with them, and the unreferenced files."""
  report = {split: report_lib.Report() for split in splits}
  kept: dict[str, list[tuple[Entry, tuple[int, int]]]] = {split: [] for split in splits}
  for entry, (reason, stamp) in _checked(root, entries):
    counts = report[entry.split]
    counts.count("images")
    if reason:
      image_folder.count_image_failure(counts, reason)
      continue
    counts.count("examples")
    kept[entry.split].append((entry, stamp))
  files = {**file_counts, "unreferenced_file": unreferenced_files(root, folders, named)}
  return Plan(kept, {**{s: image_folder.finish_report(report[s], REPORT_KEYS) for s in splits}, "file": files})


def format_report(report: Mapping[str, Mapping[str, Any]], title: str, json_name: str) -> str:
  """The per-split table (as the other builders print theirs) and one line of the json's counts."""
  splits = {k: v for k, v in report.items() if k != "file"}
  counts = report["file"]
  return (image_folder.format_report(splits, title, REPORT_KEYS) + "\n"
          + f"{json_name}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
