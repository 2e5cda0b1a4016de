"""Command-line plumbing of capjax's commands: absl flags in a `FlagValues` of each tool's own (tools share flag
names such as --input and --weights, and one process may import several), `--help` that prints the module
docstring as usage, and one error path for all of them.

The error path: input a command cannot work with (a missing file, a bad flag value, a dataset that is not built)
is one line on stderr, `error: <what is wrong> — <what to do>`, and exit status 2; so is a full disk, wherever
in the command (or the libraries it calls: orbax, TFDS, ArrayRecord) the write that found it was. A traceback
means a bug, or that the user asked for one with `--verbose` (every command has it), which prints the stack of the
expected failures too.

Values: `parse` refuses a float flag that is NaN or infinite in every command (absl's bounds let NaN through);
`check_number` gives a flag its range, with the check that config fields share (`config_util.check_number`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging as pylogging
import os
import errno
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # every command imports this module before TensorFlow loads

from absl import app, flags, logging

from capjax import config_util, interrupt

HELP_FLAGS = ("--help", "-help", "-h", "-?", "--helpshort", "--helpfull")
VERBOSE_HELP = "On an error, print the traceback too (for bug reports; expected errors are one line without it)."

_verbose = False  # the last parse()'s --verbose: `run` shows tracebacks of expected failures when it is set


class Failure(SystemExit):
  """An expected failure, already reported on stderr: exit status 2. A `SystemExit`, so that a command's `main`
  called from Python (tests, notebooks) stops the same way as on the command line."""

  def __init__(self, message: str):
    super().__init__(2)
    self.message = message

  def __str__(self) -> str:
    return self.message


def fail(message: str) -> NoReturn:
  """Input the command cannot work with: one line on stderr, exit status 2, no traceback (unless --verbose).

  `message` says what is wrong, then ` — ` and what to do; a newline in it (a path, a quoted error) is shown
  as a space so that the message stays one line."""
  print(f"error: {' '.join(message.split())}", file=sys.stderr)
  raise Failure(message)


def parse(flag_values: flags.FlagValues, argv: Sequence[str], usage: str, positional: bool = False) -> list[str]:
  """Sets `flag_values` from `argv` (program name first, as `app.run` passes it), every flag not given back at
  its default, and returns the positional arguments. `--help` prints `usage` and the flags, then exits 0; a bad
  or missing flag is an `error:` line and exit 2, and so is a positional argument unless `positional`."""
  global _verbose
  if "verbose" not in flag_values:
    flags.DEFINE_boolean("verbose", False, VERBOSE_HELP, flag_values=flag_values)
  if any(arg in HELP_FLAGS for arg in argv[1:]):
    print(f"{usage.strip()}\n\nflags:\n{flags_help(flag_values)}")
    raise SystemExit(0)
  _verbose = any(arg in ("--verbose", "-verbose") for arg in argv[1:])  # so a flag error shows its stack too
  for name in flag_values:  # a second call in one process (tests) starts from the defaults again
    flag_values[name].unparse()
  try:
    rest = flag_values(list(argv))
  except flags.Error as error:  # absl puts one line per bad flag: the user gets them on one
    missing = re.findall(r"Flag (--\w+) must have a value other than None", str(error))
    if missing:
      fail(f"missing {', '.join(missing)} — see --help")
    fail(f"{'; '.join(str(error).splitlines())} — see --help")
  _verbose = flag_values["verbose"].value
  for name in flag_values:  # absl's bounds let NaN through (every comparison with it is false): no float flag may be
    value = flag_values[name].value  # NaN or infinite, whatever its own range
    if isinstance(value, float):
      check_number(f"--{name}", value)
  if len(rest) > 1 and not positional:
    fail(f"unexpected arguments {rest[1:]} — every input is a --flag, see --help")
  return rest[1:]


def check_number(flag: str, value: float, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False, hint: str = "") -> None:
  """`config_util.check_number` for a flag (`flag` "--x"): a value that is NaN, infinite or outside the range is an
  `error:` line, before any work."""
  try:
    config_util.check_number(flag, value, low, high, low_open=low_open, high_open=high_open, hint=hint)
  except config_util.ConfigError as error:
    fail(str(error))


def unwritable_reason(path: str | os.PathLike[str]) -> str | None:
  """Why files cannot be written in directory `path` (creating it if missing), or None when they can.

  Tried by writing a probe file rather than asked of `os.access`, which says yes to root on a read-only mount.
  """
  if os.path.exists(path) and not os.path.isdir(path):
    return "is a file, not a directory"
  try:
    os.makedirs(path, exist_ok=True)
    with tempfile.TemporaryFile(dir=path):
      pass
  except OSError as error:
    return f"cannot be written ({error.strerror or error})"
  return None


def writable_dir(path: str | os.PathLike[str], flag: str) -> str:
  """`path`, made if missing, after checking before any work that files can be written in it; otherwise an
  `error:` line naming `flag` (the user learns at once, not after hours of work that cannot be saved)."""
  reason = unwritable_reason(path)
  if reason:
    fail(f"{flag}={os.fspath(path)} {reason} — choose a directory you can write to")
  return os.fspath(path)


def human_size(size: float) -> str:
  """`size` bytes for a message: "812 bytes", "3.4 MB"."""
  if size < 1000:
    return f"{int(size)} bytes"
  for unit in ("kB", "MB", "GB", "TB"):
    size /= 1000
    if size < 1000 or unit == "TB":
      break
  return f"{size:.1f} {unit}"


def free_space(folder: str | os.PathLike[str]) -> str:
  """The space free to this user on the disk of `folder`, for a message (OSError if it cannot be asked)."""
  info = os.statvfs(folder)
  return human_size(info.f_bavail * info.f_frsize)


_NO_SPACE = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))
_WRITING = re.compile(r"(?:writing|file|path)[ :='\"]+(/[^\s'\";,]+)", re.IGNORECASE)


def no_space(error: BaseException) -> str | None:
  """One line for an exception a full disk caused, found in its chain of causes, or None.

  An OSError with ENOSPC (or EDQUOT) names its file; libraries that wrap it (ArrayRecord's RuntimeError, orbax's
  and tensorstore's errors) keep at least the system's words for it, and often the path they were writing."""
  seen: set[int] = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    text = str(error)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT) or any(t in text for t in _NO_SPACE):
      path = getattr(error, "filename", None) or next(iter(_WRITING.findall(text)), None)
      folder = os.path.dirname(os.path.abspath(os.fspath(path))) if path else None
      while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
      try:
        free = f" ({free_space(folder)} free)" if folder else ""
      except OSError:
        free = ""
      where = f"in {folder}{free} while writing {os.fspath(path)}" if path else "on a disk this command writes"
      return (f"no space left {where} — free some space there (or write elsewhere) and run the command again; "
              "nothing half-written is taken for complete")
    error = error.__cause__ or error.__context__
  return None


def flags_help(flag_values: flags.FlagValues) -> str:
  """Each flag with its help and default, without absl's per-module headings (one module defines them all)."""
  modules = set(flag_values.flags_by_module_dict())
  lines = flag_values.get_help(prefix="", include_special_flags=False).splitlines()
  return "\n".join(line for line in lines if line.strip() and line.rstrip(":") not in modules)


def lazy_attributes(module: str, names: dict[str, str]) -> Callable[[str], Any]:
  """A module's `__getattr__` (PEP 562) for a command that is also a library's front: each of `names` (name ->
  the module that defines it, or the module itself where its last part is the name: "decode" -> "capjax.decode")
  is imported on first use, so that the command's `--help` does not load what its work needs (JAX, Flax)."""
  def getattr_(name: str) -> Any:
    if name not in names:
      raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if names[name].rpartition(".")[2] == name:
      return importlib.import_module(names[name])
    return getattr(importlib.import_module(names[name]), name)
  return getattr_


def run(main: Callable[[list[str]], int | None]) -> NoReturn:
  """`app.run(main)` for a `main(argv)` that parses its own flags with `parse`; absl's global flags (logging)
  keep their defaults.

  `main` turns the library's exceptions for bad input (a `ConfigError`, a `DatasetNotBuiltError`, whose messages
  say what to do) into `fail`; an exception a full disk caused is turned into one here (`no_space`); with
  --verbose, a failure also prints its traceback, with the exception that caused it. Any other exception is a bug,
  and keeps Python's traceback. Ctrl-C, from here on (`main`'s own imports of JAX and TensorFlow included), is one
  `interrupted:` line and exit status 130 (`capjax.interrupt`)."""

  def guarded(argv: list[str]) -> int | None:
    global _verbose
    _verbose = any(arg in ("--verbose", "-verbose") for arg in argv[1:])  # for failures before `parse` runs
    try:
      return main(argv)
    except Failure as failure:
      if _verbose:
        traceback.print_exception(failure)
      raise
    except BrokenPipeError:  # `... --help | head` closed stdout: stop quietly, as `cat` does
      os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not fail again
      raise SystemExit(1) from None
    except Exception as error:  # a full disk, however deep in a library it was found, is one line too
      message = no_space(error)
      if message is None:
        raise
      if _verbose:
        traceback.print_exception(error)
      fail(message)

  with interrupt.ctrl_c_raises():
    try:
      logging.get_absl_handler().addFilter(QuietLibraries())  # every command: the libraries' INFO lines off
      app.run(guarded, flags_parser=lambda argv: (flags.FLAGS(argv[:1]), list(argv))[1])
    except KeyboardInterrupt:
      interrupt.stop("the command stopped before it finished — run it again to finish")


class QuietLibraries(pylogging.Filter):
  """Drops INFO chatter of orbax/grain/tfds/JAX (dozens of lines per checkpoint); warnings still show."""

  _NOISY = (f"{os.sep}orbax{os.sep}", f"{os.sep}grain{os.sep}", f"{os.sep}tensorflow_datasets{os.sep}",
            f"{os.sep}jax{os.sep}_src{os.sep}")

  def filter(self, record: pylogging.LogRecord) -> bool:
    return record.levelno >= pylogging.WARNING or not any(n in record.pathname for n in self._NOISY)


def quiet_library_logs() -> None:
  """absl's INFO on (a command's own step logs), the libraries' INFO off (`QuietLibraries`)."""
  logging.set_verbosity(logging.INFO)
  logging.get_absl_handler().addFilter(QuietLibraries())


# The native start-up lines TensorFlow 2.21 writes to file descriptor 2 whatever TF_CPP_MIN_LOG_LEVEL says (its C++
# logging runs before absl::InitializeLog): the oneDNN and CPU-instruction notices, the CUDA probes of a machine
# without a GPU. Other native lines (errors, and warnings of any other kind) are kept.
NATIVE_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:.]+ +\d+ (port|cudart_stub|cpu_feature_guard|cuda_executor|cuda_diagnostics)\.cc:\d+\] .*"
    r"|E\d{4} [\d:.]+ +\d+ cuda_(platform|executor)\.cc:\d+\] failed call to cuInit.*"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.")


@contextlib.contextmanager
def quiet_native_startup() -> Iterator[None]:
  """Runs the block (a library's first import or device probe) with file descriptor 2 in a temporary file, then
  writes what the block wrote there back to stderr, less the lines NATIVE_NOISE matches."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      kept = [line for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True)
              if not NATIVE_NOISE.fullmatch(line.rstrip("\n"))]
      if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()
