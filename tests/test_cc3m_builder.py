"""The cc3m builder over img2dataset-style manual dirs: the TFDS contract on dummy_data/, the join by url, the
stored JPEG bytes, every defect counted with its reason, stream-only tar reading, the error for missing files,
and the same dataset from `tfds build` on Beam's local runner (FnApiRunner).
"""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import tensorflow_datasets as tfds

from capjax.image import io as image_io
from tfds_builders import img2dataset as i2d
from capjax import progress as progress_lib
from tfds_builders.cc3m import cc3m_dataset_builder as cc3m
from tfds_builders.img2dataset import beam as i2d_beam
from tfds_builders.cc3m import make_dummy_data as dummy
import helpers
from hostile import harness

REPO = pathlib.Path(__file__).resolve().parent.parent
DUMMY = REPO / "tfds_builders" / "cc3m" / "dummy_data"

# What dummy_data/ holds (make_dummy_data.write_dummy), counted by hand. Train: a failed-download row
# (missing_image), a truncated JPEG and a PNG saved as .jpg (corrupt_image: truncated, not_jpeg), a row with an
# extra tab (malformed_row), a url on two rows (duplicate_url) downloaded twice (duplicate_image), an image whose
# url is in no row, a shard without its parquet, and a tar whose last member is cut (truncated_shard; that
# member's row is corrupt_image: truncated). Validation: the files layout, one failed download.
TRAIN_REPORT = {
    "tsv_rows": 12, "examples": 6, "missing_image": 1, "corrupt_image": 3, "duplicate_url": 1, "malformed_row": 1,
    "image_without_row": 1, "duplicate_image": 1, "unsafe_member": 0, "shards": 4, "shard_without_parquet": 1,
    "truncated_shard": 1, "corrupt_reasons": {"not_jpeg": 1, "truncated": 2}}
VALIDATION_REPORT = {
    "tsv_rows": 3, "examples": 2, "missing_image": 1, "corrupt_image": 0, "duplicate_url": 0, "malformed_row": 0,
    "image_without_row": 0, "duplicate_image": 0, "unsafe_member": 0, "shards": 1, "shard_without_parquet": 0,
    "truncated_shard": 0, "corrupt_reasons": {}}


class Cc3mUnlabeledTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = cc3m.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["unlabeled"]
  SPLITS = {"train": 6, "validation": 2}
  SKIP_CHECKSUMS = True


class Cc3mLabeledTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = cc3m.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["labeled"]
  SPLITS = {"train": 3}
  SKIP_CHECKSUMS = True


def _build(manual_dir: pathlib.Path, data_dir: pathlib.Path, config: str = "unlabeled",
           beam: bool = False) -> tfds.core.DatasetBuilder:
  options = {}
  if beam:  # the DirectRunner's local runner, by name (docs/data-at-scale.md "Beam runs here"): one worker, in memory
    beam_lib = helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
    options["beam_options"] = beam_lib.options.pipeline_options.PipelineOptions(["--runner=FnApiRunner"])
  builder = tfds.builder(f"cc3m/{config}", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record", download_config=tfds.download.DownloadConfig(
      manual_dir=os.fspath(manual_dir), **options))
  return tfds.builder(f"cc3m/{config}", data_dir=data_dir)  # as a reader sees it: info read back from disk


def _records(builder, split: str, raw_image: bool = False) -> list[dict]:
  decoders = {"image": tfds.decode.SkipDecoding()} if raw_image else None
  source = builder.as_data_source(split=split, decoders=decoders)
  return [source[i] for i in range(len(source))]


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tfds.core.DatasetBuilder:
  return _build(DUMMY, tmp_path_factory.mktemp("tfds"))


def test_build_report_counts_every_row_and_image_with_its_reason(built):
  report = built.info.metadata["build_report"]
  assert report == {"train": TRAIN_REPORT, "validation": VALIDATION_REPORT}
  for split in report.values():
    rows = ("examples", "missing_image", "corrupt_image", "duplicate_url", "malformed_row")
    assert split["tsv_rows"] == sum(split[k] for k in rows)
  assert built.info.file_format.value == "array_record"


def test_build_prints_the_report_table(tmp_path, capsys):
  _build(DUMMY, tmp_path)
  out = capsys.readouterr().out
  table = i2d.format_report({"train": TRAIN_REPORT, "validation": VALIDATION_REPORT})
  assert table in out
  assert "  not_jpeg" in table and table.splitlines()[0].split() == ["cc3m", "build", "report", "train", "validation"]


def test_progress_lines_say_rows_done_of_the_total_rate_eta_and_failures():
  now = [0.0]
  lines: list[str] = []
  progress = progress_lib.Progress("cc3m train", 1000, every=10, clock=lambda: now[0], log=lines.append)
  for second in range(1, 26):
    now[0] = float(second)
    progress.update(20, failures=int(second % 5 == 0))
  progress.finish()
  assert lines == ["cc3m train: 200/1,000 rows (20.0%), 20 rows/s, ETA 0:00:40, 2 failures so far",
                   "cc3m train: 400/1,000 rows (40.0%), 20 rows/s, ETA 0:00:30, 4 failures so far",
                   "cc3m train: 500/1,000 rows (50.0%), 20 rows/s, ETA 0:00:25, 5 failures so far"]


def test_a_plain_build_logs_its_progress(tmp_path, monkeypatch):
  """The dummy data's train split: 9 rows have images (6 examples, 3 corrupt); the last line is always logged."""
  lines: list[str] = []
  monkeypatch.setattr(progress_lib.logging, "info", lambda fmt, *args: lines.append(fmt % args))
  _build(DUMMY, tmp_path)
  train = [line for line in lines if line.startswith("cc3m train: ")]
  assert train and re.fullmatch(r"cc3m train: 9/9 rows \(100\.0%\), [\d,]+ rows/s, ETA 0:00:00, 3 failures so far",
                                train[-1]), train


def test_examples_are_joined_by_url_and_keep_the_downloaded_bytes(built):
  rows = {}
  for line in (DUMMY / dummy.TRAIN_TSV).read_text(encoding="utf-8").splitlines():
    fields = line.split("\t")
    rows.setdefault(fields[1], fields[0])  # the first row of a url is the one kept
  downloaded = {}  # url -> bytes in the tars, as the json beside each image names it
  for shard in sorted((DUMMY / "images" / "train").glob("*.tar")):
    try:
      with tarfile.open(shard, "r|*") as tar:
        members = {}
        for member in tar:
          members[member.name] = tar.extractfile(member).read()
    except tarfile.ReadError:  # the dummy data's cut-short shard: keep the members read before the cut
      pass
    for name, data in members.items():
      if name.endswith(".json"):
        meta = json.loads(data)
        downloaded.setdefault(meta["url"], members.get(name.replace(".json", ".jpg")))
  records = _records(built, "train", raw_image=True)
  assert len(records) == 6
  for record in records:
    url = _text(record["url"])
    assert _text(record["caption"]) == rows[url]
    assert [_text(c) for c in record["captions"]] == [rows[url]]
    assert record["image"] == downloaded[url]  # byte for byte: never re-encoded
    header = image_io.probe(record["image"])
    assert (int(record["width"]), int(record["height"])) == (header.width, header.height)
  assert {_text(r["caption"]) for r in records} >= set(dummy.TRAIN_CAPTIONS)  # quotes and unicode intact


def test_decoded_images_are_rgb_even_for_grey_jpegs(built):
  for record in _records(built, "validation"):
    assert record["image"].shape == (int(record["height"]), int(record["width"]), 3)
    assert record["image"].dtype == np.uint8


def test_labeled_config_reads_labels_mids_and_confidences(tmp_path):
  builder = _build(DUMMY, tmp_path, "labeled")
  by_url = {_text(r["url"]): r for r in _records(builder, "train")}
  assert sorted(by_url) == sorted(dummy.url(i) for i in (0, 1, 8))
  first = by_url[dummy.url(0)]
  assert [_text(x) for x in first["labels"]] == ["dog", "beach", "sand"]
  assert [_text(x) for x in first["mids"]] == ["/m/0bt9lr", "/m/0b3yr", "/m/06z0n"]
  np.testing.assert_array_equal(first["confidences"], np.asarray([0.98, 0.91, 0.7], np.float32))
  report = builder.info.metadata["build_report"]["train"]
  assert (report["tsv_rows"], report["examples"], report["malformed_row"], report["missing_image"]) == (5, 3, 1, 1)


def test_a_split_without_any_images_is_left_out_and_reported(tmp_path):
  manual = tmp_path / "manual"
  dummy.write_clean(manual, num_train=3, num_validation=4)
  for path in (manual / "images" / "validation").iterdir():
    path.unlink()
  builder = _build(manual, tmp_path / "tfds")
  assert list(builder.info.splits) == ["train"]
  report = builder.info.metadata["build_report"]["validation"]
  assert (report["tsv_rows"], report["examples"], report["missing_image"], report["shards"]) == (4, 0, 4, 0)


def test_join_ignores_position_and_key_order(tmp_path):
  """Tar members and parquet rows in reverse TSV order, keys unrelated to rows: captions still follow urls."""
  manual = tmp_path / "manual"
  dummy.write_clean(manual, num_train=10, num_validation=2, per_shard=10)
  shard = manual / "images" / "train" / "00000.tar"
  with tarfile.open(shard) as tar:
    members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
  with tarfile.open(shard, "w") as tar:
    groups = [members[i:i + 3] for i in range(0, len(members), 3)]
    for group in reversed(groups):
      for member, data in group:
        tar.addfile(member, io.BytesIO(data))
  builder = _build(manual, tmp_path / "tfds")
  rows = dict(reversed(line.split("\t")) for line in (manual / dummy.TRAIN_TSV).read_text().splitlines())
  records = _records(builder, "train")
  assert len(records) == 10
  for record in records:
    assert _text(record["caption"]) == rows[_text(record["url"])]


def _downloaded_twice(manual: pathlib.Path) -> tuple[bytes, bytes]:
  """A manual dir where img2dataset fetched row 1's url twice (run twice, or a retry) and got other bytes each
  time: its larger key comes first in the stream, in a shard of its own read before the smaller key's."""
  dummy.write_clean(manual, num_train=3, num_validation=1)
  first, second = dummy.jpeg(501), dummy.jpeg(502)
  caption = (manual / dummy.TRAIN_TSV).read_text().splitlines()[1].split("\t")[0]
  train = manual / "images" / "train"
  dummy.write_tar(train / "00000.tar", [("000009999", first, dummy._meta("000009999", dummy.url(1), caption))] + [
      (f"0000{i:05d}", dummy.jpeg(i, 64, 48), dummy._meta(f"0000{i:05d}", dummy.url(i), "")) for i in (0, 2)])
  (train / "00000.parquet").unlink()
  dummy.write_tar(train / "00001.tar", [("000000001", second, dummy._meta("000000001", dummy.url(1), caption))])
  return first, second


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_a_url_downloaded_twice_gives_the_same_dataset_on_both_paths(tmp_path):
  """The join rule: of a row's good images the smallest key wins, whatever order the stream or Beam gives."""
  manual = tmp_path / "manual"
  first_in_stream, smallest_key = _downloaded_twice(manual)
  plain = _build(manual, tmp_path / "plain")
  on_beam = _build(manual, tmp_path / "beam", beam=True)
  assert on_beam.info.metadata["build_report"] == plain.info.metadata["build_report"]
  assert plain.info.metadata["build_report"]["train"]["duplicate_image"] == 1
  for built in (plain, on_beam):
    records = {_text(r["url"]): r for r in _records(built, "train", raw_image=True)}
    assert sorted(records) == sorted(dummy.url(i) for i in range(3))
    assert _text(records[dummy.url(1)]["key"]) == "000000001"
    assert records[dummy.url(1)]["image"] == smallest_key != first_in_stream
  assert _records(on_beam, "train", raw_image=True) == _records(plain, "train", raw_image=True)


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_a_generated_set_with_duplicates_and_failures_is_the_same_on_both_paths(tmp_path, monkeypatch):
  """200 train rows in 5 shards (make_dummy_data.generated_defect): 4 failed downloads, 2 truncated JPEGs, 2 rows
  with the previous row's url (whose image joins that row again), 2 images downloaded twice; 10 validation rows.
  Both paths log their progress. Beam joins the rows of each KiB of the TSV here (256 KiB in a build): each shard's
  light events go to several groups."""
  manual = tmp_path / "manual"
  dummy.write_generated(manual, 200, per_shard=40)
  monkeypatch.setattr(i2d_beam, "GROUP_BYTES", 1024)
  lines: list[str] = []
  monkeypatch.setattr(progress_lib.logging, "info", lambda fmt, *args: lines.append(fmt % args))
  plain = _build(manual, tmp_path / "plain")
  # Rows with images: 200 less 2 duplicate urls (their images join the row before) and 4 failed downloads.
  assert re.fullmatch(r"cc3m train: 194/194 rows \(100\.0%\), [\d,]+ rows/s, ETA 0:00:00, 2 failures so far",
                      [line for line in lines if line.startswith("cc3m train: ")][-1])
  on_beam = _build(manual, tmp_path / "beam", beam=True)
  shards = sorted(line for line in lines if line.startswith("cc3m train: shard "))
  assert [re.sub(r"[\d,]+ images/s$", "R images/s", line) for line in shards] == [
      f"cc3m train: shard {n} of 5 read: {images} images checked, {failed} failed, R images/s"
      for n, images, failed in ((1, 39, 1), (2, 40, 0), (3, 39, 1), (4, 39, 0), (5, 41, 0))]
  report = plain.info.metadata["build_report"]
  assert report["train"] == {
      "tsv_rows": 200, "examples": 192, "missing_image": 4, "corrupt_image": 2, "duplicate_url": 2,
      "malformed_row": 0, "image_without_row": 0, "duplicate_image": 4, "unsafe_member": 0, "shards": 5,
      "shard_without_parquet": 0, "truncated_shard": 0, "corrupt_reasons": {"truncated": 2}}
  assert (report["validation"]["tsv_rows"], report["validation"]["examples"]) == (10, 9)
  assert on_beam.info.metadata["build_report"] == report
  for split in ("train", "validation"):
    assert _records(on_beam, split, raw_image=True) == _records(plain, split, raw_image=True)


def test_beam_pass_1_sends_one_batch_of_tuples_per_group_of_rows_that_decode_to_the_light_events(tmp_path,
                                                                                                   monkeypatch):
  """Every element costs on Beam: a shard's light events go as one (group, batch) per group of rows it has images
  of, plain tuples that decode to the events themselves, and its counts as one tagged Report."""
  beam = helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
  manual = tmp_path / "manual"
  dummy.write_generated(manual, 200, per_shard=40)
  monkeypatch.setattr(i2d_beam, "GROUP_BYTES", 1024)
  tsv = os.fspath(manual / cc3m.TSV_FILES["unlabeled"]["train"])
  shard = i2d.split_shards(os.fspath(manual / "images"), "train")[1]
  out = list(i2d_beam._read_shard((1, shard), tsv, False, "", 5))
  tagged = [o for o in out if isinstance(o, beam.pvalue.TaggedOutput)]
  batches = [o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
  events = list(i2d.shard_events(shard, tsv, False, 1, light=True))
  assert [(t.tag, t.value) for t in tagged] == [(i2d_beam.COUNTS, events[-1].counts)]
  assert [group for group, _ in batches] == [3, 4, 5, 6, 7]  # rows 40 to 79: the TSV's 4th to 8th KiB
  assert [i2d_beam._unpacked(p) for _, batch in batches for p in batch] == events[:-1]


def test_read_images_reads_chosen_images_again_and_refuses_a_changed_shard(tmp_path):
  """Beam's second pass: the chosen samples' bytes at their offsets in a tar, or streamed again (offset -1), the
  same either way; a shard rewritten since is a ValueError, never another image."""
  manual = tmp_path / "manual"
  dummy.write_clean(manual, num_train=5, num_validation=1, per_shard=5)
  shard = os.fspath(manual / "images" / "train" / "00000.tar")
  samples = list(i2d.shard_samples(shard, collections.Counter()))
  chosen = [i2d.Where.of(n, samples[n]) for n in (3, 1)]
  assert all(where.offset > 0 for where in chosen)
  want = [(samples[n].key, samples[n].image) for n in (1, 3)]
  assert [(where.key, data) for where, data in i2d.read_images(shard, chosen)] == want
  streamed = [dataclasses.replace(where, offset=-1) for where in chosen]
  assert [(where.key, data) for where, data in i2d.read_images(shard, streamed)] == want
  dummy.write_clean(tmp_path / "other", num_train=5, num_validation=1, per_shard=5, width=48)
  os.replace(tmp_path / "other" / "images" / "train" / "00000.tar", shard)
  for where in (chosen, streamed):
    with pytest.raises(ValueError, match="changed during the build"):
      list(i2d.read_images(shard, where))


def _evil_tar(path: pathlib.Path, secret: pathlib.Path) -> None:
  """A shard whose members try to escape: `../` names, an absolute name, a symlink and a hard link to a secret."""
  good = dummy.jpeg(1)
  with tarfile.open(path, "w") as tar:
    for name, data in (("../../escaped.jpg", good), ("/tmp/absolute.jpg", good), ("000000000.jpg", good),
                       ("000000000.json", json.dumps({"url": dummy.url(0)}).encode())):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
    for name, kind in (("000000001.jpg", tarfile.SYMTYPE), ("000000002.jpg", tarfile.LNKTYPE)):
      info = tarfile.TarInfo(name)
      info.type, info.linkname = kind, os.fspath(secret)
      tar.addfile(info)
    for key, row in (("000000001", 1), ("000000002", 2)):
      data = json.dumps({"url": dummy.url(row)}).encode()
      info = tarfile.TarInfo(f"{key}.json")
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))


def test_tar_members_are_streamed_never_extracted_nor_followed(tmp_path):
  manual = tmp_path / "deep" / "manual"
  dummy.write_clean(manual, num_train=3, num_validation=1)
  secret = tmp_path / "secret.jpg"
  secret.write_bytes(dummy.jpeg(42))
  for old in (manual / "images" / "train").iterdir():
    old.unlink()
  _evil_tar(manual / "images" / "train" / "00000.tar", secret)
  # The files layout too: a symlinked image in a shard folder is not read.
  folder = manual / "images" / "validation" / "00001"
  folder.mkdir()
  (folder / "000000005.jpg").symlink_to(secret)
  before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
  builder = _build(manual, tmp_path / "tfds")
  after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "tfds" not in p.parts)
  assert after == before  # nothing written beside or above the shard
  assert not (tmp_path / "escaped.jpg").exists() and not pathlib.Path("/tmp/absolute.jpg").exists()
  records = _records(builder, "train", raw_image=True)
  assert [_text(r["key"]) for r in records] == ["000000000"]
  assert all(r["image"] != secret.read_bytes() for r in records)
  report = builder.info.metadata["build_report"]
  # ../ name, absolute name, symlink, hard link; the links' rows (1, 2) stay missing_image.
  assert report["train"]["unsafe_member"] == 4
  assert (report["train"]["examples"], report["train"]["missing_image"]) == (1, 2)
  assert report["validation"]["unsafe_member"] == 1


def test_url_index_holds_20_bytes_a_row(tmp_path):
  rows = [[f"caption {i}", dummy.url(i)] for i in range(10_000)]
  dummy.write_tsv(tmp_path / "rows.tsv", rows)
  index = i2d.TsvIndex(os.fspath(tmp_path / "rows.tsv"), labeled=False)
  assert len(index) == 10_000 and index.nbytes == 10_000 * (8 + 8 + 4)
  position, row, fields = index.lookup(dummy.url(1234))
  assert fields == (f"caption {1234}", dummy.url(1234)) and row > 0 and 0 <= position < 10_000
  assert index.lookup("http://example.com/not/there.jpg") is None


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.fspath(REPO), os.environ.get("PYTHONPATH", "")]),
         "TF_CPP_MIN_LOG_LEVEL": "2"}
  return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, **kwargs)


def _error_lines(stderr: str) -> list[str]:
  return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_missing_manual_dir_or_tsv_is_one_error_line_and_exit_2(tmp_path):
  proc = _run([sys.executable, "-m", "capjax.data.build", "--dataset=cc3m", f"--manual_dir={tmp_path / 'nowhere'}",
               f"--data_dir={tmp_path / 'tfds'}"])
  assert proc.returncode == 2, proc.stderr[-2000:]
  [line] = _error_lines(proc.stderr)
  assert str(tmp_path / "nowhere") in line and "tfds_builders/cc3m/README.md" in line
  assert "Traceback" not in proc.stderr

  manual = tmp_path / "manual"
  dummy.write_clean(manual, num_train=2, num_validation=1)
  (manual / dummy.VALIDATION_TSV).unlink()
  proc = _run([sys.executable, "-m", "capjax.data.build", "--dataset=cc3m/unlabeled", f"--manual_dir={manual}",
               f"--data_dir={tmp_path / 'tfds'}"])
  assert proc.returncode == 2, proc.stderr[-2000:]
  [line] = _error_lines(proc.stderr)
  assert dummy.VALIDATION_TSV in line and "README.md" in line


def test_capjax_build_command_builds_the_labeled_config(tmp_path):
  leftover = tmp_path / "cc3m/labeled/incomplete.Q7ZK2B_1.0.0"  # as a build stopped by SIGKILL leaves it
  leftover.mkdir(parents=True)
  proc = _run([sys.executable, "-m", "capjax.data.build", "--dataset=cc3m/labeled", f"--manual_dir={DUMMY}",
               f"--data_dir={tmp_path}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "cc3m build report" in proc.stdout and "train: 3 examples" in proc.stdout
  [note] = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
  assert note == (f"note: 1 folder(s) left by interrupted builds of this dataset: {leftover} — remove them once no "
                  "other build of it is running")
  assert leftover.is_dir()  # reported, never removed: another build of it may be writing there
  assert tfds.builder("cc3m/labeled", data_dir=tmp_path).info.splits["train"].num_examples == 3


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_tfds_build_on_beam_direct_runner_writes_the_same_dataset(built, tmp_path):
  helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
  proc = _run([os.path.join(os.path.dirname(sys.executable), "tfds"), "build", "tfds_builders/cc3m",
               f"--manual_dir={DUMMY}", f"--data_dir={tmp_path}", "--file_format=array_record",
               "--beam_pipeline_options=runner=FnApiRunner,direct_num_workers=2,"
               "direct_running_mode=multi_processing"])
  assert proc.returncode == 0, proc.stderr[-4000:]
  beam_built = tfds.builder("cc3m", data_dir=tmp_path)
  assert beam_built.info.metadata["build_report"] == built.info.metadata["build_report"]
  assert "cc3m build report" in proc.stdout
  # The manifest (keys and image sha256s), read back from the shards at the report step: byte for byte the same.
  manifests = [pathlib.Path(b.data_dir, "manifest.tsv.gz").read_bytes() for b in (built, beam_built)]
  assert manifests[0] == manifests[1] and "manifest: 8 keys" in proc.stdout
  for split in ("train", "validation"):
    plain = {_text(r["url"]): r for r in _records(built, split, raw_image=True)}
    beam = {_text(r["url"]): r for r in _records(beam_built, split, raw_image=True)}
    assert sorted(plain) == sorted(beam)
    for url, record in plain.items():
      assert beam[url]["image"] == record["image"] and beam[url]["caption"] == record["caption"]


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_a_shard_or_member_that_is_a_fifo_or_a_device_is_counted_never_read(tmp_path, special):
  """D1, D2: a tar shard and a files-layout member (KEY.json) that are a FIFO (whose read blocked forever) or a
  device (/dev/null's numbers here; /dev/zero's read grew memory without end) are counted `unsafe_member`, each, and
  the build goes on (under an alarm: a read that blocks fails the test)."""
  manual = tmp_path / "manual"
  shutil.copytree(DUMMY, manual)
  (manual / "images/validation/00000/000000001.json").unlink()
  harness.populate(manual, {"images/train/00009.tar": harness.Special(special),
                            "images/validation/00000/000000001.json": harness.Special(special)})
  with harness.alarm():
    report = _build(manual, tmp_path / "tfds").info.metadata["build_report"]
  # The FIFO shard is one more shard, without its parquet; the validation image without its .json is joined by
  # its parquet row, as before.
  assert report == {
      "train": {**TRAIN_REPORT, "unsafe_member": 1, "shards": 5, "shard_without_parquet": 2},
      "validation": {**VALIDATION_REPORT, "unsafe_member": 1}}
