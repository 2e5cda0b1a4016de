"""The flickrstyle10k builder on dummy data in the released layout: the TFDS contract, the image list read from the
pickle's opcodes without unpickling (and a hostile pickle refused), every listed image accounted for, the split,
and one error line for files that are missing or do not pair up.
"""

from __future__ import annotations

import os
import pathlib
import pickle

import pytest
import tensorflow_datasets as tfds

from capjax.data import build as build_command
from tfds_builders.flickrstyle10k import flickrstyle10k_dataset_builder as flickrstyle
from tfds_builders.flickrstyle10k import make_dummy_data as dummy

DUMMY = pathlib.Path(dummy.__file__).parent / "dummy_data"
REPORTS = {
    "train": {"listed": 11, "examples": 7, "missing_image": 1, "corrupt_image": 2, "empty_caption": 1,
              "unsafe_name": 0, "not_utf8_caption": 1, "without_factual": 2,
              "corrupt_reasons": {"not_jpeg": 1, "truncated": 1}},
    "validation": {"listed": 1, "examples": 1, "missing_image": 0, "corrupt_image": 0, "empty_caption": 0,
                   "unsafe_name": 0, "not_utf8_caption": 0, "without_factual": 0, "corrupt_reasons": {}},
    "test": {"listed": 2, "examples": 2, "missing_image": 0, "corrupt_image": 0, "empty_caption": 0,
             "unsafe_name": 0, "not_utf8_caption": 0, "without_factual": 0, "corrupt_reasons": {}},
}


class FlickrStyle10kTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = flickrstyle.Builder
  SPLITS = {"train": 7, "validation": 1, "test": 2}
  SKIP_CHECKSUMS = True


def _build(manual_dir: pathlib.Path, data_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
  builder = tfds.builder("flickrstyle10k", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record",
                               download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)))
  return tfds.builder("flickrstyle10k", data_dir=data_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tfds.core.DatasetBuilder:
  return _build(DUMMY, tmp_path_factory.mktemp("tfds"))


def test_the_report_accounts_for_every_listed_image(built):
  assert dict(built.info.metadata["build_report"]) == REPORTS


def test_examples_pair_each_image_with_its_lines_and_keep_the_jpeg_bytes(built):
  source = built.as_data_source("train", decoders={"image": tfds.decode.SkipDecoding()})
  records = {int(r["index"]): r for r in (source[i] for i in range(len(source)))}
  assert sorted(records) == [0, 7, 9, 10, 11, 12, 13]
  record = records[9]
  assert (record["image_name"], record["flickr30k_name"]) == (b"1000101795_093e5c0a1b.jpg", b"1000101795.jpg")
  assert (record["humorous"], record["romantic"]) == (dummy.humorous(9).encode(), dummy.romantic(9).encode())
  assert record["image"] == (DUMMY / "flickr30k-images" / "1000101795.jpg").read_bytes()
  assert records[dummy.CP1252_HUMOROUS]["humorous"].decode() == "a dog at the café – it wants a croissant"
  assert record["factual"] == [dummy.factual(9, k).encode() for k in range(5)]
  assert records[7]["factual"] == [dummy.factual(7, k).encode() for k in range(5)]  # sorted by their #k
  assert records[0]["factual"] == [] and records[13]["factual"] == []


def test_the_split_is_the_papers_shares_drawn_once_by_a_fixed_seed():
  splits = flickrstyle.split_of(7000)
  assert {s: splits.count(s) for s in ("train", "validation", "test")} == {"train": 5400, "validation": 600,
                                                                          "test": 1000}
  assert splits == flickrstyle.split_of(7000)
  assert [i for i, s in enumerate(flickrstyle.split_of(14)) if s != "train"] == [1, 3, 8]


NAMES = ["1000092795_a1.jpg", "10002456_b2.jpg", "1000268201_c3.jpg"]


@pytest.mark.parametrize("data", [
    dummy.protocol0_pickle(NAMES),                                                     # the release's form
    b"(lp0\n" + b"".join(b"S'" + n.encode() + b"'\np" + bytes(str(k + 1), "ascii") + b"\na"   # Python 2 str
                          for k, n in enumerate(NAMES)) + b".",
    *(pickle.dumps(NAMES, protocol=p) for p in (1, 2, 3, 4, 5)),
])
def test_image_names_are_read_from_the_opcodes_of_any_protocol(data):
  assert flickrstyle.image_names(data) == NAMES


def test_a_name_repeated_by_the_memo_is_read_twice():
  name = "1000092795_a1.jpg"
  assert flickrstyle.image_names(pickle.dumps([name, name], protocol=2)) == [name, name]


@pytest.mark.parametrize("data,message", [
    (b"cos\nsystem\n(S'touch /tmp/pwned'\ntR.", "train.p holds a GLOBAL opcode, not just a list of names"),
    (pickle.dumps({"a": "b"}, protocol=2), "train.p holds a EMPTY_DICT opcode, not just a list of names"),
    (pickle.dumps([1, 2], protocol=2), "train.p holds a BININT1 opcode, not just a list of names"),
    (b"(lp0\nVa.jpg\np1\n", "train.p is not a pickle"),
    (b"not a pickle at all", "train.p is not a pickle"),
    (b"Va.jpg\np0\n.", "train.p does not hold one list of strings"),
])
def test_anything_but_a_pickled_list_of_names_is_refused_unread(data, message):
  with pytest.raises(ValueError) as error:
    flickrstyle.image_names(data, "train.p")
  assert str(error.value).startswith(message) and " — " in str(error.value)


def test_a_name_list_in_text_replaces_the_pickle_and_unsafe_names_are_never_opened(tmp_path):
  manual = tmp_path / "manual"
  dummy.write_manual_dir(manual, num_images=7, defects=False, release_folder=False)
  names = [dummy.released_name(i) for i in range(7)]
  names[0] = "../../etc/passwd_x.jpg"
  (manual / "humor" / "train.p").unlink()
  (manual / "humor" / "train.txt").write_text("\n".join(names) + "\n")
  report = _build(manual, tmp_path / "tfds").info.metadata["build_report"]
  assert sum(r["unsafe_name"] for r in report.values()) == 1
  assert sum(r["examples"] for r in report.values()) == 6


def _fail(capsys, *flags: str) -> str:
  with pytest.raises(SystemExit) as exit_:
    build_command.main(["build", "--dataset=flickrstyle10k", *flags])
  assert exit_.value.code == 2
  return capsys.readouterr().err


def test_files_that_do_not_pair_up_or_are_missing_are_one_error_line(tmp_path, capsys):
  manual = tmp_path / "manual"
  dummy.write_manual_dir(manual, num_images=7, defects=False)
  release = manual / "FlickrStyle_v0.9"
  (release / "romantic" / "romantic_train.txt").write_text("a single line\n")
  err = _fail(capsys, f"--manual_dir={manual}", f"--data_dir={tmp_path / 'tfds'}")
  assert err == (f"error: {release}/humor/train.p lists 7 images, {release}/humor/funny_train.txt has 7 lines and "
                 f"{release}/romantic/romantic_train.txt 1: the files are paired by position, so they must agree — "
                 "download them again, whole\n")
  (release / "romantic" / "romantic_train.txt").unlink()
  err = _fail(capsys, f"--manual_dir={manual}", f"--data_dir={tmp_path / 'tfds'}")
  assert err == (f"error: {release}/romantic/romantic_train.txt is missing — download FlickrStyle10K (see "
                 "tfds_builders/flickrstyle10k/README.md (or `tfds.builder('flickrstyle10k').MANUAL_DOWNLOAD_"
                 "INSTRUCTIONS`))\n")
  (release / "humor" / "train.p").write_bytes(b"cos\nsystem\n(S'touch /tmp/pwned'\ntR.")
  dummy_romantic = "\n".join(dummy.romantic(i) for i in range(7)) + "\n"
  (release / "romantic" / "romantic_train.txt").write_text(dummy_romantic)
  err = _fail(capsys, f"--manual_dir={manual}", f"--data_dir={tmp_path / 'tfds'}")
  assert err.startswith(f"error: {release}/humor/train.p holds a GLOBAL opcode, not just a list of names — ")
  assert not pathlib.Path("/tmp/pwned").exists()


def test_the_build_command_names_a_builder_without_configs_plainly(tmp_path, capsys):
  manual = tmp_path / "manual"
  dummy.write_manual_dir(manual, num_images=7, defects=False)
  build_command.main(["build", "--dataset=flickrstyle10k", f"--manual_dir={manual}", f"--data_dir={tmp_path / 'tfds'}"])
  out = capsys.readouterr().out
  assert f"built flickrstyle10k 1.0.0 in {tmp_path / 'tfds' / 'flickrstyle10k' / '1.0.0'}\n" in out, out  # no "/ "
