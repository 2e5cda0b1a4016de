"""A built dataset that is not whole is found before it is used (capjax.data.integrity): `capjax.data.build` builds
it again instead of "Reusing" it, or refuses in one line when it cannot, and leaves the damaged copy as it was."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from capjax.data import build, integrity

TINY = "synthetic_scenes/tiny/1.0.0"
TRAIN_SHARD = "synthetic_scenes-train.array_record-00000-of-00001"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> pathlib.Path:
  """synthetic_scenes/tiny built once, as `python -m capjax.data.build` builds it; tests damage copies of it."""
  directory = tmp_path_factory.mktemp("tfds")
  build.main(["capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={directory}"])
  return directory


def _copy(built: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
  shutil.copytree(built, tmp_path / "tfds")
  return tmp_path / "tfds"


def _truncate(path: pathlib.Path, keep: float = 0.5) -> None:
  data = path.read_bytes()
  path.write_bytes(data[:int(len(data) * keep)])


def _shard_lengths(path: pathlib.Path, lengths: list[str]) -> None:
  info = json.loads(path.read_text())
  info["splits"][0]["shardLengths"] = lengths
  path.write_text(json.dumps(info))


DAMAGES = {  # name: (damage done to the dataset folder, the file the problem names, what it says)
    "shard-half-truncated": (lambda d: _truncate(d / TRAIN_SHARD), TRAIN_SHARD, "holds 0 records, not the 512"),
    "shard-one-byte-short": (lambda d: _truncate(d / TRAIN_SHARD, 0.9999), TRAIN_SHARD, "holds 0 records"),
    "shard-emptied": (lambda d: (d / TRAIN_SHARD).write_bytes(b""), TRAIN_SHARD, "holds 0 records"),
    "shard-missing": (lambda d: (d / TRAIN_SHARD).unlink(), TRAIN_SHARD, "is missing"),
    "shard-lengths-edited": (lambda d: _shard_lengths(d / "dataset_info.json", ["500"]), TRAIN_SHARD,
                             "holds 512 records, not the 500"),
    "info-truncated": (lambda d: _truncate(d / "dataset_info.json"), "dataset_info.json", "is not JSON"),
    "info-not-an-object": (lambda d: (d / "dataset_info.json").write_text("[]"), "dataset_info.json",
                           "not an object"),
    "info-missing": (lambda d: (d / "dataset_info.json").unlink(), "dataset_info.json", "is missing"),
    "features-garbled": (lambda d: (d / "features.json").write_bytes(b"\x89\xff garbage"), "features.json",
                         "is not JSON"),
    "features-truncated": (lambda d: _truncate(d / "features.json"), "features.json", "is not JSON"),
}


def test_a_whole_dataset_has_no_problem(built):
  assert integrity.problem(built / TINY) is None


@pytest.mark.parametrize("damage", DAMAGES)
def test_each_damage_is_named_with_its_file(built, tmp_path, damage):
  folder = _copy(built, tmp_path) / TINY
  do, file, says = DAMAGES[damage]
  do(folder)
  wrong = integrity.problem(folder)
  assert wrong is not None and wrong.startswith(str(folder / file)) and says in wrong, wrong


@pytest.mark.parametrize("name, wrong", [("", "is empty"), ("../escape", "holds a path separator"),
                                         ("a/b", "holds a path separator"), ("..", "starts with '.'"),
                                         ("a\\b", "holds a path separator")])
def test_a_name_that_is_not_one_folder_is_refused(name, wrong):
  assert integrity.name_problem(name) is not None and wrong in integrity.name_problem(name)


def test_a_plain_name_is_a_name():
  assert integrity.name_problem("synthetic_scenes_irv2") is None


@pytest.mark.parametrize("dataset, parts, wrong", [
    ("cc3m", ("cc3m", ""), None), ("karpathy/coco", ("karpathy", "coco"), None),
    ("karpathy/", ("karpathy", ""), "the builder config '' is empty"),
    ("../x", ("..", "x"), "the dataset name '..' starts with '.' (a path out of the data dir)"),
    ("a/b/c", ("a", "b/c"), "the builder config 'b/c' holds a path separator"),
])
def test_a_dataset_is_name_or_name_slash_config(dataset, parts, wrong):
  """The one reading (and writing) of --dataset=NAME[/CONFIG]: stats, show, build, the tools, the matrix."""
  assert integrity.split_dataset(dataset) == parts
  assert integrity.join_dataset(*parts) == dataset.rstrip("/")
  problem = integrity.dataset_problem(dataset)
  assert problem == (wrong and f"{wrong} — give NAME or NAME/CONFIG, e.g. synthetic_scenes/tiny")


def test_the_default_data_dir_is_the_flag_then_tfds_data_dir_then_tfds_own(monkeypatch, tmp_path):
  monkeypatch.setenv("HOME", str(tmp_path))
  monkeypatch.delenv("TFDS_DATA_DIR", raising=False)
  assert integrity.data_dir("") == str(tmp_path / "tensorflow_datasets")
  monkeypatch.setenv("TFDS_DATA_DIR", "~/tfds")
  assert integrity.data_dir("") == str(tmp_path / "tfds")
  assert integrity.data_dir("~/given") == str(tmp_path / "given")


def _records(data_dir: pathlib.Path, split: str) -> list:
  """The split's records, field by field (pictures as their PNG bytes): two builds of the same examples are not
  byte for byte the same shard files (the serialized records differ), their examples are."""
  import numpy as np
  import tensorflow_datasets as tfds
  source = tfds.builder("synthetic_scenes/tiny", data_dir=data_dir).as_data_source(
      split=split, decoders={"image": tfds.decode.SkipDecoding()})

  def plain(value):
    if isinstance(value, dict):
      return {k: plain(v) for k, v in value.items()}
    return np.asarray(value).tolist()
  return [plain(source[i]) for i in range(len(source))]


@pytest.mark.parametrize("damage", ["shard-half-truncated", "info-truncated", "features-garbled"])
def test_a_build_over_a_damaged_dataset_builds_it_again(built, tmp_path, capsys, damage):
  data_dir = _copy(built, tmp_path)
  DAMAGES[damage][0](data_dir / TINY)
  capsys.readouterr()
  build.main(["capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={data_dir}"])
  out, err = capsys.readouterr()
  assert "is damaged" in err and DAMAGES[damage][1] in err and "building it again" in err
  assert f"built synthetic_scenes/tiny 1.0.0 in {data_dir / TINY}\n" in out
  assert integrity.problem(data_dir / TINY) is None
  assert sorted(p.name for p in (data_dir / TINY).parent.iterdir()) == ["1.0.0"]  # the damaged copy is gone
  if damage == "shard-half-truncated":  # the split that was damaged holds the same examples again
    assert _records(data_dir, "train") == _records(built, "train")


def test_a_whole_dataset_is_reused(built, tmp_path, capsys):
  data_dir = _copy(built, tmp_path)
  before = {p.name: p.stat().st_mtime_ns for p in (data_dir / TINY).iterdir()}
  build.main(["capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={data_dir}"])
  assert "damaged" not in capsys.readouterr().err
  assert {p.name: p.stat().st_mtime_ns for p in (data_dir / TINY).iterdir()} == before


def test_a_damaged_dataset_whose_manual_files_are_gone_is_refused_and_left_as_it_was(built, tmp_path, capsys):
  data_dir = tmp_path / "tfds"
  folder = data_dir / "cc3m" / "unlabeled" / "1.0.0"  # where cc3m's build goes; a damaged copy of some dataset
  shutil.copytree(built / TINY, folder)
  _truncate(folder / TRAIN_SHARD)
  before = {p.name: p.read_bytes() for p in folder.iterdir()}
  capsys.readouterr()
  with pytest.raises(SystemExit) as exit_info:
    build.main(["capjax.data.build", "--dataset=cc3m", f"--data_dir={data_dir}"])
  err = capsys.readouterr().err
  assert exit_info.value.code == 2
  [line] = err.splitlines()
  assert line.startswith(f"error: the dataset in {folder} is damaged ({folder / TRAIN_SHARD} holds 0 records")
  assert "--manual_dir" in line
  assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
  assert sorted(p.name for p in folder.parent.iterdir()) == ["1.0.0"]


def test_a_folder_named_with_other_digits_is_not_a_version(tmp_path):
  """str.isdigit takes "²" and "٣": such a folder is neither a version nor a crash in the version sort."""
  for version in ("1.0.0", "1.0.²", "1.٣.0", "2.0"):
    (tmp_path / "name" / "cfg" / version).mkdir(parents=True)
    (tmp_path / "name" / "cfg" / version / "dataset_info.json").write_text("{}")
  assert integrity.version_folders(str(tmp_path), "name", "cfg") == [str(tmp_path / "name" / "cfg" / "1.0.0")]
