"""A training run's checkpoints: orbax's manager (the latest kept, and the best by validation CIDEr-D), restoring
the newest checkpoint that restores (damaged ones set aside in `checkpoints.damaged/`), and the disk: what a
checkpoint needs, the check before each save, a full disk as one error line. Used by `capjax.train` (the loop)
and `capjax.inference` (a trained workdir's best checkpoint)."""

from __future__ import annotations

import contextlib
import glob
import logging as pylogging
import math
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import grain
import jax
import ml_collections
import orbax.checkpoint as ocp
from absl import logging

from capjax import cli, distributed, model_io
from capjax.strings import decimal
from capjax.config_util import ConfigError

BEST_METRIC = "cider_d"


def abstract_state(setup) -> Any:
  """Shapes, dtypes and shardings of the train state of `setup` (`capjax.train.Setup`), for restoring a checkpoint
  straight onto the mesh."""
  shapes = jax.eval_shape(setup.init, jax.random.key(0))
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                      shapes, setup.state_shardings)


def checkpoint_manager(workdir: str, config: ml_collections.ConfigDict) -> ocp.CheckpointManager:
  """Keeps the latest `keep_checkpoints` and the best by validation CIDEr-D (never deletes the newest).

  `best_fn` makes orbax write each save's metrics beside it (without it, a preservation policy alone keeps them in
  memory only: `metrics(step)` reads None, and after a restart the best is forgotten and deleted). Saves without a
  validation pass empty metrics (orbax warns at each save without any), which rank below every score. A save cut
  short by a kill leaves its `*.orbax-checkpoint-tmp*` folder, which orbax removes here (`cleanup_tmp_directories`).
  """
  def score(metrics: dict[str, float]) -> float:
    return metrics.get(BEST_METRIC, -math.inf)

  policy = ocp.checkpoint_managers.AnyPreservationPolicy([
      ocp.checkpoint_managers.LatestN(n=config.keep_checkpoints),
      ocp.checkpoint_managers.BestN(get_metric_fn=score, n=1, keep_checkpoints_without_metrics=False),
  ])
  options = ocp.CheckpointManagerOptions(
      preservation_policy=policy, best_fn=score, best_mode="max",
      enable_async_checkpointing=config.async_checkpointing, cleanup_tmp_directories=True)
  return ocp.CheckpointManager(os.path.join(os.path.abspath(workdir), "checkpoints"), options=options,
                               item_names=("state", "data"))


def best_step(mngr: ocp.CheckpointManager) -> int | None:
  """The kept step with the highest validation CIDEr-D (the latest if none was evaluated)."""
  scored = [(m[BEST_METRIC], step) for step in mngr.all_steps() if (m := mngr.metrics(step)) and BEST_METRIC in m]
  return max(scored)[1] if scored else mngr.latest_step()


def restore_state(mngr: ocp.CheckpointManager, step: int, setup,
                  data_iter: grain.DatasetIterator | None = None) -> Any:
  """The train state of checkpoint `step` on `setup`'s mesh (`capjax.train.Setup`), and the data iterator's. A damaged
  one raises orbax's error alone: its other reads finish before orbax closes their loop
  (`model_io.settled_event_loops`)."""
  args = {"state": ocp.args.StandardRestore(abstract_state(setup))}
  if data_iter is not None:
    args["data"] = grain.checkpoint.CheckpointRestore(data_iter)
  with model_io.settled_event_loops():
    return mngr.restore(step, args=ocp.args.Composite(**args))["state"]


DAMAGED_DIRNAME = "checkpoints.damaged"  # beside checkpoints/: where checkpoints that cannot be restored are moved


def why(error: BaseException) -> str:
  """An exception as one short line (orbax and tensorstore nest long messages)."""
  text = " ".join(f"{type(error).__name__}: {error}".split())
  return text if len(text) <= 300 else text[:297] + "..."


def set_aside(workdir: str, step: int) -> str:
  """Moves checkpoint `step` to `checkpoints.damaged/` (never deletes it: the user may inspect or mend it)."""
  source = os.path.join(os.path.abspath(workdir), "checkpoints", str(step))
  target = os.path.join(os.path.abspath(workdir), DAMAGED_DIRNAME, str(step))
  os.makedirs(os.path.dirname(target), exist_ok=True)
  suffix = 1
  while os.path.exists(target):  # a step set aside before, in another attempt
    suffix += 1
    target = os.path.join(os.path.abspath(workdir), DAMAGED_DIRNAME, f"{step}.{suffix}")
  os.rename(source, target)
  return target


def restore_latest_intact(mngr: ocp.CheckpointManager, setup, data_iter: grain.DatasetIterator,
                          workdir: str) -> tuple[Any, int | None]:
  """(state, step) of the newest checkpoint that restores, with the data iterator at that step; (None, None) in a
  workdir without checkpoints.

  A checkpoint that does not restore (array data cut short, a garbled manifest or iterator state, arrays of other
  shapes) is reported in one line; when an older one restores, the newer damaged ones are moved to
  `checkpoints.damaged/` and the run resumes from it. Nothing is moved when none restores (then the fault may be
  this run's, not the files'): a ConfigError lists each checkpoint's reason.
  """
  failures: list[tuple[int, str]] = []
  for step in sorted(mngr.all_steps(), reverse=True):
    try:
      state = restore_state(mngr, step, setup, data_iter)
    except Exception as error:  # noqa: BLE001 (orbax, tensorstore, grain and json each raise their own)
      failures.append((step, why(error)))
      logging.warning("checkpoint %d in %s cannot be restored: %s", step, workdir, failures[-1][1])
      continue
    if failures:
      if jax.process_index() == 0:
        for damaged, _ in failures:
          logging.warning("checkpoint %d set aside as %s", damaged, set_aside(workdir, damaged))
      distributed.sync("checkpoints_set_aside")
      mngr.reload()
    return state, step
  if failures:
    reasons = "; ".join(f"step {step}: {reason}" for step, reason in failures)
    raise ConfigError(f"no checkpoint in {os.path.join(workdir, 'checkpoints')} can be restored ({reasons}) — if "
                      "the config changed the model, resume with the run's own (config.json); otherwise move "
                      "checkpoints/ aside to start over")
  return None, None


# ----------------------------------------------------------------------------------------------------------
# Disk space
# ----------------------------------------------------------------------------------------------------------
def checkpoint_bytes(state: Any) -> int:
  """About what a checkpoint of `state` takes on disk: its arrays, plus orbax's metadata (about 2 KiB a leaf)."""
  leaves = jax.tree.leaves(state)
  return sum(x.size * x.dtype.itemsize for x in leaves) + 2048 * len(leaves) + (64 << 10)


class _NoSpaceNoise(pylogging.Filter):
  """Drops the tracebacks of a full disk that orbax's writer threads and their asyncio tasks log (hundreds of
  lines, some at exit): `disk_full_is_one_error` reports it in one line."""

  def filter(self, record: pylogging.LogRecord) -> bool:
    return not ("No space left on device" in record.getMessage()
                and any(f"{os.sep}{name}{os.sep}" in record.pathname for name in ("orbax", "asyncio")))


def committed_step(workdir: str) -> int | None:
  """The newest checkpoint on disk (orbax's own list also holds a save still being written)."""
  folder = os.path.join(os.path.abspath(workdir), "checkpoints")
  steps = [decimal(name) for name in os.listdir(folder)] if os.path.isdir(folder) else []
  return max((step for step in steps if step is not None), default=None)


@contextlib.contextmanager
def disk_full_is_one_error(workdir: str, need: Callable[[], int], mngr: ocp.CheckpointManager):
  """Inside, a full disk anywhere in the workdir (a checkpoint, the history, TensorBoard's events) ends the run with
  a `DiskFullError` naming the folder, what a checkpoint needs (`need()`) and the step it resumes from; the
  checkpoint being written when it happened (orbax's `*.orbax-checkpoint-tmp*`) is removed once `mngr`'s writer
  threads have stopped (removed earlier, a save still under way writes part of it again)."""
  noise = _NoSpaceNoise()
  handler = logging.get_absl_handler()
  handler.addFilter(noise)
  try:
    yield
  except Exception as error:
    if cli.no_space(error) is None:
      raise
    with contextlib.suppress(Exception):  # the save under way fails on the same full disk
      mngr.wait_until_finished()
    remove_partial_checkpoints(workdir)
    raise DiskFullError(workdir, need(), committed_step(workdir)) from None  # the filter stays: tasks log at exit
  handler.removeFilter(noise)


def remove_partial_checkpoints(workdir: str, quiet: float = 0.5, limit: float = 10.0) -> None:
  """Removes the checkpoint orbax was writing when the disk filled (`*.orbax-checkpoint-tmp*`). Orbax stops waiting at
  the first failed write while TensorStore's other writes of that save still run and create their folders again, so
  it removes until none has come back for `quiet` seconds (at most `limit`). A run killed while saving leaves one
  too: `checkpoint_manager` has orbax remove those when the next run starts."""
  pattern = os.path.join(os.path.abspath(workdir), "checkpoints", "*.orbax-checkpoint-tmp*")
  start = last_seen = time.monotonic()
  while time.monotonic() - last_seen < quiet and time.monotonic() - start < limit:
    partials = glob.glob(pattern)
    for partial in partials:
      shutil.rmtree(partial, ignore_errors=True)
    if partials:
      last_seen = time.monotonic()
    time.sleep(0.05)


class DiskFullError(ConfigError):
  """The workdir's disk cannot take the run's next checkpoint (checked before each save, and any ENOSPC)."""

  def __init__(self, workdir: str, need: int, resume_step: int | None):
    free = shutil.disk_usage(workdir).free
    resume = (f"rerun the same command to resume from step {resume_step}" if resume_step is not None
              else "rerun the same command")
    super().__init__(f"no space left on the disk of {workdir} ({cli.human_size(free)} free; a checkpoint of this run "
                     f"needs about {cli.human_size(need)}) — free space there or pass a --workdir on a larger disk, "
                     f"then {resume}")


def ensure_space(workdir: str, need: int, saved: int | None) -> int:
  """Raises DiskFullError before a save that cannot fit (the previous ones are kept until it is committed), and
  returns what a checkpoint needs: `need`, or what the latest one (`saved`) took if that is more (orbax's files of a
  state replicated over several devices can take several times its arrays). What a file takes is the blocks the
  disk gave it (a tmpfs or a disk rounds each of orbax's many small files up to a page or block)."""
  if saved is not None:
    folder = os.path.join(os.path.abspath(workdir), "checkpoints", str(saved))
    need = max(need, sum(max(os.stat(os.path.join(d, f)).st_blocks * 512, os.path.getsize(os.path.join(d, f)))
                         for d, _, files in os.walk(folder) for f in files))
  if shutil.disk_usage(workdir).free < need:
    raise DiskFullError(workdir, need, saved)
  return need


def close_manager(mngr: ocp.CheckpointManager) -> None:
  """Closes `mngr`; a full disk that it reports again (its failed save) was reported already."""
  try:
    mngr.close()
  except Exception as error:
    if cli.no_space(error) is None:
      raise


def save_args(state: Any, data_iter: grain.DatasetIterator) -> ocp.args.Composite:
  return ocp.args.Composite(state=ocp.args.StandardSave(state),
                            data=grain.checkpoint.CheckpointSave(data_iter))
