"""The `karpathy` TFDS builder: COCO, Flickr30k and Flickr8k in Karpathy's splits (Karpathy & Fei-Fei 2015, the
`dataset_*.json` files of `caption_datasets.zip`), and COCO-format caption files (`coco_format`: a set of the
user's own, or COCO's `captions_val2014.json`; `nocaps`: nocaps' validation captions with each image's domain),
each joined by file name to the images of its released folder. JPEG bytes are stored as read.

Stateless, on TFDS's public API only: `_split_generators` reads the json, checks every image once
(`entries.plan`: missing, corrupt, unsafe names; files no entry names), prints that report and stores it in
`self.info.metadata["build_report"]` (as TFDS's own librispeech and vctk builders fill their metadata there), then
hands `_generate_examples` the entries to write. Nothing is carried on the builder between calls, and the report
is whole before the first example is written. An image that changes between its check and its writing stops the
build with a ManualDataError (rerun it), so that what is written is what the report counted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from capjax import files
from tfds_builders import builder_base
from tfds_builders.builder_base import LocalCodePath, ManualDataError
from tfds_builders.karpathy import entries as entries_lib

_README = "tfds_builders/karpathy/README.md"
_INSTRUCTIONS_POINTER = f"see {_README} (or `tfds.builder('karpathy').MANUAL_DOWNLOAD_INSTRUCTIONS`)"

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Put in the manual dir (`--manual_dir=DIR`), for the config you build:

  karpathy/coco:        DIR/dataset_coco.json        DIR/train2014/  DIR/val2014/    # caption_datasets.zip; COCO 2014
  karpathy/flickr30k:   DIR/dataset_flickr30k.json   DIR/flickr30k-images/
  karpathy/flickr8k:    DIR/dataset_flickr8k.json    DIR/Flicker8k_Dataset/          # (sic: the archive's spelling)
  karpathy/coco_format: DIR/captions.json            DIR/images/     # any COCO-format file and its folder (links ok)
  karpathy/nocaps:      DIR/nocaps_val_4500_captions.json            DIR/validation/ # nocaps' val images

Karpathy's splits: https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip. Images: COCO
http://images.cocodataset.org/zips/{train,val}2014.zip; Flickr30k and Flickr8k from their authors' forms; nocaps
https://nocaps.org/download (the images by each entry's coco_url). See tfds_builders/karpathy/README.md.
"""


@dataclasses.dataclass(eq=False)
class KarpathyConfig(tfds.core.BuilderConfig):
  json_name: str = ""
  folders: tuple[str, ...] = ()
  splits: tuple[str, ...] = ()
  coco_format: bool = False  # COCO's {"images", "annotations"} rather than Karpathy's {"images": [.. sentences]}
  with_domain: bool = False  # nocaps: each image's in-domain / near-domain / out-domain
  homepage: str = ""


CONFIGS = (
    KarpathyConfig(name="coco", json_name="dataset_coco.json", folders=("train2014", "val2014"),
                   splits=("train", "restval", "val", "test"), homepage="https://cocodataset.org",
                   description="COCO 2014 in Karpathy's splits: train 82,783, restval 30,504, val 5,000, test 5,000."),
    KarpathyConfig(name="flickr30k", json_name="dataset_flickr30k.json", folders=("flickr30k-images",),
                   splits=("train", "val", "test"), homepage="https://shannon.cs.illinois.edu/DenotationGraph/",
                   description="Flickr30k in Karpathy's splits: train 29,000, val 1,014, test 1,000 (the paper's "
                               "Flickr 1K)."),
    KarpathyConfig(name="flickr8k", json_name="dataset_flickr8k.json", folders=("Flicker8k_Dataset",),
                   splits=("train", "val", "test"), homepage="https://hockenmaier.cs.illinois.edu/8k-pictures.html",
                   description="Flickr8k in Karpathy's splits: train 6,000, val 1,000, test 1,000."),
    KarpathyConfig(name="coco_format", json_name="captions.json", folders=("images",), splits=("validation",),
                   coco_format=True, homepage="https://cocodataset.org/#format-data",
                   description="Any COCO-format caption file (e.g. captions_val2014.json) and its image folder, as "
                               "one split."),
    KarpathyConfig(name="nocaps", json_name="nocaps_val_4500_captions.json", folders=("validation",),
                   splits=("validation",), coco_format=True, with_domain=True, homepage="https://nocaps.org",
                   description="nocaps validation: 4,500 Open Images with 10 captions each and their domain."),
)


class Builder(LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """Karpathy's COCO / Flickr30k / Flickr8k splits and COCO-format caption files, on their released JPEGs."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Karpathy's split files and COCO-format caption files on the released JPEGs."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
  BUILDER_CONFIGS = list(CONFIGS)
  DEFAULT_CONFIG_NAME = "flickr30k"

  def _info(self) -> tfds.core.DatasetInfo:
    config = self.builder_config
    ids = "COCO annotation ids" if config.coco_format else "Karpathy's sentids (-1 where an entry has none)"
    features = {
        "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg",
                                     doc="The released JPEG bytes, never re-encoded."),
        "image_id": tfds.features.Scalar(np.int64, doc="COCO's id (cocoid) for karpathy/coco; the json's image "
                                                       "id (Karpathy's imgid, COCO-format's id) otherwise."),
        "file_name": tfds.features.Text(doc=f"The image's file in {' or '.join(config.folders)}/."),
        "captions": tfds.features.Sequence(
            tfds.features.Text(), doc="Every reference caption in the vocabulary's form: Karpathy's tokens joined by "
                                      "spaces, or (COCO format) Penn Treebank tokens of the caption."),
        "raw_captions": tfds.features.Sequence(tfds.features.Text(), doc="Every reference caption as released."),
        "caption_ids": tfds.features.Sequence(tfds.features.Scalar(np.int64), doc=f"Each caption's id: {ids}."),
    }
    if config.with_domain:
      features["domain"] = tfds.features.Text(doc="in-domain, near-domain or out-domain (nocaps).")
    return self.dataset_info_from_configs(features=tfds.features.FeaturesDict(features), homepage=config.homepage,
                                          metadata=tfds.core.MetadataDict())

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    config = self.builder_config
    what = f"{config.json_name} and {', '.join(f + '/' for f in config.folders)}"
    root = builder_base.manual_dir(dl_manager, what, _README)
    path = root / config.json_name
    if not path.is_file():
      raise ManualDataError(f"{path} is missing — put {what} in the manual dir ({_INSTRUCTIONS_POINTER})")
    folders = [root / f for f in config.folders if (root / f).is_dir()]
    if not any(any(not p.name.startswith(".") for p in f.iterdir()) for f in folders):
      raise ManualDataError(f"{' and '.join(os.fspath(root / f) for f in config.folders)} "
                            f"{'is' if len(config.folders) == 1 else 'are'} missing or empty — download the images "
                            f"({_INSTRUCTIONS_POINTER})")
    what_to_do = f"give the released {config.json_name} ({_INSTRUCTIONS_POINTER})"
    try:
      data = json.loads(files.read_regular(path))  # a FIFO would hang the read, a device never end it
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
      raise entries_lib.not_the_format(os.fspath(path), f"JSON ({str(e)[:80]})", what_to_do) from e
    keys = entries_lib.FILE_KEYS[:-1] + (entries_lib.COCO_FORMAT_KEYS if config.coco_format else ())
    counts = dict.fromkeys(keys, 0)
    if config.coco_format:
      entries, named = entries_lib.parse_coco_format(data, os.fspath(path), config.splits[0], config.folders[0],
                                              config.with_domain, counts, what_to_do)
    else:
      entries, named = entries_lib.parse_karpathy(data, os.fspath(path), config.splits, config.folders,
                                           config.name == "coco", counts, what_to_do)
    del data
    plan = entries_lib.plan(os.fspath(root), entries, named, config.splits, config.folders, counts)
    self.info.metadata["build_report"] = plan.report
    print(entries_lib.format_report(plan.report, f"karpathy/{config.name} build report", config.json_name),
          flush=True)
    built = {split: kept for split, kept in plan.entries.items() if kept}
    if not built:
      raise ManualDataError(f"no example could be built from {path} and the images in {what}: "
                            f"{json.dumps(plan.report)} — check that the images are the ones the json names, whole "
                            f"({_INSTRUCTIONS_POINTER})")
    for split in config.splits:
      if split not in built:  # TFDS refuses a split with no examples: it is left out, and the report says why
        print(f"note: karpathy/{config.name}: no image of the {split} split could be read: the split is not built",
              file=sys.stderr, flush=True)
    return {split: self._generate_examples(os.fspath(root), kept) for split, kept in built.items()}

  def _generate_examples(self, root: str, kept: list) -> Iterator[tuple[str, dict[str, Any]]]:
    for entry, stamp in kept:
      example = {"image": entries_lib.read_checked(root, entry, stamp), "image_id": entry.image_id,
                 "file_name": entry.file_name,
                 "captions": list(entry.captions), "raw_captions": list(entry.raw_captions),
                 "caption_ids": list(entry.caption_ids)}
      if self.builder_config.with_domain:
        example["domain"] = entry.domain
      yield f"{entry.folder}/{entry.file_name}:{entry.image_id}", example
