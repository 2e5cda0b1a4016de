"""Device mesh, logical-axis rules and host-to-global array conversion.

The only module that maps the logical axis names carried by parameters and activations to mesh axes.

The mesh has three axes, (data, fsdp, model), in order of increasing communication: `data` and `fsdp` split the
batch, `model` splits the wide dimensions of the layers (tensor parallelism). A rules table (`RULES`, chosen by
`config.mesh.rules`) says which logical axis goes on which mesh axis, as in t5x and MaxText: a table is data, and
the models only name their axes. The `fsdp` tables also shard parameters and optimizer state over the batch axes
(data, fsdp): ZeRO-3 over every data-parallel device, as the `data` axis alone of `--mesh=data=4,model=2` asks.
The two batch axes differ in the tables that shard nothing over `fsdp` (dp, tp), which keep it at 1.

Traced functions (init, the train step, decoding, feature extraction) run their model inside `axis_rules(mesh,
rules)`, so that the models' `nn.with_logical_constraint` calls constrain activations; outside it they do nothing.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import ml_collections
import numpy as np
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec as P

from capjax.config_util import MESH_AXES, ConfigError, mesh_sizes

BATCH_AXES = ("data", "fsdp")  # the batch is split over both data-parallel axes

Rules = tuple[tuple[str, str | tuple[str, ...] | None], ...]

# Every logical axis name the models use, parameters and activations alike (tests/test_sharding_rules.py checks
# that the models use no other and that every table maps each). An activation reuses its parameter's name:
# flax assigns a mesh axis to one dimension of an array only, in the order of the table, so `batch` (first in
# every table) takes (data, fsdp) and an activation's `embed` stays unsharded even where a kernel's is on fsdp.
LOGICAL_AXES = (
    "batch",                                # activations: the examples
    "vocab", "embed", "mlp", "heads", "kv",  # T2T: embedding rows, model width, feed-forward, attention heads
    "features",                             # the image encoder's channels that the visual projection reads
    "lstm_in", "lstm_gates",                # LSTM kernels (input or hidden state -> the four gates) and biases
    "conv_h", "conv_w", "conv_in", "conv_out", "classes",  # convolution kernels, IRv2's classification head
    "length", "height", "width", "channels", "grid",        # activations only: positions, pixels, channels
)

_UNSHARDED = ("kv", "conv_h", "conv_w", "length", "height", "width", "channels", "grid")

# Data parallel: every parameter replicated, the batch split.
DP: Rules = (
    ("batch", BATCH_AXES),
    *((name, None) for name in ("vocab", "embed", "mlp", "heads", "features", "lstm_in", "lstm_gates",
                                "conv_in", "conv_out", "classes")),
    *((name, None) for name in _UNSHARDED),
)

# FSDP (ZeRO-3): each parameter and its optimizer state split over the data-parallel devices, (data, fsdp), on its
# model-width dimension (MaxText's `embed` -> fsdp), convolutions on their output channels; the batch likewise.
# Every device of the batch split holds 1/n of the state and all-gathers a layer's weights when it runs it.
FSDP: Rules = (
    ("batch", BATCH_AXES),
    ("embed", BATCH_AXES),
    ("lstm_in", BATCH_AXES),
    ("conv_out", BATCH_AXES),
    *((name, None) for name in ("vocab", "mlp", "heads", "features", "lstm_gates", "conv_in", "classes")),
    *((name, None) for name in _UNSHARDED),
)

# Tensor parallel (Megatron): the wide dimensions (vocabulary, feed-forward, heads, conv output channels, classes,
# LSTM gates) on `model`. This was capjax's only table before there were others, and stays the default: with
# mesh.model = 1 it is plain data parallelism.
_WIDE_ON_MODEL: Rules = tuple((name, "model") for name in ("vocab", "mlp", "heads", "conv_out", "classes",
                                                             "lstm_gates"))
TP: Rules = (
    ("batch", BATCH_AXES),
    *_WIDE_ON_MODEL,
    *((name, None) for name in ("embed", "features", "lstm_in", "conv_in")),
    *((name, None) for name in _UNSHARDED),
)

# Both: the wide dimensions on `model`, the model-width (and conv input) dimensions on (data, fsdp).
FSDP_TP: Rules = (
    ("batch", BATCH_AXES),
    *_WIDE_ON_MODEL,
    ("embed", BATCH_AXES),
    ("lstm_in", BATCH_AXES),
    ("conv_in", BATCH_AXES),
    ("features", None),
    *((name, None) for name in _UNSHARDED),
)

RULES: dict[str, Rules] = {"dp": DP, "fsdp": FSDP, "tp": TP, "fsdp_tp": FSDP_TP}
DEFAULT_RULES = "tp"
# Mesh axes each table shards over besides the batch's: a larger axis that no table's rule uses would hold copies.
_RULE_AXES = {"dp": (), "fsdp": ("fsdp",), "tp": ("model",), "fsdp_tp": ("fsdp", "model")}


# ----------------------------------------------------------------------------------------------------------
# Mesh shape and mesh
# ----------------------------------------------------------------------------------------------------------
def rules_name(mesh_config: ml_collections.ConfigDict | Mapping[str, Any]) -> str:
  name = mesh_config.get("rules", DEFAULT_RULES)
  if name not in RULES:
    raise ConfigError(f"mesh.rules={name!r} is not a rules table — choose one of {', '.join(RULES)}")
  return name


def rules_of(config: ml_collections.ConfigDict) -> Rules:
  """The table `config.mesh.rules` names (today's `tp` when absent)."""
  return RULES[rules_name(config.mesh)]


def _fill(sizes: dict[str, int], total: int, what: str, unit: str = "devices") -> dict[str, int]:
  """Replaces the -1 in `sizes` (at most one: `config_util.mesh_sizes`) by what `total` leaves; a ConfigError when
  the product cannot be `total`."""
  known = math.prod(v for v in sizes.values() if v != -1)
  free = [k for k, v in sizes.items() if v == -1]
  if free:
    if total % known:
      raise ConfigError(f"{what} sizes {sizes} do not divide the {total} {unit} — pick divisors of {total}")
    sizes = {**sizes, free[0]: total // known}
  if math.prod(sizes.values()) != total:
    shape = " x ".join(f"{k}={v}" for k, v in sizes.items())
    raise ConfigError(f"{what} {shape} needs {math.prod(sizes.values())} {unit} but {total} are available — set "
                      f"one size to -1 to use them all, or pick sizes whose product is the number of {unit}")
  return sizes


def mesh_shape(mesh_config: ml_collections.ConfigDict | Mapping[str, Any], num_devices: int,
               num_slices: int = 1) -> tuple[dict[str, int], dict[str, int]]:
  """({axis: size within a slice (ICI)}, {axis: size across slices (DCN)}) for `num_devices` devices.

  The sizes are checked by `config_util.mesh_sizes`. A -1 among the DCN sizes takes `num_slices`; a -1 among the
  ICI sizes takes what the devices of a slice leave. Sizes that cannot fit, and a rules table that leaves an axis
  larger than 1 unused, are ConfigErrors.
  """
  name = rules_name(mesh_config)
  dcn = _fill(mesh_sizes(mesh_config, dcn=True), num_slices, "DCN mesh", "slices")
  slices = math.prod(dcn.values())
  if num_devices % slices:
    raise ConfigError(f"the DCN mesh has {slices} slices, which do not divide the {num_devices} devices — set "
                      "mesh.dcn_* to the number of slices")
  ici = _fill(mesh_sizes(mesh_config), num_devices // slices,
              "mesh" if slices == 1 else f"mesh (in each of {slices} slices)")
  for axis in ("fsdp", "model"):
    if ici[axis] * dcn[axis] > 1 and axis not in _RULE_AXES[name]:
      users = [n for n, axes in _RULE_AXES.items() if axis in axes]
      raise ConfigError(f"mesh.{axis}={ici[axis] * dcn[axis]} but rules {name!r} shard nothing over {axis!r}, so "
                        f"its devices would hold copies — use rules {' or '.join(users)}, or set mesh.{axis}=1")
  return ici, dcn


def axis_sizes(mesh_config: ml_collections.ConfigDict | Mapping[str, Any], num_devices: int,
               num_slices: int = 1) -> dict[str, int]:
  """{axis: total size} of the mesh `mesh_config` makes on `num_devices` devices (ICI x DCN)."""
  ici, dcn = mesh_shape(mesh_config, num_devices, num_slices)
  return {a: ici[a] * dcn[a] for a in MESH_AXES}


def _num_slices(devices: Sequence[jax.Device]) -> int:
  return len({getattr(d, "slice_index", 0) for d in devices})


def make_mesh(config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """The (data, fsdp, model) mesh `config.mesh` describes over `devices` (default: all).

  With DCN sizes above 1 (multi-slice TPU), the mesh is `create_hybrid_device_mesh`'s: each axis is its ICI size
  within a slice times its DCN size across slices, so that the heavy `model` and `fsdp` traffic stays in a slice.
  """
  return mesh_of(config.mesh, devices)


def mesh_of(mesh_config: ml_collections.ConfigDict | Mapping[str, Any],
            devices: Sequence[jax.Device] | None = None) -> Mesh:
  """`make_mesh` from the `mesh` fields alone."""
  devices = list(jax.devices() if devices is None else devices)
  ici, dcn = mesh_shape(mesh_config, len(devices), _num_slices(devices))
  from jax.experimental import mesh_utils  # noqa: PLC0415 (mesh construction only)
  if math.prod(dcn.values()) > 1:  # several slices (mesh_shape checked that the devices form them)
    grid = mesh_utils.create_hybrid_device_mesh([ici[a] for a in MESH_AXES], [dcn[a] for a in MESH_AXES], devices,
                                                allow_split_physical_axes=True)
  elif devices == jax.devices():
    grid = mesh_utils.create_device_mesh([ici[a] for a in MESH_AXES], devices, allow_split_physical_axes=True)
  else:  # a subset (tests, benchmarks on one device): in the order given
    grid = np.asarray(devices).reshape([ici[a] for a in MESH_AXES])
  # Linen logical-axis rules need Auto axes (jax >= 0.9 defaults to Explicit).
  return Mesh(grid, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def data_mesh(devices: Sequence[jax.Device]) -> Mesh:
  """The mesh of pure batch parallelism over `devices` (frozen-feature extraction): data = all of them."""
  return mesh_of({"data": -1, "fsdp": 1, "model": 1, "rules": "dp"}, devices)


def abstract_mesh(sizes: Mapping[str, int]) -> AbstractMesh:
  """A mesh of these axis sizes without devices: for abstract evaluation (`capjax.tools.sharding_report`)."""
  return AbstractMesh(tuple(sizes[a] for a in MESH_AXES), MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


@contextlib.contextmanager
def axis_rules(mesh: Mesh | AbstractMesh, rules: Rules) -> Iterator[None]:
  """The mesh and the rules that `nn.with_logical_constraint` reads (today's `with mesh, nn.logical_axis_rules`).

  Entered inside a traced function (it sets the abstract mesh, which jax allows under `jit`), so that a compiled
  function carries its constraints whatever context it is called from.
  """
  abstract = mesh.abstract_mesh if isinstance(mesh, Mesh) else mesh
  with jax.sharding.use_abstract_mesh(abstract), nn.logical_axis_rules(rules):
    yield


# ----------------------------------------------------------------------------------------------------------
# Logical names -> mesh shardings
# ----------------------------------------------------------------------------------------------------------
def _axes(entry) -> tuple[str, ...]:
  return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def fit(spec: P, shape: Sequence[int], sizes: Mapping[str, int]) -> P:
  """`spec` with each dimension's mesh axes cut to the longest prefix whose product divides the dimension.

  A stored array must split evenly (jax places no padded shards): a 3-channel RGB kernel stays whole where its
  table would split it 8 ways. Constraints inside a traced function may split unevenly and are left as they are.
  """
  out = []
  for dim, entry in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
    axes = _axes(entry)
    while axes and dim % math.prod(sizes[a] for a in axes):
      axes = axes[:-1]
    out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return P(*out)


def _is_partitioned(x) -> bool:
  return isinstance(x, nn.Partitioned)


def logical_axes(abstract: Any) -> Any:
  """The logical axis names of each leaf of a boxed tree (from `jax.eval_shape` of an init): a tuple, or () for
  leaves without names (scalars such as the step and optimizer counts)."""
  return jax.tree.map(lambda x: tuple(x.names) if _is_partitioned(x) else (), abstract, is_leaf=_is_partitioned)


def mesh_specs(abstract: Any, rules: Rules, sizes: Mapping[str, int]) -> Any:
  """The PartitionSpec each leaf of a boxed abstract tree is stored with on a mesh of axis `sizes`."""
  def spec(x):
    names = tuple(x.names) if _is_partitioned(x) else ()
    value = x.value if _is_partitioned(x) else x
    return fit(nn.logical_to_mesh_axes(names, rules) if names else P(), value.shape, sizes)
  return jax.tree.map(spec, abstract, is_leaf=_is_partitioned)


def logical_to_shardings(mesh: Mesh, abstract: Any, rules: Rules) -> Any:
  """NamedShardings for a boxed abstract tree (`jax.eval_shape` of an init with `nn.with_logical_partitioning`):
  each leaf as `rules` place its logical axes, evenly divisible (`fit`). Unboxed, like `nn.unbox` of the tree."""
  return jax.tree.map(lambda s: NamedSharding(mesh, s), mesh_specs(abstract, rules, dict(mesh.shape)),
                      is_leaf=lambda x: isinstance(x, P))


def bytes_per_device(shape: Sequence[int], dtype: Any, spec: P, sizes: Mapping[str, int]) -> int:
  """Bytes of one device's shard of an array of `shape` stored with `spec` (even shards: see `fit`)."""
  split = math.prod(sizes[a] for entry in spec for a in _axes(entry))
  return math.prod(shape) * np.dtype(dtype).itemsize // split


def activation_bytes(shape: Sequence[int], dtype: Any, spec: P, sizes: Mapping[str, int]) -> int:
  """Bytes of one device's part of an activation constrained to `spec`: a dimension that does not split evenly
  is padded to the next multiple by XLA, so each device holds the rounded-up share."""
  split = [math.prod(sizes[a] for a in _axes(entry)) for entry in spec] + [1] * (len(shape) - len(spec))
  return math.prod(-(-dim // n) for dim, n in zip(shape, split)) * np.dtype(dtype).itemsize


def constraints(jaxpr: Any) -> Iterator[tuple[jax.ShapeDtypeStruct, P, str]]:
  """(shape and dtype, PartitionSpec, module path) of every sharding constraint in a closed jaxpr, nested ones
  (scans, loops, remat) included: the activations a traced function constrains, without devices when traced under
  an `abstract_mesh`."""
  from jax.extend import core as jex_core  # noqa: PLC0415 (abstract evaluation only)
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "sharding_constraint":
      aval = eqn.invars[0].aval
      yield jax.ShapeDtypeStruct(aval.shape, aval.dtype), eqn.params["sharding"].spec, str(eqn.source_info.name_stack)
    for sub in jex_core.jaxprs_in_params(eqn.params):
      yield from constraints(sub)


# ----------------------------------------------------------------------------------------------------------
# Batches
# ----------------------------------------------------------------------------------------------------------
def batch_shards(mesh: Mesh) -> int:
  """How many ways the batch is split: the product of the data-parallel axes."""
  return math.prod(mesh.shape[a] for a in BATCH_AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) dimension split over (data, fsdp), the rest replicated."""
  return NamedSharding(mesh, P(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def host_to_global(batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Turns this process's slice of the batch into global arrays sharded on the batch axes."""
  sharding = batch_sharding(mesh)
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), batch)


def global_batch_to_host(x: jax.Array) -> np.ndarray:
  """Gathers a (possibly multi-host) global array to a full numpy array on every host."""
  if jax.process_count() == 1:
    return np.asarray(x)
  from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
  return np.asarray(multihost_utils.process_allgather(x, tiled=True))
