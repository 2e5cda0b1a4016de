"""Multi-host start-up and synchronisation: cluster detection, a guarded `jax.distributed.initialize`, and the one
barrier (`sync`) that processes wait at before reading what process 0 wrote."""

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


def maybe_initialize(mode: str) -> None:
  """Calls `jax.distributed.initialize()`: 'auto' when a cluster is detected, 'on' always, 'off' never."""
  if mode not in MODES:
    raise ValueError(f"distributed mode {mode!r}: use one of {MODES}")
  if mode == "off" or (mode == "auto" and not cluster_detected()):
    return
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
    raise NoClusterError(
        f"--distributed={mode} but no cluster was detected ({error}) — set JAX_COORDINATOR_ADDRESS=host:port, "
        "JAX_NUM_PROCESSES and JAX_PROCESS_ID in every process (launch/multiprocess_cpu.sh does), run under SLURM "
        "or on a Cloud TPU pod slice, or use --distributed=auto for one process") from error
  logging.info("JAX distributed: process %d of %d", jax.process_index(), jax.process_count())


def sync(name: str) -> None:
  """Waits until every process reaches the barrier `name` (a no-op in a single process)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
    multihost_utils.sync_global_devices(name)
