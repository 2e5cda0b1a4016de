"""The `cc3m` TFDS builder: Conceptual Captions' released TSVs joined, by url, to the images img2dataset downloaded.
It reads shards as streams, one at a time (one Beam work item each under `tfds build --beam_pipeline_options`).
Stateless, on TFDS's public API: each split's report is written by report.py's step, from either path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from absl import logging
from etils import epath

from tfds_builders import img2dataset as i2d
from tfds_builders import report
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


@dataclasses.dataclass(eq=False)
class Cc3mConfig(tfds.core.BuilderConfig):
  labeled: bool = False


def _describe(metadata) -> str:
  return i2d.format_report(metadata["build_report"])


# ------------------------------------------------------------------------------------------------ builder


class Builder(PlainOrBeam, LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """Conceptual Captions 3M (Sharma et al. 2018): the released captions joined by url to downloaded images."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Released TSVs joined by url to img2dataset shards; original JPEG bytes."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
  BUILDER_CONFIGS = [
      Cc3mConfig(name="unlabeled", description="Train and validation: image, caption, url, key, size."),
      Cc3mConfig(name="labeled", labeled=True,
                 description="The train images with Google Cloud Vision labels, MIDs and confidences."),
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
        metadata=report.ReportMetadata(report.by_split, _describe),
    )

  # --- files

  def _manual_files(self, manual_dir: epath.Path) -> dict[str, tuple[str, str]]:
    """split → (TSV path, images dir); a missing manual dir or TSV is a ManualDataError naming it."""
    if not manual_dir.exists():
      raise ManualDataError(f"the manual dir {manual_dir} does not exist — put the CC3M TSVs and img2dataset "
                            f"images there ({_INSTRUCTIONS_POINTER})")
    files = {}
    for split, name in TSV_FILES[self.builder_config.name].items():
      tsv = manual_dir / name
      if not tsv.exists():
        raise ManualDataError(f"{tsv} is missing — download {name} ({_INSTRUCTIONS_POINTER})")
      files[split] = (os.fspath(tsv), os.fspath(manual_dir / IMAGES_DIR / split))
    return files

  # --- generation

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    try:
      manual_dir = epath.Path(dl_manager.manual_dir)
    except AssertionError as e:  # TFDS: "Manual directory X does not exist or is empty. ..." + instructions
      first = str(e).split(". ")[0]
      raise ManualDataError(f"{first} — put the CC3M TSVs and img2dataset images there, as "
                            f"{_INSTRUCTIONS_POINTER.removeprefix('see ')} says (pass it with --manual_dir)") from e
    files = self._manual_files(manual_dir)
    labeled = self.builder_config.labeled
    for split, (tsv, images) in list(files.items()):
      if not i2d.list_shards(images):
        # TFDS refuses a split with no examples: a split with no images at all is left out of the build, and
        # its report says every row is missing_image.
        index = i2d.tsv_index(tsv, labeled)
        report.write_part(self.data_dir, split, i2d.split_report(report.Report(), index))
        logging.warning("cc3m: no img2dataset shards in %s: the %s split is not built", images, split)
        del files[split]
    if not files:
      raise ManualDataError(f"no img2dataset shards in {manual_dir / IMAGES_DIR}/*/ — download the images "
                            f"({_INSTRUCTIONS_POINTER})")
    return {split: self._generate_examples(split, tsv, images) for split, (tsv, images) in files.items()}

  def _generate_examples(self, split: str, tsv: str, images: str):
    """The split's examples: a Beam PTransform when the build runs on Beam, else a generator. Either writes the
    split's part of the build report into the dataset's folder once its last example is out (report.py)."""
    shards = i2d.list_shards(images)
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
