"""The karpathy builder on dummy data in each released format (Karpathy's split files for COCO, Flickr30k and
Flickr8k; a COCO-format file; nocaps' with its domains): the TFDS contract, the splits exactly as the files say,
every caption and id of an example, the JPEG bytes as released, every bad input counted by its reason in the
report, and one error line for files that are missing, empty or of another format.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import ml_collections
import pytest
import tensorflow_datasets as tfds

from capjax.data import build as build_command
from capjax.data import sources
from tfds_builders.karpathy import entries as entries_lib
from tfds_builders.karpathy import karpathy_dataset_builder as karpathy
from tfds_builders.karpathy import make_dummy_data as dummy

DUMMY = pathlib.Path(dummy.__file__).parent / "dummy_data"
GOOD = {"corrupt_image": 0, "unsafe_name": 0, "missing_image": 0, "corrupt_reasons": {}}


def _split(images: int, examples: int, **bad) -> dict:
  return {"images": images, "examples": examples, **GOOD, **bad}


def _file(entries: int, malformed: int = 0, duplicate: int = 0, unreferenced: int = 0, **coco) -> dict:
  return {"entries": entries, "malformed_entry": malformed, "duplicate_entry": duplicate, **coco,
          "unreferenced_file": unreferenced}


REPORTS = {
    "flickr30k": {"train": _split(4, 2, missing_image=1, corrupt_image=1, corrupt_reasons={"undecodable": 1}),
                  "val": _split(1, 1), "test": _split(2, 2), "file": _file(8, malformed=1, unreferenced=1)},
    "flickr8k": {"train": _split(2, 2), "val": _split(1, 1), "test": _split(1, 1), "file": _file(5, duplicate=1)},
    "coco": {"train": _split(2, 2), "restval": _split(2, 1, corrupt_image=1, corrupt_reasons={"not_jpeg": 1}),
             "val": _split(1, 1), "test": _split(2, 1, missing_image=1), "file": _file(8, malformed=1, unreferenced=1)},
    "coco_format": {"validation": _split(3, 2, missing_image=1),
                    "file": _file(5, malformed=2, unreferenced=1, annotation_without_image=1,
                                  image_without_caption=1)},
    "nocaps": {"validation": _split(3, 3),
               "file": _file(4, malformed=1, annotation_without_image=0, image_without_caption=0)},
}
SPLITS = {"flickr30k": {"train": 2, "val": 1, "test": 2}, "flickr8k": {"train": 2, "val": 1, "test": 1},
          "coco": {"train": 2, "restval": 1, "val": 1, "test": 1}, "coco_format": {"validation": 2},
          "nocaps": {"validation": 3}}


class KarpathyFlickr30kTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = karpathy.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["flickr30k"]
  SPLITS = SPLITS["flickr30k"]
  SKIP_CHECKSUMS = True


class KarpathyNocapsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = karpathy.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["nocaps"]
  SPLITS = SPLITS["nocaps"]
  SKIP_CHECKSUMS = True


def _build(config: str, manual_dir: pathlib.Path, data_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
  builder = tfds.builder(f"karpathy/{config}", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record",
                               download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)))
  return tfds.builder(f"karpathy/{config}", data_dir=data_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tfds.core.DatasetBuilder]:
  data_dir = tmp_path_factory.mktemp("tfds")
  return {config: _build(config, DUMMY, data_dir) for config in SPLITS}


def _records(builder, split: str) -> dict[int, dict]:
  source = builder.as_data_source(split, decoders={"image": tfds.decode.SkipDecoding()})
  return {int(r["image_id"]): r for r in (source[i] for i in range(len(source)))}


@pytest.mark.parametrize("config", sorted(SPLITS))
def test_each_config_has_the_files_splits_and_reports_every_bad_input_by_reason(built, config):
  builder = built[config]
  assert {s: i.num_examples for s, i in builder.info.splits.items()} == SPLITS[config]
  assert dict(builder.info.metadata["build_report"]) == REPORTS[config]


def test_the_report_is_printed_as_a_table_and_a_line_for_the_json(tmp_path, capsys):
  _build("flickr8k", DUMMY, tmp_path)
  out = capsys.readouterr().out
  assert ("karpathy/flickr8k build report         train         val        test\n"
          "images                                     2           1           1\n") in out
  assert "dataset_flickr8k.json: entries 5, malformed_entry 0, duplicate_entry 1, unreferenced_file 0\n" in out


def test_a_karpathy_example_keeps_every_caption_its_ids_and_the_released_jpeg(built):
  records = _records(built["flickr30k"], "test")
  assert sorted(records) == [5, 6]
  record = records[5]
  assert record["file_name"] == b"1000523639.jpg"
  assert record["captions"] == [" ".join(dummy.tokens(5, k)).encode() for k in range(5)]
  assert record["captions"][0] == b"a child stands near the dog"
  assert record["raw_captions"] == [dummy.raw_caption(5, k).encode() for k in range(5)]
  assert list(record["caption_ids"]) == [50, 51, 52, 53, 54]
  assert record["image"] == (DUMMY / "flickr30k-images" / "1000523639.jpg").read_bytes()


def test_coco_takes_cocoid_and_reads_each_entry_from_its_filepath(built):
  builder = built["coco"]
  assert sorted(_records(builder, "train")) == [9, 25]
  test = _records(builder, "test")
  assert sorted(test) == [391895]
  assert test[391895]["file_name"] == b"COCO_val2014_000000391895.jpg"
  assert test[391895]["image"] == (DUMMY / "val2014" / "COCO_val2014_000000391895.jpg").read_bytes()
  assert list(test[391895]["caption_ids"]) == [0, 1, 2, 3, 4]
  assert _records(builder, "train")[25]["image"] == (DUMMY / "train2014" / "COCO_train2014_000000000025.jpg") \
      .read_bytes()


def test_a_coco_format_example_has_its_annotations_in_file_order_as_tokens_and_raw(built):
  records = _records(built["coco_format"], "validation")
  assert sorted(records) == [101, 102]
  record = records[102]
  assert record["captions"] == [b"A bus stands near the dog .", b"A kite stands near the cat .",
                                b"A man stands near the horse ."]
  assert record["raw_captions"] == [dummy.raw_caption(102, k).encode() for k in range(3)]
  assert list(record["caption_ids"]) == [102000, 102001, 102002]
  assert record["image"] == (DUMMY / "images" / "000000000102.jpg").read_bytes()
  assert len(records[101]["captions"]) == 2  # its malformed third annotation (no caption) is left out
  assert "domain" not in built["coco_format"].info.features


def test_nocaps_keeps_each_images_domain(built):
  records = _records(built["nocaps"], "validation")
  assert {i: r["domain"] for i, r in records.items()} == {0: b"in-domain", 1: b"near-domain", 2: b"out-domain"}
  assert len(records[2]["captions"]) == 10
  assert records[1]["file_name"] == b"00223d6d3afd9b71.jpg"


def test_a_split_with_no_readable_image_is_left_out_and_reported(tmp_path, capsys):
  manual = tmp_path / "manual"
  shutil.copytree(DUMMY, manual)
  shutil.rmtree(manual / "train2014")
  builder = _build("coco", manual, tmp_path / "tfds")
  assert {s: i.num_examples for s, i in builder.info.splits.items()} == {"restval": 1, "val": 1, "test": 1}
  assert builder.info.metadata["build_report"]["train"] == _split(2, 0, missing_image=2)
  assert "note: karpathy/coco: no image of the train split could be read: the split is not built\n" in \
      capsys.readouterr().err


def test_an_image_that_changes_after_its_check_stops_the_build():
  entry = entries_lib.Entry("test", "flickr30k-images", "1000523639.jpg", 5, ("A dog.",), ("a dog",), (50,))
  builder = tfds.builder("karpathy/flickr30k")
  with pytest.raises(karpathy.ManualDataError, match="1000523639.jpg changed while the dataset was being built"):
    list(builder._generate_examples(os.fspath(DUMMY), [(entry, (1, 1))]))


@pytest.mark.parametrize("entry", [
    {"imgid": 1, "split": "train", "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"]}]},       # no filename
    {"filename": "a.jpg", "split": "train", "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"]}]},  # no imgid
    {"filename": "a.jpg", "imgid": 1, "split": "dev", "sentences": [{"raw": "A.", "tokens": ["a"]}]},  # bad split
    {"filename": "a.jpg", "imgid": 1, "split": "train", "sentences": []},
    {"filename": "a.jpg", "imgid": 1, "split": "train", "sentences": [{"raw": "A dog."}]},           # no tokens
    {"filename": "a.jpg", "imgid": 1, "split": "train", "sentences": [{"raw": None, "tokens": []}]},  # no raw
    {"filename": "a.jpg", "imgid": True, "split": "train", "sentences": [{"raw": "A.", "tokens": ["a"]}]},
    "a.jpg",
    # issue 40 (D12): what an example cannot hold: an id outside int64, a lone surrogate (JSON's "\ud800")
    {"filename": "a.jpg", "imgid": 2**63, "split": "train", "sentences": [{"raw": "A.", "tokens": ["a"]}]},
    {"filename": "a.jpg", "imgid": -2**63 - 1, "split": "train", "sentences": [{"raw": "A.", "tokens": ["a"]}]},
    {"filename": "a.jpg", "imgid": 1, "split": "train", "sentences": [{"raw": "A \ud800.", "tokens": ["a"]}]},
    {"filename": "a.jpg", "imgid": 1, "split": "train", "sentences": [{"raw": "A.", "tokens": ["a\udfff"]}]},
    {"filename": "a\ud800.jpg", "imgid": 1, "split": "train", "sentences": [{"raw": "A.", "tokens": ["a"]}]},
])
def test_an_entry_without_the_keys_it_needs_is_malformed(entry):
  counts = dict.fromkeys(entries_lib.FILE_KEYS[:-1], 0)
  parsed, _ = entries_lib.parse_karpathy({"images": [entry, {"sentences": []}]}, "f.json", ("train",), ("x",), False,
                                         counts, "fix it")
  assert parsed == [] and counts == {"entries": 2, "malformed_entry": 2, "duplicate_entry": 0}


def test_a_sentence_with_empty_text_or_no_tokens_is_kept_as_released():
  counts = dict.fromkeys(entries_lib.FILE_KEYS[:-1], 0)
  entry = {"filename": "a.jpg", "imgid": 7, "split": "test",
           "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"], "sentid": 70}, {"raw": "", "tokens": []}]}
  parsed, named = entries_lib.parse_karpathy({"images": [entry]}, "f.json", ("test",), ("x",), False, counts, "")
  assert parsed == [entries_lib.Entry("test", "x", "a.jpg", 7, ("A dog.", ""), ("a dog", ""), (70, -1))]
  assert named == {("x", "a.jpg")} and counts == {"entries": 1, "malformed_entry": 0, "duplicate_entry": 0}


def test_an_id_outside_int64_or_a_lone_surrogate_is_a_malformed_entry_and_the_build_finishes(tmp_path):
  # Each of these once stopped the build after the report had counted its image as an example (issue 40, D12).
  manual = tmp_path / "manual"
  shutil.copytree(DUMMY, manual)
  coco = json.loads((DUMMY / "captions.json").read_text())
  coco["images"].append({"id": 2**63, "file_name": "000000000103.jpg"})
  coco["annotations"] += [{"image_id": 2**63, "id": 7, "caption": "A dog."},
                          {"image_id": 101, "id": 2**63, "caption": "A cat."},
                          {"image_id": 101, "id": 101002, "caption": "A \ud800 dog."}]
  (manual / "captions.json").write_text(json.dumps(coco))
  flickr = json.loads((DUMMY / "dataset_flickr8k.json").read_text())
  flickr["images"] += [
      {"filename": "1000268201_693b08cb0e.jpg", "imgid": 2**63, "split": "train",
       "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"], "sentid": 90}]},
      {"filename": "1001773457_577c3a7d70.jpg", "imgid": 77, "split": "val",
       "sentences": [{"raw": "A \ud800 dog.", "tokens": ["a", "dog"], "sentid": 91}]}]
  (manual / "dataset_flickr8k.json").write_text(json.dumps(flickr))
  builder = _build("coco_format", manual, tmp_path / "tfds")
  assert dict(builder.info.metadata["build_report"]) == {
      "validation": _split(3, 2, missing_image=1),
      "file": _file(6, malformed=6, unreferenced=1, annotation_without_image=1, image_without_caption=1)}
  assert sorted(_records(builder, "validation")) == [101, 102]
  assert len(_records(builder, "validation")[101]["captions"]) == 2
  builder = _build("flickr8k", manual, tmp_path / "tfds")
  assert dict(builder.info.metadata["build_report"]) == {**REPORTS["flickr8k"], "file": _file(7, 2, duplicate=1)}
  assert {s: i.num_examples for s, i in builder.info.splits.items()} == SPLITS["flickr8k"]


def _fail(capsys, config: str, manual: pathlib.Path, tmp_path: pathlib.Path) -> str:
  with pytest.raises(SystemExit) as exit_:
    build_command.main(["build", f"--dataset=karpathy/{config}", f"--manual_dir={manual}",
                        f"--data_dir={tmp_path / 'tfds'}"])
  assert exit_.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: ")
  return err


POINTER = "(see tfds_builders/karpathy/README.md (or `tfds.builder('karpathy').MANUAL_DOWNLOAD_INSTRUCTIONS`))"


def test_missing_wrong_or_unbuildable_files_are_one_error_line(tmp_path, capsys):
  manual = tmp_path / "manual"
  (manual / "flickr30k-images").mkdir(parents=True)
  (manual / "flickr30k-images" / ".DS_Store").write_bytes(b"")
  json_path = manual / "dataset_flickr30k.json"
  assert _fail(capsys, "flickr30k", manual, tmp_path) == (
      f"error: {json_path} is missing — put dataset_flickr30k.json and flickr30k-images/ in the manual dir "
      f"{POINTER}\n")
  json_path.write_text(json.dumps(dummy.karpathy_json("flickr30k")))
  assert _fail(capsys, "flickr30k", manual, tmp_path) == (
      f"error: {manual / 'flickr30k-images'} is missing or empty — download the images {POINTER}\n")
  shutil.copy(DUMMY / "flickr30k-images" / "1000092795.jpg", manual / "flickr30k-images")
  json_path.write_text("{\"images\": [")
  assert _fail(capsys, "flickr30k", manual, tmp_path).startswith(f"error: {json_path} is not JSON (")
  json_path.write_text(json.dumps(dummy.coco_format_json(dummy.COCO_FORMAT, with_domain=False)))
  assert _fail(capsys, "flickr30k", manual, tmp_path) == (
      f"error: {json_path} is not a Karpathy split file (an \"images\" list of entries with \"sentences\") (it is a "
      f"COCO-format file: build it with karpathy/coco_format) — give the released dataset_flickr30k.json "
      f"{POINTER}\n")
  json_path.write_text(json.dumps({"images": [{"filename": "1000092795.jpg", "sentences": []}]}))
  assert _fail(capsys, "flickr30k", manual, tmp_path).startswith(
      f"error: no example could be built from {json_path} and the images in dataset_flickr30k.json and "
      "flickr30k-images/: ")
  (manual / "captions.json").write_text(json.dumps(dummy.karpathy_json("flickr8k")))
  (manual / "images").mkdir()
  shutil.copy(DUMMY / "images" / "000000000101.jpg", manual / "images")
  assert _fail(capsys, "coco_format", manual, tmp_path) == (
      f"error: {manual / 'captions.json'} is not a COCO-format caption file (\"images\" and \"annotations\" lists) "
      "(it is a Karpathy split file: build it with karpathy/coco, flickr30k or flickr8k) — give the released "
      f"captions.json {POINTER}\n")


def test_capjax_reads_the_references_from_captions_or_from_raw_captions(built):
  config = ml_collections.ConfigDict({"name": "karpathy", "builder_config": "flickr30k",
                                      "data_dir": os.fspath(built["flickr30k"].data_dir_root), "caption_field": ""})
  record = next(r for r in (sources.data_source(config, "test")[i] for i in range(2)) if int(r["image_id"]) == 5)
  assert record["captions"][0] == b"a child stands near the dog"
  config.caption_field = "raw_captions"
  record = next(r for r in (sources.data_source(config, "test")[i] for i in range(2)) if int(r["image_id"]) == 5)
  assert record["captions"][0] == "A child stands near the dog ."
  assert sources._text_fields(built["nocaps"].info.features) == ["captions", "raw_captions"]


def test_a_coco_format_file_and_folder_of_other_names_are_given_by_links(tmp_path):
  manual = tmp_path / "manual"
  manual.mkdir()
  (manual / "captions.json").symlink_to(DUMMY / "captions.json")
  (manual / "images").symlink_to(DUMMY / "images", target_is_directory=True)
  builder = _build("coco_format", manual, tmp_path / "tfds")
  assert dict(builder.info.metadata["build_report"]) == REPORTS["coco_format"]
  assert sorted(_records(builder, "validation")) == [101, 102]
