"""Stopping a run cleanly on SIGTERM or SIGINT (a preempted VM, a cluster's time limit, Ctrl-C): the first signal
only asks the train loop to stop after a step and save it; a second one ends a single process at once.

`StopRequest` records the signals of one process. `AgreedStop` decides, after each step, whether the loop stops
there, with the same answer on every process of a multi-host job: they write one checkpoint together, so they must
all stop at one step although a preemption notice reaches one host only (JAX's preemption sync point; see there).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Any

import numpy as np
from absl import logging

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_parent(parent: int) -> None:
  """Makes this forked worker end when its parent `parent` (a pid) does, however the parent ends: give it as a
  process pool's initializer, with `os.getpid()` of the parent.

  A forked pool worker holds both ends of the pool's pipes, so it never reads end-of-file when its parent dies of
  a signal: it would wait for work forever. SIGTERM (a preempted VM, SLURM's `scancel`) ends a Python process
  without running its `finally` blocks, and SIGKILL ends it without anything, so only the kernel can tell the
  worker: Linux sends it SIGKILL when the parent dies (`PR_SET_PDEATHSIG`). Elsewhere this does nothing.
  """
  if sys.platform.startswith("linux"):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died between the fork and prctl: nobody would signal this worker
      os._exit(1)


class StopRequest:
  """While entered, the first SIGTERM or SIGINT is recorded (`requested`) instead of ending the process.

  The loop polls `requested` after each step, saves a checkpoint and returns. The first signal also puts both
  signals back to the OS default action (terminate): a second one ends the process at once, even while the main
  thread is blocked in C code (an XLA computation, a checkpoint write) where no Python handler could run. The
  checkpoint being written is then lost, and the next start resumes from the one before, as after SIGKILL.

  Python handles signals in the main thread only: entered from another thread, it installs nothing and signals
  keep their previous handlers. On exit the previous handlers come back, so in-process callers (tests, notebooks)
  keep theirs.
  """

  def __init__(self, when: str = "after the current step", signals: tuple[signal.Signals, ...] = SIGNALS):
    self.when = when  # when the loop stops, for the message the first signal prints
    self.signals = signals
    self.signum: int | None = None
    self._previous: dict[int, Any] = {}

  @property
  def requested(self) -> bool:
    return self.signum is not None

  @property
  def name(self) -> str:
    return signal.Signals(self.signum).name if self.signum is not None else ""

  def __enter__(self) -> StopRequest:
    if threading.current_thread() is threading.main_thread():
      self._previous = {s: signal.getsignal(s) for s in self.signals}
      for s in self.signals:
        signal.signal(s, self._handle)
    return self

  def __exit__(self, *exc_info) -> None:
    for s, handler in self._previous.items():
      # None: a handler installed outside Python, which cannot be put back; the default is the closest.
      signal.signal(s, signal.SIG_DFL if handler is None else handler)
    self._previous = {}

  def _handle(self, signum: int, frame) -> None:
    del frame
    self.signum = signum
    for s in self.signals:
      signal.signal(s, signal.SIG_DFL)
    # os.write, not logging or print: the handler may run between two writes of the main thread to the same
    # buffered stream, and a buffered writer refuses such reentrant calls.
    os.write(2, f"\n{self.name} received: saving a checkpoint and stopping {self.when}; send it again to stop "
                f"at once (that checkpoint is then lost)\n".encode())


class AgreedStop:
  """Whether the train loop stops after a step: the same answer on every process, so that all save that step.

  One process: a `StopRequest` on SIGTERM and SIGINT, and the loop stops after the step during which the first one
  came (a second one ends the process at once).

  Several processes (`jax.distributed`): a preemption notice (SIGTERM) reaches one host, or several hosts a step
  apart, and every process must save the same step and exit.
    - SIGTERM belongs to JAX's preemption service. `jax.distributed.initialize` installs a C++ SIGTERM handler (the
      preemption notifier, polled about once a second) which tells the coordination service; the service then has
      every process report the last step it passed to `multihost_utils.reached_preemption_sync_point`, and sets
      the sync point to the largest + 1, the next step of the fastest process. Every process calls it after every
      step (`after`; it reads a number under a lock, no device round trip), so each one sees True at that same step.
      orbax's `CheckpointManager.save` consults the same point for the same step, so the save happens there. A
      Python SIGTERM handler would replace JAX's, so the `StopRequest` takes SIGINT only: a second SIGTERM does not
      end the process early (JAX's handler keeps catching it); SIGKILL does, or Ctrl-C twice.
    - SIGINT (Ctrl-C; srun forwards it to every task) is recorded by the `StopRequest` and agreed at log steps by
      an all-gather, where the loop already waits for the step's metrics (elsewhere it would stall the
      asynchronous dispatch of every step). With the preemption service off (`jax_enable_preemption_service`),
      SIGTERM is handled the same way.
  Limits of the sync point: the steps are counted by their global number, as orbax counts them, so a notice that
  comes before the processes registered the step they resume from (`__init__`, after the restore) sets a point
  the loop never reaches: that job ends at its kill and resumes from its last periodic checkpoint. A point past
  the last step ends nothing: the run finishes, and a kill during its final evaluation leaves the last step saved.
  """

  def __init__(self, step: int):
    """`step`: the step the loop starts from, the same on every process (registered with the sync point)."""
    import jax  # noqa: PLC0415 (the signal handling above needs no jax)
    self.processes = jax.process_count()
    reached = _register(step) if self.processes > 1 else None
    self.sync_point = reached is not None
    self.preempted = False
    if reached:  # a notice just before, with the point set at this step: stop after the first one, all together
      self._preempted_at(step)
    self.request = StopRequest(
        "after the current step" if self.processes == 1 else "after the next log step (all processes together)",
        (signal.SIGINT,) if self.sync_point else SIGNALS)

  def __enter__(self) -> AgreedStop:
    self.request.__enter__()
    return self

  def __exit__(self, *exc_info) -> None:
    self.request.__exit__(*exc_info)

  @property
  def requested(self) -> bool:
    """Whether this process received a signal that it handles itself (not JAX's preemption notice)."""
    return self.request.requested

  @property
  def name(self) -> str:
    """What stopped the run, for its last message."""
    if self.preempted:
      return "a preemption notice (SIGTERM to a process of the job)"
    return self.request.name or "a signal to another process"

  def after(self, step: int, log_step: bool) -> bool:
    """Whether every process stops after `step` (called by every process after every step, in order)."""
    if self.processes == 1:
      return self.request.requested
    from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
    if self.preempted:
      return True
    if self.sync_point and multihost_utils.reached_preemption_sync_point(step):
      self._preempted_at(step)
      return True
    if not log_step:
      return False
    return bool(np.any(multihost_utils.process_allgather(np.int32(self.request.requested))))

  def _preempted_at(self, step: int) -> None:
    self.preempted = True
    logging.warning("Preemption sync point at step %d: all %d processes save it and stop", step, self.processes)


def _register(step: int) -> bool | None:
  """Registers `step` with JAX's preemption sync point: whether it is the point, or None where the preemption
  service is off."""
  from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
  try:
    return multihost_utils.reached_preemption_sync_point(step)
  except RuntimeError:  # jax_enable_preemption_service=False: no sync manager (orbax reads it the same way)
    return None
