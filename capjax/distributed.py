"""Multi-host start-up and synchronisation: cluster detection, a guarded `jax.distributed.initialize`, and the one
barrier (`sync`) that processes wait at before reading what process 0 wrote, and `from_process_zero`, process 0's
answer for every process."""

from __future__ import annotations

import os

import jax
from absl import logging

MODES = ("auto", "on", "off")
# Any of these set means the launcher started several processes that must find each other.
CLUSTER_ENV = ("JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID", "TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS")


def cluster_detected() -> bool:
  """True under Cloud TPU pod slices, SLURM, or an explicit `JAX_COORDINATOR_ADDRESS`."""
  return any(os.environ.get(k) for k in CLUSTER_ENV)


def maybe_initialize(mode: str) -> None:
  """Calls `jax.distributed.initialize()`: 'auto' when a cluster is detected, 'on' always, 'off' never."""
  if mode not in MODES:
    raise ValueError(f"distributed mode {mode!r}: use one of {MODES}")
  if mode == "off" or (mode == "auto" and not cluster_detected()):
    return
  if jax.config.jax_platforms == "cpu" or os.environ.get("JAX_PLATFORMS") == "cpu":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes need a collectives backend
  if os.environ.get("JAX_COORDINATOR_ADDRESS") and os.environ.get("JAX_NUM_PROCESSES"):
    jax.distributed.initialize(coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
                               num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
                               process_id=int(os.environ["JAX_PROCESS_ID"]))
  else:
    jax.distributed.initialize()
  logging.info("JAX distributed: process %d of %d", jax.process_index(), jax.process_count())


def sync(name: str) -> None:
  """Waits until every process reaches the barrier `name` (a no-op in a single process)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
    multihost_utils.sync_global_devices(name)


def from_process_zero(value: int) -> int:
  """Process 0's `value` on every process (itself in a single process): a decision only process 0 can make, such
  as whether it took the workdir's lock, that all processes must follow."""
  if jax.process_count() == 1:
    return value
  import numpy as np  # noqa: PLC0415
  from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
  return int(multihost_utils.broadcast_one_to_all(np.int32(value)))
