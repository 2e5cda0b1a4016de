"""Progress of a long build that tells the truth: rows done of a total the input already told (not a guess), rows/s,
ETA and failures so far, as one absl log line at most every `every` seconds, and a last line when it ends."""

from __future__ import annotations

import time
from collections.abc import Callable

from absl import logging


def _clock_text(seconds: float) -> str:
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
  """Counts rows done and failed against `total`; `update` logs a line when `every` seconds have passed since the
  last one, `finish` logs the last. `clock` and `log` are for tests."""

  def __init__(self, name: str, total: int, every: float = 30.0, clock: Callable[[], float] = time.monotonic,
               log: Callable[[str], None] = lambda line: logging.info("%s", line)):
    self.name, self.total, self.every = name, total, every
    self.done = self.failures = 0
    self._clock, self._log = clock, log
    self._start = self._last = clock()

  def update(self, done: int = 1, failures: int = 0) -> None:
    self.done += done
    self.failures += failures
    now = self._clock()
    if now - self._last >= self.every:
      self._last = now
      self._log(self.line(now))

  def finish(self) -> None:
    self._log(self.line(self._clock()))

  def line(self, now: float) -> str:
    """`NAME: DONE/TOTAL rows (P%), R rows/s, ETA H:MM:SS, F failures so far`."""
    elapsed = now - self._start
    rate = self.done / elapsed if elapsed > 0 else 0.0
    left = max(self.total - self.done, 0)
    eta = _clock_text(left / rate) if rate else ("0:00:00" if not left else "unknown")
    share = 100 * self.done / self.total if self.total else 100.0
    return (f"{self.name}: {self.done:,}/{self.total:,} rows ({share:.1f}%), {rate:,.0f} rows/s, ETA {eta}, "
            f"{self.failures:,} failures so far")
