"""A training workdir's checks at start: it must be writable, and hold no run of another config (the config of its
first start is saved there, and a later start compares its own, with an explicit allow-list of safe changes)."""

from __future__ import annotations

import json
import os
from typing import Any

import ml_collections
from absl import logging

from capjax import cli
from capjax.config_util import ConfigError

CONFIG_FILENAME = "config.json"
# What a run leaves once its work has begun: the vocabulary of its training captions (written first), checkpoints.
RUN_FILES = ("vocab.txt", "checkpoints")

# Fields a resumed run may change (a prefix covers its sub-fields): they decide how long the run trains, how often it
# logs, evaluates and saves, how it evaluates and reads its input, and where things are, but not the model, the
# optimizer or the training examples, so the checkpoint and the saved data iterator stay valid. Any other field
# that differs means another run: its checkpoint would fail to restore, or resume as a run that no config describes.
RESUMABLE_FIELDS = (
    "num_train_steps",     # train longer or shorter (a cosine schedule then decays over the new length: warned)
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "async_checkpointing",
    "debug_nans",
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


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
  flat = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      flat.update(_flatten(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def _resumable(field: str) -> bool:
  return any(field == f or field.startswith(f + ".") for f in RESUMABLE_FIELDS)


def config_changes(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
  """'field: old → new' for each field outside RESUMABLE_FIELDS that differs (both as JSON-loaded dicts)."""
  old, new = _flatten(saved), _flatten(current)

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
  if os.path.exists(path) and holds_a_run(workdir):
    with open(path, encoding="utf-8") as f:
      saved = json.load(f)
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
