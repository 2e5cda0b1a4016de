"""The one way a command reads an input file and writes an output file: inputs must be regular files (a FIFO or a
device would hang the read or never end) in UTF-8, outputs are new names or regular files that are none of the
inputs, written through a temporary file beside them that replaces the output only when complete.

Every refusal is `cli.fail`: one `error:` line naming the flag and the file, exit status 2. A write that fails (a
full disk above all) is one line naming the folder and how much was written, and leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from capjax import cli

UTF8_BOM = b"\xef\xbb\xbf"
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _named(path: str | os.PathLike[str], flag: str) -> str:
  """How a message names a file: `--flag=PATH`, `what PATH` (a flag's part: "--dataset=cc3m's folder"), or the
  path alone for a positional argument."""
  if not flag:
    return os.fspath(path)
  return f"{flag} {os.fspath(path)}" if " " in flag else f"{flag}={os.fspath(path)}"


def kind(mode: int) -> str:
  """What a file that is not a regular file is, in words ("a FIFO (named pipe)", "a character device", ...)."""
  return next((name for test, name in _KINDS if test(mode)), "not a regular file")


# --- inputs --------------------------------------------------------------------------------------------------------


def input_file(path: str | os.PathLike[str], flag: str = "", what: str = "a file") -> str:
  """`path` after checking that it is a regular file (symbolic links followed); otherwise an `error:` line naming
  `flag` and saying what it is (missing, a directory, a FIFO, a device). `what` is what to give instead."""
  try:
    mode = os.stat(path).st_mode
  except FileNotFoundError:
    cli.fail(f"{_named(path, flag)} does not exist — give the path of {what}")
  except OSError as error:
    cli.fail(f"{_named(path, flag)} cannot be read ({error.strerror or error}) — give the path of {what}")
  _refuse_special(mode, path, flag, what)
  return os.fspath(path)


def _refuse_special(mode: int, path: str | os.PathLike[str], flag: str, what: str) -> None:
  if stat.S_ISDIR(mode):
    cli.fail(f"{_named(path, flag)} is a directory — give the path of {what}")
  if not stat.S_ISREG(mode):
    cli.fail(_special_message(_named(path, flag), kind(mode)))


def refuse_special(paths: Sequence[str | os.PathLike[str]], flag: str, what: str) -> None:
  """An `error:` line for the first of `paths` (a glob's matches) that is a FIFO, a device or a socket: reading it
  would hang or never end. Folders and broken links are left to the caller (usually skipped and counted)."""
  for path in paths:
    if os.path.exists(path) and not os.path.isdir(path):
      input_file(path, flag, what)


class NotRegularError(OSError):
  """A path read as a regular file is a FIFO, a device or a socket (reading it would hang, or never end): its
  message names the path and what it is. Builders let it reach `capjax.data.build`, which prints it as one line."""


def special_kind(path: str | os.PathLike[str]) -> str | None:
  """What the file at `path` is when it is a FIFO, a device or a socket (symbolic links followed), else None: a
  regular file, a folder, a missing path, or one on an object store (`gs://...`, which holds only files and
  folders). The check every reader makes before it opens a file, epath's included: epath's `is_file()` answers yes
  for a FIFO."""
  text = os.fspath(path)
  if "://" in text:
    return None
  try:
    mode = os.stat(text).st_mode
  except OSError:
    return None
  return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else kind(mode)


def check_regular(path: str | os.PathLike[str]) -> None:
  """NotRegularError now when `path` is a FIFO, a device or a socket (`special_kind`): for a file a builder will
  read later (in its example generator), so that the error comes before the build starts."""
  text = os.fspath(path)
  if special_kind(text):
    raise _not_regular(text, os.stat(text).st_mode)


def _not_regular(path: str, mode: int) -> NotRegularError:
  error = NotRegularError(_special_message(path, kind(mode)))  # one argument: its str is the message alone
  error.kind = kind(mode)
  return error


def _special_message(named: str, what_it_is: str) -> str:
  return f"{named} is {what_it_is}, not a regular file — save the data to a file and give its path"


def open_regular(path: str | os.PathLike[str]) -> IO[bytes]:
  """The file at `path` open for binary reading; NotRegularError when it is a FIFO, a device or a socket, before
  any byte is read. Checked before the open (a device on a `nodev` mount cannot even be opened), then opened without
  blocking and checked again on the open file, so that a FIFO cannot hang the open nor be swapped in after the
  check. A path on an object store (`gs://...`) is opened through epath. Other errors are the OSError of the open."""
  text = os.fspath(path)
  if "://" in text:
    from etils import epath  # noqa: PLC0415 (only builders read object stores)
    return epath.Path(text).open("rb")
  mode = os.stat(text).st_mode
  if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
    raise _not_regular(text, mode)
  fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
  try:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
      raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), text)
    if not stat.S_ISREG(mode):
      raise _not_regular(text, mode)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
  except BaseException:
    os.close(fd)
    raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
  """The bytes of the file at `path`, read through `open_regular` (NotRegularError for a FIFO, a device, a socket)."""
  with open_regular(path) as f:
    return f.read()


def json_object(path: str | os.PathLike[str]) -> tuple[dict | None, str]:
  """(the JSON object in the regular file `path`, "") or (None, what is wrong with the file: missing, unreadable, not
  a regular file, not JSON, not an object), for a caller to end with its own remedy."""
  try:
    value = json.loads(read_regular(path).decode("utf-8"))
  except FileNotFoundError:
    return None, f"{os.fspath(path)} is missing"
  except NotRegularError as e:
    return None, str(e)
  except OSError as e:
    return None, f"{os.fspath(path)} cannot be read ({e.strerror or e})"
  except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
    where = f" ({e.msg} at byte {e.pos})" if isinstance(e, json.JSONDecodeError) else ""
    return None, f"{os.fspath(path)} is not JSON{where}: truncated or damaged"
  if not isinstance(value, dict):
    return None, f"{os.fspath(path)} holds JSON that is not an object: damaged"
  return value, ""


@contextlib.contextmanager
def open_input(path: str | os.PathLike[str], flag: str = "", what: str = "a file") -> Iterator[IO[bytes]]:
  """The file at `path` open for binary reading (`open_regular`), refused (one `error:` line) unless it is a regular
  file."""
  input_file(path, flag, what)
  try:
    f = open_regular(path)
  except FileNotFoundError:
    cli.fail(f"{_named(path, flag)} does not exist — give the path of {what}")
  except IsADirectoryError:
    cli.fail(f"{_named(path, flag)} is a directory — give the path of {what}")
  except NotRegularError as error:
    cli.fail(_special_message(_named(path, flag), error.kind))
  except OSError as error:
    cli.fail(f"{_named(path, flag)} cannot be read ({error.strerror or error}) — give the path of a readable file")
  with f:
    yield f


def read_bytes(path: str | os.PathLike[str], flag: str = "", what: str = "a file") -> bytes:
  """The bytes of the regular file at `path` (see `open_input`)."""
  with open_input(path, flag, what) as f:
    try:
      return f.read()
    except OSError as error:
      cli.fail(f"{_named(path, flag)} cannot be read ({error.strerror or error}) — give the path of a readable file")


def text_input(path: str | os.PathLike[str], flag: str = "", what: str = "a text file") -> str:
  """`path` after checking, before any work, that it is a regular file (`input_file`) whose text does not start in
  another encoding than UTF-8 (`refuse_other_encoding`)."""
  with open_input(path, flag, what) as f:
    refuse_other_encoding(f.read(4096), path, flag)
  return os.fspath(path)


def other_encoding(head: bytes) -> str | None:
  """The encoding of text starting with `head` when it is recognisably not UTF-8 (a UTF-16 or UTF-32 byte-order
  mark, or UTF-16 without one: every other byte zero), else None."""
  for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
                    (b"\xfe\xff", "UTF-16")):
    if head.startswith(bom):
      return name
  pairs = len(head) // 2
  if pairs >= 2:
    even_zeros, odd_zeros = head[0:2 * pairs:2].count(0), head[1:2 * pairs:2].count(0)
    if max(even_zeros, odd_zeros) >= 0.4 * pairs and min(even_zeros, odd_zeros) < 0.05 * pairs:
      return "UTF-16"
  return None


def refuse_other_encoding(head: bytes, path: str | os.PathLike[str], flag: str = "") -> None:
  """An `error:` line when `head` (the first bytes of a file) is text in another encoding than UTF-8, naming it."""
  name = other_encoding(head)
  if name:
    cli.fail(f"{_named(path, flag)} is {name}, not UTF-8 — convert it with iconv -f {name} -t UTF-8")


def decode_text(data: bytes, path: str | os.PathLike[str], flag: str = "") -> str:
  """`data`, a text file's bytes, as a str: UTF-8, a leading byte-order mark dropped; text in another encoding is
  an `error:` line naming the encoding, or the line and byte that are not UTF-8."""
  refuse_other_encoding(data[:4096], path, flag)
  data = data.removeprefix(UTF8_BOM)
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as error:
    line = data.count(b"\n", 0, error.start) + 1
    column = error.start - (data.rfind(b"\n", 0, error.start) + 1)
    cli.fail(f"{_named(path, flag)} line {line}: byte {column + 1} (0x{data[error.start]:02x}) is not UTF-8 — "
             "save the file as UTF-8 (from Latin-1: iconv -f LATIN1 -t UTF-8)")


def read_text(path: str | os.PathLike[str], flag: str = "", what: str = "a text file") -> str:
  """The text of the regular UTF-8 file at `path` (see `open_input` and `decode_text`)."""
  return decode_text(read_bytes(path, flag, what), path, flag)


# --- outputs -------------------------------------------------------------------------------------------------------


def _paths(value: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None) -> list[str]:
  if value is None or value == "":
    return []
  return [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(v) for v in value]


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
  """Whether paths `a` and `b` name one file or folder: the same path once resolved, or a hard link of it."""
  if os.path.realpath(a) == os.path.realpath(b):
    return True
  try:
    return os.path.samefile(a, b)
  except OSError:
    return False


def _inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
  """Whether `path` lies strictly inside `folder`: by their resolved paths, or one of `path`'s folders is `folder`
  under another name (a bind mount, a folder reached through another link)."""
  real, top = os.path.realpath(path), os.path.realpath(folder)
  try:
    folder_stat = os.stat(top)
  except OSError:
    return False
  if not stat.S_ISDIR(folder_stat.st_mode):
    return False  # a file holds nothing
  if real.startswith(os.path.join(top, "")):
    return True
  parent = os.path.dirname(real)
  while parent != os.path.dirname(parent):
    with contextlib.suppress(OSError):
      if os.path.samestat(os.stat(parent), folder_stat):
        return True
    parent = os.path.dirname(parent)
  return False


def overlap(output: str | os.PathLike[str], read: str | os.PathLike[str]) -> str | None:
  """How an `output` meets a file or folder the command reads: "would overwrite" (it is that file), "is inside"
  or "contains"; None when they are apart. Paths are compared once links are resolved, and by inode (hard links)."""
  if same_file(output, read):
    return "would overwrite"
  if _inside(output, read):
    return "is inside"
  if _inside(read, output):
    return "contains"
  return None


Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None


def refuse_overlap(outputs: Mapping[str, Paths], inputs: Mapping[str, Paths]) -> None:
  """The one rule for outputs: an `error:` line when any of `outputs` ({flag: path or paths}) is, contains or lies
  inside any of `inputs` ({flag: path or paths}: the files and folders the command reads, a built dataset's
  own folder among them), so that a command never writes over, into or around what it reads. Call it with all the
  outputs before writing any."""
  for flag, value in outputs.items():
    for output in _paths(value):
      for input_flag, read in inputs.items():
        for input_path in _paths(read):
          how = overlap(output, input_path)
          if how == "would overwrite":
            cli.fail(f"{_named(output, flag)} would overwrite {_named(input_path, input_flag)} — write the output to "
                     "another file")
          if how:
            cli.fail(f"{_named(output, flag)} {how} {_named(input_path, input_flag)}, which the command reads — "
                     "write the output elsewhere")


def output_file(path: str | os.PathLike[str] | None, flag: str = "--output", inputs: Mapping[str, Paths] | None = None,
                example: str = "out.txt", make_folder: bool = False) -> str:
  """`path`, checked before any work as a file to write: a new name or a regular file, in a folder that exists (or,
  with `make_folder`, can be made) and can be written, and apart from all of `inputs` (`refuse_overlap`: not one of
  them, nor inside a folder of them, under any name). Otherwise an `error:` line; `example` is the file name it
  suggests. With `make_folder`, a missing folder is left for the caller to make."""
  text = os.fspath(path) if path is not None else ""
  if not text.strip():
    cli.fail(f"{flag}= is empty — give the path of the file to write, e.g. {flag}={example}")
  if text.endswith(("/", os.sep)) or os.path.isdir(text):
    cli.fail(f"{flag}={text} is a directory — give a file name, e.g. {os.path.join(text, example)}")
  refuse_overlap({flag: text}, inputs or {})
  try:
    mode = os.stat(text).st_mode
  except (FileNotFoundError, NotADirectoryError):  # a new name, or one under a file (said below)
    mode = None
  except OSError as error:
    cli.fail(f"{flag}={text} cannot be checked ({error.strerror or error}) — give a path you can write to")
  if mode is not None and not stat.S_ISREG(mode):
    cli.fail(f"{flag}={text} is {kind(mode)}, not a regular file — write to a file and copy it there if needed")
  folder = os.path.dirname(os.path.realpath(text))
  if make_folder and not os.path.lexists(folder):
    return text  # the caller makes it (`cli.writable_dir`) once the inputs are known to be good
  if os.path.exists(folder) and not os.path.isdir(folder):
    cli.fail(f"{flag}={text}: {folder} is a file, not a folder — give a path in a folder")
  if not os.path.isdir(folder):
    cli.fail(f"{flag}={text}: the folder {folder} does not exist — create it first")
  reason = cli.unwritable_reason(folder)
  if reason:
    cli.fail(f"{flag}={text}: the folder {folder} {reason} — choose a folder you can write to")
  return text


def _write_error(error: OSError, target: str, written: int, flag: str) -> str:
  """One line for a write that failed: the folder, what was being written and how much."""
  folder = os.path.dirname(target) or "."
  try:
    free = f" ({cli.free_space(folder)} free)"
  except OSError:
    free = ""
  what = f"writing {os.path.basename(target)} stopped after {cli.human_size(written)}{free}"
  if error.errno in (errno.ENOSPC, errno.EDQUOT):
    return f"no space left in {folder}: {what} — free some space there, or give {flag} in another folder"
  if error.errno == errno.EFBIG:
    return f"{target} is larger than {folder} allows: {what} — give {flag} in another folder"
  return (f"cannot write {target} in {folder} ({error.strerror or error}): {what} — check the folder, or give "
          f"{flag} in another one")


def _is_write_error(error: OSError, temporary: str) -> bool:
  """Whether `error`, raised while writing `temporary`, comes from that write (a read of an input names its file)."""
  return error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) or error.filename in (None, temporary)


def _size(path: str) -> int:
  try:
    return os.stat(path).st_size
  except OSError:
    return 0


@contextlib.contextmanager
def scratch(beside: str | os.PathLike[str], flag: str = "--output") -> Iterator[str]:
  """The path of a new temporary file in the folder of `beside` (same disk: renamed over it when complete),
  removed when the block ends however it ends; a write that fails in the block is one line (`_write_error`)."""
  target = os.path.realpath(beside)
  temporary = f"{target}.{uuid.uuid4().hex[:8]}.partial"  # no other run's name, and never taken for an output
  try:
    yield temporary
  except OSError as error:
    if not _is_write_error(error, temporary):
      raise
    message = _write_error(error, target, _size(temporary), flag)  # the space free before the file goes
    with contextlib.suppress(OSError):
      os.remove(temporary)
    cli.fail(message)
  finally:
    with contextlib.suppress(FileNotFoundError):
      os.remove(temporary)


def commit(temporary: str, path: str | os.PathLike[str], flag: str = "--output") -> None:
  """Renames the complete `temporary` (from `scratch`) over `path`, or an `error:` line when `path` has become
  something other than a regular file meanwhile (a device stays a device)."""
  target = os.path.realpath(path)
  try:
    mode = os.stat(target).st_mode
  except FileNotFoundError:
    mode = stat.S_IFREG
  if not stat.S_ISREG(mode):
    cli.fail(f"{flag}={os.fspath(path)} is {kind(mode)}, not a regular file — write to a file and copy it there")
  os.replace(temporary, target)


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], mode: str = "w", flag: str = "--output", **open_args: Any) -> Iterator[IO]:
  """A new file open for writing (`mode` "w" or "wb"; text is UTF-8 unless `open_args` say otherwise) that
  replaces `path` (a symbolic link's target) only when the block ends without an exception: a failed or interrupted
  write leaves the earlier file as it was. Check `path` with `output_file` first."""
  if "b" not in mode:
    open_args.setdefault("encoding", "utf-8")
  with scratch(path, flag) as temporary:
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    with os.fdopen(fd, mode, **open_args) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())  # a full disk shows here, not after the rename
    commit(temporary, path, flag)
