"""Config helpers: parse the `:arg` of `--config=configs/x.py:arg` and reject unknown variants early.

`arg` is a comma-separated list of variant names and `key=value` pairs, as in big_vision.
"""

from __future__ import annotations

from collections.abc import Collection


class ConfigError(ValueError):
  """Config fields that do not fit together; the message says which and what to set (main exits with 2)."""


def parse_arg(arg: str | None, variants: Collection[str]) -> tuple[set[str], dict[str, str]]:
  """'shapes,1x1,steps=100' -> ({'shapes', '1x1'}, {'steps': '100'}); unknown variant names are errors."""
  names: set[str] = set()
  values: dict[str, str] = {}
  for part in (arg or "").split(","):
    part = part.strip()
    if not part:
      continue
    if "=" in part:
      key, value = part.split("=", 1)
      values[key.strip()] = value.strip()
    elif part in variants:
      names.add(part)
    else:
      raise ValueError(f"unknown config variant {part!r}: choose from {sorted(variants)} "
                       "(or pass key=value pairs)")
  return names, values
