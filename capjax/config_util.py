"""Config helpers: the one way to load `configs/x.py:arg` (`load`), and the parsing of its `:arg` that rejects unknown
variants early. `arg` is a comma-separated list of variant names and `key=value` pairs, as in big_vision.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
from collections.abc import Collection

import ml_collections


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
      raise ValueError(f"unknown config variant {part!r} — choose from {sorted(variants)} "
                       "(or pass key=value pairs)")
  return names, values


def int_value(values: dict[str, str], key: str) -> int:
  """`values[key]` of `parse_arg`, removed from `values`, as an integer (`steps=100`); a ValueError otherwise."""
  text = values.pop(key)
  try:
    return int(text)
  except ValueError:
    raise ValueError(f"{key}={text} is not an integer — e.g. {key}=100") from None


def load(spec: str | os.PathLike[str]) -> ml_collections.ConfigDict:
  """`path/to/config.py[:arg]` -> the ConfigDict its `get_config(arg)` returns (`arg` None when absent).

  A relative path is read from the working directory, as `--config` reads it. The file is executed as a fresh
  module each time, so two loads never share mutable state.
  """
  path, sep, arg = os.fspath(spec).partition(".py:")
  path = pathlib.Path(path + ".py" if sep else path)
  if path.is_file() and path.suffix != ".py":
    raise FileNotFoundError(f"{os.fspath(path)!r} is not a config file (a .py file) — give "
                            "`path/to/config.py[:variants]`")
  if not path.is_file():
    raise FileNotFoundError(f"config file {os.fspath(path)!r} not found — give `path/to/config.py[:variants]`")
  module_spec = importlib.util.spec_from_file_location(f"capjax_config_{path.stem}", path)
  module = importlib.util.module_from_spec(module_spec)
  try:
    module_spec.loader.exec_module(module)
  except SyntaxError as error:  # the user's file: one line that says where, not the parser's traceback
    raise ValueError(f"config file {os.fspath(path)!r} line {error.lineno}: {error.msg} — fix the file") from error
  if not callable(getattr(module, "get_config", None)):
    raise ValueError(f"config file {os.fspath(path)!r} has no get_config(arg) — a config file defines "
                     "get_config(arg=None) returning its ConfigDict, as configs/t2t.py does")
  return module.get_config(arg or None)


# Fields of the captioning configs (configs/t2t.py, configs/rnn.py) and the values that make sense: checked before
# any work, so that `batch_size=0` is one line rather than a grain traceback, and `log_every=0` is not a
# ZeroDivisionError an hour into training. (field, lowest value, whether the lowest is allowed).
_LOWER_BOUNDS: tuple[tuple[str, float, bool], ...] = (
    ("batch_size", 1, True), ("eval.batch_size", 1, True), ("num_train_steps", 0, True), ("log_every", 1, True),
    ("eval_every", 1, True), ("checkpoint_every", 1, True), ("keep_checkpoints", 1, True),
    ("max_caption_tokens", 1, True), ("vocab.min_count", 1, True), ("model.d_model", 1, True),
    ("model.mlp_dim", 1, True), ("model.num_heads", 1, True), ("model.encoder_layers", 0, True),
    ("model.decoder_layers", 0, True), ("model.vocab_multiple", 1, True), ("optimizer.learning_rate", 0, False),
    ("optimizer.warmup_steps", 0, True), ("decode.beam_size", 1, True), ("max_steps_ahead", 1, True),
)
_FRACTIONS = ("model.dropout_rate", "label_smoothing")  # in [0, 1)


def _field(config: ml_collections.ConfigDict, path: str):
  value = config
  for key in path.split("."):
    if not isinstance(value, ml_collections.ConfigDict) or key not in value:
      return None
    value = value[key]
  return value


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming the first field whose value no run can use (absent fields are not checked)."""
  for path, low, inclusive in _LOWER_BOUNDS:
    value = _field(config, path)
    if value is not None and (value < low or (value == low and not inclusive)):
      bound = f"at least {low}" if inclusive else f"more than {low}"
      raise ConfigError(f"{path}={value} is impossible — set --config.{path} to {bound}")
  for path in _FRACTIONS:
    value = _field(config, path)
    if value is not None and not 0 <= value < 1:
      raise ConfigError(f"{path}={value} is impossible — set --config.{path} in [0, 1)")
  _validate_mesh(config)
  heads, d = _field(config, "model.num_heads"), _field(config, "model.d_model")
  if heads and d and _field(config, "model.name") == "t2t" and d % heads:
    raise ConfigError(f"model.d_model={d} is not divisible by model.num_heads={heads} — choose a d_model that is")


MESH_SIZES = ("data", "fsdp", "model")  # capjax.sharding.MESH_AXES; dcn_<axis>: the same axis across TPU slices


def _validate_mesh(config: ml_collections.ConfigDict) -> None:
  """Mesh sizes are positive integers or -1 (one per group at most); the rules table's name, and whether the sizes
  fit the devices and the rules, are checked by `capjax.sharding.make_mesh`, which knows the tables."""
  for group in (MESH_SIZES, tuple(f"dcn_{axis}" for axis in MESH_SIZES)):
    free = []
    for name in group:
      value = _field(config, f"mesh.{name}")
      if value is None:
        continue
      if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
        raise ConfigError(f"mesh.{name}={value!r} is impossible — set --config.mesh.{name} to a positive integer, "
                          "or -1 for the devices left")
      if value == -1:
        free.append(name)
    if len(free) > 1:
      raise ConfigError(f"mesh.{' and mesh.'.join(free)} are all -1 — at most one may be -1: give the others sizes")
  rules = _field(config, "mesh.rules")
  if rules is not None and not isinstance(rules, str):
    raise ConfigError(f"mesh.rules={rules!r} is not a table name — set --config.mesh.rules to one of "
                      "capjax.sharding.RULES (dp, fsdp, tp, fsdp_tp)")
