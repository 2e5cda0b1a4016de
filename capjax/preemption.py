"""Stopping a run cleanly on SIGTERM or SIGINT (a preempted VM, a cluster's time limit, Ctrl-C): the first signal
only asks the train loop to stop after its current step; a second one ends the process at once."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


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
