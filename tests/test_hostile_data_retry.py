"""`python -m capjax.data.retry` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from hostile import harness
from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner

RETRY = "capjax.data.retry"
DUMMY = harness.REPO / "tfds_builders" / "cc3m" / "dummy_data"
TRAIN_TSV = "Train_GCC-training.tsv"

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


# --- against a built cc3m: its TSV a FIFO or a device (D1, D2), an output among the dataset's files (D10) -----------


@pytest.fixture(scope="module")
def built_cc3m(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
  """(a copy of cc3m's dummy manual dir, the data dir cc3m/unlabeled was built in from it)."""
  import tensorflow_datasets as tfds
  root = tmp_path_factory.mktemp("retry_cc3m")
  manual, data_dir = root / "manual", root / "tfds"
  shutil.copytree(DUMMY, manual)
  tfds.builder("cc3m/unlabeled", data_dir=data_dir).download_and_prepare(
      file_format="array_record", download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual)))
  return manual, data_dir


@pytest.mark.parametrize("images", ["none", "another-download"])
def test_a_manual_dir_without_the_builds_images_is_one_error_line(built_cc3m, tmp_path, capsys, images):
  """The TSVs without the images the build read (no images/train*/, or shards of other rows): every row would be a
  silent `missing_image`; instead one `error:` line names --manual_dir and what to give."""
  manual = tmp_path / "manual"
  shutil.copytree(DUMMY, manual, ignore=shutil.ignore_patterns("images", "*.tar"))
  if images == "another-download":  # validation's shard where train's should be: it lists no train row
    shutil.copytree(DUMMY / "images" / "validation", manual / "images" / "train")
  before = harness.snapshot(tmp_path)
  with pytest.raises(SystemExit) as exit_info:
    harness.command_module(RETRY).main([RETRY, "--dataset=cc3m", f"--manual_dir={manual}",
                                        f"--data_dir={built_cc3m[1]}", f"--output={tmp_path / 'retry.tsv'}"])
  out, err = capsys.readouterr()
  shards = 0 if images == "none" else 1
  assert (exit_info.value.code, out, err) == (2, "", (
      f"error: --manual_dir: no image shard in {manual}/images/train[.*]/ lists a row of "
      f"{manual}/Train_GCC-training.tsv ({shards} shard(s) there), so every row would be listed as missing_image — "
      "give --manual_dir the folder the dataset was built from (its TSVs and img2dataset's images/)\n"))
  assert harness.snapshot(tmp_path) == before


def _refused(args: list[str], roots: list[pathlib.Path], monkeypatch, capsys) -> str:
  """The one `error:` line of the retry command run on `args` (under an alarm: a FIFO must not hang it), after
  checking its exit status 2 and that nothing under `roots` changed."""
  before = [harness.snapshot(root) for root in roots]
  capsys.readouterr()
  with harness.alarm():
    code = harness.invoke(RETRY, [RETRY, *args], monkeypatch)
  out, err = capsys.readouterr()
  assert code == 2 and out == "" and "Traceback" not in err, (code, err)
  [line] = err.splitlines()
  assert [harness.snapshot(root) for root in roots] == before
  return line


@pytest.mark.parametrize("special, what", [(FIFO, "a FIFO (named pipe)"), (NULL_DEVICE, "a character device")])
def test_a_tsv_that_is_a_fifo_or_a_device_is_one_error_line(built_cc3m, tmp_path, monkeypatch, capsys, special,
                                                             what):
  built_manual, data_dir = built_cc3m
  manual = tmp_path / "manual"
  shutil.copytree(built_manual, manual)
  (manual / TRAIN_TSV).unlink()
  harness.populate(manual, {TRAIN_TSV: special})
  line = _refused(["--dataset=cc3m", f"--manual_dir={manual}", f"--data_dir={data_dir}",
                   f"--output={tmp_path / 'retry.tsv'}"], [tmp_path, data_dir], monkeypatch, capsys)
  assert line == (f"error: {manual / TRAIN_TSV} is {what}, not a regular file — save the data to a file and give "
                  "its path")
  assert not (tmp_path / "retry.tsv").exists()


@pytest.mark.parametrize("name", ["manifest.tsv.gz", "dataset_info.json", "metadata.json",
                                  "cc3m-train.array_record-00000-of-00001"])
def test_an_output_among_the_built_dataset_s_files_is_refused(built_cc3m, monkeypatch, capsys, name):
  manual, data_dir = built_cc3m
  folder = data_dir / "cc3m" / "unlabeled" / "1.0.0"
  assert (folder / name).is_file()
  line = _refused(["--dataset=cc3m", f"--manual_dir={manual}", f"--data_dir={data_dir}",
                   f"--output={folder / name}"], [manual, data_dir], monkeypatch, capsys)
  assert line == (f"error: --output={folder / name} is inside --dataset=cc3m's folder {folder}, which the command "
                  "reads — write the output elsewhere")
