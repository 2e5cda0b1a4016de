"""The cc12m_llavanext builder: the TFDS contract on dummy_data/, the join on key checked against url, the stored
JPEG bytes, the cleaned captions and their flags, every row and image counted, bad input (a truncated gzip, lines
that are not JSON, rows missing fields, a 100k-character caption, a line over the limit) counted while the build
finishes, hostile tars, the same dataset from Beam's local runner (FnApiRunner), and the progress both paths log.
"""

from __future__ import annotations

import collections
import gzip
import io
import json
import os
import pathlib
import re
import tarfile

import pytest
import tensorflow_datasets as tfds

from capjax.image import io as image_io
from tfds_builders import img2dataset as i2d
from capjax import progress as progress_lib
from tfds_builders import report as report_lib
from tfds_builders.cc3m import make_dummy_data as cc3m_dummy
from tfds_builders.cc12m_llavanext import cc12m_llavanext_dataset_builder as cc12m
from tfds_builders.cc12m_llavanext import join
from tfds_builders.cc12m_llavanext import make_dummy_data as dummy
import helpers

REPO = pathlib.Path(__file__).resolve().parent.parent
DUMMY = REPO / "tfds_builders" / "cc12m_llavanext" / "dummy_data"

# What dummy_data/ holds (make_dummy_data.ROWS), counted by hand: 9 rows; 9 images in two tars. Six rows join an
# image; 000000004's is cut short (corrupt_image), 000099999 has none, 000010003's image names another url
# (url_mismatch, and the row is row_without_image); 000010002 is an image no row has. Flags: two openings
# trimmed and one loop cut (repairs); the "An image" placeholder and "no text visible" (failures: flagged).
FLAGS = {
    "000000000": ["caption_llava:trimmed_prefix"],
    "000000001": ["caption_llava:cut_repeated_suffix"],
    "000000002": [],
    "000000003": ["caption_llava_short:placeholder"],
    "000010000": ["caption_llava:trimmed_prefix", "caption_llava:mentions_no_text"],
    "000010001": [],
}
REPORT = {
    "rows": 9, "examples": 6, "repaired": 3, "flagged": 2, "row_without_image": 2, "corrupt_image": 1,
    "invalid_json": 0, "missing_field": 0, "caption_too_long": 0, "line_too_long": 0, "duplicate_key": 0,
    "image_without_row": 1, "url_mismatch": 1, "duplicate_image": 0, "unsafe_member": 0, "shards": 2,
    "truncated_shard": 0, "truncated_jsonl": 0, "corrupt_reasons": {"truncated": 1},
    "flags": {"caption_llava:cut_repeated_suffix": 1, "caption_llava:mentions_no_text": 1,
              "caption_llava:trimmed_prefix": 2, "caption_llava_short:placeholder": 1}}
CLEAN_REPORT = {**REPORT, "examples": 4}  # the two flagged examples dropped; every count the same


class Cc12mLlavanextTest(tfds.testing.DatasetBuilderTestCase):
  """TFDS's contract on `all` (`clean` has the same features: test_clean_config_drops_the_flagged_examples)."""
  DATASET_CLASS = cc12m.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["all"]
  SPLITS = {"train": 6}
  SKIP_CHECKSUMS = True


def _build(manual_dir: pathlib.Path, data_dir: pathlib.Path, config: str = "all",
           beam: bool = False) -> tfds.core.DatasetBuilder:
  options = {}
  if beam:
    beam_lib = helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
    options["beam_options"] = beam_lib.options.pipeline_options.PipelineOptions(["--runner=FnApiRunner"])
  builder = tfds.builder(f"cc12m_llavanext/{config}", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record", download_config=tfds.download.DownloadConfig(
      manual_dir=os.fspath(manual_dir), **options))
  return tfds.builder(f"cc12m_llavanext/{config}", data_dir=data_dir)  # as a reader sees it: info read back


def _records(builder: tfds.core.DatasetBuilder) -> dict[str, dict]:
  """key → record, the image as its stored bytes, text as str."""
  source = builder.as_data_source(split="train", decoders={"image": tfds.decode.SkipDecoding()})
  records = {}
  for i in range(len(source)):
    record = {k: v.decode("utf-8") if isinstance(v, bytes) and k != "image" else v for k, v in source[i].items()}
    record["flags"] = [f.decode("utf-8") for f in record["flags"]]
    records[record["key"]] = record
  return records


def _members(shard: pathlib.Path) -> dict[str, bytes]:
  with tarfile.open(shard) as tar:
    return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tfds.core.DatasetBuilder:
  return _build(DUMMY, tmp_path_factory.mktemp("tfds"))


def test_build_report_counts_every_row_and_image(built):
  report = built.info.metadata["build_report"]
  assert report == REPORT
  rows = ("examples", "row_without_image", "corrupt_image", *join.BAD_ROW_KEYS)
  assert report["rows"] == sum(report[k] for k in rows)
  assert built.info.file_format.value == "array_record"


def test_examples_join_on_key_keep_the_stored_bytes_and_carry_their_flags(built):
  rows = {}
  with gzip.open(DUMMY / dummy.JSONL, "rt", encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      rows[row["key"]] = row
  stored = {**_members(DUMMY / dummy.shard_name(0)), **_members(DUMMY / dummy.shard_name(1))}
  records = _records(built)
  assert {key: r["flags"] for key, r in records.items()} == FLAGS
  for key, record in records.items():
    row = rows[key]
    assert record["image"] == stored[f"{key}.jpg"]  # byte for byte: never re-encoded
    assert record["url"] == row["url"] == json.loads(stored[f"{key}.json"])["url"]
    header = image_io.probe(record["image"])
    assert (record["width"], record["height"]) == (header.width, header.height) == (row["width"], row["height"])
    assert (record["original_width"], record["original_height"]) == (row["original_width"], row["original_height"])
  # Repairs: the loop cut to one copy, the opening trimmed, trailing newlines and spaces stripped.
  assert records["000000001"]["caption_llava"] == ("A red double-decker bus is parked on a city street beside a "
                                                   "row of shops. The bus is parked.")
  assert records["000000000"]["caption_llava"].startswith("A golden retriever running along")
  assert records["000000002"]["caption_llava_short"] == "A bowl of ramen with a soft-boiled egg."
  assert records["000000002"]["alt_text"] == "homemade ramen recipe"
  # Untouched: quotes and non-ASCII letters, and the alt-text as released.
  _, long, short, alt = dummy.ROWS[6]
  assert (records["000010001"]["caption_llava"], records["000010001"]["caption_llava_short"],
          records["000010001"]["alt_text"]) == (long, short, alt)


def test_caption_statistics_per_field_after_a_build(built, capsys):
  from capjax.text import stats
  assert stats.main(["--dataset=cc12m_llavanext", "--split=train", f"--data_dir={built.data_dir_root}",
                     "--tokenizer=treebank", "--field=caption_llava,caption_llava_short,alt_text"]) == 0
  out = json.loads(capsys.readouterr().out)
  assert list(out) == ["caption_llava", "caption_llava_short", "alt_text"]
  assert all(s["examples"] == 6 for s in out.values())
  # The cleaned short captions, in tokens ("." and the quotes `` '' split off): 11, 10, 9, 2, 9 and 14.
  assert out["caption_llava_short"] == {"examples": 6, "unique_tokens": 41, "tokens_mean": 9.1667, "tokens_std": 3.6248,
                                        "tokens_median": 9.5, "tokens_p95": 14.0}


def test_clean_config_drops_the_flagged_examples(tmp_path):
  builder = _build(DUMMY, tmp_path, "clean")
  assert builder.info.metadata["build_report"] == CLEAN_REPORT
  records = _records(builder)
  assert sorted(records) == sorted(k for k, flags in FLAGS.items() if k not in ("000000003", "000010000"))
  assert records["000000001"]["flags"] == ["caption_llava:cut_repeated_suffix"]  # repaired examples stay


def test_build_prints_the_report(tmp_path, capsys):
  _build(DUMMY, tmp_path)
  out = capsys.readouterr().out
  assert join.format_report(REPORT) in out
  lines = out[out.index(join.TITLE):].splitlines()
  assert lines[0].split() == ["cc12m_llavanext", "build", "report", "train"]
  assert lines[lines.index("flags (examples with each)") + 1].split() == ["caption_llava:cut_repeated_suffix", "1"]


def _truncated_gzip(path: pathlib.Path, kept: list[str], lost: list[str]) -> None:
  """A gzip stream cut a few bytes after `kept` (flushed whole), inside the lines of `lost`."""
  buffer = io.BytesIO()
  with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as f:
    f.write("".join(line + "\n" for line in kept).encode("utf-8"))
    f.flush()
    cut = buffer.tell() + 24
    f.write("".join(line + "\n" for line in lost).encode("utf-8"))
  path.write_bytes(buffer.getvalue()[:cut])


@pytest.fixture(scope="module")
def bad_input(tmp_path_factory) -> pathlib.Path:
  """A manual dir whose jsonl.gz has every kind of bad line, and is cut short."""
  manual = tmp_path_factory.mktemp("bad_input")
  dummy.write_clean(manual, 4)
  rows = [json.dumps(r) for r in dummy.clean_rows(4)]
  missing = {k: v for k, v in json.loads(rows[2]).items() if k != "caption_llava_short"}
  huge = {**json.loads(rows[3]), "caption_llava": "A cat sits on a mat. " * 5000}  # 105,000 characters
  duplicate = {**json.loads(rows[0]), "caption_llava": "A later row with the same key."}
  long_line = json.dumps({"key": "000000777", "padding": "x" * (join.MAX_LINE_BYTES + 10)})
  no_image = json.dumps(dummy.row("000000099", "A lighthouse on a rock.", "A lighthouse.", "lighthouse"))
  kept = [rows[0], rows[1], "this is not JSON {", json.dumps(missing), json.dumps(huge), json.dumps(duplicate),
          "", "[1, 2]", long_line, no_image]
  lost = [json.dumps(dummy.row(f"0000001{i:02d}", "Lost " + os.urandom(400).hex(), "Lost.", "lost")) for i in range(3)]
  _truncated_gzip(manual / dummy.JSONL, kept, lost)
  return manual


BAD_INPUT_REPORT = {
    "rows": 9, "examples": 2, "repaired": 0, "flagged": 0, "row_without_image": 1, "corrupt_image": 0,
    "invalid_json": 2, "missing_field": 1, "caption_too_long": 1, "line_too_long": 1, "duplicate_key": 1,
    "image_without_row": 2, "url_mismatch": 0, "duplicate_image": 0, "unsafe_member": 0, "shards": 1,
    "truncated_shard": 0, "truncated_jsonl": 1, "corrupt_reasons": {}, "flags": {}}


def _progress_lines(monkeypatch) -> list[str]:
  """The builder's progress lines, as absl logs them, from now on (TFDS's own lines left out)."""
  lines: list[str] = []

  def info(fmt: str, *args) -> None:
    if (fmt % args).startswith("cc12m_llavanext train"):
      lines.append(fmt % args)
  monkeypatch.setattr(progress_lib.logging, "info", info)
  return lines


def test_bad_input_is_counted_and_the_build_finishes(bad_input, tmp_path, monkeypatch):
  lines = _progress_lines(monkeypatch)
  builder = _build(bad_input, tmp_path)
  report = builder.info.metadata["build_report"]
  assert report == BAD_INPUT_REPORT
  # Bad rows as they are read (the duplicate key is the store's to count); the images of no row failed.
  assert [re.sub(r"[\d,.]+ (rows|shards|images)/s", r"R \1/s", line) for line in lines] == [
      "cc12m_llavanext train jsonl: 9 rows (total not known before reading), R rows/s, 5 bad rows so far",
      "cc12m_llavanext train: 1/1 shards (100.0%), R shards/s, 4 images at R images/s, ETA 0:00:00, "
      "2 images failed so far"]
  records = _records(builder)
  assert sorted(records) == ["000000000", "000000001"]
  # Of two rows with one key, the first is kept.
  assert records["000000000"]["caption_llava"] == dummy.clean_rows(1)[0]["caption_llava"]


@pytest.mark.parametrize("field", ["key", "url", "caption_llava", "caption_llava_short", "caption"])
def test_a_field_with_a_lone_surrogate_is_a_missing_field(field):
  # JSON's "\ud800" is text no store, record or terminal can hold: it once stopped the build (issue 40, D12).
  row = {"key": "1", "url": "http://example.org/1.jpg", "caption_llava": "A dog.", "caption_llava_short": "A dog.",
         "caption": "dog"}
  assert isinstance(join.parse_row(json.dumps(row).encode()), join.Row)
  assert join.parse_row(json.dumps({**row, field: "a \ud800 b"}).encode()) == "missing_field"


def test_jsonl_is_streamed_a_bounded_piece_at_a_time(tmp_path, monkeypatch):
  """Lines are cut from 1 MiB reads: a line over MAX_LINE_BYTES is skipped as it passes, never held whole."""
  monkeypatch.setattr(join, "_READ_BYTES", 7)
  monkeypatch.setattr(join, "MAX_LINE_BYTES", 30)
  path = tmp_path / "lines.jsonl.gz"
  dummy.write_rows(path, ["short one", "x" * 50, "", "after the long one", "y" * 31, "z" * 30])
  with gzip.open(path, "ab") as f:  # a second gzip member, as `cat a.gz b.gz` makes
    f.write(b"last line without a newline")
  counts = collections.Counter()
  assert list(join.jsonl_lines(os.fspath(path), counts)) == [
      b"short one", None, b"", b"after the long one", None, b"z" * 30, b"last line without a newline"]
  assert counts == {}


def _hostile_tar(path: pathlib.Path, rows: list[dict], big: bytes) -> None:
  """Members that try to escape (`../`, an absolute name, a symlink to a secret), an image over the member cap, a
  .json nested past Python's recursion limit, and a good sample; the tar is cut inside its last member."""
  with tarfile.open(path, "w") as tar:
    for name, data in (("../../escaped.jpg", cc3m_dummy.jpeg(1)), ("/tmp/absolute.jpg", cc3m_dummy.jpeg(1))):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
    link = tarfile.TarInfo(f"{rows[0]['key']}.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    tar.addfile(link)
    samples = ((rows[0], None, None), (rows[1], big, None), (rows[2], cc3m_dummy.jpeg(2), None),
               (rows[4], cc3m_dummy.jpeg(4), b"[" * 200_000), (rows[3], cc3m_dummy.jpeg(3), None))
    for row, image, meta in samples:
      members = [] if image is None else [("jpg", image)]
      members.append(("json", meta or json.dumps({"key": row["key"], "url": row["url"]}).encode()))
      for extension, data in members:
        info = tarfile.TarInfo(f"{row['key']}.{extension}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
  cc3m_dummy.cut_last_member(path)  # inside 000000003.json: the sample is cut short


def test_hostile_tars_are_streamed_never_extracted_and_counted(tmp_path, monkeypatch):
  monkeypatch.setattr(i2d.shards, "MAX_MEMBER_BYTES", 20_000)  # where the shard reader reads it
  manual = tmp_path / "deep" / "manual"
  manual.mkdir(parents=True)
  rows = dummy.clean_rows(5)
  dummy.write_rows(manual / dummy.JSONL, rows)
  big = cc3m_dummy.jpeg(7, 400, 300, quality=100)
  assert len(big) > i2d.shards.MAX_MEMBER_BYTES
  _hostile_tar(manual / dummy.shard_name(0), rows, big)
  before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
  builder = _build(manual, tmp_path / "tfds")
  assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "tfds" not in p.parts) == before
  assert not (tmp_path / "escaped.jpg").exists() and not pathlib.Path("/tmp/absolute.jpg").exists()
  report = builder.info.metadata["build_report"]
  # ../ name, absolute name, symlink: unsafe. 000000001's image is over the cap (too_large); 000000003's sample is
  # cut inside its .json (truncated: a bad image is the row's by key even without its url). 000000004's .json does
  # not parse: its good image cannot be checked against the row's url (url_mismatch). 000000000 has no image.
  assert {k: report[k] for k in ("examples", "unsafe_member", "truncated_shard", "corrupt_image", "url_mismatch",
                                 "row_without_image")} == {
      "examples": 1, "unsafe_member": 3, "truncated_shard": 1, "corrupt_image": 2, "url_mismatch": 1,
      "row_without_image": 2}
  assert report["corrupt_reasons"] == {"too_large": 1, "truncated": 1}
  assert list(_records(builder)) == ["000000002"]


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
@pytest.mark.parametrize("manual", ["dummy", "bad_input"])
def test_beam_direct_runner_writes_the_same_dataset(manual, built, bad_input, tmp_path):
  folder = DUMMY if manual == "dummy" else bad_input
  plain = built if manual == "dummy" else _build(folder, tmp_path / "plain")
  beam = _build(folder, tmp_path / "beam", beam=True)
  assert beam.info.metadata["build_report"] == plain.info.metadata["build_report"]
  assert _records(beam) == _records(plain)
  assert not (tmp_path / "beam" / ".cc12m_llavanext_counts").exists()
  manifests = [(pathlib.Path(b.data_dir) / "manifest.tsv.gz").read_bytes() for b in (plain, beam)]
  assert manifests[0] == manifests[1]  # the keys obtained, with their image sha256 (capjax.data.manifest)


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_a_generated_set_with_duplicates_and_failures_is_the_same_on_both_paths(tmp_path, monkeypatch):
  """200 rows in 5 tars (make_dummy_data.generated_defect): 4 rows without an image, 2 truncated images, 2 images
  again in the next tar, 2 images naming another url, 2 rows repeating a key, 2 placeholder captions. Both paths
  log their progress. Beam joins keys in groups of 10 here (1,000 in a build), the jsonl's rows in batches of 8 with
  at most 2 open: rows and images reach their groups in several batches."""
  manual = tmp_path / "manual"
  dummy.write_generated(manual, 200, per_shard=40)
  join_beam = helpers.import_extra("tfds_builders.cc12m_llavanext.join_beam", "pip install -e '.[beam]'")
  monkeypatch.setattr(join_beam, "key_group", lambda key: key[:-1])
  monkeypatch.setattr(join_beam, "ROWS_PER_BATCH", 8)
  monkeypatch.setattr(join_beam, "_OPEN_BATCHES", 2)
  lines = _progress_lines(monkeypatch)
  plain = _build(manual, tmp_path / "plain")
  rate = r"[\d,.]+"
  # Rows read while the store is built (their total is not known before the gzip stream ends), then the shards: 196
  # images (190 joined, 2 truncated, 2 naming another url, 2 again), of which 4 cannot be an example.
  assert re.fullmatch(rf"cc12m_llavanext train jsonl: 200 rows \(total not known before reading\), {rate} rows/s, "
                      r"0 bad rows so far", lines[0]), lines
  assert re.fullmatch(rf"cc12m_llavanext train: 5/5 shards \(100\.0%\), {rate} shards/s, 196 images at {rate} "
                      r"images/s, ETA 0:00:00, 4 images failed so far", lines[-1]), lines
  del lines[:]
  beam = _build(manual, tmp_path / "beam", beam=True)
  assert [re.sub(rf"{rate} (rows|images)/s$", r"R \1/s", line) for line in sorted(lines)] == [
      "cc12m_llavanext train jsonl read: 200 rows, 0 bad, R rows/s",
      *(f"cc12m_llavanext train: shard {n} of 5 read: {images} images checked, {failed} failed, R images/s"
        for n, images, failed in ((1, 39, 1), (2, 39, 0), (3, 39, 1), (4, 39, 0), (5, 40, 0)))]
  report = plain.info.metadata["build_report"]
  assert {k: report[k] for k in ("rows", "examples", "flagged", "row_without_image", "corrupt_image", "duplicate_key",
                                 "image_without_row", "url_mismatch", "duplicate_image", "shards")} == {
      "rows": 200, "examples": 190, "flagged": 2, "row_without_image": 6, "corrupt_image": 2, "duplicate_key": 2,
      "image_without_row": 0, "url_mismatch": 2, "duplicate_image": 2, "shards": 5}
  assert beam.info.metadata["build_report"] == report
  assert _records(beam) == _records(plain)


def test_missing_jsonl_or_tars_name_the_file_and_the_readme(tmp_path):
  manual = tmp_path / "manual"
  dummy.write_clean(manual, 2)
  (manual / dummy.JSONL).unlink()
  with pytest.raises(cc12m.ManualDataError, match=r"train\.jsonl\.gz is missing.*cc12m_llavanext/README\.md"):
    _build(manual, tmp_path / "tfds")
  dummy.write_rows(manual / dummy.JSONL, dummy.clean_rows(2))
  (manual / dummy.shard_name(0)).rename(manual / "other-name.tar")
  with pytest.raises(cc12m.ManualDataError, match=r"no cc12m-wds tars \(cc12m-train-NNNN\.tar\) in"):
    _build(manual, tmp_path / "tfds")


def test_progress_without_a_total_claims_no_share_nor_eta_and_counts_items_in_their_unit():
  now = [0.0]
  lines: list[str] = []
  rows = progress_lib.Progress("rows", None, every=10, clock=lambda: now[0], log=lines.append, failed="bad so far")
  shards = progress_lib.Progress("tars", 4, every=10, clock=lambda: now[0], log=lines.append, unit="shards",
                                 items="images", failed="images failed so far")
  now[0] = 40.0
  rows.update(1234, 5)
  shards.update(1, 2, items=500)
  assert lines == ["rows: 1,234 rows (total not known before reading), 31 rows/s, 5 bad so far",
                   "tars: 1/4 shards (25.0%), 0.025 shards/s, 500 images at 12 images/s, ETA 0:02:00, "
                   "2 images failed so far"]


def test_progress_counts_each_image_as_it_is_read_and_a_shard_when_it_ends(tmp_path, monkeypatch):
  """Every update logged (every=0): shard 1's five images (000000004's cut short), then shard 2's four (one naming
  another url, one of no row); shards done only when their last image is read, never a total of rows."""
  lines = _progress_lines(monkeypatch)
  list(join.plain_examples(os.fspath(DUMMY / dummy.JSONL), join.list_shards(os.fspath(DUMMY)), os.fspath(tmp_path),
                           False, report_lib.Report(), name="cc12m_llavanext train", every=0))
  assert [line.split(", ")[0] for line in lines[:2]] == [
      "cc12m_llavanext train jsonl: 9 rows (total not known before reading)"] * 2  # the last batch, and the end
  found = [re.search(r"(\d)/2 shards .* (\d) images at .* (\d) images failed so far$", line) for line in lines[2:]]
  assert [tuple(int(n) for n in m.groups()) for m in found] == [
      (0, 1, 0), (0, 2, 0), (0, 3, 0), (0, 4, 0), (0, 5, 1), (1, 5, 1),
      (1, 6, 1), (1, 7, 1), (1, 8, 2), (1, 9, 3), (2, 9, 3), (2, 9, 3)]
