"""Workdir checks at the start of training: an unwritable workdir, one that holds a run of another config, or one that
another process writes, is refused before any work with a one-line `what — what to do` error; the fields a resume
may change pass, and a stale lock (its owner gone) is taken over."""

import json
import logging
import os
import pathlib
import socket
import subprocess
import time

import pytest

from capjax import config_util, train, workdir
from capjax.config_util import ConfigError


def _config(tmp_path: pathlib.Path):
  config = config_util.load("configs/t2t.py:shapes,debug")
  # A dataset that training would build on first use: its absence afterwards shows no work was done.
  config.dataset.update(builder_config="tiny", data_dir=str(tmp_path / "tfds"))
  return config


def _unwritable_dir(tmp_path: pathlib.Path) -> pathlib.Path:
  """An existing directory this process may not create files in."""
  if os.geteuid() == 0:  # root writes through any mode bits; sysfs takes no new files from anyone
    return pathlib.Path("/sys")
  directory = tmp_path / "read_only"
  directory.mkdir()
  directory.chmod(0o555)
  return directory


def test_a_workdir_that_cannot_be_created_is_refused_before_any_work(tmp_path):
  (tmp_path / "file").write_text("")
  target = tmp_path / "file" / "run"
  with pytest.raises(ConfigError) as e:
    train.train_and_evaluate(_config(tmp_path), str(target))
  assert str(e.value) == (f"--workdir={target} cannot be written (Not a directory) — pass a --workdir this user "
                          "may write to, or make it writable")
  assert not (tmp_path / "tfds").exists()


def test_a_read_only_workdir_is_refused_before_any_work(tmp_path):
  target = _unwritable_dir(tmp_path)
  with pytest.raises(ConfigError, match=r"^--workdir=\S+ cannot be written "
                     r"\((Permission denied|Read-only file system)\) "
                     r"— pass a --workdir "
                     "this user may write to, or make it writable$"):
    train.train_and_evaluate(_config(tmp_path), str(target))
  assert not (tmp_path / "tfds").exists()
  assert not list(target.glob("tmp*"))  # the probe leaves nothing behind


def test_the_first_start_saves_its_config_and_another_config_is_refused_naming_the_fields(tmp_path):
  config = _config(tmp_path)
  run = tmp_path / "run"
  workdir.prepare(str(run), config)
  assert json.loads((run / "config.json").read_text()) == json.loads(config.to_json_best_effort())
  assert sorted(os.listdir(run)) == ["config.json"]  # the write probe is gone
  (run / "vocab.txt").write_text("<pad>\n")  # the run's first output: from here on the workdir holds it

  other = _config(tmp_path)
  other.model.d_model = 64
  other.batch_size = 32
  other.model.encoder.widths = (8, 16, 32)
  with pytest.raises(ConfigError) as e:
    train.train_and_evaluate(other, str(run))
  assert str(e.value) == (
      f"--workdir={run} holds a run of another config (batch_size: 16 → 32; model.d_model: 32 → 64; "
      f"model.encoder.widths: [8, 16, 16] → [8, 16, 32]) — pass another --workdir, or resume with the config of "
      f"that run (saved in {run}/config.json)")
  assert not (tmp_path / "tfds").exists()
  assert json.loads((run / "config.json").read_text())["batch_size"] == 16  # the refused config is not recorded


def test_a_start_that_stopped_before_any_work_does_not_hold_the_workdir(tmp_path):
  # A typo in a field the start stops at (an unknown dataset, a batch the devices cannot split): the corrected
  # command runs in the same workdir, until the run has written something that depends on its config.
  run = tmp_path / "run"
  typo = _config(tmp_path)
  typo.dataset.name = "synthetic_scene"
  workdir.prepare(str(run), typo)
  (run / "checkpoints").mkdir()  # orbax makes the folder before the first save
  corrected = _config(tmp_path)
  workdir.prepare(str(run), corrected)
  assert json.loads((run / "config.json").read_text())["dataset"]["name"] == "synthetic_scenes"
  (run / "checkpoints" / "5").mkdir()
  with pytest.raises(ConfigError, match='dataset.name: "synthetic_scenes" → "synthetic_scene"'):
    workdir.prepare(str(run), typo)


def test_fields_a_resume_may_change_pass_and_the_latest_start_is_recorded(tmp_path, caplog):
  run = tmp_path / "run"
  workdir.prepare(str(run), _config(tmp_path))
  (run / "vocab.txt").write_text("<pad>\n")
  resumed = _config(tmp_path)
  resumed.update(num_train_steps=40, log_every=2, eval_every=4, checkpoint_every=8, keep_checkpoints=3,
                 async_checkpointing=False, debug_nans=False)
  resumed.eval.num_examples = 32
  resumed.decode.update(method="beam", beam_size=2)
  resumed.mesh.data = 2
  resumed.input.num_threads = 1
  resumed.dataset.data_dir = str(tmp_path / "moved")
  with caplog.at_level(logging.WARNING):
    workdir.prepare(str(run), resumed)
  saved = json.loads((run / "config.json").read_text())
  assert (saved["num_train_steps"], saved["eval"]["num_examples"], saved["decode"]["method"]) == (40, 32, "beam")
  # The shapes config decays its learning rate by a cosine over num_train_steps: a new length changes it.
  assert "num_train_steps 20 → 40: the cosine schedule decays over the new length" in caplog.text


def test_config_changes_lists_changed_added_and_removed_fields_outside_the_allow_list():
  saved = {"seed": 0, "model": {"d_model": 32, "old_field": 1}, "eval": {"num_examples": 64}, "log_every": 5}
  current = {"seed": 1, "model": {"d_model": 32, "new_field": [1, 2]}, "eval": {"num_examples": 8}, "log_every": 1}
  assert workdir.config_changes(saved, current) == [
      "model.new_field: (absent) → [1, 2]", "model.old_field: 1 → (absent)", "seed: 0 → 1"]


# --- One writer per workdir ------------------------------------------------------------------------------------

def _lock_record(pid: int, host: str, ticks=None) -> str:
  return json.dumps({"pid": pid, "host": host, "start_ticks": ticks, "purpose": "a training",
                     "since": "2026-01-01 00:00:00"})


def _dead_pid() -> int:
  proc = subprocess.Popen(["true"])
  proc.wait()
  return proc.pid


def test_a_workdir_held_by_a_running_process_is_refused_before_any_work_naming_it(tmp_path):
  run = tmp_path / "run"
  with workdir.claim(str(run), "a training"):
    record = json.loads((run / "run.lock").read_text())
    assert (record["pid"], record["host"], record["purpose"]) == (os.getpid(), socket.gethostname(), "a training")
    with pytest.raises(ConfigError) as e:
      train.train_and_evaluate(_config(tmp_path), str(run))
  assert str(e.value) == (
      f"--workdir={run} is in use by a training (pid {os.getpid()} on {socket.gethostname()}, since "
      f"{record['since']}) — wait for it to end or stop it, or pass another --workdir (if that process is gone, "
      f"delete {run}/run.lock)")
  assert not (tmp_path / "tfds").exists() and not (run / "config.json").exists()
  assert not (run / "run.lock").exists()  # released by its owner
  workdir.claim(str(run), "an evaluation").release()  # and free for the next


@pytest.mark.parametrize("stale", ["dead-pid", "pid-reused", "cut-short", "other-host-silent"])
def test_a_stale_lock_is_taken_over_with_a_warning(stale, tmp_path, caplog):
  run = tmp_path / "run"
  run.mkdir()
  lock = run / "run.lock"
  here = socket.gethostname()
  lock.write_text({"dead-pid": _lock_record(_dead_pid(), here),
                   "pid-reused": _lock_record(os.getpid(), here, ticks=1),  # this pid, but not this process's start
                   "cut-short": '{"pid": 12',
                   "other-host-silent": _lock_record(1, "another-host")}[stale])
  old = time.time() - workdir.STALE_AFTER_S - 1
  os.utime(lock, (old, old))
  with caplog.at_level(logging.WARNING), workdir.claim(str(run), "a training"):
    assert json.loads(lock.read_text())["pid"] == os.getpid()
  assert "taking over a stale lock" in caplog.text
  assert sorted(os.listdir(run)) == []  # no stale file left aside


def test_a_lock_of_another_host_that_is_kept_fresh_is_respected(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  (run / "run.lock").write_text(_lock_record(4242, "another-host"))
  with pytest.raises(ConfigError, match=r"is in use by a training \(pid 4242 on another-host"):
    workdir.claim(str(run), "a training")
  assert json.loads((run / "run.lock").read_text())["host"] == "another-host"  # left as it was


def test_the_owner_keeps_its_lock_fresh_while_it_runs(tmp_path, monkeypatch):
  monkeypatch.setattr(workdir, "HEARTBEAT_S", 0.05)
  run = tmp_path / "run"
  with workdir.claim(str(run), "a training"):
    old = time.time() - 1000
    os.utime(run / "run.lock", (old, old))
    time.sleep(0.3)
    assert time.time() - os.stat(run / "run.lock").st_mtime < 1
