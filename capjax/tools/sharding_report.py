r"""Prints how a config's model would be sharded on a mesh, without the devices: each parameter's shape, logical
axes, mesh sharding (PartitionSpec) and bytes per device, then the per-device totals of parameters, optimizer state
and the largest activations of one training forward pass (the ones the model constrains, at the config's batch).

usage: python -m capjax.tools.sharding_report --config=configs/t2t.py --mesh=data=4,model=2 --rules=fsdp_tp \
           [--vocab_size=10000] [--top=5]
--mesh gives the axis sizes (data, fsdp, model; an axis not named has size 1); --rules a table of
capjax.sharding.RULES (default: the config's mesh.rules). Everything is abstract evaluation over a mesh of that
shape (`jax.sharding.AbstractMesh`): no device is touched, so a TPU pod's layout can be planned on a laptop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from absl import flags

from capjax import cli, config_util

if TYPE_CHECKING:
  import jax

# capjax.sharding, jax and flax are imported where they are used, not here: --help answers without them (1.5 s).
RULE_NAMES = ("dp", "fsdp", "tp", "fsdp_tp")  # capjax.sharding.RULES' (tests/test_sharding_rules.py checks it)
MESH_AXES = ("data", "fsdp", "model")  # capjax.sharding.MESH_AXES

FLAGS = flags.FlagValues()
_CONFIG = flags.DEFINE_string("config", None, "config file[:variants]", flag_values=FLAGS, required=True)
_MESH = flags.DEFINE_string("mesh", None, "axis sizes, e.g. data=4,model=2 (default: the config's, without -1)",
                            flag_values=FLAGS)
_RULES = flags.DEFINE_string("rules", None, f"rules table: {', '.join(RULE_NAMES)} (default: the config's)",
                             flag_values=FLAGS)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 10_000, "caption vocabulary incl. specials", lower_bound=1,
                                   flag_values=FLAGS)
_TOP = flags.DEFINE_integer("top", 5, "how many of the largest activations to list", lower_bound=0,
                            flag_values=FLAGS)


def parse_mesh(text: str) -> dict[str, int]:
  """'data=4,model=2' -> {'data': 4, 'fsdp': 1, 'model': 2}; a ValueError that says what is wrong otherwise."""
  sizes = dict.fromkeys(MESH_AXES, 1)
  for part in text.split(","):
    axis, sep, value = part.strip().partition("=")
    if not sep or axis not in sizes:
      raise ValueError(f"--mesh={text}: {part.strip()!r} is not axis=size — name the axes "
                       f"{', '.join(MESH_AXES)}, e.g. --mesh=data=4,model=2")
    if not (value.isascii() and value.isdecimal()) or int(value) < 1:  # str.isdigit takes "²", which int() refuses
      raise ValueError(f"--mesh={text}: {axis}={value} is not a positive size — the report has no devices to fill "
                       "a -1 from: give every size, e.g. --mesh=data=4,model=2")
    sizes[axis] = int(value)
  return sizes


def _mib(n: float) -> str:
  return f"{n / 2**20:,.2f} MiB"


def _path(keys) -> str:
  return "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in keys)


def _spec(spec: jax.sharding.PartitionSpec) -> str:
  return "P(" + ", ".join("None" if e is None else repr(e) for e in spec) + ")"


def report(config, sizes: dict[str, int], rules_name: str, vocab_size: int, top: int, name: str = "") -> list[str]:
  """The report's lines for `config` (called `name`) on a mesh of axis `sizes` under the rules table `rules_name`."""
  import flax.linen as nn  # noqa: PLC0415
  import jax  # noqa: PLC0415
  import numpy as np  # noqa: PLC0415

  from capjax import sharding  # noqa: PLC0415
  rules = sharding.RULES[rules_name]
  # Imported here: the trainer and the data registry bring TensorFlow, orbax and grain (7 s), which --help and a
  # bad flag do without.
  from capjax import train  # noqa: PLC0415
  from capjax.data import sources  # noqa: PLC0415

  inputs = sources.input_spec(config)
  model, _, init_fn = train.state_init_fn(config, vocab_size, inputs)
  abstract = jax.eval_shape(init_fn, jax.random.key(0))
  specs = sharding.mesh_specs(abstract, rules, sizes)
  names = sharding.logical_axes(abstract)
  shapes = nn.unbox(abstract)
  devices = math.prod(sizes.values())
  mesh_text = " ".join(f"{a}={sizes[a]}" for a in MESH_AXES)
  lines = [f"config {name}  model {config.model.name}  vocabulary {vocab_size:,}"
           f"  mesh {mesh_text} ({devices} devices)  rules {rules_name}  batch {config.batch_size}", ""]

  header = f"{'parameter':<48} {'shape':<18} {'logical axes':<30} {'sharding':<28} {'bytes/device':>13}"
  lines += [header, "-" * len(header)]
  flat_shapes = jax.tree_util.tree_flatten_with_path(shapes.params)[0]
  flat_names = jax.tree.leaves(names.params, is_leaf=lambda x: isinstance(x, tuple))
  flat_specs = jax.tree.leaves(specs.params, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
  for (path, x), axes, spec in zip(flat_shapes, flat_names, flat_specs, strict=True):
    per_device = sharding.bytes_per_device(x.shape, x.dtype, spec, sizes)
    lines.append(f"{_path(path):<48} {str(tuple(x.shape)):<18} {'(' + ', '.join(axes) + ')':<30} "
                 f"{_spec(spec):<28} {per_device:>13,}")

  def total(tree, tree_specs) -> tuple[int, int]:
    leaves = jax.tree.leaves(tree)
    leaf_specs = jax.tree.leaves(tree_specs, is_leaf=lambda s: isinstance(s, jax.sharding.PartitionSpec))
    full = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in leaves)
    return full, sum(sharding.bytes_per_device(x.shape, x.dtype, s, sizes) for x, s in zip(leaves, leaf_specs))

  params_full, params_dev = total(shapes.params, specs.params)
  opt_full, opt_dev = total(shapes.opt_state, specs.opt_state)

  # One training forward pass at the config's batch, traced over an abstract mesh: its sharding constraints.
  batch = config.batch_size
  images = jax.ShapeDtypeStruct((batch, *inputs.shape), inputs.dtype)
  tokens = jax.ShapeDtypeStruct((batch, config.max_caption_tokens + 1), np.int32)
  mesh = sharding.abstract_mesh(sizes)

  def forward(params, images, tokens):
    with sharding.axis_rules(mesh, rules):
      return model.apply({"params": params}, images, tokens, train=True, rngs={"dropout": jax.random.key(0)})

  jaxpr = jax.make_jaxpr(forward)(shapes.params, images, tokens)
  acts = [(sharding.activation_bytes(x.shape, x.dtype, spec, sizes), x, spec, where)
          for x, spec, where in sharding.constraints(jaxpr)]
  acts.sort(key=lambda a: -a[0])
  acts_dev = sum(a[0] for a in acts)

  lines += ["", f"{f'per device ({devices} devices)':<44} {'bytes':>15} {'':<13} {'replicated':>15}  fraction"]
  for label, dev, full in (("parameters", params_dev, params_full), ("optimizer state", opt_dev, opt_full),
                           ("parameters + optimizer state", params_dev + opt_dev, params_full + opt_full)):
    lines.append(f"  {label:<42} {dev:>15,} {'(' + _mib(dev) + ')':<13} {full:>15,}  {dev / full:.4f}")
  lines.append(f"  {'constrained activations, one forward pass':<42} {acts_dev:>15,} {'(' + _mib(acts_dev) + ')'}"
               f"  ({len(acts)} tensors)")
  if top and acts:
    lines += ["", f"largest activations (per device; batch {batch}):"]
    for per_device, x, spec, where in acts[:top]:
      lines.append(f"  {where:<60} {str(tuple(x.shape)):<20} {_spec(spec):<40} {per_device:>13,}")
  shards = sizes["data"] * sizes["fsdp"]
  if batch % shards:
    lines += ["", f"note: batch_size={batch} does not divide over data x fsdp = {shards}: activations are padded as "
                  "shown, and training would ask for a batch_size that is a multiple of it"]
  return lines


def main(argv: Sequence[str]) -> int:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  from capjax import sharding  # noqa: PLC0415
  try:
    config = config_util.load(_CONFIG.value)
  except (FileNotFoundError, ValueError) as error:
    cli.fail(f"--config={_CONFIG.value}: {error}")
  rules_name = _RULES.value or config.mesh.get("rules", sharding.DEFAULT_RULES)
  try:
    if _MESH.value is None:
      sizes = {a: config.mesh.get(a, 1) for a in MESH_AXES}
      if -1 in sizes.values():
        raise ValueError(f"the config's mesh {sizes} has a -1, and the report has no devices to fill it from — "
                         "give every size with --mesh, e.g. --mesh=data=4,model=2")
    else:
      sizes = parse_mesh(_MESH.value)
    config_util.validate(config)
    sharding.mesh_shape({**sizes, "rules": rules_name}, math.prod(sizes.values()))  # the table fits the axes
  except ValueError as error:  # ConfigError included: one line that says what to change
    cli.fail(str(error))
  try:
    lines = report(config, sizes, rules_name, _VOCAB_SIZE.value, _TOP.value, _CONFIG.value)
  except config_util.ConfigError as error:  # a --vocab_size beyond int32 ids: the model's own check, before tracing
    cli.fail(f"--vocab_size={_VOCAB_SIZE.value}: {error}")
  for line in lines:
    print(line)
  return 0


if __name__ == "__main__":
  cli.run(main)
