"""The `caption_folder` TFDS builder: a folder of the user's own captioned images, one folder per split, in Hugging
Face's `imagefolder` layout (images and a `metadata.jsonl` or `metadata.csv` of `file_name` and `text`) or, without
metadata, as img2dataset leaves a download (`KEY.jpg` beside `KEY.txt`, or webdataset tars).

Stateless, on TFDS's public API: `_split_generators` finds each split's layout and reads its metadata (names and
captions only: every error in a metadata file stops the build before anything is written); `_generate_examples`
reads the images one at a time (`folder.py`) and writes the split's report part when its last example is out
(report.py's step). A split that gives no example is one error line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import tensorflow_datasets as tfds

from tfds_builders import builder_base
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.builder_base import LocalCodePath, ManualDataError, at_least_one
from tfds_builders.caption_folder import folder as folder_lib
from tfds_builders.caption_folder import metadata

SPLITS = ("train", "validation", "test")
_README = "tfds_builders/caption_folder/README.md"

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Put in the manual dir (`--manual_dir=DIR`) one folder per split, any of train/, validation/ and test/:

  DIR/train/metadata.jsonl   DIR/train/a.jpg   DIR/train/more/b.png ...   # {"file_name": "a.jpg", "text": "..."}
  DIR/validation/metadata.csv   DIR/validation/c.webp ...                 # file_name,text
  DIR/test/00000/000000000.jpg   DIR/test/00000/000000000.txt ...         # img2dataset --output_format files
  DIR/test/00000.tar ...                                                  # or img2dataset's webdataset tars

See tfds_builders/caption_folder/README.md.
"""

IMAGE_DOC = ("JPEG (RGB or grey) bytes as read; a PNG, a WebP or a CMYK JPEG is re-encoded as a lossless 8-bit RGB "
             "PNG (the report's re_encoded counts them by what they were), since TFDS's decoders would hand the "
             "trainer 4 channels, palette indices or 16-bit values, or (TensorFlow) fail on WebP.")


def _describe(metadata_dict) -> str:
  """The report step's table, then each split's layout."""
  reports = metadata_dict["build_report"]
  table = i2d.format_report(reports, "caption_folder build report", folder_lib.REPORT_KEYS, folder_lib.BREAKDOWNS)
  return table + "\nlayouts: " + ", ".join(f"{split} {part['layout']}" for split, part in reports.items())


class Builder(LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """A folder of captioned images, one folder per split (Hugging Face imagefolder or img2dataset layouts)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Hugging Face imagefolder metadata, img2dataset files and webdataset layouts."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS

  def _info(self) -> tfds.core.DatasetInfo:
    features = {
        "image": tfds.features.Image(shape=(None, None, 3), doc=IMAGE_DOC),
        "file_name": tfds.features.Text(doc="The image's path relative to its split folder (`a/b.jpg`); for a "
                                            "webdataset tar, `SHARD.tar/KEY`."),
        "captions": tfds.features.Sequence(
            tfds.features.Text(), doc="Every reference caption of the image, in file order: each metadata row's "
                                      "text exactly as written (a list gives several), or the stripped text of its "
                                      ".txt (or .json caption)."),
    }
    return self.dataset_info_from_configs(features=tfds.features.FeaturesDict(features),
                                          homepage="https://huggingface.co/docs/datasets/image_dataset#imagefolder",
                                          metadata=report_lib.ReportMetadata(report_lib.by_split, _describe))

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = builder_base.manual_dir(dl_manager, "one folder per split (train/, validation/, test/)", _README)
    splits = [split for split in SPLITS if (root / split).is_dir()]
    if not splits:
      raise ManualDataError(f"{root} holds no train/, validation/ or test/ folder — put each split's images (and "
                            f"its metadata.jsonl or metadata.csv) in a folder of its name ({_README})")
    plans = {}
    for split in splits:  # every metadata file is read (and refused) before any example is written
      folder = os.fspath(root / split)
      report = report_lib.Report()
      path = metadata.metadata_file(folder)
      if path is not None:
        index = metadata.read_index(path, report)
        if not any(index.captions.values()):
          raise ManualDataError(f"no example could be built: no row of {path} names a file with text "
                                f"({folder_lib.split_report(report, os.path.basename(path))}) — give each image's "
                                f"file_name and text ({_README})")
        plans[split] = (folder, os.path.basename(path), index, report)
      else:
        shards = folder_lib.tar_shards(folder)
        plans[split] = (folder, "tars" if shards else "files", shards, report)
    return {split: self._generate_examples(split, *plan) for split, plan in plans.items()}

  def _generate_examples(self, split: str, folder: str, layout: str, source: Any,
                         report: report_lib.Report) -> Iterator[tuple[str, dict[str, Any]]]:
    if layout == "tars":
      examples = folder_lib.tar_examples(source, report)
    elif layout == "files":
      examples = folder_lib.txt_examples(folder, report)
    else:
      examples = folder_lib.metadata_examples(folder, source, report)
    yield from at_least_one(examples, lambda: f"the {split} split ({folder}, {layout}) gave "
                                              f"{folder_lib.split_report(report, layout)}",
                            f"check that {folder} holds its images and their captions ({_README})")
    report_lib.write_part(self.data_dir, split, folder_lib.split_report(report, layout))
