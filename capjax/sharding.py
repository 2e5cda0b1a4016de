"""Device mesh, logical-axis rules and host-to-global array conversion.

The only module that maps the logical axis names carried by parameters and activations to mesh axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import ml_collections
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

# Logical axis names used across capjax models. Tensor parallelism puts the wide dimensions (vocabulary,
# feed-forward, heads, conv output channels) on the `model` mesh axis; the batch goes on `data`.
LOGICAL_AXIS_RULES: tuple[tuple[str, str | None], ...] = (
    ("batch", "data"),
    ("vocab", "model"),
    ("mlp", "model"),
    ("heads", "model"),
    ("conv_out", "model"),
    ("classes", "model"),
    ("kv", None),
    ("embed", None),
    ("length", None),
    ("grid", None),
    ("conv_h", None),
    ("conv_w", None),
    ("conv_in", None),
    ("features", None),
    ("height", None),
    ("width", None),
    ("channels", None),
)

MESH_AXES = ("data", "model")


def make_mesh(config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A (data, model) mesh over `devices` (default: all); `config.mesh.data = -1` takes what is left."""
  devices = list(jax.devices() if devices is None else devices)
  model = int(config.mesh.model)
  data = int(config.mesh.data)
  if data == -1:
    if len(devices) % model:
      raise ValueError(f"mesh.model={model} does not divide the {len(devices)} devices: pick a divisor.")
    data = len(devices) // model
  if data * model != len(devices):
    raise ValueError(
        f"mesh data={data} x model={model} needs {data * model} devices but {len(devices)} are available: "
        "set --config.mesh.data=-1 to use them all, or pick sizes whose product is the device count.")
  grid = np.asarray(devices).reshape(data, model)
  # Linen logical-axis rules need Auto axes (jax >= 0.9 defaults to Explicit).
  return Mesh(grid, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def data_mesh(devices: Sequence[jax.Device]) -> Mesh:
  """A 1-D mesh over `devices` whose one axis is `data`: pure batch parallelism (frozen-feature extraction)."""
  return Mesh(np.asarray(devices), ("data",))


def logical_to_shardings(mesh: Mesh, logical_specs: Any) -> Any:
  """Maps a pytree of logical PartitionSpecs (from `nn.get_partition_spec`) to NamedShardings."""
  return nn.logical_to_mesh_sharding(logical_specs, mesh, LOGICAL_AXIS_RULES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) dimension split over `data`, the rest replicated."""
  return NamedSharding(mesh, P("data"))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def host_to_global(batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Turns this process's slice of the batch into global arrays sharded on the data axis."""
  sharding = batch_sharding(mesh)
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), batch)


def global_batch_to_host(x: jax.Array) -> np.ndarray:
  """Gathers a (possibly multi-host) global array to a full numpy array on every host."""
  if jax.process_count() == 1:
    return np.asarray(x)
  from jax.experimental import multihost_utils  # noqa: PLC0415 (multi-host only)
  return np.asarray(multihost_utils.process_allgather(x, tiled=True))
