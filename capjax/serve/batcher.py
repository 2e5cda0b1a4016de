"""Concurrent requests decoded together: request threads put one image's pixels on a queue and wait; one worker
takes up to `max_batch` of them, or what came within `max_wait_ms` of the first, and makes one decode call.

The batch is padded to the next of a few fixed sizes (powers of two up to `max_batch`, and `max_batch`): each size a
jitted function sees compiles once, so the sizes are few, and `warm` compiles them all before the first request.
One worker, because the decode uses every core itself: two decodes at once would only share them.
"""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
import time
from collections.abc import Callable

import numpy as np
from absl import logging

Decode = Callable[[np.ndarray], tuple[list[list[str]], np.ndarray]]


def bucket_sizes(max_batch: int) -> list[int]:
  """The batch sizes a decode is called with: 1, 2, 4, ... below `max_batch`, then `max_batch`."""
  sizes = [1]
  while sizes[-1] * 2 < max_batch:
    sizes.append(sizes[-1] * 2)
  return sorted({*sizes, max_batch})


@dataclasses.dataclass
class _Request:
  pixels: np.ndarray
  done: threading.Event = dataclasses.field(default_factory=threading.Event)
  result: list[tuple[str, float]] | None = None
  error: BaseException | None = None


class DecodeError(RuntimeError):
  """The decode call failed (a bug, or the device): the request gets a 500, the server goes on."""


class Batcher:
  """The queue and its one worker thread. `caption(pixels)` blocks until its batch is decoded."""

  def __init__(self, decode: Decode, max_batch: int, max_wait_ms: float):
    self._decode, self.max_batch, self._max_wait = decode, max_batch, max_wait_ms / 1000
    self.sizes = bucket_sizes(max_batch)
    self._queue: queue.Queue[_Request | None] = queue.Queue()
    self._lock = threading.Lock()
    self._stats = {"images": 0, "decode_calls": 0, "batch_sizes": collections.Counter()}
    self._worker = threading.Thread(target=self._run, name="capjax-serve-batcher", daemon=True)

  def warm(self, pixels: np.ndarray) -> int:
    """One decode of each padded size, so that no request waits for a compilation; k, the captions per image."""
    for size in self.sizes:
      _, scores = self._decode(np.repeat(pixels[None], size, axis=0))
    return int(scores.shape[1])

  def start(self) -> None:
    self._worker.start()

  def stop(self, timeout: float = 5.0) -> None:
    """Ends the worker after the requests already queued (put after them)."""
    self._queue.put(None)
    self._worker.join(timeout)

  def caption(self, pixels: np.ndarray) -> list[tuple[str, float]]:
    """The k (caption, score) of one image, best first, decoded in whichever batch takes it."""
    request = _Request(pixels)
    self._queue.put(request)
    request.done.wait()
    if request.error is not None:
      raise DecodeError(str(request.error)) from request.error
    return request.result

  def stats(self) -> dict:
    with self._lock:
      return {**self._stats, "batch_sizes": {str(k): v for k, v in sorted(self._stats["batch_sizes"].items())}}

  def _take(self) -> tuple[list[_Request], bool]:
    """The next batch (blocking for its first request) and whether the stop mark came after it."""
    first = self._queue.get()
    if first is None:
      return [], True
    batch, deadline = [first], time.monotonic() + self._max_wait
    while len(batch) < self.max_batch:
      try:
        request = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
      except queue.Empty:
        break
      if request is None:
        return batch, True
      batch.append(request)
    return batch, False

  def _run(self) -> None:
    stopping = False
    while not stopping:
      batch, stopping = self._take()
      if batch:
        self._decode_batch(batch)

  def _decode_batch(self, batch: list[_Request]) -> None:
    size = next(s for s in self.sizes if s >= len(batch))
    pixels = np.stack([r.pixels for r in batch])
    if size > len(batch):  # padded with copies of the first picture: any picture will do, it is thrown away
      pixels = np.concatenate([pixels, np.repeat(pixels[:1], size - len(batch), axis=0)])
    try:
      captions, scores = self._decode(pixels)
    except Exception as error:  # noqa: BLE001 (each waiting request answers it as a 500; the worker goes on)
      logging.error("decode of a batch of %d failed: %s: %s", len(batch), type(error).__name__, error)
      for request in batch:
        request.error = error
        request.done.set()
      return
    with self._lock:
      self._stats["images"] += len(batch)
      self._stats["decode_calls"] += 1
      self._stats["batch_sizes"][len(batch)] += 1
    for i, request in enumerate(batch):
      request.result = [(text, float(score)) for text, score in zip(captions[i], scores[i])]
      request.done.set()
