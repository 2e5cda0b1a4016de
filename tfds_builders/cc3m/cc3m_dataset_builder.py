"""The `cc3m` TFDS builder: Conceptual Captions' released TSVs joined, by url, to the images img2dataset downloaded
(every `images/SPLIT*` folder: a first download and its retries), or (config `wds`) pixparse's webdataset mirror as
it is. It reads shards as streams, one at a time (one Beam work item each under `tfds build --beam_pipeline_options`);
`retry_rows` lists the rows a build left out, for `python -m capjax.data.retry`.
Stateless, on TFDS's public API: each split's report is written by report.py's step, from either path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from absl import logging
from etils import epath

from capjax import files
from tfds_builders import builder_base
from tfds_builders import img2dataset as i2d
from tfds_builders import report
from tfds_builders.img2dataset import retry, wds
from tfds_builders.builder_base import LocalCodePath, ManualDataError, PlainOrBeam, at_least_one

TSV_FILES: dict[str, dict[str, str]] = {
    "unlabeled": {"train": "Train_GCC-training.tsv", "validation": "Validation_GCC-1.1.0-Validation.tsv"},
    # The image labels were released for (a subset of) the training images only.
    "labeled": {"train": "Image_Labels_Subset_Train_GCC-Labels-training.tsv"},
}
IMAGES_DIR = "images"
_INSTRUCTIONS_POINTER = "see tfds_builders/cc3m/README.md (or `tfds.builder('cc3m').MANUAL_DOWNLOAD_INSTRUCTIONS`)"

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Put in the manual dir (`--manual_dir=DIR`):

  DIR/Train_GCC-training.tsv                              # https://ai.google.com/research/ConceptualCaptions/download
  DIR/Validation_GCC-1.1.0-Validation.tsv
  DIR/Image_Labels_Subset_Train_GCC-Labels-training.tsv   # only for cc3m/labeled
  DIR/images/train/       DIR/images/validation/          # what img2dataset wrote, one folder per split
  [DIR/images/train.retry/ ...]                           # optional: re-downloads of the rows left out (retry)

The TSVs stay as released (caption TAB url, no header). img2dataset needs a header line, so give it copies:

  cd DIR
  for s in Train_GCC-training Validation_GCC-1.1.0-Validation; do
    (printf 'caption\\turl\\n'; cat $s.tsv) > $s.with_header.tsv
  done
  pip install img2dataset==1.47.0   # in its own virtualenv: it pins webdataset<0.3, albumentations<2, pandas<3
  img2dataset --url_list Train_GCC-training.with_header.tsv --input_format tsv \\
      --url_col url --caption_col caption --output_format webdataset --output_folder images/train \\
      --resize_mode no --disable_all_reencoding True --number_sample_per_shard 10000 \\
      --processes_count 16 --thread_count 64 --timeout 10 --retries 1 --enable_wandb False
  img2dataset --url_list Validation_GCC-1.1.0-Validation.with_header.tsv --input_format tsv \\
      --url_col url --caption_col caption --output_format webdataset --output_folder images/validation \\
      --resize_mode no --disable_all_reencoding True --number_sample_per_shard 10000 \\
      --processes_count 16 --thread_count 64 --timeout 10 --retries 1 --enable_wandb False

`--resize_mode no --disable_all_reencoding True` keeps the bytes as the servers sent them; the builder keeps
JPEGs only (as the paper) and counts every other row with its reason. `--output_format files` works too.
"""


MIRROR_SPLITS = ("train", "validation")
MIRROR_INSTRUCTIONS = """\
For cc3m/wds, put pixparse's webdataset mirror in the manual dir instead (no TSV, no img2dataset run):

  DIR/cc3m-train-0000.tar ... cc3m-train-0575.tar        # KEY.jpg, KEY.txt (the caption) [, KEY.json (url)]
  DIR/cc3m-validation-0000.tar ... cc3m-validation-0015.tar

  huggingface-cli download --repo-type dataset pixparse/cc3m-wds --local-dir DIR
"""


@dataclasses.dataclass(eq=False)
class Cc3mConfig(tfds.core.BuilderConfig):
  labeled: bool = False
  mirror: bool = False  # pixparse's cc3m-wds tars instead of the TSVs and img2dataset's shards


def _describe(metadata) -> str:
  return i2d.format_report(metadata["build_report"])


def _describe_mirror(metadata) -> str:
  return i2d.format_report(metadata["build_report"], "cc3m/wds build report", wds.MIRROR_KEYS, wds.MIRROR_BREAKDOWNS)


# ------------------------------------------------------------------------------------------------ builder


class Builder(PlainOrBeam, LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """Conceptual Captions 3M (Sharma et al. 2018): the released captions joined by url to downloaded images."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Released TSVs joined by url to img2dataset shards; original JPEG bytes."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS + "\n" + MIRROR_INSTRUCTIONS
  BUILDER_CONFIGS = [
      Cc3mConfig(name="unlabeled", description="Train and validation: image, caption, url, key, size."),
      Cc3mConfig(name="labeled", labeled=True,
                 description="The train images with Google Cloud Vision labels, MIDs and confidences."),
      Cc3mConfig(name="wds", mirror=True,
                 description="Train and validation from pixparse's cc3m-wds mirror: each image with its caption."),
  ]
  DEFAULT_CONFIG_NAME = "unlabeled"

  def _info(self) -> tfds.core.DatasetInfo:
    features = {
        **i2d.image_caption_features("The released (hypernymized) caption."),
        "width": tfds.features.Scalar(np.int32, doc="Of the stored image."),
        "height": tfds.features.Scalar(np.int32, doc="Of the stored image."),
    }
    if self.builder_config.labeled:
      features.update({
          "labels": tfds.features.Sequence(tfds.features.Text()),
          "mids": tfds.features.Sequence(tfds.features.Text(), doc="Knowledge Graph MIDs of the labels."),
          "confidences": tfds.features.Sequence(tfds.features.Scalar(np.float32)),
      })
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict(features),
        homepage="https://ai.google.com/research/ConceptualCaptions/",
        metadata=report.ReportMetadata(report.by_split, _describe_mirror if self.builder_config.mirror else _describe,
                                       manifest=True),
    )

  # --- files

  def _manual_files(self, manual_dir: epath.Path) -> dict[str, tuple[str, str]]:
    """split → (TSV path, its images' folders as one pattern: `images/SPLIT[.*]`); a missing manual dir or TSV is a
    ManualDataError naming it, a TSV that is a FIFO or a device a `files.NotRegularError`."""
    if not manual_dir.exists():
      raise ManualDataError(f"the manual dir {manual_dir} does not exist — put the CC3M TSVs and img2dataset "
                            f"images there ({_INSTRUCTIONS_POINTER})")
    found = {}
    for split, name in TSV_FILES[self.builder_config.name].items():
      tsv = manual_dir / name
      if not tsv.exists():
        raise ManualDataError(f"{tsv} is missing — download {name} ({_INSTRUCTIONS_POINTER})")
      files.check_regular(tsv)  # read in the example generator: a FIFO or a device is refused before the build
      found[split] = (os.fspath(tsv), os.fspath(manual_dir / IMAGES_DIR / split) + "[.*]")
    return found

  # --- generation

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    manual_dir = builder_base.manual_dir(dl_manager, "the CC3M TSVs and img2dataset images",
                                         _INSTRUCTIONS_POINTER.removeprefix("see "))
    if self.builder_config.mirror:
      return self._mirror_splits(manual_dir)
    files = self._manual_files(manual_dir)
    labeled = self.builder_config.labeled
    for split, (tsv, images) in list(files.items()):
      if not i2d.split_shards(os.fspath(manual_dir / IMAGES_DIR), split):  # no folder, or no shard in any
        # TFDS refuses a split with no examples: a split with no images at all is left out of the build, and
        # its report says every row is missing_image.
        index = i2d.tsv_index(tsv, labeled)
        report.write_part(self.data_dir, split, i2d.split_report(report.Report(), index))
        logging.warning("cc3m: no img2dataset shards in %s: the %s split is not built", images, split)
        del files[split]
    if not files:
      raise ManualDataError(f"no img2dataset shards in {manual_dir / IMAGES_DIR}/*/ — download the images "
                            f"({_INSTRUCTIONS_POINTER})")
    root = os.fspath(manual_dir / IMAGES_DIR)
    return {split: self._generate_examples(split, tsv, images, i2d.split_shards(root, split))
            for split, (tsv, images) in files.items()}

  def _generate_examples(self, split: str, tsv: str, images: str, shards: list[str]):
    """The split's examples, from the shards of all its image folders: a Beam PTransform when the build runs on
    Beam, else a generator. Either writes the split's part of the build report into the dataset's folder once its
    last example is out (report.py)."""
    if self.uses_beam():
      return i2d.beam_split_transform(shards, tsv, self.builder_config.labeled, os.fspath(self.data_dir), split,
                                      name=f"cc3m {split}")
    return self._plain_examples(split, tsv, shards, images)

  def _plain_examples(self, split: str, tsv: str, shards: list[str],
                      images: str) -> Iterator[tuple[int, dict[str, Any]]]:
    labeled = self.builder_config.labeled
    index = i2d.tsv_index(tsv, labeled)
    counts = report.Report()
    yield from at_least_one(i2d.plain_split(shards, tsv, labeled, counts, name=f"cc3m {split}"),
                            lambda: f"{tsv} ({len(index):,} rows) and the images in {images} gave "
                                    f"{i2d.split_report(counts, index)}")
    report.write_part(self.data_dir, split, i2d.split_report(counts, index))

  # --- the webdataset mirror (cc3m/wds)

  def _mirror_splits(self, manual_dir: epath.Path):
    """Each split with tars in the manual dir; a split without any is left out, and no tar at all is an error."""
    shards = {split: wds.mirror_shards(os.fspath(manual_dir), "cc3m", split) for split in MIRROR_SPLITS}
    if not any(shards.values()):
      raise ManualDataError(f"no cc3m-wds tars (cc3m-train-NNNN.tar, cc3m-validation-NNNN.tar) in {manual_dir} — "
                            f"download pixparse/cc3m-wds ({_INSTRUCTIONS_POINTER})")
    for split in [s for s, found in shards.items() if not found]:
      logging.warning("cc3m/wds: no cc3m-%s-NNNN.tar in %s: the %s split is not built", split, manual_dir, split)
      del shards[split]
    return {split: self._mirror_examples(split, found) for split, found in shards.items()}

  def _mirror_examples(self, split: str, shards: list[str]):
    """A split of the mirror: every good JPEG with a caption is an example, on either path (no join: each sample
    carries its caption); the split's report part is written once its last example is out."""
    if self.uses_beam():
      return wds.beam_mirror_transform(shards, os.fspath(self.data_dir), split)
    return self._plain_mirror(split, shards)

  def _plain_mirror(self, split: str, shards: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    counts = report.Report()
    yield from at_least_one(wds.plain_mirror(shards, counts),
                            lambda: f"{len(shards)} cc3m-wds tar(s) of {split} gave {wds.mirror_report(counts)}")
    report.write_part(self.data_dir, split, wds.mirror_report(counts))

  # --- retry (python -m capjax.data.retry)

  def retry_splits(self) -> list[str]:
    """The splits whose TSV rows `retry_rows` can list (none for the mirror, which has no TSV)."""
    return list(TSV_FILES.get(self.builder_config.name, {}))

  def retry_rows(self, manual_dir: str, split: str, obtained_urls: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """(caption, url, reason) of each row of the split's TSV that gave no example (its url is not among
    `obtained_urls`, the build's manifest), in TSV order; a missing manual dir or TSV, or image shards that list
    none of its rows (a manual dir not the build's), is a ManualDataError now."""
    tsv, _ = self._manual_files(epath.Path(manual_dir))[split]
    images = os.fspath(epath.Path(manual_dir) / IMAGES_DIR)
    return retry.failed_rows(tsv, self.builder_config.labeled, i2d.split_shards(images, split), obtained_urls,
                             os.path.join(images, f"{split}[.*]/"))
