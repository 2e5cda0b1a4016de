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


class NoClusterError(ValueError):
  """`--distributed=on` where jax.distributed finds no cluster to join; the message says what to set."""


def cluster_detected() -> bool:
  """True under Cloud TPU pod slices, SLURM, or an explicit `JAX_COORDINATOR_ADDRESS`."""
  return any(os.environ.get(k) for k in CLUSTER_ENV)


def jax_detects_a_cluster() -> bool:
  """Whether one of jax's own cluster environments (SLURM, Open MPI, Kubernetes, Cloud TPU, ...) is present, as
  `jax.distributed.initialize()` would find it without arguments (True when jax's detection cannot be asked)."""
  try:
    from jax._src import clusters  # noqa: PLC0415 (jax exposes its detection only here)
    return any(not env.opt_in_only_method and env.is_env_present()
               for env in clusters.ClusterEnv._cluster_types)  # noqa: SLF001 (the list of jax's detectors)
  except (ImportError, AttributeError):
    return True


def _no_cluster(mode: str, why: str) -> NoClusterError:
  return NoClusterError(
      f"--distributed={mode} but no cluster was detected ({why}) — set JAX_COORDINATOR_ADDRESS=host:port, "
      "JAX_NUM_PROCESSES and JAX_PROCESS_ID in every process (launch/multiprocess_cpu.sh does), run under SLURM or "
      "on a Cloud TPU pod slice, or use --distributed=auto for one process")


def maybe_initialize(mode: str) -> None:
  """Calls `jax.distributed.initialize()`: 'auto' when a cluster is detected, 'on' always, 'off' never. 'on' where
  neither capjax nor jax detects a cluster is a NoClusterError, before jax is touched."""
  if mode not in MODES:
    raise ValueError(f"distributed mode {mode!r}: use one of {MODES}")
  if mode == "off" or (mode == "auto" and not cluster_detected()):
    return
  if not cluster_detected() and not jax_detects_a_cluster():
    raise _no_cluster(mode, "no coordinator address, SLURM, MPI, Kubernetes or Cloud TPU environment")
  collectives = jax.config.jax_cpu_collectives_implementation
  if jax.config.jax_platforms == "cpu" or os.environ.get("JAX_PLATFORMS") == "cpu":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes need a collectives backend
  try:
    if os.environ.get("JAX_COORDINATOR_ADDRESS") and os.environ.get("JAX_NUM_PROCESSES"):
      jax.distributed.initialize(coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
                                 num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
                                 process_id=int(os.environ["JAX_PROCESS_ID"]))
    else:
      jax.distributed.initialize()
  except ValueError as error:  # jax's own detection found nothing: "coordinator_address should be defined."
    jax.config.update("jax_cpu_collectives_implementation", collectives)  # this process goes on alone, or stops
    if cluster_detected():
      raise
    raise _no_cluster(mode, str(error)) from error
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
