"""The `cc12m_llavanext` TFDS builder: CC12M's LLaVA-NeXT recaptions (train.jsonl.gz) joined on key, checked
against url, to the cc12m-wds tars, with the captions cleaned and every rule that fired recorded as a flag.
Plain builds stream the jsonl into an on-disk store and read the tars one at a time; Beam groups both by key.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import builder_base
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.builder_base import LocalCodePath, ManualDataError, PlainOrBeam, at_least_one
from tfds_builders.cc12m_llavanext import join

_README = "tfds_builders/cc12m_llavanext/README.md"
_INSTRUCTIONS_POINTER = f"see {_README} (or `tfds.builder('cc12m_llavanext').MANUAL_DOWNLOAD_INSTRUCTIONS`)"

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Put in the manual dir (`--manual_dir=DIR`), as downloaded:

  DIR/train.jsonl.gz                # the LLaVA-NeXT recaptions (3.6 GB): one JSON object a line
  DIR/cc12m-train-0000.tar ...      # the cc12m-wds shards: KEY.jpg, KEY.txt, KEY.json per image

  pip install huggingface_hub
  huggingface-cli download --repo-type dataset CaptionEmporium/conceptual-captions-cc12m-llavanext \\
      train.jsonl.gz --local-dir DIR
  huggingface-cli download --repo-type dataset pixparse/cc12m-wds --include 'cc12m-train-*.tar' --local-dir DIR

A plain build needs free disk in $TMPDIR for its row store: about the jsonl's uncompressed size.
"""


@dataclasses.dataclass(eq=False)
class Cc12mLlavanextConfig(tfds.core.BuilderConfig):
  drop_flagged: bool = False


def _assemble(parts: dict[str, Any]) -> dict[str, Any]:
  return {"build_report": parts["train"]}


def _describe(metadata: Mapping[str, Any]) -> str:
  return join.format_report(metadata["build_report"])


class Builder(PlainOrBeam, LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """CC12M (Changpinyo et al. 2021) with LLaVA-NeXT recaptions, long and short, beside the alt-text."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "train.jsonl.gz joined on key (checked against url) to cc12m-wds; cleaned captions."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
  BUILDER_CONFIGS = [
      Cc12mLlavanextConfig(name="all", description="Every joined image; flagged examples kept, with their flags."),
      Cc12mLlavanextConfig(name="clean", drop_flagged=True,
                           description="Without the examples a failure rule flagged (placeholders, loops, ...)."),
  ]
  DEFAULT_CONFIG_NAME = "all"

  def _info(self) -> tfds.core.DatasetInfo:
    size = "Of the stored image (cc12m-wds resized it to a 512-pixel short side)."
    original = "Of the image as first downloaded, from the row; -1 when the row does not say."
    features = {
        **i2d.image_features("The JPEG bytes as stored in the cc12m-wds tar, never re-encoded."),
        "caption_llava": tfds.features.Text(doc="The long LLaVA-NeXT caption, cleaned."),
        "caption_llava_short": tfds.features.Text(doc="The short caption (at most about 30 words), cleaned."),
        "alt_text": tfds.features.Text(doc="CC12M's alt-text (the row's `caption`), stripped."),
        "width": tfds.features.Scalar(np.int32, doc=size),
        "height": tfds.features.Scalar(np.int32, doc=size),
        "original_width": tfds.features.Scalar(np.int32, doc=original),
        "original_height": tfds.features.Scalar(np.int32, doc=original),
        "flags": tfds.features.Sequence(tfds.features.Text(),
                                        doc="The cleaning rules that fired, as FIELD:RULE (README: repairs and "
                                            "failures; an example with a failure is dropped by `clean`)."),
    }
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict(features),
        homepage="https://huggingface.co/datasets/CaptionEmporium/conceptual-captions-cc12m-llavanext",
        metadata=report_lib.ReportMetadata(_assemble, _describe, manifest=True),
    )

  # --- files

  def _manual_files(self, dl_manager) -> tuple[str, list[str]]:
    """(jsonl path, tar paths); a missing manual dir, jsonl or tars is a ManualDataError naming them."""
    manual_dir = builder_base.manual_dir(dl_manager, "train.jsonl.gz and the cc12m-wds tars", _README)
    jsonl = manual_dir / join.JSONL
    if not jsonl.exists():
      raise ManualDataError(f"{jsonl} is missing: download {join.JSONL} ({_INSTRUCTIONS_POINTER})")
    shards = join.list_shards(os.fspath(manual_dir))
    if not shards:
      raise ManualDataError(f"no cc12m-wds tars (cc12m-train-NNNN.tar) in {manual_dir}: download them "
                            f"({_INSTRUCTIONS_POINTER})")
    return os.fspath(jsonl), shards

  # --- generation

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    jsonl, shards = self._manual_files(dl_manager)
    return {"train": self._generate_examples(jsonl, shards, self.builder_config.drop_flagged)}

  def _generate_examples(self, jsonl: str, shards: list[str], drop_flagged: bool):
    """The examples: a Beam PTransform when the build runs on Beam, else a generator. Either writes the build
    report's part into the dataset's folder once the last example is out (tfds_builders/report.py)."""
    if self.uses_beam():
      return _beam_transform(jsonl, shards, drop_flagged, os.fspath(self.data_dir))
    return self._plain_examples(jsonl, shards, drop_flagged)

  def _plain_examples(self, jsonl: str, shards: list[str], drop_flagged: bool) -> Iterator[tuple[int, dict[str, Any]]]:
    report = report_lib.Report()
    with tempfile.TemporaryDirectory(prefix="cc12m_llavanext_rows_") as folder:
      examples = join.plain_examples(jsonl, shards, folder, drop_flagged, report, name="cc12m_llavanext train")
      yield from at_least_one(examples,
                              lambda: f"{jsonl} and {len(shards)} tar(s) gave {join.finish_report(report)}")
    join.write_report(report, self.data_dir)


def _beam_transform(jsonl: str, shards: list[str], drop_flagged: bool, data_dir: str):
  """The Beam path (join_beam.py imports apache_beam, so only Beam builds import it)."""
  from tfds_builders.cc12m_llavanext import join_beam  # noqa: PLC0415
  return join_beam.JoinPipeline(jsonl, shards, drop_flagged, data_dir)
