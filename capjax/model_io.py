"""Saving and loading an auxiliary model's parameters: ERG's generator and dual encoder, the style classifier,
converted text models and Inception-ResNet-v2 weights. The one module that constructs orbax checkpointers
(`tests/test_architecture.py` fails on any other; `capjax.train`'s CheckpointManager is the captioner's own).

A saved model is a directory: each parameter tree an orbax checkpoint in its own folder (`variables/`, say), the
description files beside it (JSON text such as `config.json`), and files copied as they are (tokenizer files).
`save` writes them all into a temporary folder inside the directory, then renames them into place, the old
description files removed first and the new ones renamed last: a directory whose description is there is whole,
and a save cut short leaves no description of parameters it did not write. `restore` reads a tree back onto the
shapes and dtypes of a target and refuses one of other shapes (orbax restores a stored array whole even where the
target's shape differs). Nothing is pickled: orbax stores arrays and their tree, the descriptions are text.

Errors are `ParamsError`s whose message says what is wrong; the callers add what to do with their own model.
`settled_event_loops` is the one way every restore (these trees, and `capjax.checkpoints`' train states) reads: a
damaged checkpoint is then one error, without TensorStore's tracebacks of reads that ended after orbax's loop closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

STAGING_PREFIX = ".saving-"
SETTLE_SECONDS = 300.0  # the longest a closing event loop waits for its pending tasks (a restore's remaining reads)


class _SettlingLoop(asyncio.SelectorEventLoop):
  """An event loop that lets its pending tasks finish before it closes.

  Orbax runs each restore's coroutine in a fresh loop (`asyncio_utils.run_sync`: `run_until_complete`, then
  `close`). When one of its reads fails (a garbled `manifest.ocdbt`: every array's read fails), `asyncio.gather`
  raises at the first failure while the other reads' tasks still await TensorStore futures, and the loop is closed
  under them. Each of those futures then completes in a TensorStore thread, whose callback calls the closed loop's
  `call_soon_threadsafe`: `RuntimeError: Event loop is closed`, which TensorStore can only report through
  `sys.unraisablehook`: one traceback a read, dozens on stderr beside the command's one error line.
  Waiting for those tasks here lets every callback reach a loop that still runs."""

  def close(self) -> None:
    if not self.is_closed() and not self.is_running():
      pending = asyncio.all_tasks(self)
      if pending:  # their outcomes are the restore's own failure, already raised: awaited only to be delivered
        self.run_until_complete(asyncio.wait(pending, timeout=SETTLE_SECONDS))
    super().close()


class _SettlingPolicy(asyncio.DefaultEventLoopPolicy):
  def new_event_loop(self) -> asyncio.AbstractEventLoop:
    return _SettlingLoop()


@contextlib.contextmanager
def settled_event_loops():
  """Inside, every new asyncio event loop (orbax makes one for each restore) finishes its pending tasks before it closes
  (`_SettlingLoop`), so that a failed restore leaves no TensorStore read to report on a closed loop. The policy is
  the process's while inside: restores run in the main thread, one at a time."""
  previous = asyncio.get_event_loop_policy()
  asyncio.set_event_loop_policy(_SettlingPolicy())
  try:
    yield
  finally:
    asyncio.set_event_loop_policy(previous)


class WeightsError(ValueError):
  """A model directory that is not a whole conversion (a converted text model, Inception-ResNet-v2 weights): the
  message says what is wrong and what to do. The callers raise it; it lives here, under both, to be caught once."""


class ParamsError(ValueError):
  """Parameters that cannot be saved or restored: the message says what is wrong (the caller says what to do)."""


class RestoreError(ParamsError):
  """The checkpoint could not be read: missing, cut short, or not an orbax checkpoint of this tree (`cause`)."""

  def __init__(self, path: pathlib.Path, cause: BaseException):
    super().__init__(f"{path} could not be restored ({type(cause).__name__}: {' '.join(str(cause).split())[:200]})")
    self.path, self.cause = path, cause


class ShapeError(ParamsError):
  """A restored parameter whose place or shape the target does not have: `keys` (its path in the tree), `got` (the
  stored shape, None when nothing is stored there) and `want` (the target's, None when it has no such parameter)."""

  def __init__(self, path: pathlib.Path, keys: tuple[str, ...], got: tuple[int, ...] | None,
               want: tuple[int, ...] | None):
    where = "/".join(keys)
    super().__init__(f"{path} has no {where} (the target's has shape {want})" if got is None else
                     f"{path} holds {where} of shape {got} where the target has "
                     f"{want if want is not None else 'no such parameter'}")
    self.path, self.keys, self.got, self.want = path, keys, got, want


def save(directory: str | os.PathLike[str], trees: Mapping[str, Any], texts: Mapping[str, str] | None = None,
         copies: Mapping[str, str | os.PathLike[str]] | None = None) -> pathlib.Path:
  """Writes each of `trees` ({folder: parameter tree}) as an orbax checkpoint, each of `copies` ({name: source
  file}) and each of `texts` ({name: text}, the descriptions, in their order, last) into `directory` (made if
  missing; what it held under other names stays); returns the directory, resolved."""
  directory = pathlib.Path(directory).resolve()
  directory.mkdir(parents=True, exist_ok=True)
  texts, copies = dict(texts or {}), dict(copies or {})
  staging = pathlib.Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
  try:
    for name, source in copies.items():
      shutil.copyfile(source, staging / name)
    if trees:
      import orbax.checkpoint as ocp  # noqa: PLC0415 (a command's --help must not wait for orbax)
      with ocp.StandardCheckpointer() as checkpointer:
        for name, tree in trees.items():
          checkpointer.save(staging / name, jax.tree.map(np.asarray, tree))
    for name, text in texts.items():
      (staging / name).write_text(text, encoding="utf-8")
    for name in texts:  # first: a directory without its description is not taken for a whole one
      (directory / name).unlink(missing_ok=True)
    for name in (*copies, *trees, *texts):
      target = directory / name
      if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
      elif name in trees and (target.exists() or target.is_symlink()):  # a file or link where a folder goes
        target.unlink()
      os.replace(staging / name, target)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return directory


def restore(path: str | os.PathLike[str], target: Any) -> Any:
  """The tree saved in `path`, as numpy arrays of `target`'s structure, shapes and dtypes (`target`: arrays or
  `jax.ShapeDtypeStruct`s). A RestoreError when orbax cannot read it, a ShapeError when a stored parameter has
  another place or shape than the target's."""
  import orbax.checkpoint as ocp  # noqa: PLC0415
  path = pathlib.Path(path)
  zeros = jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), target)
  try:
    with settled_event_loops(), ocp.StandardCheckpointer() as checkpointer:
      restored = checkpointer.restore(path, zeros)
  except Exception as error:  # orbax and tensorstore raise many types for a missing, cut or foreign checkpoint
    raise RestoreError(path, error) from error
  restored = jax.tree.map(np.asarray, restored)
  expected = {_keys(p): np.shape(a) for p, a in jax.tree_util.tree_flatten_with_path(zeros)[0]}
  for p, value in jax.tree_util.tree_flatten_with_path(restored)[0]:
    keys = _keys(p)
    if expected.get(keys) != np.shape(value):
      raise ShapeError(path, keys, np.shape(value), expected.get(keys))
  missing = sorted(set(expected) - {_keys(p) for p, _ in jax.tree_util.tree_flatten_with_path(restored)[0]})
  if missing:
    raise ShapeError(path, missing[0], None, expected[missing[0]])
  return restored


def _keys(path: tuple[Any, ...]) -> tuple[str, ...]:
  return tuple(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)
