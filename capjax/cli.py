"""Command-line plumbing of capjax's commands: absl flags in a `FlagValues` of each tool's own (tools share flag
names such as --input and --weights, and one process may import several), `--help` that prints the module
docstring as usage, and bad input reported as one `error: ...` line with exit status 2.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from absl import app, flags

HELP_FLAGS = ("--help", "-help", "-h", "-?", "--helpshort", "--helpfull")


def fail(message: str) -> NoReturn:
  """Input the command cannot work with: one line on stderr, exit status 2, no traceback."""
  print(f"error: {message}", file=sys.stderr)
  raise SystemExit(2)


def parse(flag_values: flags.FlagValues, argv: Sequence[str], usage: str, positional: bool = False) -> list[str]:
  """Sets `flag_values` from `argv` (program name first, as `app.run` passes it), every flag not given back at
  its default, and returns the positional arguments. `--help` prints `usage` and the flags, then exits 0; a bad
  or missing flag is an `error:` line and exit 2, and so is a positional argument unless `positional`."""
  if any(arg in HELP_FLAGS for arg in argv[1:]):
    print(f"{usage.strip()}\n\nflags:\n{flags_help(flag_values)}")
    raise SystemExit(0)
  for name in flag_values:  # a second call in one process (tests) starts from the defaults again
    flag_values[name].unparse()
  try:
    rest = flag_values(list(argv))
  except flags.Error as error:  # absl puts one line per bad flag: the user gets them on one
    missing = re.findall(r"Flag (--\w+) must have a value other than None", str(error))
    if missing:
      fail(f"missing {', '.join(missing)} (see --help)")
    fail(f"{'; '.join(str(error).splitlines())} (see --help)")
  if len(rest) > 1 and not positional:
    fail(f"unexpected arguments {rest[1:]}: every input is a --flag (see --help)")
  return rest[1:]


def flags_help(flag_values: flags.FlagValues) -> str:
  """Each flag with its help and default, without absl's per-module headings (one module defines them all)."""
  modules = set(flag_values.flags_by_module_dict())
  lines = flag_values.get_help(prefix="", include_special_flags=False).splitlines()
  return "\n".join(line for line in lines if line.strip() and line.rstrip(":") not in modules)


def run(main: Callable[[list[str]], int | None]) -> NoReturn:
  """`app.run(main)` for a `main(argv)` that parses its own flags with `parse`; absl's global flags (logging)
  keep their defaults."""
  app.run(main, flags_parser=lambda argv: (flags.FLAGS(argv[:1]), list(argv))[1])
