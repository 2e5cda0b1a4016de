"""cc3m/wds: pixparse's webdataset mirror (cc3m-SPLIT-NNNN.tar of KEY.jpg, KEY.txt, KEY.json) built as it is, on the
plain and the Beam paths alike, with hostile members counted and never read."""

from __future__ import annotations

import os
import pathlib
import tarfile

import pytest
import tensorflow_datasets as tfds

from tfds_builders.cc3m import cc3m_dataset_builder as cc3m
from tfds_builders.cc3m import make_dummy_data as dummy
from tfds_builders.img2dataset import shards as shards_lib
from tfds_builders.img2dataset import wds
import helpers

REPO = pathlib.Path(__file__).resolve().parent.parent
DUMMY = REPO / "tfds_builders" / "cc3m" / "dummy_data"

# What make_dummy_data.write_wds put in dummy_data/, counted by hand.
TRAIN_REPORT = {"samples": 6, "examples": 4, "corrupt_image": 1, "no_caption": 1, "unsafe_member": 2, "shards": 2,
                "truncated_shard": 0, "corrupt_reasons": {"not_jpeg": 1}}
VALIDATION_REPORT = {"samples": 2, "examples": 2, "corrupt_image": 0, "no_caption": 0, "unsafe_member": 0,
                     "shards": 1, "truncated_shard": 0, "corrupt_reasons": {}}


class Cc3mWdsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = cc3m.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["wds"]
  SPLITS = {"train": 4, "validation": 2}
  SKIP_CHECKSUMS = True


def _build(manual_dir: pathlib.Path, data_dir: pathlib.Path, beam_options=None) -> tfds.core.DatasetBuilder:
  builder = tfds.builder("cc3m/wds", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record", download_config=tfds.download.DownloadConfig(
      manual_dir=os.fspath(manual_dir), beam_options=beam_options))
  return tfds.builder("cc3m/wds", data_dir=data_dir)


def _records(builder, split: str) -> list[dict]:
  source = builder.as_data_source(split=split, decoders={"image": tfds.decode.SkipDecoding()})
  return sorted((source[i] for i in range(len(source))), key=lambda r: (r["key"], r["url"]))


def _members(path: pathlib.Path) -> dict[str, bytes]:
  with tarfile.open(path) as tar:
    return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_the_mirror_builds_the_same_on_both_paths_and_counts_every_sample(tmp_path):
  beam = helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
  plain = _build(DUMMY, tmp_path / "plain")
  assert plain.info.metadata["build_report"] == {"train": TRAIN_REPORT, "validation": VALIDATION_REPORT}
  options = beam.options.pipeline_options.PipelineOptions(["--runner=FnApiRunner"])
  on_beam = _build(DUMMY, tmp_path / "beam", options)
  assert on_beam.info.metadata["build_report"] == plain.info.metadata["build_report"]
  manifests = [pathlib.Path(b.data_dir, "manifest.tsv.gz").read_bytes() for b in (plain, on_beam)]
  assert manifests[0] == manifests[1]
  train = _members(DUMMY / "cc3m-train-0000.tar") | _members(DUMMY / "cc3m-train-0001.tar")
  records = _records(plain, "train")
  assert records == _records(on_beam, "train")
  for record in records:
    key = record["key"].decode()
    assert record["image"] == train[f"{key}.jpg"]  # the bytes as stored in the tar
    assert record["caption"].decode() == train[f"{key}.txt"].decode()
    assert list(record["captions"]) == [record["caption"]]
  assert sorted(r["caption"].decode() for r in records) == sorted(dummy.WDS_TRAIN)
  by_key = {r["key"].decode(): r for r in records}
  assert by_key["000000000"]["url"].decode() == dummy.url(0, "mirror") and by_key["000010001"]["url"] == b""
  assert (int(by_key["000000001"]["width"]), int(by_key["000000001"]["height"])) == (40, 56)


def _hostile_tar(path: pathlib.Path, secret: pathlib.Path) -> None:
  """Members that try to escape or to be held whole: `../` and absolute names, a symlink and a hard link to a
  secret, a member over the size limit, then a good sample and a member cut short by the end of the file."""
  good = dummy.jpeg(1)
  with tarfile.open(path, "w") as tar:
    for name, data in (("../../escaped.jpg", good), ("/tmp/absolute.jpg", good), ("000000000.jpg", good),
                       ("000000000.txt", b"a good picture"), ("000000003.jpg", dummy.jpeg(3, 400, 300)),
                       ("000000003.txt", b"a picture over the limit")):
      dummy._add(tar, name, data)
    for name, kind in (("000000001.jpg", tarfile.SYMTYPE), ("000000002.jpg", tarfile.LNKTYPE)):
      info = tarfile.TarInfo(name)
      info.type, info.linkname = kind, os.fspath(secret)
      tar.addfile(info)
    dummy._add(tar, "000000004.txt", b"cut short")
    dummy._add(tar, "000000004.jpg", good)
  data = path.read_bytes()
  path.write_bytes(data[:data.rindex(good[:64]) + 100])  # inside the last member


def test_hostile_mirror_members_are_counted_never_followed_nor_held(tmp_path, monkeypatch):
  monkeypatch.setattr(shards_lib, "MAX_MEMBER_BYTES", 4000)  # a "huge" member, without writing 64 MB
  assert len(dummy.jpeg(3, 400, 300)) > 4000 > len(dummy.jpeg(1))
  manual = tmp_path / "deep" / "manual"
  manual.mkdir(parents=True)
  secret = tmp_path / "secret.jpg"
  secret.write_bytes(dummy.jpeg(42))
  _hostile_tar(manual / "cc3m-train-0000.tar", secret)
  before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
  builder = _build(manual, tmp_path / "tfds")
  assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "tfds" not in p.parts) == before
  assert not (tmp_path / "escaped.jpg").exists() and not pathlib.Path("/tmp/absolute.jpg").exists()
  assert [r["key"] for r in _records(builder, "train")] == [b"000000000"]
  # ../ name, absolute name, symlink, hard link; the member over the limit and the cut one are corrupt images.
  assert builder.info.metadata["build_report"] == {"train": {
      "samples": 3, "examples": 1, "corrupt_image": 2, "no_caption": 0, "unsafe_member": 4, "shards": 1,
      "truncated_shard": 1, "corrupt_reasons": {"too_large": 1, "truncated": 1}}}
  assert list(builder.info.splits) == ["train"]  # no validation tar: the split is left out


def test_mirror_shards_are_found_by_name_and_split(tmp_path):
  for name in ("cc3m-train-0000.tar", "cc3m-train-0012.tar", "cc3m-validation-0000.tar", "cc12m-train-0000.tar",
               "cc3m-train-0001.tar.partial", "cc3m-train.tar"):
    (tmp_path / name).write_bytes(b"")
  (tmp_path / "cc3m-train-0002.tar").symlink_to(tmp_path / "cc3m-train-0000.tar")
  assert [os.path.basename(s) for s in wds.mirror_shards(os.fspath(tmp_path), "cc3m", "train")] == [
      "cc3m-train-0000.tar", "cc3m-train-0012.tar"]


def test_retry_has_nothing_to_do_on_the_mirror():
  assert tfds.builder("cc3m/wds").retry_splits() == []
