"""How long each capjax command takes to answer `--help` (a user's first contact with it), and which heavy
libraries its import loads: every command in one run, each `--repeats` times, interleaved so that the machine's
noise hits all alike.

`python benchmarks/help_latency.py [--repeats=3]`

A command's `--help` needs only its flags; the libraries of the work (TensorFlow through TFDS, orbax, grain, NLTK's
corpora) belong inside `main`, after `cli.parse`. `tests/test_architecture.py` checks that no command imports
TensorFlow, orbax or grain at import time.
"""

from __future__ import annotations

import pathlib
import re
import statistics
import subprocess
import sys
import time

from absl import app, flags

REPO = pathlib.Path(__file__).resolve().parent.parent
HEAVY = ("tensorflow", "tensorflow_datasets", "orbax.checkpoint", "grain", "jax", "nltk", "transformers")

_REPEATS = flags.DEFINE_integer("repeats", 3, "--help calls of each command, interleaved")


def commands() -> list[str]:
  """The modules of `capjax/` that are commands (they end in `cli.run(main)`)."""
  found = []
  for path in sorted((REPO / "capjax").rglob("*.py")):
    if re.search(r"^\s+cli\.run\(", path.read_text(encoding="utf-8"), re.M):
      module = ".".join(path.relative_to(REPO).with_suffix("").parts)
      found.append(module.removesuffix(".__main__"))
  return found


def heavy_imports(module: str) -> list[str]:
  """The HEAVY libraries that importing `module` loads."""
  code = f"import sys, {module}; print(' '.join(h for h in {HEAVY!r} if h in sys.modules))"
  return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                        check=True).stdout.split()


def main(argv: list[str]) -> None:
  del argv
  names = commands()
  times: dict[str, list[float]] = {name: [] for name in names}
  for _ in range(_REPEATS.value):
    for name in names:
      start = time.perf_counter()
      subprocess.run([sys.executable, "-m", name, "--help"], cwd=REPO, capture_output=True, check=True)
      times[name].append(time.perf_counter() - start)
  print(f"| command | `--help` s (median of {_REPEATS.value}) | imported for it |")
  print("|---|---|---|")
  for name in sorted(names, key=lambda n: -statistics.median(times[n])):
    print(f"| `{name}` | {statistics.median(times[name]):.2f} | {', '.join(heavy_imports(name)) or '-'} |")


if __name__ == "__main__":
  app.run(main)
