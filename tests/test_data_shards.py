"""capjax.data.shards, the one home of a dataset written shard by shard: each shard whole or not at all, a resumed
job writes only the missing ones, and a resume with other settings is refused with what changed."""

from __future__ import annotations

import json

import pytest

from capjax.data import shards


def test_a_split_writes_each_shard_whole_and_a_resume_finds_only_the_missing_ones(tmp_path):
  split = shards.SplitShards(tmp_path, "toy", "train", shards.shard_ranges(5, 2))
  assert split.ranges == [(0, 2), (2, 4), (4, 5)]
  assert [p.name for p in split.paths] == [f"toy-train.array_record-0000{i}-of-00003" for i in range(3)]
  assert split.missing() == [0, 1, 2]
  with split.writer(1) as writer:
    writer.write(b"record")
    writer.info = {"num_examples": 1, "extra": "the job's own"}
  with pytest.raises(RuntimeError), split.writer(2) as writer:  # killed in the middle of a shard
    writer.write(b"record")
    raise RuntimeError("killed")
  with split.writer(0) as writer:  # no info set: the shard is not finished either
    writer.write(b"record")
  assert split.missing() == [0, 2] and split.missing([1, 2]) == [2]
  assert sorted(p.name for p in tmp_path.iterdir()) == [shards.INFO_DIR, split.paths[1].name]
  assert split.info_paths[1] == tmp_path / shards.INFO_DIR / "train-00001.json"
  assert json.loads(split.info_paths[1].read_text()) == {"num_examples": 1, "extra": "the job's own"}


def test_infos_are_in_shard_order_under_the_job_s_own_names(tmp_path):
  split = shards.SplitShards(tmp_path, "toy", "test", shards.shard_ranges(3, 1), info_name="{number:05d}.json")
  for number in reversed(split.missing()):
    with split.writer(number) as writer:
      writer.info = {"num_examples": number}
  assert split.missing() == [] and [info["num_examples"] for info in split.infos()] == [0, 1, 2]
  assert sorted(p.name for p in (tmp_path / shards.INFO_DIR).iterdir()) == ["00000.json", "00001.json", "00002.json"]


def test_a_resume_with_other_settings_is_refused_with_what_changed(tmp_path):
  path = tmp_path / "job" / "settings.json"
  shards.check_manifest(path, {"a": 1, "b": 2}, ValueError, write=False)  # checked before the slow set-up
  assert not path.exists()
  shards.check_manifest(path, {"a": 1, "b": 2}, ValueError)
  shards.check_manifest(path, {"a": 1, "b": 2}, ValueError)  # the same settings: a resume
  with pytest.raises(ValueError, match=r"^b: 2 -> 3$"):
    shards.check_manifest(path, {"a": 1, "b": 3}, ValueError, write=False)
  assert json.loads(path.read_text()) == {"a": 1, "b": 2}
