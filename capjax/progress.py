"""Progress of a long job (a dataset build, a recaptioning) that tells the truth: what is done of a total the input
already told (rows, or shards where the rows are not known before reading them; never a guess), its rate, the ETA,
failures so far, and the items of another unit seen along the way with their rate (a shard's images), as one absl
log line at most every `every` seconds, and a last line when it ends. Without a total the line says so, and gives no
share and no ETA. The library's (layer 0) so that both the builders and `capjax.recaption` log it."""

from __future__ import annotations

import time
from collections.abc import Callable

from absl import logging


def _clock_text(seconds: float) -> str:
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _rate_text(rate: float) -> str:
  """Whole numbers from 10 up; two significant digits under it (a build of large shards does 0.05 shards/s)."""
  return f"{rate:,.0f}" if rate >= 10 or rate == 0 else f"{rate:.2g}"


class Progress:
  """Counts `unit`s done and failed against `total` (None: not known before reading); `update` logs a line when
  `every` seconds have passed since the last one, `finish` logs the last. With `items` named (say "images"), the
  line also says how many were seen and their rate (`update`'s `items`). `failed` is the failures' wording.
  `clock` and `log` are for tests."""

  def __init__(self, name: str, total: int | None, every: float = 30.0, clock: Callable[[], float] = time.monotonic,
               log: Callable[[str], None] = lambda line: logging.info("%s", line), unit: str = "rows",
               items: str = "", failed: str = "failures so far"):
    self.name, self.total, self.every = name, total, every
    self.unit, self.items_unit, self.failed = unit, items, failed
    self.done = self.failures = self.items = 0
    self._clock, self._log = clock, log
    self._start = self._last = clock()

  def update(self, done: int = 1, failures: int = 0, items: int = 0) -> None:
    self.done += done
    self.failures += failures
    self.items += items
    now = self._clock()
    if now - self._last >= self.every:
      self._last = now
      self._log(self.line(now))

  def finish(self) -> None:
    self._log(self.line(self._clock()))

  def line(self, now: float) -> str:
    """`NAME: DONE/TOTAL UNIT (P%), R UNIT/s[, N ITEMS at R ITEMS/s], ETA H:MM:SS, F FAILED`; without a total,
    `NAME: DONE UNIT (total not known before reading), R UNIT/s[, ...], F FAILED`."""
    elapsed = now - self._start
    rate = self.done / elapsed if elapsed > 0 else 0.0
    parts = [f"{self.name}: {self.done:,} {self.unit} (total not known before reading)"]
    if self.total is not None:
      share = 100 * self.done / self.total if self.total else 100.0
      parts = [f"{self.name}: {self.done:,}/{self.total:,} {self.unit} ({share:.1f}%)"]
    parts.append(f"{_rate_text(rate)} {self.unit}/s")
    if self.items_unit:
      items_rate = self.items / elapsed if elapsed > 0 else 0.0
      parts.append(f"{self.items:,} {self.items_unit} at {_rate_text(items_rate)} {self.items_unit}/s")
    if self.total is not None:
      left = max(self.total - self.done, 0)
      parts.append("ETA " + (_clock_text(left / rate) if rate else ("0:00:00" if not left else "unknown")))
    return ", ".join([*parts, f"{self.failures:,} {self.failed}"])


def log_shard(name: str, number: int, total: int, checked: int, failed: int, seconds: float,
              unit: str = "images", verb: str = "checked") -> None:
  """A Beam worker's line for one shard read (each worker sees only its own shards, so it tells no ETA):
  `NAME: shard N of TOTAL read: C UNIT VERB, F failed, R UNIT/s` (CPU seconds of the read)."""
  rate = f"{checked / seconds:,.0f}" if seconds > 0 else "-"
  logging.info("%s: shard %d of %d read: %d %s %s, %d failed, %s %s/s", name, number + 1, total, checked, unit, verb,
               failed, rate, unit)
