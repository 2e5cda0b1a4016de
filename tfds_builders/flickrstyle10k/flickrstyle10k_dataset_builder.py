"""The `flickrstyle10k` TFDS builder: the 7,000 public FlickrStyle10K images (Gan et al. 2017), each with its
humorous and romantic caption, joined by file name to Flickr30K's images. The image list is released as a Python
pickle (`humor/train.p`): it is read by its opcodes (`image_names`), never unpickled.
"""

from __future__ import annotations

import os
import pickletools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from capjax import files as capjax_files
from capjax.text.lines import read_lines
from tfds_builders import builder_base
from tfds_builders import image_folder
from tfds_builders import report as report_lib
from tfds_builders.builder_base import LocalCodePath, ManualDataError, at_least_one

HUMOR_CAPTIONS = "humor/funny_train.txt"
ROMANTIC_CAPTIONS = "romantic/romantic_train.txt"
IMAGE_LIST = "humor/train.p"
IMAGE_LIST_TEXT = "humor/train.txt"  # optional: the names one per line, read instead of the pickle when present
RELEASE_FOLDER = "FlickrStyle_v0.9"
IMAGES_DIR = "flickr30k-images"  # the folder of Flickr30K's own archive; Kaggle's copy nests flickr30k_images/ twice
IMAGES_DIRS = (IMAGES_DIR, "flickr30k_images/flickr30k_images", "flickr30k_images")
FACTUAL_CAPTIONS = "results_20130124.token"  # optional: Flickr30K's own captions, "NAME.jpg#k<TAB>caption" a line
_README = "tfds_builders/flickrstyle10k/README.md"
_INSTRUCTIONS_POINTER = f"see {_README} (or `tfds.builder('flickrstyle10k').MANUAL_DOWNLOAD_INSTRUCTIONS`)"
# The paper's split: 6,000 of the 7,000 images for training, 10% of those for validation, the rest for test.
TRAIN_SHARE, VALIDATION_SHARE, SPLIT_SEED = 6 / 7, 0.1, 0
REPORT_KEYS = ("listed", "examples", "missing_image", "corrupt_image", "empty_caption", "unsafe_name",
               "not_utf8_caption", "without_factual")

MANUAL_DOWNLOAD_INSTRUCTIONS = f"""\
Put in the manual dir (`--manual_dir=DIR`), as released:

  DIR/{RELEASE_FOLDER}/{HUMOR_CAPTIONS}         # https://zhegan27.github.io/Papers/FlickrStyle_v0.9.zip
  DIR/{RELEASE_FOLDER}/{ROMANTIC_CAPTIONS}
  DIR/{RELEASE_FOLDER}/{IMAGE_LIST}                 # the image names (a pickle: read by its opcodes, never loaded)
  DIR/{IMAGES_DIR}/1000092795.jpg ...            # Flickr30K's images (https://shannon.cs.illinois.edu/DenotationGraph/)

  DIR/{FACTUAL_CAPTIONS}                  # optional: Flickr30K's factual captions, for `factual`

(The {RELEASE_FOLDER}/ level may be left out: DIR/humor/... works too; so may Kaggle's flickr30k_images/ stand
for {IMAGES_DIR}/.)
"""

# Opcodes of a pickled list of strings, in protocols 0 to 5: anything else (a class, a call) is refused unread.
_STRING_OPS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
               "BINBYTES", "SHORT_BINBYTES", "BINBYTES8"}
_PUT_OPS, _GET_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}, {"GET", "BINGET", "LONG_BINGET"}


class _Mark:
  pass


def image_names(data: bytes, where: str = IMAGE_LIST) -> list[str]:
  """The list of strings in a pickle, read by walking its opcodes with `pickletools.genops`: nothing is executed.

  Only what a pickled list of strings holds is understood (list, mark, append(s), strings, memo put/get, proto,
  frame, stop); any other opcode (a global, a call, a dict) is a ValueError, so a hostile file is refused before
  anything in it is used."""
  stack: list[Any] = []
  memo: dict[int, Any] = {}
  try:
    for opcode, arg, _ in pickletools.genops(data):
      name = opcode.name
      if name in ("PROTO", "FRAME"):
        continue
      if name == "STOP":
        break
      if name == "EMPTY_LIST":
        stack.append([])
      elif name == "MARK":
        stack.append(_Mark())
      elif name in _STRING_OPS:
        stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
      elif name in _PUT_OPS:
        memo[arg] = stack[-1]
      elif name == "MEMOIZE":
        memo[len(memo)] = stack[-1]
      elif name in _GET_OPS:
        stack.append(memo[arg])
      elif name == "APPEND":
        item = stack.pop()
        stack[-1].append(item)
      elif name in ("APPENDS", "LIST"):
        mark = max(i for i, v in enumerate(stack) if isinstance(v, _Mark))
        items, stack = stack[mark + 1:], stack[:mark]
        if name == "LIST":
          stack.append(items)
        else:
          stack[-1].extend(items)
      else:
        raise ValueError(f"{where} holds a {name} opcode, not just a list of names — give the released file, or "
                         f"the names one per line in {IMAGE_LIST_TEXT}")
  except (IndexError, KeyError, AttributeError, TypeError) as e:
    raise ValueError(f"{where} is not a well-formed pickled list ({type(e).__name__}) — give the released file") \
        from e
  except ValueError as e:
    if "opcode, not just" in str(e):
      raise
    raise ValueError(f"{where} is not a pickle ({e}) — give the released file") from e
  if len(stack) != 1 or not isinstance(stack[0], list) or not all(isinstance(s, str) for s in stack[0]):
    raise ValueError(f"{where} does not hold one list of strings — give the released file")
  return stack[0]


def flickr30k_name(released: str) -> str:
  """Flickr30K's file for a released name: "1000092795_d4e3c0a1b2.jpg" (Flickr id, secret) -> "1000092795.jpg"."""
  stem, extension = os.path.splitext(released)
  return stem.split("_", 1)[0] + (extension or ".jpg")


def read_captions(path: str) -> list[tuple[str, bool]]:
  """(caption, was UTF-8) per line. A line that is not UTF-8 is read as Windows-1252 (the released files have a
  few; read as Latin-1 where cp1252 has no character), and counted, never dropped: lines align with images."""
  lines = []
  for line in read_lines(path):
    try:
      lines.append((line.decode("utf-8").strip(), True))
    except UnicodeDecodeError:
      try:
        text = line.decode("cp1252")
      except UnicodeDecodeError:
        text = line.decode("latin-1")
      lines.append((text.strip(), False))
  return lines


def read_factual(path: str) -> dict[str, list[str]]:
  """Flickr30K's captions by image file, in their #k order: "1000092795.jpg#0<TAB>Two young guys ..." lines.
  Lines that are not UTF-8 or not in that form are skipped (the captions are extra: the example is built anyway)."""
  numbered: dict[str, list[tuple[int, str]]] = {}
  for line in read_lines(path):
    try:
      key, caption = line.decode("utf-8").split("\t", 1)
      name, number = key.rsplit("#", 1)
      numbered.setdefault(name, []).append((int(number), caption.strip()))
    except ValueError:  # UnicodeDecodeError is one
      continue
  return {name: [caption for _, caption in sorted(captions)] for name, captions in numbered.items()}


def split_of(num_images: int) -> list[str]:
  """The split of each released position: a seeded permutation's first 6/7 train (10% of them validation), the
  rest test. Decided before any image is read, so that a missing image never moves another between splits."""
  num_train = round(num_images * TRAIN_SHARE)
  permutation = np.random.default_rng(SPLIT_SEED).permutation(num_images)
  num_validation = round(num_train * VALIDATION_SHARE)
  splits = [""] * num_images
  for rank, position in enumerate(permutation):
    splits[int(position)] = ("validation" if rank < num_validation else "train") if rank < num_train else "test"
  return splits


def _describe(metadata: Mapping[str, Any]) -> str:
  return image_folder.format_report(metadata["build_report"], "flickrstyle10k build report", REPORT_KEYS)


class Builder(LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """FlickrStyle10K's public 7,000 images with their humorous and romantic captions."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "humor/ and romantic/ captions aligned with humor/train.p, on Flickr30K's JPEGs."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg",
                                         doc="Flickr30K's JPEG bytes, never re-encoded."),
            "image_name": tfds.features.Text(doc="The name in train.p (Flickr id and secret)."),
            "flickr30k_name": tfds.features.Text(doc="The image's file in flickr30k-images/."),
            "index": tfds.features.Scalar(np.int32, doc="Its position in the released files."),
            "humorous": tfds.features.Text(doc="The line of humor/funny_train.txt, stripped."),
            "romantic": tfds.features.Text(doc="The line of romantic/romantic_train.txt, stripped."),
            "factual": tfds.features.Sequence(tfds.features.Text(),
                                              doc="Flickr30K's captions of the image (results_20130124.token), "
                                                  "in their order; empty when that file is not in the manual dir."),
        }),
        homepage="https://zhegan27.github.io/Papers/FlickrStyle_v0.9.zip",
        metadata=report_lib.ReportMetadata(report_lib.by_split, _describe),
    )

  def _manual_files(self, dl_manager) -> dict[str, str]:
    root = builder_base.manual_dir(dl_manager, "FlickrStyle_v0.9/ and flickr30k-images/", _README)
    release = root / RELEASE_FOLDER if (root / RELEASE_FOLDER).is_dir() else root
    files = {"humorous": release / HUMOR_CAPTIONS, "romantic": release / ROMANTIC_CAPTIONS}
    names_text = release / IMAGE_LIST_TEXT
    files["names"] = names_text if names_text.exists() else release / IMAGE_LIST
    for path in files.values():
      if not path.exists():
        raise ManualDataError(f"{path} is missing — download FlickrStyle10K ({_INSTRUCTIONS_POINTER})")
    images = next((root / d for d in IMAGES_DIRS if (root / d).is_dir()), None)
    if images is None:
      raise ManualDataError(f"{root / IMAGES_DIR} is missing — download Flickr30K's images ({_INSTRUCTIONS_POINTER})")
    factual = root / FACTUAL_CAPTIONS
    return {**{key: os.fspath(path) for key, path in files.items()}, "images": os.fspath(images),
            "factual": os.fspath(factual) if factual.exists() else ""}

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    files = self._manual_files(dl_manager)
    if files["names"].endswith(".txt"):
      names = [line.decode("utf-8", "replace").strip() for line in read_lines(files["names"])]
    else:
      try:
        names = image_names(capjax_files.read_regular(files["names"]), files["names"])
      except ValueError as e:
        raise ManualDataError(str(e)) from e
    humorous, romantic = read_captions(files["humorous"]), read_captions(files["romantic"])
    if not len(names) == len(humorous) == len(romantic):
      raise ManualDataError(
          f"{files['names']} lists {len(names):,} images, {files['humorous']} has {len(humorous):,} lines and "
          f"{files['romantic']} {len(romantic):,}: the files are paired by position, so they must agree — "
          "download them again, whole")
    rows = list(zip(names, humorous, romantic))
    splits = split_of(len(rows))
    factual = read_factual(files["factual"]) if files["factual"] else None
    return {split: self._generate_examples(split, rows, splits, files["images"], factual)
            for split in ("train", "validation", "test")}

  def _generate_examples(self, split: str, rows: list, splits: list[str], images: str,
                         factual: dict[str, list[str]] | None) -> Iterator[tuple[int, dict[str, Any]]]:
    report = report_lib.Report()

    def examples():
      for index, (name, (humorous, humorous_utf8), (romantic, romantic_utf8)) in enumerate(rows):
        if splits[index] != split:
          continue
        report.count("listed")
        report.count("not_utf8_caption", (not humorous_utf8) + (not romantic_utf8))
        if not humorous or not romantic:
          report.count("empty_caption")
          continue
        data, reason = image_folder.read_jpeg(images, flickr30k_name(name))
        if reason:
          image_folder.count_image_failure(report, reason)
          continue
        report.count("examples")
        captions = factual.get(flickr30k_name(name), []) if factual is not None else []
        report.count("without_factual", int(factual is not None and not captions))
        yield index, {"image": data, "image_name": name, "flickr30k_name": flickr30k_name(name), "index": index,
                      "humorous": humorous, "romantic": romantic, "factual": captions}

    yield from at_least_one(examples(), lambda: f"the {split} split's {report.counts['listed']} images in {images} "
                                                f"gave {image_folder.finish_report(report, REPORT_KEYS)}")
    report_lib.write_part(self.data_dir, split, image_folder.finish_report(report, REPORT_KEYS))
