"""METEOR 1.5 through the jar pycocoevalcap ships, with its protocol and numbers, over a pipe that cannot desync:
line breaks become spaces, every answer has a timeout, a dead JVM or missing Java is a clear error.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import IO, TypeVar

from capjax.metrics.java import find_java, pycocoevalcap_dir

# The protocol: one `SCORE ||| ref ||| ... ||| hyp` line per image answers with statistics; one `EVAL ||| stats
# ||| ...` line answers with each image's score and then the corpus score, from pooled statistics (not a mean).

K = TypeVar("K", bound=Hashable)
_LINE_BREAK = re.compile("\r\n|[\r\n]")
_BATCH = 256  # SCORE lines in flight: their answers (~100 bytes each) stay well below a pipe's buffer


def meteor_jar() -> str:
  jar = os.path.join(pycocoevalcap_dir(), "meteor", "meteor-1.5.jar")
  if not os.path.exists(jar):
    raise RuntimeError(f"{jar} is missing — `pip install --force-reinstall pycocoevalcap==1.2` brings it back")
  return jar


def _clean(text: str) -> str:
  return _LINE_BREAK.sub(" ", text).replace("|||", "")


def score_line(hypothesis: str, references: Sequence[str]) -> str:
  """The SCORE request for one image, formatted as pycocoevalcap formats it."""
  hypothesis = _clean(hypothesis).replace("  ", " ")
  return " ||| ".join(("SCORE", " ||| ".join(_clean(r) for r in references), hypothesis))


class Meteor:
  """A METEOR 1.5 process (`-stdio -l en -norm`, 2 GB heap, as pycocoevalcap runs it).

  `timeout` bounds the wait for each answer, in seconds; loading the paraphrase tables before the first answer
  takes ~10-30 s.
  """

  def __init__(self, jar: str | None = None, java: str | None = None, timeout: float = 300.0,
               max_heap: str = "2G"):
    self.timeout = timeout
    self._lock = threading.Lock()
    self._process: subprocess.Popen[bytes] | None = None
    jar = jar or meteor_jar()
    command = [find_java(java), f"-Xmx{max_heap}", "-Dfile.encoding=UTF-8", "-jar", os.path.basename(jar),
               "-", "-", "-stdio", "-l", "en", "-norm"]
    self._process = subprocess.Popen(command, cwd=os.path.dirname(os.path.abspath(jar)), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    self._answers: queue.Queue[str | None] = queue.Queue()
    self._stderr: collections.deque[str] = collections.deque(maxlen=20)
    self._threads = [threading.Thread(target=_pump, args=(self._process.stdout, self._answers.put), daemon=True),
                     threading.Thread(target=_pump, args=(self._process.stderr, self._log_stderr), daemon=True)]
    for thread in self._threads:
      thread.start()

  def _log_stderr(self, line: str | None) -> None:
    if line:
      self._stderr.append(line)

  def __enter__(self) -> Meteor:
    return self

  def __exit__(self, *exc_info: object) -> None:
    self.close()

  def method(self) -> str:
    return "METEOR"

  def compute_score(self, gts: Mapping[K, Sequence[str]], res: Mapping[K, Sequence[str]]
                    ) -> tuple[float, list[float]]:
    """{image: [references]}, {image: [hypothesis]} -> (corpus METEOR, per-image METEOR), images in `gts` order."""
    if set(gts) != set(res):
      raise ValueError("references and hypotheses cover different images")
    requests = []
    for image, references in gts.items():
      hypotheses = res[image]
      if isinstance(hypotheses, str) or len(hypotheses) != 1:
        raise ValueError(f"image {image!r}: expected a list of exactly one hypothesis, got {hypotheses!r}")
      if not references:
        raise ValueError(f"image {image!r} has no reference caption")
      requests.append(score_line(hypotheses[0], references))
    if not requests:
      raise ValueError("no images to score")
    with self._lock:
      stats = self._ask(requests)
      answers = self._ask(["EVAL ||| " + " ||| ".join(stats)], len(stats) + 1)
    values = [_number(answer, "EVAL") for answer in answers]
    return values[-1], values[:-1]

  def _ask(self, lines: Sequence[str], answers_per_batch: int | None = None) -> list[str]:
    """Sends `lines` in batches and collects one answer per line (or `answers_per_batch` for a single line)."""
    answers: list[str] = []
    for start in range(0, len(lines), _BATCH):
      batch = lines[start:start + _BATCH]
      self._send(batch)
      for _ in range(answers_per_batch or len(batch)):
        answer = self._receive()
        if answer.startswith("Error"):  # the remaining answers would be out of step: this process is done
          self.close(wait=0)
          raise RuntimeError(f"METEOR rejected a request ({answer}); first line of the batch: {batch[0][:200]!r}")
        answers.append(answer)
    return answers

  def _send(self, lines: Sequence[str]) -> None:
    process = self._running()
    try:
      process.stdin.write("".join(line + "\n" for line in lines).encode("utf-8"))
      process.stdin.flush()
    except (BrokenPipeError, OSError) as error:
      raise self._dead() from error

  def _receive(self) -> str:
    try:
      answer = self._answers.get(timeout=self.timeout)
    except queue.Empty:
      self.close(wait=0)
      raise TimeoutError(f"METEOR gave no answer within {self.timeout:g} s; its process was stopped") from None
    if answer is None:
      raise self._dead()
    return answer

  def _running(self) -> subprocess.Popen[bytes]:
    if self._process is None:
      raise RuntimeError("this Meteor was closed; make a new one")
    if self._process.poll() is not None:
      raise self._dead()
    return self._process

  def _dead(self) -> RuntimeError:
    """The error for a JVM that stopped answering: its exit code and last error lines."""
    code = None
    if self._process is not None:
      try:
        code = self._process.wait(timeout=5)
      except subprocess.TimeoutExpired:
        pass
    for thread in self._threads[1:]:
      thread.join(timeout=1.0)
    detail = " | ".join(self._stderr) or "no error output"
    self.close(wait=0)
    return RuntimeError(f"METEOR's JVM stopped (exit code {code}): {detail}")

  def close(self, wait: float = 10.0) -> None:
    """Ends the JVM (idempotent): closes its input, waits up to `wait` seconds for it to exit, then kills it."""
    process, self._process = self._process, None
    if process is None:
      return
    try:
      process.stdin.close()
    except OSError:
      pass
    try:
      process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
    for stream in (process.stdout, process.stderr):
      stream.close()

  def __del__(self) -> None:
    if getattr(self, "_process", None) is not None:
      self.close()


def _pump(stream: IO[bytes], put: Callable[[str | None], None]) -> None:
  """Reader thread: every line of `stream` to `put`, then None at the end."""
  try:
    for raw in iter(stream.readline, b""):
      put(raw.decode("utf-8", errors="replace").strip())
  except (OSError, ValueError):
    pass
  put(None)


def _number(answer: str, request: str) -> float:
  try:
    return float(answer.strip())
  except ValueError:
    raise RuntimeError(f"METEOR answered {answer!r} to {request}, not a score") from None
