"""What the metrics command lines share on top of absl: errors in flags or input are one line `error: ...` on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from absl import flags


def fail(message: str) -> int:
  """Prints `error: message` to stderr; returns the exit status for a command line's `main` to return."""
  print(f"error: {message}", file=sys.stderr)
  return 2


def parse_flags(argv: Sequence[str]) -> list[str]:
  """`app.run`'s flags_parser: absl's parsing, with a bad flag reported by `fail` instead of absl's FATAL."""
  try:
    return flags.FLAGS(list(argv))
  except flags.Error as error:
    raise SystemExit(fail(f"{error} (see --help)")) from None
