"""The `senticap` TFDS builder: SentiCap's positive and negative captions (Mathews et al. 2016) of COCO val2014
images, from the released `senticap_dataset.json`, joined by file name to COCO's val2014 folder. One config per
sentiment; an image is in a config when it has at least one caption of that sentiment.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from capjax import files
from capjax.strings import is_utf8
from tfds_builders import builder_base
from tfds_builders import image_folder
from tfds_builders import report as report_lib
from tfds_builders.builder_base import LocalCodePath, ManualDataError, at_least_one

JSON_NAME = "senticap_dataset.json"
IMAGES_DIR = "val2014"
SENTIMENTS = {"positive": 1, "negative": 0}  # the released "sentiment" value of each config's captions
RELEASED_SPLITS = ("train", "val", "test")
# The paper's split: the released train images (train and val in the file), 100 of them held out for validation;
# the released test images for test.
NUM_VALIDATION, SPLIT_SEED = 100, 0
REPORT_KEYS = ("images", "examples", "missing_image", "corrupt_image", "unsafe_name")
FILE_KEYS = ("entries", "malformed_entry", "malformed_sentence", "duplicate_entry")
# COCO's id in ASCII digits (\d takes any script's), at most 18 of them: the image_id feature is an int64.
_COCO_ID = re.compile(r"_([0-9]{1,18})\.jpg$")
_README = "tfds_builders/senticap/README.md"
_INSTRUCTIONS_POINTER = f"see {_README} (or `tfds.builder('senticap').MANUAL_DOWNLOAD_INSTRUCTIONS`)"

MANUAL_DOWNLOAD_INSTRUCTIONS = f"""\
Put in the manual dir (`--manual_dir=DIR`), as released:

  DIR/{JSON_NAME}            # from SentiCap's page (http://users.cecs.anu.edu.au/~u4534172/senticap.html):
                                      # the zip's data/senticap_dataset.json (DIR/data/ works too)
  DIR/{IMAGES_DIR}/COCO_val2014_000000000042.jpg ...   # http://images.cocodataset.org/zips/val2014.zip
"""


def _sentence(value: Any, sentiment: int) -> dict[str, str] | None:
  """The caption's fields when `value` is a well-formed released sentence of `sentiment`; None when it is of the
  other sentiment; a ValueError when it is malformed."""
  if not isinstance(value, dict) or value.get("sentiment") not in (0, 1) or isinstance(value.get("sentiment"), bool):
    raise ValueError("no sentiment 0 or 1")
  raw, tokens, marks = value.get("raw"), value.get("tokens"), value.get("word_sentiment")
  if not is_utf8(raw) or not raw.strip():  # a lone surrogate (JSON's "\ud800") could not be written
    raise ValueError("no raw caption")
  if (not isinstance(tokens, list) or not isinstance(marks, list) or len(tokens) != len(marks)
      or not all(is_utf8(t) for t in tokens) or not all(m in (0, 1) for m in marks)):
    raise ValueError("tokens and word_sentiment do not pair up")
  if value["sentiment"] != sentiment:
    return None
  return {"caption": raw.strip(), "tokens": " ".join(tokens),
          "style_words": " ".join(t for t, m in zip(tokens, marks) if m == 1)}


def parse_entries(data: Any, sentiment: int, counts: dict[str, int]) -> list[dict[str, Any]]:
  """The released images that have a caption of `sentiment`, in file order: {filename, image_id, split, captions
  (each {caption, tokens, style_words})}. Malformed entries and sentences, and further entries of an image, are
  counted in `counts` and left out."""
  if not isinstance(data, dict) or not isinstance(data.get("images"), list):
    raise ManualDataError(f"{JSON_NAME} is not SentiCap's (no \"images\" list) — download it again "
                          f"({_INSTRUCTIONS_POINTER})")
  entries, seen = [], set()
  for entry in data["images"]:
    counts["entries"] += 1
    filename = entry.get("filename") if isinstance(entry, dict) else None
    match = _COCO_ID.search(filename) if is_utf8(filename) else None
    if (match is None or entry.get("split") not in RELEASED_SPLITS or not isinstance(entry.get("sentences"), list)):
      counts["malformed_entry"] += 1
      continue
    captions = []
    for value in entry["sentences"]:
      try:
        sentence = _sentence(value, sentiment)
      except ValueError:
        counts["malformed_sentence"] += 1
        continue
      if sentence is not None:
        captions.append(sentence)
    if filename in seen:  # the first entry of an image is kept: one example per image
      counts["duplicate_entry"] += 1
      continue
    seen.add(filename)
    if captions:
      entries.append({"filename": filename, "image_id": int(match.group(1)), "split": entry["split"],
                      "captions": captions})
  return entries


def assign_splits(entries: list[dict[str, Any]]) -> list[str]:
  """train / validation / test per entry: the released test images are test; of the others (released train and
  val), NUM_VALIDATION drawn by a seeded permutation are validation (half of them when there are fewer than
  2 x NUM_VALIDATION, as in dummy data), the rest train."""
  pool = [i for i, e in enumerate(entries) if e["split"] != "test"]
  held = image_folder.held_out(len(pool), min(NUM_VALIDATION, len(pool) // 2), SPLIT_SEED)
  splits = ["test" if e["split"] == "test" else "train" for e in entries]
  for rank, i in enumerate(pool):
    if rank in held:
      splits[i] = "validation"
  return splits


def _assemble(parts: dict[str, Any]) -> dict[str, Any]:
  """The build report: each split's (in name order), then the json's counts under "file"."""
  return {"build_report": {**{s: parts[s] for s in sorted(parts) if s != "file"}, "file": parts["file"]}}


def _describe(title: str, metadata: Mapping[str, Any]) -> str:
  report = dict(metadata["build_report"])
  counts = report.pop("file")
  return (image_folder.format_report(report, title, REPORT_KEYS) + "\n"
          + f"{JSON_NAME}: " + ", ".join(f"{k} {counts[k]:,}" for k in FILE_KEYS))


class Builder(LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """SentiCap: COCO val2014 images with positive or negative captions and their sentiment words."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "senticap_dataset.json on COCO val2014 JPEGs; 100 train images held out for validation."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=name, description=f"Images with {name} captions.")
                     for name in SENTIMENTS]
  DEFAULT_CONFIG_NAME = "positive"

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg",
                                         doc="COCO's JPEG bytes, never re-encoded."),
            "image_id": tfds.features.Scalar(np.int64, doc="COCO's image id (from the file name)."),
            "filename": tfds.features.Text(doc="COCO_val2014_NNNNNNNNNNNN.jpg"),
            "released_split": tfds.features.Text(doc="train, val or test in senticap_dataset.json."),
            "captions": tfds.features.Sequence(tfds.features.Text(), doc="The config's sentiment's captions, raw."),
            "tokens": tfds.features.Sequence(tfds.features.Text(),
                                             doc="Each caption's released tokens (lowercased, no punctuation)."),
            "style_words": tfds.features.Sequence(tfds.features.Text(),
                                                  doc="Each caption's words in a sentiment ANP (word_sentiment 1)."),
        }),
        homepage="http://users.cecs.anu.edu.au/~u4534172/senticap.html",
        metadata=report_lib.ReportMetadata(_assemble, functools.partial(
            _describe, f"senticap/{self.builder_config.name} build report")),
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = builder_base.manual_dir(dl_manager, f"{JSON_NAME} and COCO's {IMAGES_DIR}/", _README)
    path = next((p for p in (root / JSON_NAME, root / "data" / JSON_NAME) if p.exists()), None)
    if path is None:
      raise ManualDataError(f"{root / JSON_NAME} is missing — download SentiCap ({_INSTRUCTIONS_POINTER})")
    images = root / IMAGES_DIR
    if not images.is_dir():
      raise ManualDataError(f"{images} is missing — download COCO's val2014 images ({_INSTRUCTIONS_POINTER})")
    try:
      data = json.loads(files.read_regular(path))
    except (ValueError, RecursionError) as e:
      raise ManualDataError(
          f"{path} is not JSON ({str(e)[:80]}) — download it again ({_INSTRUCTIONS_POINTER})") from e
    counts = dict.fromkeys(FILE_KEYS, 0)
    entries = parse_entries(data, SENTIMENTS[self.builder_config.name], counts)
    report_lib.write_part(self.data_dir, "file", counts)
    splits = assign_splits(entries)
    return {split: self._generate_examples(split, entries, splits, os.fspath(images))
            for split in ("train", "validation", "test")}

  def _generate_examples(self, split: str, entries: list[dict[str, Any]], splits: list[str],
                         images: str) -> Iterator[tuple[str, dict[str, Any]]]:
    report = report_lib.Report()

    def examples():
      for entry, entry_split in zip(entries, splits):
        if entry_split != split:
          continue
        report.count("images")
        data, reason = image_folder.read_jpeg(images, entry["filename"])
        if reason:
          image_folder.count_image_failure(report, reason)
          continue
        report.count("examples")
        yield entry["filename"], {
            "image": data, "image_id": entry["image_id"], "filename": entry["filename"],
            "released_split": entry["split"],
            "captions": [c["caption"] for c in entry["captions"]], "tokens": [c["tokens"] for c in entry["captions"]],
            "style_words": [c["style_words"] for c in entry["captions"]]}

    yield from at_least_one(examples(), lambda: f"the {split} split's {report.counts['images']} images in {images} "
                                                f"gave {image_folder.finish_report(report, REPORT_KEYS)}")
    report_lib.write_part(self.data_dir, split, image_folder.finish_report(report, REPORT_KEYS))
