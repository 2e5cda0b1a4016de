"""Imports point one way: every module of capjax/, configs/ and tfds_builders/ sits in the layer ARCHITECTURE.md
gives it, imports nothing above that layer, takes part in no import cycle, and nothing imports capjax.main (nor,
outside the tools, capjax.tools). And a .py file over 450 lines says in its header why it is not split."""

from __future__ import annotations

import ast
import pathlib
import re
import shutil
from collections.abc import Iterator, Mapping

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("capjax", "configs", "tfds_builders")  # the trees that are parsed; imports of anything else are ignored
NEVER_IMPORTED = "capjax.main"
TOOLS = "capjax.tools"


def layer_table(markdown: str) -> dict[str, int]:
  """{module prefix: layer} from the `| layer | name | modules (prefixes) |` table of ARCHITECTURE.md."""
  table: dict[str, int] = {}
  for line in markdown.splitlines():
    row = re.fullmatch(r"\|\s*(\d+)\s*\|[^|]*\|(.*)\|\s*", line)
    if row:
      for prefix in re.findall(r"`([\w.]+)`", row.group(2)):
        table[prefix] = int(row.group(1))
  return table


def layer_of(module: str, table: Mapping[str, int]) -> int | None:
  """The layer of the longest prefix of `module` in `table`. The root package `capjax` names its `__init__` only,
  so a new top-level module has no layer until it gets a row."""
  parts = module.split(".")
  for n in range(len(parts), 0, -1):
    prefix = ".".join(parts[:n])
    if prefix in table and (prefix != "capjax" or module == "capjax"):
      return table[prefix]
  return None


def module_files(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """{dotted module name: file} for every .py file of the parsed packages under `root`."""
  modules = {}
  for package in PACKAGES:
    for path in sorted((root / package).rglob("*.py")):
      parts = path.relative_to(root).with_suffix("").parts
      modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  return modules


def imported(path: pathlib.Path, module: str, known: Mapping[str, pathlib.Path]) -> Iterator[tuple[str, int]]:
  """(imported module, line) for every import in the file, function-level ones included: a lazy import is still a
  dependency. `from a import b` names the module `a.b` when that is a module, else `a`."""
  package = module if path.name == "__init__.py" else module.rpartition(".")[0]
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name, node.lineno
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: resolved against this module's package
        anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
      for alias in node.names:
        name = f"{base}.{alias.name}"
        yield (name if name in known else base), node.lineno


def dependencies(root: pathlib.Path) -> dict[str, list[tuple[str, int]]]:
  """{module: [(imported module inside the parsed packages, line)]}."""
  known = module_files(root)
  graph = {}
  for module, path in known.items():
    graph[module] = [(target, line) for target, line in imported(path, module, known)
                     if target.split(".")[0] in PACKAGES]
  return graph


def cycles(graph: Mapping[str, list[tuple[str, int]]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan), each sorted."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on_stack: set[str] = set()
  found: list[list[str]] = []

  def visit(node: str) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target, _ in graph.get(node, []):
      if target not in graph or target == node:
        continue
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return found


def violations(root: pathlib.Path, table: Mapping[str, int]) -> list[str]:
  """Every breach of the rules, one line each (empty when the tree is clean)."""
  graph = dependencies(root)
  problems = []
  for module in sorted(graph):
    layer = layer_of(module, table)
    if layer is None:
      problems.append(f"{module} has no layer: add its prefix to the layer table in ARCHITECTURE.md")
      continue
    for target, line in graph[module]:
      where = f"{module} (line {line}) imports {target}"
      if target == NEVER_IMPORTED or target.startswith(NEVER_IMPORTED + "."):
        problems.append(f"{where}: nothing imports the entry point")
      elif target.startswith(TOOLS + ".") and not module.startswith(TOOLS + "."):
        problems.append(f"{where}: the tools import the library, never the reverse")
      elif (target_layer := layer_of(target, table)) is not None and target_layer > layer:
        problems.append(f"{where}: an upward import, layer {layer} -> {target_layer}")
  problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
  return problems


@pytest.fixture(scope="module")
def table() -> dict[str, int]:
  return layer_table((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))


def test_the_layer_table_names_every_layer_and_the_anticipated_packages(table):
  assert sorted(set(table.values())) == [0, 1, 2, 3, 4, 5]
  assert layer_of("capjax.strings", table) == 0 and layer_of("capjax.tokens", table) == 1
  for module in ("capjax.scenes.grammar", "capjax.image.io", "capjax.image.labels"):
    assert layer_of(module, table) == 1, module
  for module in ("capjax.metrics.ngrams", "capjax.metrics.java", "capjax.models.captioner", "capjax.data.sources"):
    assert layer_of(module, table) == 2, module
  assert layer_of("tfds_builders.cc3m.cc3m_dataset_builder", table) == 5
  assert layer_of("capjax.newmodule", table) is None  # a new top-level module needs its own row


def test_imports_point_down_without_cycles(table):
  assert violations(REPO, table) == []


def _copy(tmp_path: pathlib.Path) -> pathlib.Path:
  """The parsed packages copied to a temporary tree (the real one is never touched)."""
  for package in PACKAGES:
    shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
  return tmp_path


def _plant(path: pathlib.Path, statement: str) -> int:
  """Appends a function whose body is the import `statement`; returns that statement's line."""
  text = path.read_text(encoding="utf-8") + f"\n\ndef planted():\n  {statement}\n"
  path.write_text(text, encoding="utf-8")
  return len(text.splitlines())


def test_a_planted_upward_import_fails(table, tmp_path):
  root = _copy(tmp_path)
  line = _plant(root / "capjax" / "strings.py", "from capjax import train")
  found = violations(root, table)
  assert found[0] == f"capjax.strings (line {line}) imports capjax.train: an upward import, layer 0 -> 4"
  assert all(v.startswith("import cycle: ") for v in found[1:])  # train reaches strings: a cycle too


@pytest.mark.parametrize(("where", "statement", "expected"), [
    ("capjax/data/preprocess.py", "from capjax.data import pipeline",  # pipeline imports preprocess
     "import cycle: capjax.data.pipeline -> capjax.data.preprocess"),
    ("capjax/tools/param_count.py", "import capjax.main",
     "capjax.tools.param_count (line {line}) imports capjax.main: nothing imports the entry point"),
    ("configs/t2t.py", "from capjax.tools import convert_weights",
     "configs.t2t (line {line}) imports capjax.tools.convert_weights: the tools import the library, never the "
     "reverse"),
])
def test_a_planted_cycle_or_import_of_a_command_fails(table, tmp_path, where, statement, expected):
  root = _copy(tmp_path)
  line = _plant(root / where, statement)
  assert violations(root, table) == [expected.format(line=line)]


def test_no_command_loads_jax_tensorflow_orbax_or_grain_to_parse_its_flags():
  # `--help` and a bad flag are answered before `main` does any work: the libraries of the work (TensorFlow through
  # TFDS, orbax, grain: 7 s of imports) are imported inside it. One process imports every command.
  import subprocess
  import sys

  sys.path.insert(0, str(REPO / "benchmarks"))
  try:
    import help_latency
  finally:
    sys.path.remove(str(REPO / "benchmarks"))
  modules = help_latency.commands()
  assert {"capjax.main", "capjax.data.build", "capjax.tools.sharding_report", "capjax.text.tagger"} <= set(modules)
  # Nor jax (1.3-1.6 s of a 2 s budget for --help): a command that is a library's front too reaches the library's
  # names on first use (`cli.lazy_attributes`).
  code = (f"import sys\nfor m in {modules!r}: __import__(m)\nprint('jax' in sys.modules)\n"
          "print(sorted(h for h in ('tensorflow', 'orbax', 'grain') if h in sys.modules))")
  jax, heavy = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.splitlines()
  assert heavy == "[]", heavy
  assert jax == "False", f"one of {modules} imports jax at import time: import it inside main"


# ------------------------------------------------------------------------------------------------ builders

# TFDS's public API for a builder: what its own builders define. Every other private method of theirs may change in
# any release (tfds_builders once overrode _download_and_prepare and _post_download_and_prepare_hook).
BUILDER_API = frozenset({"_info", "_split_generators", "_generate_examples"})


def tfds_private_methods() -> frozenset[str]:
  """The private methods of the installed tfds.core.GeneratorBasedBuilder and DatasetBuilder (dunders aside)."""
  tfds = pytest.importorskip("tensorflow_datasets")
  return frozenset(name for cls in (tfds.core.GeneratorBasedBuilder, tfds.core.DatasetBuilder) for name in dir(cls)
                   if name.startswith("_") and not name.startswith("__"))


def private_overrides(root: pathlib.Path, private: frozenset[str]) -> list[str]:
  """`module.Class._name (line N)` for each method of a class in tfds_builders/ (builders and the mixins they are
  made of) named like a private TFDS builder method other than BUILDER_API."""
  found = []
  for module, path in sorted(module_files(root).items()):
    if not module.startswith("tfds_builders"):
      continue
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.ClassDef):
        found += [f"{module}.{node.name}.{item.name} (line {item.lineno}) overrides a private TFDS method"
                  for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and item.name in private - BUILDER_API]
  return found


def test_builders_override_no_private_tfds_method():
  assert private_overrides(REPO, tfds_private_methods()) == []


def test_a_planted_override_of_a_private_tfds_method_fails(tmp_path):
  root = _copy(tmp_path)
  path = root / "tfds_builders" / "cc3m" / "cc3m_dataset_builder.py"
  text = path.read_text(encoding="utf-8")
  text = text.replace("  def _split_generators(", "  def _download_and_prepare(self, dl_manager, download_config):\n"
                      "    return None\n\n  def _split_generators(", 1)
  path.write_text(text, encoding="utf-8")
  line = text.splitlines().index("  def _download_and_prepare(self, dl_manager, download_config):") + 1
  assert private_overrides(root, tfds_private_methods()) == [
      f"tfds_builders.cc3m.cc3m_dataset_builder.Builder._download_and_prepare (line {line}) overrides a private "
      "TFDS method"]


# ------------------------------------------------------------------------------------------------ checkpointers

# The one module that builds orbax checkpointers (auxiliary models' parameters: generator, dual encoder, style
# classifier, converted text models and Inception-ResNet-v2 weights). capjax/train.py builds an orbax
# `CheckpointManager`, a manager of the captioner's step folders rather than a checkpointer, and is not matched.
CHECKPOINTER_MODULE = "capjax.model_io"


def checkpointer_constructions(root: pathlib.Path) -> list[str]:
  """`module (line N) constructs orbax's NAME` for each call, outside CHECKPOINTER_MODULE, of a name or attribute
  ending in `Checkpointer` (StandardCheckpointer, PyTreeCheckpointer, Checkpointer, AsyncCheckpointer, ...)."""
  found = []
  for module, path in sorted(module_files(root).items()):
    if module == CHECKPOINTER_MODULE or not module.startswith(("capjax", "tfds_builders")):
      continue
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name.endswith("Checkpointer"):
          found.append(f"{module} (line {node.lineno}) constructs orbax's {name}: save and load through "
                       f"{CHECKPOINTER_MODULE}")
  return found


def test_only_the_save_load_module_constructs_an_orbax_checkpointer():
  assert checkpointer_constructions(REPO) == []


def test_a_planted_checkpointer_fails(tmp_path):
  root = _copy(tmp_path)
  line = _plant(root / "capjax" / "gallery.py", "import orbax.checkpoint as ocp; ocp.PyTreeCheckpointer()")
  planted = "capjax.gallery (line {}) constructs orbax's PyTreeCheckpointer: save and load through capjax.model_io"
  assert planted.format(line) in checkpointer_constructions(root)


# ------------------------------------------------------------------------------------------------ file size

MAX_LINES = 450
SIZED_TREES = ("capjax", "tfds_builders", "configs", "tests", "benchmarks")
# The recognisable form of a reason: a line of the file's header (its module docstring, or a comment before its first
# statement after it) that starts with "Not split:".
NOT_SPLIT = re.compile(r"^[ \t]*(?:#[ \t]*)?Not split:", re.MULTILINE)


def header(text: str) -> str:
  """A module's text up to its first statement after the docstring: the docstring and the comments around it."""
  body = ast.parse(text).body
  if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
    body = body[1:]
  return "\n".join(text.splitlines()[:body[0].lineno - 1]) if body else text


def long_files_without_a_reason(root: pathlib.Path) -> list[str]:
  """`path (N lines)` for each .py file of SIZED_TREES over MAX_LINES whose header gives no "Not split:" reason."""
  found = []
  for tree in SIZED_TREES:
    for path in sorted((root / tree).rglob("*.py")):
      text = path.read_text(encoding="utf-8")
      lines = len(text.splitlines())
      if lines > MAX_LINES and not NOT_SPLIT.search(header(text)):
        found.append(f"{path.relative_to(root).as_posix()} ({lines} lines)")
  return found


def test_no_file_over_450_lines_without_a_reason_in_its_header():
  assert long_files_without_a_reason(REPO) == []


def test_a_planted_long_file_is_named_until_its_header_says_why(tmp_path):
  (tmp_path / "tests").mkdir()
  path = tmp_path / "tests" / "long.py"
  body = "\n".join(f"X{i} = {i}" for i in range(MAX_LINES)) + "\n"
  path.write_text('"""A long module."""\n' + body, encoding="utf-8")
  assert long_files_without_a_reason(tmp_path) == [f"tests/long.py ({MAX_LINES + 1} lines)"]
  path.write_text('"""A long module.\n\nNot split: one table, read as one."""\n' + body, encoding="utf-8")
  assert long_files_without_a_reason(tmp_path) == []
  path.write_text('"""A long module."""\n\n# Not split: one table, read as one.\n' + body, encoding="utf-8")
  assert long_files_without_a_reason(tmp_path) == []
  path.write_text('"""A long module."""\n' + body + "# Not split: a reason at the end is no header's\n",
                  encoding="utf-8")
  assert long_files_without_a_reason(tmp_path) == [f"tests/long.py ({MAX_LINES + 2} lines)"]
  path.write_text('"""A long module."""\n' + body[:-len(f"X{MAX_LINES - 1} = {MAX_LINES - 1}\n")], encoding="utf-8")
  assert long_files_without_a_reason(tmp_path) == []  # 450 lines: at the limit, not over it
