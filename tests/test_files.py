"""capjax.files: the one input reader and output writer of every command (issue 27). A full disk is a private
64 kB tmpfs (mounted as root; elsewhere the write is made to raise ENOSPC), never the machine's own disk."""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest

from capjax import cli, files


def _error_line(capsys) -> str:
  [line] = capsys.readouterr().err.splitlines()
  assert line.startswith("error: ") and " — " in line, line
  return line


@contextlib.contextmanager
def _full_disk(size: str = "64k"):
  """A folder on a tmpfs of `size`, unmounted afterwards; None where mounting is not allowed (not root)."""
  folder = tempfile.mkdtemp()
  if os.geteuid() != 0 or not shutil.which("mount") or subprocess.run(
      ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", folder], capture_output=True).returncode != 0:
    os.rmdir(folder)
    yield None
    return
  try:
    yield pathlib.Path(folder)
  finally:
    subprocess.run(["umount", folder], check=True)
    os.rmdir(folder)


def _fill_up(monkeypatch, folder: pathlib.Path | None, tmp_path: pathlib.Path) -> pathlib.Path:
  """`folder` (a 64 kB tmpfs) or, without one, `tmp_path` where every write past 16 kB raises ENOSPC."""
  if folder is not None:
    return folder

  class Full:  # a file object whose writes stop at 16 kB, as a disk that is full
    def __init__(self, f):
      self._f, self._n = f, 0

    def write(self, data):
      self._n += len(data)
      if self._n > 16_000:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
      return self._f.write(data)

    def __getattr__(self, name):
      return getattr(self._f, name)

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      return self._f.__exit__(*exc)

  real_fdopen = os.fdopen
  monkeypatch.setattr(files.os, "fdopen", lambda *a, **k: Full(real_fdopen(*a, **k)))
  return tmp_path


def test_a_full_disk_is_one_line_naming_the_folder_and_leaves_the_old_output(tmp_path, monkeypatch, capsys):
  with _full_disk() as disk:
    folder = _fill_up(monkeypatch, disk, tmp_path)
    output = folder / "out.txt"
    output.write_text("the earlier output\n")
    with pytest.raises(cli.Failure):
      with files.writing(output) as f:
        for _ in range(200):
          f.write("x" * 1000 + "\n")
    line = _error_line(capsys)
    assert line.startswith(f"error: no space left in {folder}: writing out.txt stopped after "), line
    assert line.endswith("— free some space there, or give --output in another folder")
    assert output.read_text() == "the earlier output\n"
    assert sorted(p.name for p in folder.iterdir()) == ["out.txt"]  # no temporary file left


def test_harvest_on_a_full_disk_says_so_in_one_line(tmp_path, monkeypatch, capsys):
  """The issue's case: `harvest_alt_text` (and `text.pipeline`, through the same `files.writing`) said `cannot
  read or write None`."""
  from capjax.tools import harvest_alt_text
  page = tmp_path / "page.html"
  page.write_text("<html><body>" + "".join(f"<img src='http://example.org/{i}.jpg' alt='a dog number {i} on the "
                                           "grass'>" for i in range(2000)) + "</body></html>")
  (tmp_path / "out").mkdir()
  with _full_disk() as disk:
    folder = _fill_up(monkeypatch, disk, tmp_path / "out")
    (folder / "candidates.tsv").write_text("an earlier harvest\n")
    with pytest.raises(SystemExit) as exit_info:
      harvest_alt_text.main(["capjax.tools.harvest_alt_text", f"--input={page}", f"--output={folder}/candidates.tsv"])
    assert exit_info.value.code == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: no space left in {folder}: writing candidates.tsv stopped after "), line
    assert "None" not in line
    assert [p.name for p in folder.iterdir()] == ["candidates.tsv"]
    assert (folder / "candidates.tsv").read_text() == "an earlier harvest\n"


def test_text_pipeline_on_a_full_disk_says_so_in_one_line(tmp_path, monkeypatch, capsys):
  """The issue's case: `text.pipeline` said `cannot read or write None` (loading its NLTK resources takes most of
  this test's seconds)."""
  from capjax.text import pipeline
  alt = tmp_path / "alt.tsv"
  alt.write_text("".join(f"{i}\tA brown dog number {i} runs on the green grass in the park.\n" for i in range(400)))
  (tmp_path / "out").mkdir()
  with _full_disk() as disk:
    folder = _fill_up(monkeypatch, disk, tmp_path / "out")
    with pytest.raises(SystemExit) as exit_info:
      pipeline.main(["capjax.text.pipeline", f"--input={alt}", f"--output={folder / 'out.jsonl'}"])
    assert exit_info.value.code == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: no space left in {folder}: writing out.jsonl stopped after "), line
    assert list(folder.iterdir()) == []


def test_writing_replaces_the_output_only_when_complete(tmp_path):
  output = tmp_path / "out.txt"
  output.write_text("old\n")
  with pytest.raises(RuntimeError):
    with files.writing(output) as f:
      f.write("half")
      raise RuntimeError("interrupted")
  assert output.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
  with files.writing(output) as f:
    f.write("new\n")
  assert output.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
  assert stat.S_IMODE(output.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def test_writing_through_a_symbolic_link_replaces_its_target(tmp_path):
  (tmp_path / "target.txt").write_text("old\n")
  (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
  with files.writing(tmp_path / "link.txt") as f:
    f.write("new\n")
  assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "target.txt").read_text() == "new\n"


@pytest.mark.parametrize("name, make, match", [
    ("null", lambda p: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3)), "is a character device, not a regular"),
    ("pipe", os.mkfifo, "is a FIFO (named pipe), not a regular file"),
    ("folder", os.mkdir, "is a directory — give a file name, e.g. "),
])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path, capsys, name, make, match):
  path = tmp_path / name
  make(path)
  with pytest.raises(cli.Failure):
    files.output_file(path)
  assert match in _error_line(capsys)


@pytest.mark.parametrize("output, match", [
    ("{t}/in.txt", "would overwrite --input={t}/in.txt"),
    ("{t}/sub/../in.txt", "would overwrite --input={t}/in.txt"),
    ("{t}/link.txt", "would overwrite --input={t}/in.txt"),
    ("{t}/hard.txt", "would overwrite --input={t}/in.txt"),
    ("{t}/new/", "is a directory"),
    ("", "--output= is empty"),
    ("/", "--output=/ is a directory"),
    ("{t}/missing/out.txt", "does not exist — create it first"),
    ("{t}/in.txt/out.txt", "is a file, not a folder"),
])
def test_an_output_the_command_must_not_write_is_refused(tmp_path, capsys, output, match):
  (tmp_path / "in.txt").write_text("input\n")
  (tmp_path / "sub").mkdir()
  (tmp_path / "link.txt").symlink_to(tmp_path / "in.txt")
  os.link(tmp_path / "in.txt", tmp_path / "hard.txt")
  with pytest.raises(cli.Failure):
    files.output_file(output.replace("{t}", str(tmp_path)), inputs={"--input": str(tmp_path / "in.txt")})
  assert match.replace("{t}", str(tmp_path)) in _error_line(capsys)
  assert (tmp_path / "in.txt").read_text() == "input\n"


def test_a_new_or_regular_output_beside_other_inputs_is_accepted(tmp_path):
  (tmp_path / "in.txt").write_text("input\n")
  (tmp_path / "old.txt").write_text("earlier output\n")
  for name in ("old.txt", "new.txt"):
    assert files.output_file(tmp_path / name, inputs={"--input": [str(tmp_path / "in.txt")]}) == str(tmp_path / name)


@pytest.mark.parametrize("data, name", [
    ("a dog\n".encode("utf-16"), "UTF-16"),
    ("a dog runs\n".encode("utf-16-le"), "UTF-16"),
    ("a dog runs\n".encode("utf-16-be"), "UTF-16"),
    ("a dog\n".encode("utf-32"), "UTF-32"),
])
def test_text_in_another_encoding_is_refused_naming_it(tmp_path, capsys, data, name):
  path = tmp_path / "in.txt"
  path.write_bytes(data)
  with pytest.raises(cli.Failure):
    files.read_text(path, "--input")
  assert _error_line(capsys) == (f"error: --input={path} is {name}, not UTF-8 — convert it with iconv -f {name} "
                                 f"-t UTF-8")


def test_utf8_with_a_byte_order_mark_is_read_without_it(tmp_path):
  path = tmp_path / "in.txt"
  path.write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\n")
  assert files.read_text(path) == "café\n"


def test_latin1_names_the_line_and_byte(tmp_path, capsys):
  path = tmp_path / "in.txt"
  path.write_bytes(b"a dog\ncaf\xe9\n")
  with pytest.raises(cli.Failure):
    files.read_text(path, "--input")
  assert f"--input={path} line 2: byte 4 (0xe9) is not UTF-8" in _error_line(capsys)


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "a FIFO (named pipe)"),
    (lambda p: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 5)), "a character device"),  # /dev/zero's numbers
])
def test_an_input_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, capsys, make, kind):
  path = tmp_path / "in.txt"
  make(path)
  with pytest.raises(cli.Failure):
    files.read_bytes(path, "--input")
  assert _error_line(capsys) == (f"error: --input={path} is {kind}, not a regular file — save the data to a file and "
                                 "give its path")


def test_human_eval_reads_a_csv_with_a_utf8_byte_order_mark(tmp_path, capsys):
  """The issue's case: a spreadsheet's "CSV UTF-8" export starts with a byte-order mark, which was blamed on the
  header."""
  from capjax.metrics import human_eval
  path = tmp_path / "ratings.csv"
  path.write_bytes(b"\xef\xbb\xbfimage_id,rater,rating\n1,1,GOOD\n1,2,GOOD\n1,3,BAD\n")
  assert human_eval.main(["capjax.metrics.human_eval", "aggregate", str(path)]) == 0
  assert '"images": 1' in capsys.readouterr().out


def test_no_space_finds_a_full_disk_however_a_library_wraps_it(tmp_path):
  """ArrayRecord reports ENOSPC as a RuntimeError with the system's words and the path; orbax wraps OSErrors."""
  wrapped = RuntimeError(f"write() failed: No space left on device; writing {tmp_path}/x.array_record; at byte 65536")
  assert cli.no_space(wrapped) == (
      f"no space left in {tmp_path} ({cli.free_space(tmp_path)} free) while writing {tmp_path}/x.array_record — "
      "free some space there (or write elsewhere) and run the command again; nothing half-written is taken for "
      "complete")
  try:
    try:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "ckpt" / "manifest.ocdbt"))
    except OSError as error:
      raise ValueError("checkpoint save failed") from error
  except ValueError as error:
    assert cli.no_space(error).startswith(f"no space left in {tmp_path} (")  # the nearest folder that exists
  assert cli.no_space(ValueError("no such thing")) is None


def test_a_full_disk_in_any_command_is_one_line(tmp_path, monkeypatch, capsys):
  """`cli.run` turns a full disk found deep in a library (here TFDS writing ArrayRecord shards in data.build) into
  one `error:` line and exit status 2, not a traceback."""
  from capjax.data import build
  with _full_disk() as disk:
    if disk is None:  # the write that fails is ArrayRecord's C++: only a real full disk reaches it
      pytest.skip("needs root to mount a 64 kB tmpfs; test_no_space_... covers the message without one")
    monkeypatch.setattr("sys.argv", ["capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={disk}"])
    with pytest.raises(SystemExit) as exit_info:
      cli.run(build.main)
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert len(errors) == 1 and errors[0].lstrip().startswith(f"error: no space left in {disk}/"), errors
    assert "synthetic_scenes-train.array_record" in errors[0]
