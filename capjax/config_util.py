"""Config helpers: the one way to load `configs/x.py:arg` (`load`), and the parsing of its `:arg` that rejects unknown
variants early. `arg` is a comma-separated list of variant names and `key=value` pairs, as in big_vision. `validate`
checks a config's values before any work; `check_number` is the one check of a number (NaN, infinities, range) that
config fields and command flags (`capjax.cli.check_number`) share; `mesh_sizes` the one check of the mesh sizes,
which `validate` and `capjax.sharding` share.
"""

from __future__ import annotations

import importlib.util
import math
import numbers
import os
import pathlib
from collections.abc import Collection, Iterator, Mapping
from typing import Any

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
    ("optimizer.warmup_steps", 0, True), ("decode.beam_size", 1, True), ("dataset.image_size", 1, True),
    ("model.encoder.out_features", 1, True), ("eval.num_examples", 1, True), ("eval.gallery_size", 0, True),
    ("eval.rating_sheet_size", 0, True), ("input.num_threads", 0, True), ("input.prefetch", 0, True),
    ("decode.alpha", 0, True), ("optimizer.eps", 0, True), ("optimizer.grad_clip_norm", 0, True),
    ("optimizer.initial_accumulator_value", 0, True), ("augment.crop_min_scale", 0, False),
    ("max_steps_ahead", 1, True), ("profile_steps", 0, True), ("optimizer.accumulate_steps", 1, True),
)
_FRACTIONS = ("model.dropout_rate", "label_smoothing", "optimizer.b1", "optimizer.b2",  # in [0, 1)
              "optimizer.ema_decay")
_AT_MOST_ONE = ("augment.crop_min_scale",)  # a share of the image: (0, 1]
DECODE_METHODS = ("greedy", "beam")  # capjax.train.decode_tokens' searches (sampling is scst's, not evaluation's)


def _field(config: ml_collections.ConfigDict, path: str):
  value = config
  for key in path.split("."):
    if not isinstance(value, ml_collections.ConfigDict) or key not in value:
      return None
    value = value[key]
  return value


def check_number(name: str, value: float, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False, hint: str = "") -> None:
  """Raises ConfigError unless `value` is a finite number in [low, high] (an end excluded when `*_open`; None: no
  bound). The one range check of config fields (`name` "--config.x") and command flags (`name` "--x"): NaN, which
  every comparison lets through, and infinities are refused whatever the bounds. `hint` is added to what to do."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise ConfigError(f"{name}={value!r} is not a number — set {name} to a number{hint}")
  if not math.isfinite(value):
    bounds = _bounds(low, high, low_open, high_open) or " to a number"
    raise ConfigError(f"{name}={value} is not a finite number — set {name}{bounds}{hint}")
  if (low is not None and (value < low or (low_open and value == low))) or (
      high is not None and (value > high or (high_open and value == high))):
    raise ConfigError(f"{name}={value} is impossible — set {name}{_bounds(low, high, low_open, high_open)}{hint}")


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
  """' in [0, 1)', ' to at least 1', ' to more than 0', ' to at most 5', or '' without bounds."""
  if low is not None and high is not None:
    return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
  if low is not None:
    return f" to {'more than' if low_open else 'at least'} {low:g}"
  if high is not None:
    return f" to {'less than' if high_open else 'at most'} {high:g}"
  return ""


def _numbers(config: ml_collections.ConfigDict, prefix: str = "") -> Iterator[tuple[str, float]]:
  """(dotted path, value) of every float field, nested ones too."""
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict):
      yield from _numbers(value, f"{prefix}{key}.")
    elif isinstance(value, float):
      yield f"{prefix}{key}", value


def machine_memory() -> int | None:
  """This machine's physical memory in bytes (None where the OS does not say)."""
  try:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  except (ValueError, OSError, AttributeError):
    return None


def attention_bytes(config: ml_collections.ConfigDict) -> int | None:
  """The estimate the caption length is checked with: one layer's decoder self-attention scores for one training
  batch, float32: batch_size x num_heads x (max_caption_tokens + 1)^2 x 4 bytes. Training holds several such
  tensors per layer, so a length whose single tensor exceeds the memory of every process together cannot run,
  however the batch is split (None for a model without attention heads)."""
  heads, tokens, batch = (_field(config, f) for f in ("model.num_heads", "max_caption_tokens", "batch_size"))
  if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (heads, tokens, batch)):
    return None
  return batch * heads * (tokens + 1) ** 2 * 4


def validate(config: ml_collections.ConfigDict, processes: int = 1, memory: int | None = None) -> None:
  """Raises ConfigError naming the first field whose value no run can use (absent fields are not checked): a
  float field that is NaN or infinite, a value out of its range, a decode method no search has, an empty dataset
  name, a caption length whose attention (`attention_bytes`) exceeds the memory of `processes` machines like this
  one (or `memory` bytes). Every value is checked here, at start-up, never at its first use."""
  for path, low, inclusive in _LOWER_BOUNDS:
    value = _field(config, path)
    if value is not None:
      check_number(f"--config.{path}", value, low, low_open=not inclusive)
  for path in _FRACTIONS:
    value = _field(config, path)
    if value is not None:
      check_number(f"--config.{path}", value, 0, 1, high_open=True)
  for path in _AT_MOST_ONE:
    value = _field(config, path)
    if value is not None:
      check_number(f"--config.{path}", value, high=1)
  for path, value in _numbers(config):  # the float fields without a range of their own: finite at least
    check_number(f"--config.{path}", value)
  method = _field(config, "decode.method")
  if method is not None and method not in DECODE_METHODS:  # else the first evaluation, maybe hours in, fails
    raise ConfigError(f"--config.decode.method={method!r} is not a search evaluation decodes with — set it to "
                      f"{' or '.join(DECODE_METHODS)} (sampling is for training: the scst variant's --config.scst.*)")
  name = _field(config, "dataset.name")
  if isinstance(name, str) and not name.strip():
    raise ConfigError("dataset.name is empty — set --config.dataset.name to a dataset, e.g. synthetic_scenes or cc3m")
  _validate_mesh(config)
  accumulate, batch = _field(config, "optimizer.accumulate_steps"), _field(config, "batch_size")
  if accumulate and batch and batch % accumulate:
    raise ConfigError(f"optimizer.accumulate_steps={accumulate} does not divide batch_size={batch} into equal "
                      "micro-batches — choose a divisor of batch_size")
  heads, d = _field(config, "model.num_heads"), _field(config, "model.d_model")
  if heads and d and _field(config, "model.name") == "t2t" and d % heads:
    raise ConfigError(f"model.d_model={d} is not divisible by model.num_heads={heads} — choose a d_model that is")
  needed = attention_bytes(config)
  if memory is None and (machine := machine_memory()):
    memory = machine * processes
  if needed is not None and memory and needed > memory:
    raise ConfigError(
        f"max_caption_tokens={_field(config, 'max_caption_tokens')} needs more memory than the run has: one layer's "
        f"attention scores for one batch alone take {needed / 2**30:,.0f} GiB (estimate: batch_size x num_heads x "
        f"(max_caption_tokens + 1)^2 x 4 bytes), {processes} process(es) have {memory / 2**30:,.0f} GiB — set "
        "--config.max_caption_tokens to the caption length the data needs (capjax.text.stats prints tokens_p95)")


MESH_AXES = ("data", "fsdp", "model")  # capjax.sharding's mesh axes, in order of increasing communication
DCN_FIELDS = {axis: f"dcn_{axis}" for axis in MESH_AXES}  # multi-slice TPU: the same axes' sizes across slices


def mesh_sizes(mesh_config: ml_collections.ConfigDict | Mapping[str, Any], dcn: bool = False) -> dict[str, int]:
  """{axis: size} of the `mesh` fields (with `dcn`, of their `dcn_<axis>` twins: the sizes across TPU slices), 1 for
  an absent field. The one check of mesh sizes, before any work (`validate`) and before a mesh is made
  (`capjax.sharding.mesh_shape`, which fills the -1): each size a positive integer or -1 (the devices, or slices,
  left), at most one -1 per group; a ConfigError naming the field otherwise."""
  sizes = {}
  for axis in MESH_AXES:
    field = DCN_FIELDS[axis] if dcn else axis
    value = mesh_config.get(field, 1)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (value < 1 and value != -1):
      raise ConfigError(f"mesh.{field}={value!r} is impossible — set --config.mesh.{field} to a positive integer, "
                        "or -1 for the devices left")
    sizes[axis] = int(value)
  free = [DCN_FIELDS[axis] if dcn else axis for axis, size in sizes.items() if size == -1]
  if len(free) > 1:
    raise ConfigError(f"mesh.{' and mesh.'.join(free)} are all -1 — at most one may be -1: give the others sizes")
  return sizes


def _validate_mesh(config: ml_collections.ConfigDict) -> None:
  """The mesh sizes (`mesh_sizes`) and that the rules table is named; the table's name, and whether the sizes fit the
  devices and the rules, are checked by `capjax.sharding.make_mesh`, which knows the tables."""
  mesh = _field(config, "mesh")
  if isinstance(mesh, ml_collections.ConfigDict):
    mesh_sizes(mesh)
    mesh_sizes(mesh, dcn=True)
  rules = _field(config, "mesh.rules")
  if rules is not None and not isinstance(rules, str):
    raise ConfigError(f"mesh.rules={rules!r} is not a table name — set --config.mesh.rules to one of "
                      "capjax.sharding.RULES (dp, fsdp, tp, fsdp_tp)")
