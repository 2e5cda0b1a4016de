"""What a training run tells its user between evaluations: the line and history record of each log step (the means
of the steps since the last, their rate and ETA), the first step's compilation time, and the stop on a diverged loss.

Apart from `capjax.train`'s loop so that the loop reads as the steps of a run; it needs nothing of capjax but the
error type of a bad config.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import jax
import numpy as np
from absl import logging

from capjax.config_util import ConfigError

HISTORY_FILENAME = "train_history.jsonl"  # a record per log step, for the loss curve


class DivergedError(ConfigError):
  """The training loss is no longer a number (NaN or infinite): every later step would be as well."""

  def __init__(self, step: int, loss: float):
    super().__init__(f"the training loss is {loss} at step {step}: the run diverged, and no state after it is saved "
                     "— train again in another --workdir with a lower --config.optimizer.learning_rate or with "
                     "--config.optimizer.grad_clip_norm set (--config.debug_nans=True names the operation)")


def interval_means(interval: list[dict[str, jax.Array]], step: int) -> dict[str, float]:
  """The mean of each metric but `tokens` (loss, gradient norm, SCST's rewards) of the steps `interval` (up to `step`,
  since the last log: one batch's loss is noise), in one transfer; a DivergedError at the first that is not finite."""
  values = jax.device_get(interval)
  for offset, v in enumerate(values):
    if not math.isfinite(float(v["loss"])):
      raise DivergedError(step - len(values) + 1 + offset, float(v["loss"]))
  keys = [k for k in values[0] if k != "tokens"] if values else ["loss", "grad_norm"]
  return {k: float(np.mean([v[k] for v in values])) if values else math.nan for k in keys}


def format_eta(seconds: float) -> str:
  seconds = int(max(seconds, 0))
  return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_metrics(metrics: dict[str, float]) -> str:
  return "  ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))


def truncate_history(path: str, step: int) -> None:
  """Drops log records past `step`: a run killed after logging them repeats those steps when it resumes."""
  if not os.path.exists(path):
    return
  with open(path, encoding="utf-8") as f:
    lines = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.writelines(lines)
  os.replace(path + ".tmp", path)


class RunLog:
  """The log of a run from `step` to `total`: `train_history.jsonl` in `workdir` (written by the first process only,
  cut back to `step` on resume), the metric writer's scalars, and the console's lines. The rates it logs leave the
  compilation out: they count from the first step's end (`compiled`)."""

  def __init__(self, workdir: str, step: int, total: int, batch_size: int, writer: Any):
    self.path = os.path.join(workdir, HISTORY_FILENAME)
    self.write = jax.process_index() == 0
    self.total, self.batch_size, self.writer = total, batch_size, writer
    if self.write:
      truncate_history(self.path, step)
    self.t_last, self.step_last = time.time(), step

  def log_step(self, step: int, interval: list[dict[str, jax.Array]]) -> None:
    """The means of the steps `interval` (up to `step`): a DivergedError, or their record and line."""
    m = interval_means(interval, step)
    now = time.time()
    steps_per_s = (step - self.step_last) / max(now - self.t_last, 1e-9)
    record = {"step": step, **m, "examples_per_s": steps_per_s * self.batch_size}
    self.writer.write_scalars(step, {k: v for k, v in record.items() if k != "step"})
    logging.info("step %d/%d  loss %.4f  %.1f examples/s  ETA %s", step, self.total, record["loss"],
                 record["examples_per_s"], format_eta((self.total - step) / max(steps_per_s, 1e-9)))
    if self.write:
      with open(self.path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    self.t_last, self.step_last = now, step

  def compiled(self, step: int, metrics: dict[str, jax.Array]) -> None:
    """The first step's line once its `metrics` are ready, at once rather than after log_every steps: the compilation
    is over."""
    metrics["loss"].block_until_ready()
    now = time.time()
    logging.info("step %d/%d  compiled the train step and ran it in %.1f s", step, self.total, now - self.t_last)
    self.t_last, self.step_last = now, step
