"""The hostile-input tests across commands: every `python -m` command has its case file
(tests/test_hostile_<command>.py), the real process exits 2 with one line and `--verbose` adds the traceback, and,
as root, the file-mode cases run in a pytest without root's capabilities."""

from __future__ import annotations

import importlib
import os
import pathlib
import subprocess
import sys

import pytest

from hostile import harness
from hostile.fixtures import SHARED
from hostile.harness import case, hard_link, runner, symlink

REPO = harness.REPO
ERG = ("capjax.erg.generate", "capjax.erg.augment", "capjax.erg.demo")
MIN_CASES = 10
# Commands with fewer ways to be given bad input than MIN_CASES, and why.
FEW_CASES = {"capjax.text.tagger": "it reads no file and has no flag of its own: a bad flag and a stray argument"}


def case_files() -> dict[str, list]:
  """{command: its cases} for every command, from its case file."""
  return {command: importlib.import_module(harness.case_file(command).removesuffix(".py")).CASES
          for command in harness.commands()}


def test_every_command_has_its_bad_inputs_here():
  commands = harness.commands()
  assert set(ERG) <= set(commands) and "capjax.main" in commands and "capjax.metrics" in commands, commands
  on_disk = {path.name for path in (REPO / "tests").glob("test_hostile_*.py")} - {pathlib.Path(__file__).name}
  expected = {harness.case_file(command) for command in commands}
  assert sorted(expected - on_disk) == [], "commands without their case file"
  assert sorted(on_disk - expected) == [], "case files of no command"
  for command, cases in case_files().items():
    module = sys.modules[harness.case_file(command).removesuffix(".py")]
    assert callable(getattr(module, harness.RUNNER, None)), f"{module.__file__} does not run its cases"
    assert {c.values[0].command for c in cases} == {command}, f"{module.__file__} holds another command's cases"
    assert len(cases) >= (2 if command in FEW_CASES else MIN_CASES), (command, len(cases))
  assert set(FEW_CASES) <= set(commands), "FEW_CASES names a command that is gone"


# --- the one rule for outputs (capjax.files.refuse_overlap), command by command ------------------------------------

# command: (its other arguments, its output flag, {input flag: the file, or the folder ending in "/", it reads}).
# Each output is given as each input under another name (a symbolic link, a hard link) and inside each folder input
# (by its path and through a link to it); every case is one error line naming both flags, nothing written.
READS_AND_WRITES = {
    "capjax.text.pipeline": (("--input={t}/alt.tsv",), "--output", {"--input": "alt.tsv"}),
    "capjax.tools.harvest_alt_text": (("--input={t}/page.html",), "--output", {"--input": "page.html"}),
    "capjax.data.retry": (("--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/data"), "--output",
                          {"--manual_dir": "folder/"}),
}


def _output_rule_cases() -> list:
  cases = []
  for command, (args, flag, reads) in READS_AND_WRITES.items():
    for input_flag, path in reads.items():
      named = f"{input_flag}={{t}}/{path.rstrip('/')}"
      if path.endswith("/"):
        ways = {"inside": ("{t}/" + path + "out.txt", {}, f"is inside {named}, which the command reads"),
                "inside-through-a-link": ("{t}/link/out.txt", {"link": symlink(path.rstrip("/"))},
                                          f"is inside {named}, which the command reads")}
      else:
        ways = {"symlink": ("{t}/link.txt", {"link.txt": symlink(path)}, f"would overwrite {named} — "),
                "hard-link": ("{t}/hard.txt", {"hard.txt": hard_link(path)}, f"would overwrite {named} — ")}
      for way, (output, files, match) in ways.items():
        cases.append(case(command, f"output-{way}-{input_flag.lstrip('-')}", *args, f"{flag}={output}", files=files,
                          match=match, absent=(output.removeprefix("{t}/"),) if "inside" in way else ()))
  return cases


OUTPUT_RULE_CASES = _output_rule_cases()
test_an_output_is_none_of_what_the_command_reads = runner(OUTPUT_RULE_CASES)


def test_the_output_rule_table_names_commands_and_flags_that_exist():
  commands = harness.commands()
  for command, (_, flag, reads) in READS_AND_WRITES.items():
    assert command in commands, command
    defined = harness.command_module(command).FLAGS
    assert {flag.lstrip("-"), *(f.lstrip("-") for f in reads)} <= set(defined), command


# --- the real process: exit status, and --verbose ------------------------------------------------------------------


def _run(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
             JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, match", [
    (("capjax.text.pipeline", "--input=missing.tsv", "--output=out.jsonl"), "missing.tsv"),
    (("capjax.metrics", "refs.json", "preds.json"), "refs.json is not JSON"),
    (("capjax.tools.convert_weights", "--format=timm", "--input=refs.json", "--output=out"), "refs.json"),
    (("capjax.text.stats", "refs.json", "--column=-1"), "--column"),
])
def test_the_process_exits_2_with_one_line(tmp_path, args, match):
  (tmp_path / "refs.json").write_text('{"annotations": [')
  (tmp_path / "preds.json").write_text("[]")
  before = harness.snapshot(tmp_path)
  proc = _run(*args, cwd=tmp_path)
  assert proc.returncode == 2, proc.stderr
  [line] = proc.stderr.splitlines()
  assert line.startswith("error: ") and " — " in line and match in line
  assert proc.stdout == "" and harness.snapshot(tmp_path) == before


def test_verbose_adds_the_traceback(tmp_path):
  proc = _run("capjax.text.stats", "missing.tsv", "--verbose", cwd=tmp_path)
  assert proc.returncode == 2
  assert proc.stderr.startswith("error: missing.tsv does not exist — ")
  assert "Traceback (most recent call last)" in proc.stderr and "capjax.cli.Failure" in proc.stderr


if not harness.MODES_BIND:
  @pytest.mark.slow  # runs the file-mode cases in a pytest subprocess (conftest.py: the slow rule)
  def test_file_mode_cases_without_root_s_capabilities(hostile_assets, hostile_data_dir):
    """The file-mode cases of every case file, in one pytest that setpriv starts without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH, so that the modes bind as they do for every other user. It reads this session's assets
    and data dir (root owns them: the modes of their files still let it read them), and checks them unchanged."""
    nodes = [f"tests/{harness.case_file(command)}::{harness.RUNNER}[{c.id}]"
             for command, cases in case_files().items() for c in cases if c.values[0].chmod]
    assert nodes
    proc = subprocess.run(
        ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "pytest", "-q",
         "-p", "no:cacheprovider", *nodes], cwd=REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, **{SHARED["hostile_assets"]: str(hostile_assets),
                                SHARED["hostile_data_dir"]: str(hostile_data_dir)}))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"{len(nodes)} passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-1000:]
