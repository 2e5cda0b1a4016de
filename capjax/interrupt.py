"""Ctrl-C in a long-running command: one line on stderr and exit status 130, wherever the signal lands. `capjax.cli.run`
enters `ctrl_c_raises` before it calls a command's `main`, so every command on it stops the same way; a command with
work to undo catches the KeyboardInterrupt itself (`capjax.data.build`) and ends with `stop`.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import importlib.machinery
import signal
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

EXIT_STATUS = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended


def stop(message: str) -> NoReturn:
  """`interrupted: <message>` on stderr, exit status 130 (`message` says what was left and what to do)."""
  print(f"interrupted: {message}", file=sys.stderr)
  raise SystemExit(EXIT_STATUS)


def _raised_later(seconds: float = 0.005) -> None:
  """SIGINT again in `seconds`, from a thread. Not `_thread.interrupt_main` here: Python runs the handler it trips at
  the next bytecode of the main thread, which is still the code that cannot raise (the handler itself, the hook)."""
  timer = threading.Timer(seconds, _thread.interrupt_main, (signal.SIGINT,))
  timer.daemon = True
  timer.start()


def _loading(frame) -> bool:
  """Whether `frame` is importlib loading a module (`_load_unlocked`)."""
  return frame.f_code.co_name == "_load_unlocked" and frame.f_code.co_filename.startswith("<frozen importlib")


def _import_cannot_raise(frame) -> bool:
  """Whether the code `frame` runs, and the frames that called it, are part of an import that a KeyboardInterrupt
  would damage:
    - a C extension's load (`_load_unlocked` of an ExtensionFileLoader's spec: its create, its init, its attributes):
      Python code that the init runs (numpy's, jaxlib's nanobind modules importing numpy) is below it, and a
      KeyboardInterrupt anywhere in it leaves a half-made module: numpy's ImportError traceback, nanobind's uncaught
      C++ exception (abort), or a segmentation fault when the exit collects it;
    - code that `exec` runs from a string while a module loads (dataclasses' and namedtuple's generated methods):
      CPython 3.11 marks a KeyboardInterrupt that leaves such an `exec` as unhandled however it is caught after,
      and the process then ends by SIGINT instead of `stop`'s exit status. Only under an import: a test runner or
      launcher that runs everything from an exec'd string (execnet's workers) is not that."""
  in_exec = False
  while frame is not None:
    if frame.f_code.co_filename == "<string>" and frame.f_code.co_name == "<module>" and frame.f_back is not None:
      in_exec = True
    elif _loading(frame) and (in_exec or isinstance(getattr(frame.f_locals.get("spec"), "loader", None),
                                                     importlib.machinery.ExtensionFileLoader)):
      return True
    frame = frame.f_back
  return False


@contextlib.contextmanager
def ctrl_c_raises() -> Iterator[None]:
  """Ctrl-C raises KeyboardInterrupt in the command's own code, never in code Python cannot raise from (JAX's
  garbage-collection hook, a finalizer), where it would be printed as an ignored exception and lost, and the command
  would go on to exit 0, nor in code a C extension's init or `exec` runs (`_import_cannot_raise`: JAX's and
  TensorFlow's imports, the first second of every command), where it would crash the process or end it by SIGINT:
  there it is put off until that code has returned. A KeyboardInterrupt that a finalizer
  swallowed all the same reaches the unraisable hook, which raises it again the same way."""
  hook = sys.unraisablehook

  def cannot_raise(frame) -> bool:  # the callbacks asked now: JAX adds its own when the command imports it
    codes = {cb.__code__ for cb in gc.callbacks if hasattr(cb, "__code__")} | {on_unraisable.__code__}
    if _import_cannot_raise(frame):
      return True
    while frame is not None:
      if frame.f_code in codes:
        return True
      frame = frame.f_back
    return False

  def on_sigint(signum, frame) -> None:
    del signum
    if cannot_raise(frame):
      _raised_later()
      return
    raise KeyboardInterrupt

  def on_unraisable(unraisable) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
      _raised_later()
    else:
      hook(unraisable)
  previous = signal.signal(signal.SIGINT, on_sigint)
  sys.unraisablehook = on_unraisable
  try:
    yield
  finally:
    sys.unraisablehook = hook
    signal.signal(signal.SIGINT, previous)
