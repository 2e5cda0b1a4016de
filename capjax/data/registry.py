"""The datasets whose builders live in this repository (tfds_builders/NAME/) and how to build each, read from the
builder's own README.md rather than written here a second time. Reads files only: capjax imports no builder
statically (`capjax.data.sources` imports one by name when a dataset is opened)."""

from __future__ import annotations

import importlib.util
import pathlib
import re

# The datasets whose builders live in this repository (tfds_builders/NAME/).
BUILDER_NAMES = ("synthetic_scenes", "stylized_scenes", "cc3m", "flickrstyle10k", "senticap", "alt_text_captions",
                 "karpathy", "cc12m_llavanext", "caption_folder")


def _build_commands(readme: str) -> list[str]:
  """The `python -m capjax.data.build` command lines of a builder's README, in order, without comments."""
  commands = []
  for line in readme.splitlines():
    command = line.split("  #", 1)[0].strip().removesuffix("\\").strip()
    if command.startswith("python -m capjax.data.build ") and command not in commands:
      commands.append(command)
  return commands


def how_to_build(name: str) -> str:
  """How to build the dataset `name`, read from its builder's README.md (its build commands: one with
  --manual_dir needs downloaded data, one without builds on first use), so that the README says it once."""
  spec = importlib.util.find_spec("tfds_builders")  # found, not imported: capjax imports no builder statically
  folder = pathlib.Path(spec.submodule_search_locations[0]) / name if spec else None
  readme = folder / "README.md" if folder else None
  commands = _build_commands(readme.read_text(encoding="utf-8")) if readme and readme.is_file() else []
  if not commands:
    return f"`python -m capjax.data.build --dataset={name} --data_dir=DATA_DIR`"
  if "--manual_dir" not in commands[0]:
    return f"nothing to download: it is built automatically on first use, or by `{commands[0]}`"
  names = [match.group(1) for c in commands if (match := re.search(r"--dataset=(\S+)", c))]
  others = [name for i, name in enumerate(names) if i and name not in names[:i]]  # each once, not the first's
  return (f"download what tfds_builders/{name}/README.md lists into DIR, then run `{commands[0]}`"
          + (f" (or {', '.join(others)})" if others else ""))


# name -> (module to import, how to build it).
KNOWN_BUILDERS: dict[str, tuple[str, str]] = {name: (f"tfds_builders.{name}", how_to_build(name))
                                              for name in BUILDER_NAMES}
