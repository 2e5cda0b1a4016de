"""The recaptioning output as a journal: one JSON line per example in index order, appended a whole batch at a time
(flush, then fsync), so that a killed job leaves complete lines and at most one torn last line; a rerun reads the
file, cuts the torn line off and continues after the last complete index. The settings sidecar (`F.settings.json`,
written before the first line) makes a rerun with another workdir, step, dataset, split or search into the same file
an error instead of a file whose lines disagree. Standard library only: it is read by tests and tools without JAX."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from capjax import files

SETTINGS_SUFFIX = ".settings.json"


class JournalError(ValueError):
  """An output file this job cannot continue; the message says what to do."""


def settings_path(output: str) -> str:
  return output + SETTINGS_SUFFIX


def settings_mismatch(output: str, wanted: Mapping[str, Any], ignore: Sequence[str] = ()) -> str | None:
  """How the settings saved beside `output` differ from `wanted` (`key: old -> new, ...`); None when they match or
  none are saved (`ignore`: keys not compared). A JournalError when `output` holds lines without settings (not this
  command's file, or one whose sidecar was removed: continuing it could mix two models' captions)."""
  path = settings_path(output)
  if not os.path.exists(path):
    if os.path.exists(output) and os.path.getsize(output):
      raise JournalError(f"--output={output} exists and has no {os.path.basename(path)} beside it, so it is not a "
                         "recaptioning this command can continue — remove it, or give another --output")
    return None
  found, wrong = files.json_object(path)
  if found is None:
    raise JournalError(f"{wrong} — remove it and {output}, and run again")
  changed = sorted(k for k in set(wanted) | set(found) if k not in ignore and found.get(k) != wanted.get(k))
  return ", ".join(f"{k}: {found.get(k)!r} -> {wanted.get(k)!r}" for k in changed) or None


def write_settings(output: str, wanted: Mapping[str, Any]) -> None:
  """The sidecar, written atomically before the first line (a rerun then compares against it)."""
  if os.path.exists(settings_path(output)):
    return
  with files.writing(settings_path(output), flag="--output") as f:
    f.write(json.dumps(dict(wanted), indent=2, sort_keys=True) + "\n")


@dataclasses.dataclass(frozen=True)
class Done:
  """What a journal holds: its complete lines' count, the index after the last one (None: no line yet), and the
  length in bytes of its complete lines (a torn last line starts there)."""

  lines: int
  next_index: int | None
  complete_bytes: int
  torn: bool


def read_done(output: str) -> Done:
  """The complete lines of `output` (missing: none). A line that is not JSON, or an index out of order, before the
  last line is a JournalError (the file was edited or two jobs wrote it); a last line without its newline or not
  JSON is torn (a job killed while writing) and is cut off by `cut_torn`."""
  if not os.path.exists(output):
    return Done(0, None, 0, False)
  with open(output, "rb") as f:
    data = f.read()
  complete, lines, last = 0, 0, None
  rows = data.split(b"\n")
  for number, row in enumerate(rows, 1):
    is_last = number == len(rows)  # the text after the last newline: empty, or a line killed mid-write
    if is_last and not row:
      break
    try:
      if is_last:
        raise ValueError("no newline")
      index = json.loads(row)["index"]
      if not isinstance(index, int) or (last is not None and index <= last):
        raise ValueError(f"index {index!r} after {last}")
    except (ValueError, KeyError, TypeError) as error:
      if is_last or number == len(rows) - 1 and rows[-1] == b"":
        return Done(lines, None if last is None else last + 1, complete, True)
      raise JournalError(f"line {number} of --output={output} is not a recaptioning line in order ({error}) — "
                         "remove the file to start again, or give another --output") from None
    complete += len(row) + 1
    lines += 1
    last = index
  return Done(lines, None if last is None else last + 1, complete, False)


def cut_torn(output: str, done: Done) -> None:
  """Cuts a torn last line off, so that the next append starts on a line of its own."""
  if done.torn:
    with open(output, "r+b") as f:
      f.truncate(done.complete_bytes)
      f.flush()
      os.fsync(f.fileno())


def line(index: int, captions: Sequence[str], scores: Sequence[float], key: str | None = None) -> str:
  """One example's line: its index in the full split, its key where the dataset has one, the captions best first and
  their scores (rounded: six digits say as much as the float32 search computed)."""
  record: dict[str, Any] = {"index": index}
  if key is not None:
    record["key"] = key
  record["captions"] = list(captions)
  record["scores"] = [round(float(s), 6) for s in scores]
  return json.dumps(record, ensure_ascii=False) + "\n"


def append(output: str, lines: Sequence[str]) -> None:
  """Appends a batch's lines and makes them durable before the next batch is decoded: a kill after this call never
  loses them, a kill during it leaves at most one torn line."""
  with open(output, "a", encoding="utf-8") as f:
    f.write("".join(lines))
    f.flush()
    os.fsync(f.fileno())


def read_lines(output: str) -> list[dict[str, Any]]:
  """The complete lines of a journal, parsed (the TFDS copy and the tests read them)."""
  done = read_done(output)
  with open(output, "rb") as f:
    data = f.read(done.complete_bytes)
  return [json.loads(row) for row in data.split(b"\n") if row]
