"""Link rot in cc3m: the retry TSV of the rows a build left out (with their reasons), a second download of it by the
real img2dataset joined with the first, and the per-build manifests compared.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import os
import pathlib
import shutil
import threading

import pytest
import tensorflow_datasets as tfds

from capjax.data import manifest
from capjax.data import retry as retry_command
from tfds_builders.cc3m import make_dummy_data as dummy
from test_alt_text_end_to_end import INSTALL, QuietHandler, img2dataset_command, run
import helpers

REPO = pathlib.Path(__file__).resolve().parent.parent
DUMMY = REPO / "tfds_builders" / "cc3m" / "dummy_data"


def _build(manual_dir: pathlib.Path, data_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
  builder = tfds.builder("cc3m/unlabeled", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record",
                               download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)))
  return tfds.builder("cc3m/unlabeled", data_dir=data_dir)


def _tsv(path: pathlib.Path) -> list[list[str]]:
  return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def _retry(manual: pathlib.Path, data_dir: pathlib.Path, output: pathlib.Path, capsys) -> str:
  retry_command.main(["retry", "--dataset=cc3m", f"--manual_dir={manual}", f"--data_dir={data_dir}",
                      f"--output={output}"])
  return capsys.readouterr().out


@pytest.fixture(scope="module")
def dummy_built(tmp_path_factory) -> pathlib.Path:
  data_dir = tmp_path_factory.mktemp("tfds")
  _build(DUMMY, data_dir)
  return data_dir


def test_retry_lists_each_row_without_an_example_with_its_reason(dummy_built, tmp_path, capsys):
  output = tmp_path / "retry.tsv"
  out = _retry(DUMMY, dummy_built, output, capsys)
  caption = "caption of picture {}".format
  # The build report's train column: missing_image 1, corrupt_image 3 (not_jpeg 1, truncated 2). The malformed
  # row (3) and the later row of a url (7) are not retried: the first cannot be downloaded, the second has its row.
  assert _tsv(output) == [
      ["caption", "url", "reason"],
      [caption(4), dummy.url(4), "missing_image: HTTP Error 404: Not Found"],
      [caption(5), dummy.url(5), "corrupt_image: truncated"],
      [caption(6), dummy.url(6), "corrupt_image: not_jpeg"],
      [caption(11), dummy.url(11), "corrupt_image: truncated"],
  ]
  report = tfds.builder("cc3m/unlabeled", data_dir=dummy_built).info.metadata["build_report"]["train"]
  assert len(_tsv(output)) - 1 == report["missing_image"] + report["corrupt_image"]
  assert out.strip() == f"wrote {output}: 4 rows of train to download again (corrupt_image 3, missing_image 1)"


def test_retry_without_a_manifest_reads_the_records_and_refuses_a_damaged_one(dummy_built, tmp_path, capsys):
  data_dir = tmp_path / "tfds"
  shutil.copytree(dummy_built, data_dir)
  folder = pathlib.Path(tfds.builder("cc3m/unlabeled", data_dir=data_dir).data_dir)
  expected = tmp_path / "expected.tsv"
  _retry(DUMMY, dummy_built, expected, capsys)
  (folder / manifest.NAME).unlink()  # a dataset built before builds wrote one
  _retry(DUMMY, data_dir, tmp_path / "retry.tsv", capsys)
  assert (tmp_path / "retry.tsv").read_bytes() == expected.read_bytes()
  (folder / manifest.NAME).write_bytes(b"not gzip")
  with pytest.raises(SystemExit) as exit_info:
    _retry(DUMMY, data_dir, tmp_path / "again.tsv", capsys)
  [line] = capsys.readouterr().err.strip().splitlines()
  assert exit_info.value.code == 2 and not (tmp_path / "again.tsv").exists()
  assert line == (f"error: {folder / manifest.NAME} is not a manifest: not a whole gzip file of UTF-8 text "
                  "(BadGzipFile) — write it again: `python -m capjax.data.manifest write --dataset=cc3m`")


def test_manifest_lists_each_example_with_its_image_sha256(dummy_built):
  builder = tfds.builder("cc3m/unlabeled", data_dir=dummy_built)
  path = pathlib.Path(builder.data_dir) / manifest.NAME
  rows = list(manifest.read(os.fspath(path)))
  assert len(rows) == 8 and [r[0] for r in rows].count("validation") == 2
  for split in ("train", "validation"):
    source = builder.as_data_source(split=split, decoders={"image": tfds.decode.SkipDecoding()})
    records = {r["url"].decode(): hashlib.sha256(r["image"]).hexdigest()
               for r in (source[i] for i in range(len(source)))}
    assert {url: sha for s, _, url, sha in rows if s == split} == records
  # Written once per build, deterministically: no timestamp in the gzip header.
  data = path.read_bytes()
  assert gzip.decompress(data).startswith(b"split\tkey\turl\tsha256\n") and data[4:8] == b"\0" * 4


def _write_manifest(path: pathlib.Path, rows: list[tuple[str, str, str, str]]) -> str:
  text = "split\tkey\turl\tsha256\n" + "".join("\t".join(row) + "\n" for row in rows)
  path.write_bytes(gzip.compress(text.encode()))
  return os.fspath(path)


def test_compare_matches_keys_by_split_and_url_and_counts_other_bytes(tmp_path, capsys):
  a = _write_manifest(tmp_path / "a.tsv.gz", [
      ("train", "1", "http://x/1.jpg", "a" * 64), ("train", "2", "http://x/2.jpg", "b" * 64),
      ("train", "3", "", "c" * 64),                     # no url: its key is its identity
      ("validation", "1", "http://x/1.jpg", "d" * 64),  # another split: another key
      ("train", "9", "http://x/1.jpg", "e" * 64)])      # a url seen before: the first row is kept
  b = _write_manifest(tmp_path / "b.tsv.gz", [
      ("train", "7", "http://x/1.jpg", "a" * 64), ("train", "8", "http://x/2.jpg", "f" * 64),
      ("train", "3", "", "c" * 64), ("train", "4", "http://x/4.jpg", "0" * 64)])
  common = tmp_path / "common.tsv"
  manifest.main(["manifest", "compare", a, b, f"--common={common}"])
  assert capsys.readouterr().out.splitlines() == [
      f"A: {a}", f"B: {b}",
      "keys in A                          4", "keys in B                          4",
      "in common                          3", "only in A                          1",
      "only in B                          1", "in common, other bytes             1",
      "repeated in A                      1", "repeated in B                      0",
      f"wrote {common} (3 common keys)"]
  assert _tsv(common) == [["split", "key", "url"], ["train", "1", "http://x/1.jpg"], ["train", "2", "http://x/2.jpg"],
                          ["train", "3", ""]]


# ------------------------------------------------------------------------------------------------ end to end

ROWS = 8
GONE = (2, 5)  # the server answers 404 for these the first time


@pytest.fixture
def server(tmp_path):
  site = tmp_path / "site"
  (site / "img").mkdir(parents=True)
  handler = functools.partial(QuietHandler, directory=os.fspath(site))
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}", site / "img"
  httpd.shutdown()
  httpd.server_close()


def _download(img2dataset: str, url_list: pathlib.Path, output: pathlib.Path) -> None:
  proc = run([img2dataset, "--url_list", os.fspath(url_list), "--input_format", "tsv", "--url_col", "url",
              "--caption_col", "caption", "--output_format", "webdataset", "--output_folder", os.fspath(output),
              "--resize_mode", "no", "--disable_all_reencoding", "True", "--processes_count", "1", "--thread_count",
              "4", "--number_sample_per_shard", "10", "--timeout", "5", "--retries", "0", "--enable_wandb", "False"])
  assert proc.returncode == 0, proc.stderr[-3000:]


def test_retry_downloaded_again_by_img2dataset_joins_the_rows_that_failed(server, tmp_path, capsys):
  img2dataset = img2dataset_command()
  if img2dataset is None:
    helpers.extra_missing(f"img2dataset is not installed: {INSTALL}, or set CAPJAX_IMG2DATASET to its command")
  host, site = server
  images = {i: dummy.jpeg(700 + i, 64, 48) for i in range(ROWS)}
  for i, data in images.items():
    if i not in GONE:
      (site / f"{i}.jpg").write_bytes(data)
  manual = tmp_path / "manual"
  manual.mkdir()
  rows = [[f"picture {i} of a dog", f"{host}/img/{i}.jpg"] for i in range(ROWS)]
  dummy.write_tsv(manual / dummy.TRAIN_TSV, rows)
  dummy.write_tsv(manual / dummy.VALIDATION_TSV, [["a cat", f"{host}/img/validation.jpg"]])  # never downloaded
  with_header = tmp_path / "train.with_header.tsv"
  with_header.write_text("caption\turl\n" + (manual / dummy.TRAIN_TSV).read_text())
  _download(img2dataset, with_header, manual / "images" / "train")

  first = _build(manual, tmp_path / "first")
  assert first.info.splits["train"].num_examples == ROWS - len(GONE)
  retry_tsv = tmp_path / "retry.tsv"
  _retry(manual, tmp_path / "first", retry_tsv, capsys)
  retried = _tsv(retry_tsv)
  assert [r[:2] for r in retried] == [["caption", "url"]] + [rows[i] for i in GONE]
  assert all(r[2].startswith("missing_image: ") and "404" in r[2] for r in retried[1:])

  for i in GONE:  # the links work again
    (site / f"{i}.jpg").write_bytes(images[i])
  _download(img2dataset, retry_tsv, manual / "images" / "train.retry")
  second = _build(manual, tmp_path / "second")
  report = second.info.metadata["build_report"]["train"]
  assert (report["examples"], report["missing_image"], report["shards"]) == (ROWS, 0, 2)
  source = second.as_data_source(split="train", decoders={"image": tfds.decode.SkipDecoding()})
  by_url = {r["url"].decode(): r for r in (source[i] for i in range(len(source)))}
  for i in range(ROWS):
    assert by_url[rows[i][1]]["image"] == images[i] and by_url[rows[i][1]]["caption"].decode() == rows[i][0]

  common = tmp_path / "common.tsv"
  capsys.readouterr()  # the builds' reports
  manifest.main(["manifest", "compare", os.fspath(first.data_dir), os.fspath(second.data_dir), f"--common={common}"])
  out = capsys.readouterr().out
  counts = {line[:24].strip(): int(line[24:].replace(",", "")) for line in out.splitlines()[2:8]}
  assert counts == {"keys in A": 6, "keys in B": 8, "in common": 6, "only in A": 0, "only in B": 2,
                    "in common, other bytes": 0}
  assert sorted(r[2] for r in _tsv(common)[1:]) == sorted(rows[i][1] for i in range(ROWS) if i not in GONE)
