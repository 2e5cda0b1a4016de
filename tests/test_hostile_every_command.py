"""The hostile-input tests across commands: every `python -m` command has its case file
(tests/test_hostile_<command>.py), the real process exits 2 with one line and `--verbose` adds the traceback, and,
as root, the file-mode cases run in a pytest without root's capabilities."""

from __future__ import annotations

import gzip
import importlib
import os
import pathlib
import re
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

# command: (its other arguments, {output flag: a name for it, ending in "/" for a folder}, {input: the file, or the
# folder ending in "/", it reads}, extra files of the case folder). An input is the flag that names it in the error
# line ("A" for a positional one) and a path under {t}, or a built dataset's folder under {d}.
# Each file output is given as each file input under another name (a symbolic link, a hard link); each output, file
# or folder, is put inside each folder input (by its path and, under {t}, through a link to it); every case is one
# error line naming the input, nothing written. A folder input is one the command would fail to read (an empty
# folder): a command that broke the rule fails there with another line, before it writes.
MANIFEST_PAIR = {"a.tsv.gz": gzip.compress(b"split\tkey\turl\tsha256\ntrain\t0\thttp://example.org/0.jpg\t" + b"ab" * 32
                                           + b"\n", mtime=0)}
MANIFEST_PAIR["b.tsv.gz"] = MANIFEST_PAIR["a.tsv.gz"]
TINY_DATASET = "{d}/synthetic_scenes/tiny/1.0.0/"
OUT = {"--output": "out.txt"}
READS_AND_WRITES = {
    "capjax.text.pipeline": (("--input={t}/alt.tsv",), OUT, {"--input": "alt.tsv"}, {}),
    "capjax.tools.harvest_alt_text": (("--input={t}/page.html",), OUT, {"--input": "page.html"}, {}),
    "capjax.data.retry": (("--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/data"), OUT,
                          {"--manual_dir": "folder/"}, {}),
    "capjax.metrics.stylized_lm": (("--sentences={t}/alt.tsv",), OUT, {"--sentences": "alt.tsv"}, {}),
    "capjax.erg.generate": (("--generator={t}/folder", "--input={t}/alt.tsv"), OUT,
                            {"--input": "alt.tsv", "--generator": "folder/"}, {}),
    "capjax.text_models.embed": (("--weights={t}/folder", "--input={t}/alt.tsv"), OUT,
                                 {"--input": "alt.tsv", "--weights": "folder/"}, {}),
    "capjax.text_models.style_phrases": (("--model={t}/folder", "--sentences={t}/alt.tsv", "--style=romantic",
                                          "--output={t}/o.jsonl"), {"--output": "out.txt", "--html": "out.html"},
                                         {"--sentences": "alt.tsv", "--model": "folder/"}, {}),
    "capjax.text_models.style_classifier": (("--train=romantic={t}/alt.tsv,factual={t}/captions.tsv",
                                             "--init={t}/folder"), {"--output": "out/"}, {"--init": "folder/"}, {}),
    "capjax.tools.convert_weights": (("--format=hf_bert", "--input={t}/folder"), {"--output": "out/"},
                                     {"--input": "folder/"}, {}),
    "capjax.tools.extract_features": (("--weights={t}/folder", "--images={t}/images/*.png"), {"--output": "out.npz"},
                                      {"--images": "images/a.png", "--weights": "folder/"}, {}),
    "capjax.data.manifest": (("compare", "{t}/a.tsv.gz", "{t}/b.tsv.gz"), {"--common": "out.tsv"},
                             {"A": "a.tsv.gz", "B": "b.tsv.gz"}, MANIFEST_PAIR),
    "capjax.data.show": (("--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=validation"),
                         {"--html": "out.html", "--refs": "out.json"}, {"--data_dir": TINY_DATASET}, {}),
    "capjax.metrics.human_eval": (("sheets", "--predictions=a={t}/preds.json", "--images=synthetic_scenes/tiny:test",
                                   "--data_dir={d}"), {"--output": "out/"},
                                  {"--images=synthetic_scenes's folder": "{d}/synthetic_scenes/"}, {}),
    "capjax.tools.extract_tfds_features": (("--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--distributed=off",
                                            "--weights={t}/folder"), {"--output_data_dir": "out/"},
                                           {"--dataset=synthetic_scenes's folder": "{d}/synthetic_scenes/",
                                            "--weights": "folder/"}, {}),
    "capjax.export": (("--workdir={t}/folder",), {"--output": "out/"}, {"--workdir": "folder/"}, {}),
    "capjax.crossdomain": (("--workdirs={t}/folder", "--test=synthetic_scenes/tiny:test"), {"--output": "out/"},
                           {"--workdirs": "folder/"}, {}),
}
# Commands with a flag named like an output (OUTPUT_LIKE) that READS_AND_WRITES leaves out, and why.
OUTPUT_LIKE = re.compile(r"output|html|refs|common|out")
NOT_IN_THE_TABLE = {
    "capjax.recaption": "tests/test_hostile_recaption.py: output-inside-the-dataset, output-is-the-workdir-config",
    "capjax.erg.augment": "its output is a new dataset, --output_data_dir/--output_dataset/VERSION, which a rerun "
                          "with other settings refuses; a case needs a trained generator and style model, which "
                          "tests/test_erg_augment.py trains",
}
# Flags named like an output that are inputs.
INPUTS_NAMED_LIKE_OUTPUTS = {"capjax.text_models.style_phrases": {"heldout"}}


def _ways(path: str, name: str) -> dict[str, tuple[str, dict]]:
  """{way: (the output, the files it needs)} for an input `path` and an output called `name` (the table's comment)."""
  if path.endswith("/"):
    root = path if path.startswith("{") else "{t}/" + path
    ways = {"inside": (root + name, {})}
    if not path.startswith("{"):
      ways["inside-through-a-link"] = ("{t}/link/" + name, {"link": symlink(path.rstrip("/"))})
    return ways
  if name.endswith("/"):
    return {}
  return {"symlink": ("{t}/link-" + name, {"link-" + name: symlink(path)}),
          "hard-link": ("{t}/hard-" + name, {"hard-" + name: hard_link(path)})}


def _output_rule_cases() -> list:
  cases = []
  for command, (args, outputs, reads, extra) in READS_AND_WRITES.items():
    for flag, name in outputs.items():
      for input_flag, path in reads.items():
        where = path.rstrip("/") if path.startswith("{") else "{t}/" + path.rstrip("/")
        named = f"{input_flag}{' ' if ' ' in input_flag else '='}{where}"  # as files._named names it
        for way, (output, files) in _ways(path, name).items():
          match = f"is inside {named}, which the command reads" if "inside" in way else f"would overwrite {named} — "
          absent = (output.removeprefix("{t}/").rstrip("/"),) if "inside" in way and output.startswith("{t}/") else ()
          cases.append(case(command, f"{flag.lstrip('-')}-{way}-{input_flag.lstrip('-')}", *args, f"{flag}={output}",
                            files={**extra, **files}, match=match, absent=absent))
  return cases


OUTPUT_RULE_CASES = _output_rule_cases()
test_an_output_is_none_of_what_the_command_reads = runner(OUTPUT_RULE_CASES)


def _defined_flags(command: str) -> set[str]:
  """The names of `command`'s flags, wherever its module keeps them (FLAGS, _FLAGS, or built by _flags())."""
  module = harness.command_module(command)
  values = getattr(module, "FLAGS", None) or getattr(module, "_FLAGS", None)
  if values is None and hasattr(module, "_flags"):
    values = module._flags()
  return set(values) if values is not None else set()


def test_the_output_rule_table_names_commands_and_flags_that_exist():
  commands = harness.commands()
  for command, (_, outputs, reads, _) in READS_AND_WRITES.items():
    assert command in commands, command
    named = {f.lstrip("-").split("=")[0] for f in (*outputs, *reads) if f.startswith("--")}
    assert named <= _defined_flags(command), (command, named - _defined_flags(command))
  assert set(NOT_IN_THE_TABLE) <= set(commands) and not set(NOT_IN_THE_TABLE) & set(READS_AND_WRITES)


def test_every_command_with_an_output_flag_is_in_the_output_rule_table():
  for command in harness.commands():
    output_like = {f for f in _defined_flags(command) if OUTPUT_LIKE.search(f)}
    output_like -= INPUTS_NAMED_LIKE_OUTPUTS.get(command, set())
    if command in NOT_IN_THE_TABLE or not output_like:
      continue
    assert command in READS_AND_WRITES, f"{command} has {sorted(output_like)}: add it to READS_AND_WRITES"
    listed = {f.lstrip("-") for f in READS_AND_WRITES[command][1]}
    assert output_like <= listed, (command, output_like - listed)


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
