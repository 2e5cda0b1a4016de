"""The commands of README.md, docs/*.md and tfds_builders/*/README.md, run as written.

Every ```sh block of those files has a tag on the line right before it (an HTML comment, which Markdown does not
show):

  <!-- test: dummy -->          the test runs each command of the block and checks that it exits 0
  <!-- test: dummy output -->   ... and that a `# LINE` comment right after a command is a line of its output
  <!-- test: skip REASON -->    not run; REASON says why: real data, a download, an accelerator, or
                                `slow (what it costs; which test covers it)`

An untagged ```sh block fails the test, so a new command in the docs is either run here or says why not. A dummy
block runs on the shipped data: its placeholders are filled here (PLACEHOLDERS: data dirs and outputs in a
temporary folder, `DIR` a builder README's `dummy_data/`, `../shared/` the shared data beside the repo), an optional
`[--flag]` is given, `python -m` is this interpreter. The blocks run in order (builders' READMEs first, then
README.md, then the docs/ pages), in one data dir, so a later block reads what an earlier one built, as a reader
following the docs would.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # runs the README's commands (conftest.py: the slow rule)

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
DOCS = sorted(REPO.glob("tfds_builders/*/README.md")) + [REPO / "README.md"] + sorted(REPO.glob("docs/*.md"))
TAG = re.compile(r"<!-- test: (dummy(?: output)?|skip (?P<reason>\S.*?)) -->")
# A two-row alt-text TSV for `--input=IN.tsv` (capjax.text.pipeline's `id<TAB>alt_text`).
IN_TSV = "1\tActor Tom Cruise attends the premiere of the film in Los Angeles.\n2\tA dog runs on the beach.\n"


@dataclasses.dataclass(frozen=True)
class Block:
  doc: pathlib.Path
  line: int     # the line of the opening fence
  tag: str      # "dummy", "dummy output" or "skip REASON"; "" when untagged
  text: list[str]

  @property
  def name(self) -> str:
    return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: pathlib.Path) -> list[Block]:
  """The ```sh blocks of `doc` with their tags."""
  lines = doc.read_text(encoding="utf-8").splitlines()
  found, i = [], 0
  while i < len(lines):
    if lines[i].startswith("```"):
      end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
      if lines[i].strip() == "```sh":
        tag = TAG.fullmatch(lines[i - 1].strip()) if i else None
        found.append(Block(doc, i + 1, tag.group(1) if tag else "", lines[i + 1:end]))
      i = end
    i += 1
  return found


def commands(block: Block) -> list[tuple[str, list[str]]]:
  """(command, the output lines the block shows after it), continuation lines joined, comment lines dropped."""
  found: list[tuple[str, list[str]]] = []
  pending, after_command = "", False
  for line in block.text:
    if pending:
      pending += " " + line.strip()
    elif line.lstrip().startswith("#") or not line.strip():
      if after_command and line.strip() and block.tag == "dummy output":
        found[-1][1].append(line.lstrip()[1:].strip())
      else:
        after_command = False
      continue
    else:
      pending = line.strip()
    if pending.endswith("\\"):
      pending = pending[:-1].rstrip()
    else:
      found.append((pending, []))
      pending, after_command = "", True
  return found


def fill(command: str, doc: pathlib.Path, data_dir: pathlib.Path, tmp: pathlib.Path) -> list[str]:
  """`command` with its placeholders filled, as argv."""
  placeholders = {
      r"\$?\bDATA_DIR\b|\$?\bDATA\b|\bOUT\b(?!\.)": lambda _: str(data_dir),
      r"(?<=manual_dir=)DIR\b": lambda _: str(doc.parent / "dummy_data"),
      r"\bIN\.tsv\b": lambda _: str(tmp / "in.tsv"),
      r"(?<![\w/])\.\./shared/": lambda _: f"{SHARED}/",
      r"\[(--[^\]|]+)\]": lambda match: match.group(1),  # an optional flag is given
  }
  for pattern, value in placeholders.items():
    command = re.sub(pattern, value, command)
  argv = shlex.split(command, comments=True)
  if argv[:2] == ["python", "-m"]:
    argv[0] = sys.executable
  return argv


ALL = [block for doc in DOCS for block in blocks(doc)]


def test_every_sh_block_is_tagged():
  untagged = [block.name for block in ALL if not block.tag]
  assert not untagged, f"```sh blocks without a `<!-- test: ... -->` line before them: {untagged}"
  assert sum(block.tag.startswith("dummy") for block in ALL) >= 8  # the parser still finds the runnable blocks
  assert {"README.md", "docs"} <= {block.doc.relative_to(REPO).parts[0] for block in ALL}  # the docs pages' too


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> pathlib.Path:
  return tmp_path_factory.mktemp("readme_data")


def env_for(data_dir: pathlib.Path) -> dict[str, str]:
  env = dict(os.environ)
  env.update(PYTHONPATH=str(REPO), TFDS_DATA_DIR=str(data_dir), JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
  return env


@pytest.mark.parametrize("block", [b for b in ALL if b.tag.startswith("dummy")], ids=lambda b: b.name)
def test_dummy_block_runs_as_written(block, data_dir, tmp_path):
  (tmp_path / "in.tsv").write_text(IN_TSV, encoding="utf-8")
  if "synthetic_scenes/tiny" in "\n".join(block.text) and not (data_dir / "synthetic_scenes" / "tiny").is_dir():
    # README.md's data.show reads the build that tfds_builders/synthetic_scenes/README.md makes before it
    subprocess.run([sys.executable, "-m", "capjax.data.build", "--dataset=synthetic_scenes/tiny",
                    f"--data_dir={data_dir}"], cwd=tmp_path, env=env_for(data_dir), check=True, capture_output=True)
  for command, shown in commands(block):
    argv = fill(command, block.doc, data_dir, tmp_path)
    proc = subprocess.run(argv, cwd=tmp_path, env=env_for(data_dir), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{block.name}: {command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    for line in shown:
      assert line in proc.stdout.splitlines(), f"{block.name}: {command} no longer prints\n{line}\n{proc.stdout}"
