"""Every command against bad input (issues 13 and 28): each case gives one command a hostile argument, file or
folder, and checks what a user sees and what is left on disk. The cases of a command are in
tests/test_hostile_<command>.py (`case_file`), which runs them with `runner(CASES)`.

For every case: exit status 2; exactly one line on stderr, `error: <what is wrong> — <what to do>`; no traceback;
every file that was there before (inputs, earlier outputs, the shared assets and built dataset it names) has the
same bytes after, no new file appeared, and no half-written output where the case names one (`absent`).

Cases run in this process (`main(argv)` of each command, `SystemExit` caught) so that hundreds of them take a minute;
capjax.main's config flag reads `sys.argv`, which is set to the same argv. A few subprocess cases
(test_hostile_every_command.py) check the real exit status and that `--verbose` adds the traceback.

Besides bytes, a case's files may be `FIFO`, `NULL_DEVICE` (a character device node with /dev/null's numbers, made
in the case's folder: no case touches the real /dev), or `symlink(target)` / `hard_link(target)` to another file
of the folder. A case with a FIFO runs under an alarm, so that a read that blocks fails the case instead of hanging.

Placeholders in the arguments: {t} the case's own folder (the files of `inputs.BASE_FILES` plus the case's), {a}
shared assets (weight files and folders: `inputs.build_assets`), {d} a built synthetic_scenes/tiny data dir, {dd:NAME}
a copy of it in the case's folder damaged as `inputs.DAMAGED[NAME]` says, {r} the repository, {ro} a folder that
cannot be created, even by root (under /proc). {a} and {d} are built once per pytest session (tests/hostile/fixtures.py,
which conftest.py registers), whichever case files run. Permission cases (chmod) run only where modes bind: root
reads and writes through any mode (as root, run them under `setpriv --bounding-set=-dac_override,-dac_read_search`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import os
import pathlib
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading

import pytest

from capjax import distributed
from hostile.inputs import BASE_FILES, DAMAGED

REPO = pathlib.Path(__file__).resolve().parents[2]
READ_ONLY = "/proc/capjax_ro"  # /proc takes no new entries: what a read-only mount is, for root as for anyone
# What capjax and jax take for a cluster: capjax's variables, and those of jax's Open MPI and Kubernetes detection.
CLUSTER_ENV = (*distributed.CLUSTER_ENV, "OMPI_MCA_orte_hnp_uri", "KUBERNETES_SERVICE_HOST")
MAIN, STATS = "capjax.main", "capjax.text.stats"  # the two commands `invoke` calls otherwise
RUNNER = "test_bad_input_is_one_error_line_and_changes_nothing"  # the name of each case file's runner


def _modes_bind() -> bool:
  """Whether a folder's mode stops this process writing in it (not for root, nor with CAP_DAC_OVERRIDE)."""
  with tempfile.TemporaryDirectory() as folder:
    os.chmod(folder, 0o500)
    try:
      with open(os.path.join(folder, "probe"), "w"):
        return False
    except PermissionError:
      return True
    finally:
      os.chmod(folder, 0o700)


MODES_BIND = _modes_bind()


# --- the commands --------------------------------------------------------------------------------------------------


def commands() -> list[str]:
  """Every `python -m` command of capjax/ (a module that ends in `cli.run(main)`), found as
  benchmarks/help_latency.py finds them."""
  sys.path.insert(0, str(REPO / "benchmarks"))
  try:
    import help_latency
  finally:
    sys.path.remove(str(REPO / "benchmarks"))
  return help_latency.commands()


def case_file(command: str) -> str:
  """The file of `command`'s cases: tests/test_hostile_data_build.py for capjax.data.build."""
  return f"test_hostile_{command.removeprefix('capjax.').replace('.', '_')}.py"


def command_module(command: str):
  """The module whose `main(argv)` `python -m command` runs: a package's `__main__`."""
  package = importlib.util.find_spec(command).submodule_search_locations is not None
  return importlib.import_module(f"{command}.__main__" if package else command)


# --- the cases -----------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Special:
  """A file of a case's folder that is not bytes: `kind` is "fifo", "device", "symlink" or "hard_link" (to
  `target`, a name in the folder)."""
  kind: str
  target: str = ""


FIFO, NULL_DEVICE = Special("fifo"), Special("device")


def symlink(target: str) -> Special:
  return Special("symlink", target)


def hard_link(target: str) -> Special:
  return Special("hard_link", target)


@dataclasses.dataclass(frozen=True)
class Case:
  command: str
  args: tuple[str, ...]
  files: tuple[tuple[str, bytes], ...] = ()  # extra files in {t}
  absent: tuple[str, ...] = ()               # outputs that must not exist afterwards
  match: str = ""                            # text the error line must contain
  chmod: tuple[tuple[str, int], ...] = ()    # modes set on paths under {t} before the run (not as root)
  leaves: tuple[str, ...] = ()               # files the case may add (bookkeeping of a library, not an output)


def case(command: str, name: str, *args: str, files: dict[str, bytes] | None = None, absent: tuple[str, ...] = (),
         match: str = "", chmod: dict[str, int] | None = None, leaves: tuple[str, ...] = (), xfail: str | None = None):
  marks = []
  if xfail:
    marks.append(pytest.mark.xfail(strict=True, reason=xfail))
  return pytest.param(Case(command, args, tuple((files or {}).items()), absent, match, tuple((chmod or {}).items()),
                           leaves), id=f"{command.rsplit('.', 1)[-1]}-{name}", marks=marks)


def not_flags(command: str, *required: str) -> list:
  """An unknown flag and a stray positional argument, each with the command's required flags."""
  return [case(command, "unknown-flag", *required, "--bogus=1", match="bogus"),
          case(command, "stray-argument", *required, "stray.txt", match="stray.txt")]


def runnable(cases: list) -> list:
  """`cases` less the file-mode ones where modes do not bind (as root): test_hostile_every_command.py runs those
  in a pytest of their own, without the capabilities that let root through."""
  return cases if MODES_BIND else [c for c in cases if not c.values[0].chmod]


# --- a case's run --------------------------------------------------------------------------------------------------


def populate(folder: pathlib.Path, files: dict[str, bytes | Special]) -> None:
  """Writes `files` under `folder`: bytes first, then the `Special` files (links need their targets)."""
  for name, data in sorted(files.items(), key=lambda item: isinstance(item[1], Special)):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(data, Special):
      path.write_bytes(data)
    elif data.kind == "fifo":
      os.mkfifo(path)
    elif data.kind == "device":
      os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers, in the case's own folder
    elif data.kind == "symlink":
      path.symlink_to(folder / data.target)
    else:
      os.link(folder / data.target, path)


def snapshot(root: pathlib.Path) -> dict[str, str]:
  """sha256 of every regular file under `root`, by relative path; what anything else is (a FIFO, a device and its
  numbers, where a symbolic link points), so that a device replaced by a file shows. Nothing but files is opened."""
  found = {}
  for folder, _, names in os.walk(root):
    for name in names:
      path = os.path.join(folder, name)
      info = os.lstat(path)
      if stat.S_ISLNK(info.st_mode):
        found[os.path.relpath(path, root)] = f"symlink to {os.readlink(path)}"
      elif stat.S_ISREG(info.st_mode):
        with open(path, "rb") as f:
          found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
      else:
        found[os.path.relpath(path, root)] = f"mode {stat.S_IFMT(info.st_mode):o} device {info.st_rdev}"
  return found


def invoke(command: str, argv: list[str], monkeypatch) -> int | str | None:
  """The exit status of `command`'s `main(argv)` in this process (0 when it returns)."""
  module = command_module(command)
  if command == MAIN:
    monkeypatch.setattr(sys, "argv", argv)  # ml_collections reads --config.FIELD overrides from sys.argv
    # ml_collections defines a flag per --config.FIELD override when it parses: drop the last case's, as a new
    # process starts without them.
    for name in [name for name in module.FLAGS if name.startswith("config.")]:
      delattr(module.FLAGS, name)
  try:
    module.main(argv[1:] if command == STATS else argv)  # stats' main takes the arguments alone
  except SystemExit as exit_:
    return exit_.code
  return 0


def expand(arg: str, places: dict[str, str]) -> str:
  for key, value in places.items():
    arg = arg.replace("{" + key + "}", value)
  return arg


def _blocked(signum, frame):
  raise TimeoutError("the command blocked for 60 s (reading a FIFO?)")


@contextlib.contextmanager
def alarm(seconds: int = 60):
  """A block that raises TimeoutError after `seconds`: a read that blocks (a FIFO) fails the test, never hangs it.
  The signal is sent to the main thread itself (`pthread_kill` from a timer): a process alarm may land on any of
  TensorFlow's threads, and then the main thread's blocked open(2) is never interrupted."""
  previous = signal.signal(signal.SIGALRM, _blocked)
  timer = threading.Timer(seconds, signal.pthread_kill, (threading.main_thread().ident, signal.SIGALRM))
  timer.daemon = True
  timer.start()
  try:
    yield
  finally:
    timer.cancel()
    signal.signal(signal.SIGALRM, previous)


def check(case: Case, tmp_path: pathlib.Path, request, monkeypatch, capsys) -> None:
  """Runs `case` and checks it: one `error:` line, exit status 2, nothing changed (the module docstring)."""
  folder = tmp_path / "case"
  populate(folder, BASE_FILES | dict(case.files))
  places = {"t": str(folder), "r": str(REPO), "ro": READ_ONLY}
  roots = [folder]
  for key, fixture in (("a", "hostile_assets"), ("d", "hostile_data_dir")):
    if any("{" + key + "}" in arg for arg in case.args):
      roots.append(request.getfixturevalue(fixture))
      places[key] = str(roots[-1])
  for key in sorted({key for arg in case.args for key in re.findall(r"\{(dd:[\w-]+)\}", arg)}):
    copy = folder / key.replace(":", "-")
    shutil.copytree(request.getfixturevalue("hostile_data_dir"), copy)
    DAMAGED[key[3:]](copy)
    places[key] = str(copy)
  argv = [case.command] + [expand(arg, places) for arg in case.args]
  for name in CLUSTER_ENV:  # no case runs in a cluster: a SLURM or MPI job running the tests must not make one
    monkeypatch.delenv(name, raising=False)
  before = [snapshot(root) for root in roots]
  monkeypatch.chdir(folder)  # a relative default (capjax.main's workdir/...) lands in the case's folder
  for path, mode in case.chmod:
    os.chmod(folder / path, mode)
  capsys.readouterr()  # what the fixtures printed (the dataset build's progress)
  blocking = any(data == FIFO for _, data in case.files)
  try:  # a read of a FIFO would wait for a writer forever: the alarm interrupts it
    with alarm() if blocking else contextlib.nullcontext():
      code = invoke(case.command, argv, monkeypatch)
  finally:
    for path, _ in case.chmod:
      os.chmod(folder / path, 0o700)
  out, err = capsys.readouterr()
  assert "Traceback" not in out + err
  assert code == 2, f"exit status {code!r}, stderr: {err}"
  lines = err.splitlines()
  assert len(lines) == 1, f"stderr is not one line: {err}"
  assert lines[0].startswith("error: ") and " — " in lines[0], lines[0]
  assert expand(case.match, places) in lines[0]
  for root, old in zip(roots, before):
    new = snapshot(root)
    assert {k: v for k, v in new.items() if k in old} == old, f"a file under {root} was changed or removed"
    assert sorted(set(new) - set(old) - {os.path.join(*p.split("/")) for p in case.leaves}) == [], \
        f"new files under {root}"
  for path in case.absent:
    assert not (folder / path).exists(), f"{path} was written"


def runner(cases: list):
  """A case file's test: `check` parametrized over its `cases` (those that can run here: `runnable`). Every command
  is imported first (the session fixture `hostile_commands`), so that import-time chatter on stderr is not taken
  for a case's output."""
  @pytest.mark.parametrize("case", runnable(cases))
  def test_bad_input_is_one_error_line_and_changes_nothing(case: Case, tmp_path, request, monkeypatch, capsys,
                                                            hostile_commands):
    check(case, tmp_path, request, monkeypatch, capsys)
  return test_bad_input_is_one_error_line_and_changes_nothing
