"""`python -m capjax.data.retry` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from hostile import harness
from hostile.harness import NULL_DEVICE, case, not_flags, runner

RETRY = "capjax.data.retry"

_CC3M = ("--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/data")
CASES = [
    case(RETRY, "no-flags", match="missing --dataset, --manual_dir, --output"),
    case(RETRY, "dataset-not-built", *_CC3M, "--output={t}/retry.tsv", absent=("retry.tsv",),
         match="is not built in {t}/data"),
    case(RETRY, "dataset-unknown", "--dataset=cc4m", "--manual_dir={t}/folder", "--data_dir={t}/data",
         "--output={t}/retry.tsv", match="TFDS has no builder of that name"),
    case(RETRY, "dataset-path-out", "--dataset=../cc3m", "--manual_dir={t}/folder", "--output={t}/retry.tsv",
         match="starts with '.'"),
    case(RETRY, "dataset-without-a-tsv", "--dataset=synthetic_scenes/tiny", "--data_dir={d}",
         "--manual_dir={t}/folder", "--output={t}/retry.tsv", absent=("retry.tsv",),
         match="has no caption TSV to retry rows of"),
    case(RETRY, "manual-dir-missing", "--dataset=cc3m", "--manual_dir={t}/nowhere", "--output={t}/retry.tsv",
         match="--manual_dir={t}/nowhere is not a directory"),
    case(RETRY, "manual-dir-is-a-file", "--dataset=cc3m", "--manual_dir={t}/alt.tsv", "--output={t}/retry.tsv",
         match="--manual_dir={t}/alt.tsv is not a directory"),
    case(RETRY, "data-dir-is-a-file", "--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/alt.tsv",
         "--output={t}/retry.tsv", match="--data_dir={t}/alt.tsv is a file"),
    case(RETRY, "output-is-a-folder", *_CC3M, "--output={t}/images", match="is a directory"),
    case(RETRY, "output-inside-the-manual-dir", *_CC3M, "--output={t}/folder/retry.tsv",
         absent=("folder/retry.tsv",), match="is inside --manual_dir"),
    case(RETRY, "output-is-a-device", *_CC3M, "--output={t}/null.tsv", files={"null.tsv": NULL_DEVICE},
         match="null.tsv is a character device"),
    *not_flags(RETRY, *_CC3M, "--output={t}/retry.tsv"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)


DUMMY = harness.REPO / "tfds_builders" / "cc3m" / "dummy_data"


@pytest.fixture(scope="module")
def cc3m_built(tmp_path_factory) -> pathlib.Path:
  """cc3m/unlabeled built from its dummy data (a few seconds): the data dir."""
  import tensorflow_datasets as tfds

  from tfds_builders.cc3m import cc3m_dataset_builder  # noqa: F401 (registers cc3m with TFDS)

  data_dir = tmp_path_factory.mktemp("tfds")
  tfds.builder("cc3m/unlabeled", data_dir=data_dir).download_and_prepare(
      file_format="array_record", download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(DUMMY)))
  return data_dir


@pytest.mark.parametrize("images", ["none", "another-download"])
def test_a_manual_dir_without_the_builds_images_is_one_error_line(cc3m_built, tmp_path, capsys, images):
  """The TSVs without the images the build read (no images/train*/, or shards of other rows): every row would be a
  silent `missing_image`; instead one `error:` line names --manual_dir and what to give."""
  manual = tmp_path / "manual"
  shutil.copytree(DUMMY, manual, ignore=shutil.ignore_patterns("images", "*.tar"))
  if images == "another-download":  # validation's shard where train's should be: it lists no train row
    shutil.copytree(DUMMY / "images" / "validation", manual / "images" / "train")
  before = harness.snapshot(tmp_path)
  with pytest.raises(SystemExit) as exit_info:
    harness.command_module(RETRY).main([RETRY, "--dataset=cc3m", f"--manual_dir={manual}", f"--data_dir={cc3m_built}",
                                        f"--output={tmp_path / 'retry.tsv'}"])
  out, err = capsys.readouterr()
  shards = 0 if images == "none" else 1
  assert (exit_info.value.code, out, err) == (2, "", (
      f"error: --manual_dir: no image shard in {manual}/images/train[.*]/ lists a row of "
      f"{manual}/Train_GCC-training.tsv ({shards} shard(s) there), so every row would be listed as missing_image — "
      "give --manual_dir the folder the dataset was built from (its TSVs and img2dataset's images/)\n"))
  assert harness.snapshot(tmp_path) == before
