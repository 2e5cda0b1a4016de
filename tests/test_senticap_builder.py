"""The senticap builder on dummy data in the released format: the TFDS contract for both sentiments, each image's
captions of the config's sentiment with their tokens and sentiment words, every entry and image accounted for,
the validation hold-out, and one error line for a missing or broken file.
"""

from __future__ import annotations

import os
import pathlib

import pytest
import tensorflow_datasets as tfds

from capjax.data import build as build_command
from tfds_builders.senticap import make_dummy_data as dummy
from tfds_builders.senticap import senticap_dataset_builder as senticap

DUMMY = pathlib.Path(dummy.__file__).parent / "dummy_data"
FILE_COUNTS = {"entries": 12, "malformed_entry": 1, "malformed_sentence": 1, "duplicate_entry": 1}


def _split_report(images: int, examples: int, missing: int = 0, corrupt: dict | None = None) -> dict:
  corrupt = corrupt or {}
  return {"images": images, "examples": examples, "missing_image": missing, "corrupt_image": sum(corrupt.values()),
          "unsafe_name": 0, "corrupt_reasons": corrupt}


class SenticapPositiveTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = senticap.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["positive"]
  SPLITS = {"train": 2, "validation": 2, "test": 2}
  SKIP_CHECKSUMS = True


class SenticapNegativeTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = senticap.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["negative"]
  SPLITS = {"train": 2, "validation": 1, "test": 2}
  SKIP_CHECKSUMS = True


def _build(config: str, manual_dir: pathlib.Path, data_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
  builder = tfds.builder(f"senticap/{config}", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record",
                               download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)))
  return tfds.builder(f"senticap/{config}", data_dir=data_dir)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> pathlib.Path:
  directory = tmp_path_factory.mktemp("tfds")
  for config in ("positive", "negative"):
    _build(config, DUMMY, directory)
  return directory


def _records(data_dir, config: str, split: str) -> dict[int, dict]:
  source = tfds.builder(f"senticap/{config}", data_dir=data_dir).as_data_source(
      split, decoders={"image": tfds.decode.SkipDecoding()})
  return {int(r["image_id"]): r for r in (source[i] for i in range(len(source)))}


def test_the_reports_account_for_every_entry_and_image(data_dir):
  positive = tfds.builder("senticap/positive", data_dir=data_dir).info.metadata["build_report"]
  negative = tfds.builder("senticap/negative", data_dir=data_dir).info.metadata["build_report"]
  assert dict(positive) == {"train": _split_report(3, 2, corrupt={"undecodable": 1}),
                            "validation": _split_report(2, 2), "test": _split_report(2, 2), "file": FILE_COUNTS}
  assert dict(negative) == {"train": _split_report(2, 2), "validation": _split_report(2, 1, missing=1),
                            "test": _split_report(2, 2), "file": FILE_COUNTS}


def test_images_are_in_the_splits_of_their_sentiment(data_dir):
  ids = {(config, split): sorted(_records(data_dir, config, split))
         for config in ("positive", "negative") for split in ("train", "validation", "test")}
  assert ids == {("positive", "train"): [42, 73], ("positive", "validation"): [74, 192],
                 ("positive", "test"): [133, 208], ("negative", "train"): [74, 196],
                 ("negative", "validation"): [42], ("negative", "test"): [133, 136]}


def test_a_record_holds_its_sentiments_captions_tokens_and_style_words(data_dir):
  record = _records(data_dir, "positive", "train")[42]  # the second entry for image 42 is left out
  assert record["captions"] == [b"A beautiful dog sitting on the grass.", b"A lovely dog sitting on the grass.",
                                b"A happy dog sitting on the grass."]
  assert record["tokens"][0] == b"a beautiful dog sitting on the grass"
  assert record["style_words"] == [b"beautiful dog", b"lovely dog", b"happy dog"]
  assert (record["filename"], record["released_split"]) == (b"COCO_val2014_000000000042.jpg", b"train")
  assert record["image"] == (DUMMY / "val2014" / "COCO_val2014_000000000042.jpg").read_bytes()
  negative = _records(data_dir, "negative", "validation")[42]
  assert negative["style_words"] == [b"sad dog", b"dirty dog", b"lonely dog"]
  assert len(_records(data_dir, "positive", "validation")[192]["captions"]) == 3  # its malformed fourth dropped


def test_one_hundred_training_images_are_held_out_for_validation():
  entries = [{"split": "test" if i % 3 == 0 else ("val" if i % 7 == 0 else "train")} for i in range(1500)]
  splits = senticap.assign_splits(entries)
  assert {s: splits.count(s) for s in ("train", "validation", "test")} == {"train": 900, "validation": 100,
                                                                          "test": 500}
  assert splits == senticap.assign_splits(entries)


def test_an_id_outside_int64_or_a_lone_surrogate_is_counted_as_malformed():
  # Each once passed the checks and stopped the build when TFDS encoded it (issue 40, D12).
  sentence = {"sentiment": 1, "raw": "A nice dog.", "tokens": ["a", "nice", "dog"], "word_sentiment": [0, 1, 0]}

  def entry(number: str, **fields) -> dict:
    return {"filename": f"COCO_val2014_{number}.jpg", "split": "train", "sentences": [{**sentence, **fields}]}

  images = [entry("9" * 19), entry("\u0664\u0662"),  # an id past int64; 42 in Arabic-Indic digits
            {**entry("000000000041"), "filename": "COCO\ud800_val2014_000000000041.jpg"},
            entry("000000000043", raw="A \ud800 dog."), entry("000000000044", tokens=["a", "nice", "\udfff"]),
            entry("000000000042")]
  counts = dict.fromkeys(senticap.FILE_KEYS, 0)
  parsed = senticap.parse_entries({"images": images}, 1, counts)
  assert [e["image_id"] for e in parsed] == [42]
  assert counts == {"entries": 6, "malformed_entry": 3, "malformed_sentence": 2, "duplicate_entry": 0}


@pytest.mark.parametrize("content,message", [
    (b"{", "is not JSON"),
    (b'{"annotations": []}', "senticap_dataset.json is not SentiCap's (no \"images\" list)"),
])
def test_a_broken_file_is_one_error_line(tmp_path, capsys, content, message):
  manual = tmp_path / "manual"
  dummy.write_manual_dir(manual)
  (manual / "senticap_dataset.json").write_bytes(content)
  with pytest.raises(SystemExit) as exit_:
    build_command.main(["build", "--dataset=senticap/negative", f"--manual_dir={manual}",
                        f"--data_dir={tmp_path / 'tfds'}"])
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and err.count("\n") == 1 and message in err and "senticap/README.md" in err


def test_a_missing_image_folder_is_one_error_line(tmp_path, capsys):
  manual = tmp_path / "manual"
  dummy.write_manual_dir(manual)
  for image in (manual / "val2014").iterdir():
    image.unlink()
  (manual / "val2014").rmdir()
  with pytest.raises(SystemExit) as exit_:
    build_command.main(["build", "--dataset=senticap", f"--manual_dir={manual}", f"--data_dir={tmp_path / 'tfds'}"])
  assert exit_.value.code == 2
  assert capsys.readouterr().err == (f"error: {manual}/val2014 is missing — download COCO's val2014 images (see "
                                     "tfds_builders/senticap/README.md (or `tfds.builder('senticap').MANUAL_DOWNLOAD_"
                                     "INSTRUCTIONS`))\n")
