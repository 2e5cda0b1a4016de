"""A training workdir's checks at start: it must be writable, hold no run of another config (the config of its
first start is saved there, and a later start compares its own, with an explicit allow-list of safe changes), and
no other process may be writing it (`Lock`: one owner per workdir, a multi-host job counting as one)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from typing import Any

import jax
import ml_collections
from absl import logging

from capjax import cli, distributed
from capjax.config_util import ConfigError

CONFIG_FILENAME = "config.json"
LOCK_FILENAME = "run.lock"
# What a run leaves once its work has begun: the vocabulary of its training captions (written first), checkpoints.
RUN_FILES = ("vocab.txt", "checkpoints")

# Fields a resumed run may change (a prefix covers its sub-fields): they decide how long the run trains, how often it
# logs, evaluates and saves, how it evaluates and reads its input, and where things are, but not the model, the
# optimizer or the training examples, so the checkpoint and the saved data iterator stay valid. Any other field
# that differs means another run: its checkpoint would fail to restore, or resume as a run that no config describes.
RESUMABLE_FIELDS = (
    "num_train_steps",     # train longer or shorter (a cosine schedule then decays over the new length: warned)
    "optimizer.accumulate_steps",  # the same update in fewer or more micro-batches (less or more memory)
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "async_checkpointing",
    "debug_nans",
    "max_steps_ahead",
    "profile_steps",
    "eval",                # validation size, decoding batch, gallery and rating-sheet sizes: evaluation only
    "decode",              # greedy or beam: evaluation only
    "dataset.test_split",  # the split of the final evaluation only
    "dataset.data_dir",    # where the same dataset is stored
    "dataset.augmented_data_dir",  # where the same augmented dataset is stored
    "dataset.auto_build",
    "input",               # read threads and prefetch: the saved iterator state is a position, not a thread layout
    "mesh",                # device layout and its rules table (mesh.rules, mesh.fsdp, mesh.dcn_*): the state
                           # restores onto any mesh and sharding (a resized slice, another machine, FSDP)
    "model.encoder.weights",  # converted weights that `--mode=caption` extracts features with, unused in training
)

# Fields added after runs were saved without them, and the value those runs had: a saved config.json without the
# field compares as this value, so that a run from before it resumes (with its checkpoints, which have no EMA).
ABSENT_MEANS = {"optimizer.ema_decay": 0.0, "init_from": "", "init_step": -1, "freeze": "", "vocab.extend": True}


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
  """{"a": {"b": 1}} -> {"a.b": 1}: a config as read from config.json, by dotted field."""
  flat = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      flat.update(flatten(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def _resumable(field: str) -> bool:
  return any(field == f or field.startswith(f + ".") for f in RESUMABLE_FIELDS)


def config_changes(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
  """'field: old → new' for each field outside RESUMABLE_FIELDS that differs (both as JSON-loaded dicts)."""
  old, new = ({**ABSENT_MEANS, **flatten(tree)} for tree in (saved, current))

  def show(values: dict[str, Any], field: str) -> str:
    return json.dumps(values[field]) if field in values else "(absent)"

  return [f"{field}: {show(old, field)} → {show(new, field)}" for field in sorted(old.keys() | new.keys())
          if not _resumable(field) and old.get(field, ()) != new.get(field, ())]


def holds_a_run(workdir: str) -> bool:
  """Whether a start got as far as writing what depends on its config (config.json alone does not count: a start
  that stopped at a bad input, a typo in the dataset name, must not hold the workdir for the corrected command)."""
  vocab, checkpoints = (os.path.join(workdir, name) for name in RUN_FILES)
  return os.path.isfile(vocab) or (os.path.isdir(checkpoints) and bool(os.listdir(checkpoints)))


def as_json_dict(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The config as it reads back from config.json (tuples as lists), so saved and current compare alike."""
  return json.loads(config.to_json_best_effort())


def claim(workdir: str, purpose: str) -> Lock:
  """The workdir's `Lock`, taken for `purpose` ("a training"): a ConfigError when the workdir cannot be written or
  another process writes it. Use it as a context manager around the work."""
  reason = cli.unwritable_reason(workdir)
  if reason:
    raise ConfigError(f"--workdir={workdir} {reason} — pass a --workdir this user may write to, or make it writable")
  lock = Lock(workdir, purpose)
  lock.acquire()
  return lock


def _saved_config(path: str, write: bool) -> dict[str, Any] | None:
  """config.json of the run in the workdir; None when it is damaged (cut short, emptied), which is reported and
  moved aside: the checkpoints still refuse a config of another model (their shapes), and the current config is
  saved in its place."""
  try:
    with open(path, encoding="utf-8") as f:
      saved = json.load(f)
    if isinstance(saved, dict):
      return saved
    error = "not a JSON object"
  except (UnicodeDecodeError, ValueError) as e:
    error = " ".join(str(e).split())
  if write:
    os.replace(path, path + ".damaged")
  logging.warning("%s is damaged (%s): the config of this start is saved in its place, unchecked against the run's "
                  "(the damaged file is %s.damaged)", path, error, path)
  return None


def prepare(workdir: str, config: ml_collections.ConfigDict, write: bool = True) -> None:
  """Creates `workdir`, or raises ConfigError when it cannot be written or holds a run of another config.

  Meant to run before any work (building a dataset, compiling): a run that cannot save its checkpoints, or that
  would restore another model's, should stop in a second rather than after hours. `write` False (processes other
  than the first) checks without writing config.json.
  """
  reason = cli.unwritable_reason(workdir)
  if reason:
    raise ConfigError(f"--workdir={workdir} {reason} — pass a --workdir this user may write to, or make it writable")
  path = os.path.join(workdir, CONFIG_FILENAME)
  current = as_json_dict(config)
  saved = _saved_config(path, write) if os.path.exists(path) and holds_a_run(workdir) else None
  if saved is not None:
    changes = config_changes(saved, current)
    if changes:
      raise ConfigError(f"--workdir={workdir} holds a run of another config ({'; '.join(changes)}) — pass another "
                        f"--workdir, or resume with the config of that run (saved in {path})")
    old_steps = saved.get("num_train_steps")
    if old_steps != config.num_train_steps and config.optimizer.schedule == "cosine":
      logging.warning("num_train_steps %s → %d: the cosine schedule decays over the new length from the resumed step "
                      "on, so the learning rate jumps there", old_steps, config.num_train_steps)
  if write:  # the latest start's config (it differs from the first's in resumable fields only)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      json.dump(current, f, indent=2, sort_keys=True)
    os.replace(path + ".tmp", path)


# ----------------------------------------------------------------------------------------------------------
# One writer per workdir
# ----------------------------------------------------------------------------------------------------------
HEARTBEAT_S = 10.0  # how often the owner touches its lock file
STALE_AFTER_S = 90.0  # a lock of another host untouched for this long belongs to a process that is gone


def _start_ticks(pid: int) -> int | None:
  """When process `pid` started (clock ticks since boot, /proc), telling it from a later process with its pid; None
  where /proc does not say (the process is gone, or this is not Linux)."""
  try:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
      return int(f.read().rsplit(")", 1)[1].split()[19])
  except (OSError, IndexError, ValueError):
    return None


def _alive(pid: int, ticks: int | None) -> bool:
  """Whether process `pid` of this host still runs and is the one that started at `ticks`."""
  try:
    with contextlib.suppress(PermissionError):  # another user's process: it exists
      os.kill(pid, 0)
  except ProcessLookupError:
    return False
  return ticks is None or _start_ticks(pid) in (None, ticks)


class Lock:
  """A workdir's owner: the file `run.lock`, created atomically (O_EXCL) with the owner's pid, host, start time and
  what it does, refreshed every HEARTBEAT_S by a thread and removed on `release`.

  A second process that would write the workdir (a training or evaluation) is refused, naming the owner. A lock
  whose owner is gone is stale and taken over, with a warning: on this host when its pid no longer runs (or is a
  later process with that pid), on another host (a shared file system) when its file has not been touched for
  STALE_AFTER_S. In a multi-host job process 0 holds it for the job (`acquire` agrees the outcome)."""

  def __init__(self, workdir: str, purpose: str):
    self.path = os.path.join(workdir, LOCK_FILENAME)
    self.purpose = purpose
    self.owned = False
    self._stop = threading.Event()
    self._heartbeat: threading.Thread | None = None

  def _record(self) -> bytes:
    pid = os.getpid()
    return json.dumps({"pid": pid, "host": socket.gethostname(), "start_ticks": _start_ticks(pid),
                       "purpose": self.purpose, "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode()

  def _holder(self, data: bytes) -> str | None:
    """Who holds the lock whose file reads `data`, or None when that owner is gone (the lock is stale)."""
    try:
      owner = json.loads(data)
      pid, host = int(owner["pid"]), str(owner["host"])
    except (ValueError, KeyError, TypeError):  # a lock file cut short: its writer died as it wrote it
      return None
    described = f"{owner.get('purpose', 'a run')} (pid {pid} on {host}, since {owner.get('since', '?')})"
    if host == socket.gethostname():
      return described if _alive(pid, owner.get("start_ticks")) else None
    try:
      age = time.time() - os.stat(self.path).st_mtime
    except FileNotFoundError:
      return None
    return described if age < STALE_AFTER_S else None

  def _try_create(self) -> bool:
    try:
      fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
      return False
    with os.fdopen(fd, "wb") as f:
      f.write(self._record())
    return True

  def _take_over(self, seen: bytes) -> None:
    """Moves the stale lock that read `seen` aside and deletes it; a newer lock that replaced it meanwhile goes
    back (two processes that found the same stale lock: one of them wins the create)."""
    aside = f"{self.path}.stale.{os.getpid()}"
    try:
      os.rename(self.path, aside)
    except FileNotFoundError:
      return
    with open(aside, "rb") as f:
      if f.read() != seen:
        with contextlib.suppress(FileExistsError):
          os.link(aside, self.path)
    os.remove(aside)

  def _acquire_here(self) -> str | None:
    """Takes the lock in this process; None, or who holds it."""
    for _ in range(10):
      if self._try_create():
        self.owned = True
        return None
      try:
        with open(self.path, "rb") as f:
          seen = f.read()
        fresh = time.time() - os.stat(self.path).st_mtime < 5
      except FileNotFoundError:  # released meanwhile
        continue
      if not seen and fresh:  # created by another process that has not written it yet
        time.sleep(0.2)
        continue
      holder = self._holder(seen)
      if holder:
        return holder
      logging.warning("%s: taking over a stale lock (%s)", self.path, seen.decode(errors="replace") or "empty")
      self._take_over(seen)
    return f"another process (the lock file {self.path} changed hands 10 times while this one tried)"

  def acquire(self) -> None:
    """Takes the lock (process 0 for the job), or raises ConfigError naming the process that holds it."""
    holder = self._acquire_here() if jax.process_index() == 0 else None
    if distributed.from_process_zero(int(holder is None)) == 0:
      raise ConfigError(
          f"--workdir={os.path.dirname(self.path)} is in use by {holder or 'another run (seen by process 0)'} — wait "
          f"for it to end or stop it, or pass another --workdir (if that process is gone, delete {self.path})")
    if self.owned:
      self._heartbeat = threading.Thread(target=self._beat, name="workdir-lock", daemon=True)
      self._heartbeat.start()

  def _beat(self) -> None:
    while not self._stop.wait(HEARTBEAT_S):
      with contextlib.suppress(OSError):
        os.utime(self.path)

  def release(self) -> None:
    if not self.owned:
      return
    self._stop.set()
    if self._heartbeat is not None:
      self._heartbeat.join()
    with contextlib.suppress(OSError):
      with open(self.path, "rb") as f:
        ours = json.loads(f.read()).get("pid") == os.getpid()
      if ours:
        os.remove(self.path)
    self.owned = False

  def __enter__(self) -> Lock:  # taken by `acquire` (`claim`): the block releases it
    return self

  def __exit__(self, *exc_info) -> None:
    self.release()
