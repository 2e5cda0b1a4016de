"""Inception-ResNet-v2 image encoder in Flax Linen, laid out as released (TF-slim, Keras, timm).

Owns the architecture table, the module, input preprocessing and saving/loading converted weights.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from collections.abc import Mapping
from typing import Any, Literal

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from capjax import model_io
from capjax.model_io import WeightsError

IMAGE_SIZE = 299
MIN_IMAGE_SIZE = 75  # the smallest input the released layout accepts (Keras enforces it too)
GRID_FEATURES = 1536
BN_EPSILON = 1e-3
BN_MOMENTUM = 0.99  # Keras's default; flax convention: new = momentum * old + (1 - momentum) * batch

CONV_KERNEL_AXES = ("conv_h", "conv_w", "conv_in", "conv_out")
CHANNEL_AXES = ("conv_out",)
HEAD_KERNEL_AXES = ("conv_out", "classes")
HEAD_BIAS_AXES = ("classes",)
ACTIVATION_AXES = ("batch", "height", "width", "channels")

Variables = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class ConvSpec:
  """A convolution without bias, batch norm without scale, then ReLU (slim's `conv2d` in arg_scope)."""
  name: str
  features: int
  kernel: tuple[int, int]
  strides: int = 1
  padding: Literal["SAME", "VALID"] = "SAME"


@dataclasses.dataclass(frozen=True)
class PoolSpec:
  """A 3×3 max or average pool; average pools exclude padding like TF and timm."""
  name: str
  kind: Literal["max", "avg"]
  strides: int
  padding: Literal["SAME", "VALID"] = "VALID"


Op = ConvSpec | PoolSpec
Branch = tuple[Op, ...]


@dataclasses.dataclass(frozen=True)
class MixedSpec:
  """Branches run side by side on the same input and are concatenated on channels."""
  name: str
  branches: tuple[Branch, ...]


@dataclasses.dataclass(frozen=True)
class ResidualSpec:
  """Branches → concat → 1×1 conv with bias → x + scale·up → ReLU (unless `activate` is False)."""
  name: str
  branches: tuple[Branch, ...]
  scale: float
  activate: bool = True


Stage = ConvSpec | PoolSpec | MixedSpec | ResidualSpec


def _c(name: str, features: int, kernel: int | tuple[int, int], strides: int = 1,
       padding: Literal["SAME", "VALID"] = "SAME") -> ConvSpec:
  kernel = (kernel, kernel) if isinstance(kernel, int) else kernel
  return ConvSpec(name, features, kernel, strides, padding)


MIXED_5B: tuple[Branch, ...] = (
  (_c("Conv2d_1x1", 96, 1),),
  (_c("Conv2d_0a_1x1", 48, 1), _c("Conv2d_0b_5x5", 64, 5)),
  (_c("Conv2d_0a_1x1", 64, 1), _c("Conv2d_0b_3x3", 96, 3), _c("Conv2d_0c_3x3", 96, 3)),
  (PoolSpec("AvgPool_0a_3x3", "avg", 1, "SAME"), _c("Conv2d_0b_1x1", 64, 1)),
)
BLOCK35: tuple[Branch, ...] = (
  (_c("Conv2d_1x1", 32, 1),),
  (_c("Conv2d_0a_1x1", 32, 1), _c("Conv2d_0b_3x3", 32, 3)),
  (_c("Conv2d_0a_1x1", 32, 1), _c("Conv2d_0b_3x3", 48, 3), _c("Conv2d_0c_3x3", 64, 3)),
)
MIXED_6A: tuple[Branch, ...] = (
  (_c("Conv2d_1a_3x3", 384, 3, 2, "VALID"),),
  (_c("Conv2d_0a_1x1", 256, 1), _c("Conv2d_0b_3x3", 256, 3), _c("Conv2d_1a_3x3", 384, 3, 2, "VALID")),
  (PoolSpec("MaxPool_1a_3x3", "max", 2),),
)
BLOCK17: tuple[Branch, ...] = (
  (_c("Conv2d_1x1", 192, 1),),
  (_c("Conv2d_0a_1x1", 128, 1), _c("Conv2d_0b_1x7", 160, (1, 7)), _c("Conv2d_0c_7x1", 192, (7, 1))),
)
MIXED_7A: tuple[Branch, ...] = (
  (_c("Conv2d_0a_1x1", 256, 1), _c("Conv2d_1a_3x3", 384, 3, 2, "VALID")),
  (_c("Conv2d_0a_1x1", 256, 1), _c("Conv2d_1a_3x3", 288, 3, 2, "VALID")),
  (_c("Conv2d_0a_1x1", 256, 1), _c("Conv2d_0b_3x3", 288, 3), _c("Conv2d_1a_3x3", 320, 3, 2, "VALID")),
  (PoolSpec("MaxPool_1a_3x3", "max", 2),),
)
BLOCK8: tuple[Branch, ...] = (
  (_c("Conv2d_1x1", 192, 1),),
  (_c("Conv2d_0a_1x1", 192, 1), _c("Conv2d_0b_1x3", 224, (1, 3)), _c("Conv2d_0c_3x1", 256, (3, 1))),
)

# Stage names: slim's for the stem and mixed stages, Keras's `blockNN_i` for the residual blocks
# (slim nests those under `Repeat*`; the last block8, slim's `Block8`, is Keras's `block8_10`).
LAYOUT: tuple[Stage, ...] = (
  _c("Conv2d_1a_3x3", 32, 3, 2, "VALID"),
  _c("Conv2d_2a_3x3", 32, 3, 1, "VALID"),
  _c("Conv2d_2b_3x3", 64, 3),
  PoolSpec("MaxPool_3a_3x3", "max", 2),
  _c("Conv2d_3b_1x1", 80, 1, 1, "VALID"),
  _c("Conv2d_4a_3x3", 192, 3, 1, "VALID"),
  PoolSpec("MaxPool_5a_3x3", "max", 2),
  MixedSpec("Mixed_5b", MIXED_5B),
  *(ResidualSpec(f"block35_{i}", BLOCK35, 0.17) for i in range(1, 11)),
  MixedSpec("Mixed_6a", MIXED_6A),
  *(ResidualSpec(f"block17_{i}", BLOCK17, 0.10) for i in range(1, 21)),
  MixedSpec("Mixed_7a", MIXED_7A),
  *(ResidualSpec(f"block8_{i}", BLOCK8, 0.20) for i in range(1, 10)),
  ResidualSpec("block8_10", BLOCK8, 1.0, activate=False),
  _c("Conv2d_7b_1x1", GRID_FEATURES, 1),
)
HEAD_NAME = "Logits"


class BatchNorm(nn.Module):
  """Batch norm without scale (gamma), statistics in float32, every variable axis-named ('conv_out',)."""
  momentum: float = BN_MOMENTUM
  epsilon: float = BN_EPSILON
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    shape = (x.shape[-1],)
    bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros_init(), CHANNEL_AXES),
                      shape, self.param_dtype)
    mean = self.variable("batch_stats", "mean",
                         nn.with_logical_partitioning(lambda: jnp.zeros(shape, jnp.float32), CHANNEL_AXES))
    var = self.variable("batch_stats", "var",
                        nn.with_logical_partitioning(lambda: jnp.ones(shape, jnp.float32), CHANNEL_AXES))
    x32 = x.astype(jnp.float32)
    if train:
      batch_mean = x32.mean(axis=(0, 1, 2))
      batch_var = jnp.square(x32 - batch_mean).mean(axis=(0, 1, 2))
      if not self.is_initializing():
        mean.value = self.momentum * mean.value + (1 - self.momentum) * batch_mean
        var.value = self.momentum * var.value + (1 - self.momentum) * batch_var
      use_mean, use_var = batch_mean, batch_var
    else:
      use_mean, use_var = mean.value, var.value
    y = (x32 - use_mean) * jax.lax.rsqrt(use_var + self.epsilon) + bias.astype(jnp.float32)
    return y.astype(self.dtype)


class _Layer(nn.Module):
  """Shared dtype fields of the conv-bearing modules."""
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  precision: Any = None

  @property
  def numerics(self) -> dict[str, Any]:
    """The dtype fields, to hand on to child layers."""
    return {"dtype": self.dtype, "param_dtype": self.param_dtype, "precision": self.precision}

  def conv(self, features: int, kernel: tuple[int, int], strides: int = 1, padding: str = "SAME",
           use_bias: bool = False, name: str = "conv") -> nn.Conv:
    return nn.Conv(
      features, kernel, (strides, strides), padding=padding, use_bias=use_bias, dtype=self.dtype,
      param_dtype=self.param_dtype, precision=self.precision,
      kernel_init=nn.with_logical_partitioning(nn.initializers.glorot_uniform(), CONV_KERNEL_AXES),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), CHANNEL_AXES), name=name)


class ConvBN(_Layer):
  """Conv (no bias) → BatchNorm (no scale) → ReLU: the unit every released IRv2 is built from."""
  spec: ConvSpec = _c("conv", 1, 1)

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    s = self.spec
    x = self.conv(s.features, s.kernel, s.strides, s.padding)(x)
    x = BatchNorm(dtype=self.dtype, param_dtype=self.param_dtype, name="bn")(x, train)
    return nn.relu(x)


def pool(spec: PoolSpec, x: jax.Array) -> jax.Array:
  """3×3 pooling as in the released graph."""
  window, strides = (3, 3), (spec.strides, spec.strides)
  if spec.kind == "max":
    return nn.max_pool(x, window, strides, spec.padding)
  return nn.avg_pool(x, window, strides, spec.padding, count_include_pad=False)


class BranchOps(_Layer):
  """One branch: ops in order, each conv in the scope of its slim name."""
  ops: Branch = ()

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    for op in self.ops:
      if isinstance(op, PoolSpec):
        x = pool(op, x)
      else:
        x = ConvBN(**self.numerics, spec=op, name=op.name)(x, train)
    return x


def _concat_branches(parent: _Layer, branches: tuple[Branch, ...], x: jax.Array, train: bool) -> jax.Array:
  """Runs branch k in scope `Branch_k` of `parent` (call it from the parent's compact method); concatenates."""
  outputs = [BranchOps(**parent.numerics, ops=ops, name=f"Branch_{k}")(x, train) for k, ops in enumerate(branches)]
  return jnp.concatenate(outputs, axis=-1)


class Mixed(_Layer):
  """A mixing/reduction stage (Mixed_5b, Mixed_6a, Mixed_7a)."""
  spec: MixedSpec = MixedSpec("Mixed", ())

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    return _concat_branches(self, self.spec.branches, x, train)


class Residual(_Layer):
  """An Inception-ResNet block (block35, block17, block8): x + scale · Conv2d_1x1(branches(x))."""
  spec: ResidualSpec = ResidualSpec("Residual", (), 1.0)

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    mixed = _concat_branches(self, self.spec.branches, x, train)
    up = self.conv(x.shape[-1], (1, 1), use_bias=True, name="Conv2d_1x1")(mixed)
    x = x + self.spec.scale * up.astype(x.dtype)
    return nn.relu(x) if self.spec.activate else x


class InceptionResNetV2(nn.Module):
  """Images in [-1, 1] (B, H, W, 3) → {"grid": (B, h, w, 1536), "pooled": (B, 1536), "logits": (B, C)}.

  At 299×299 the grid is 8×8. `num_classes=None` drops the classification head (and "logits"). With
  `train=True` batch norm uses batch statistics and updates `batch_stats` (pass `mutable=["batch_stats"]`).
  """
  num_classes: int | None = 1000
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  precision: Any = None

  @nn.compact
  def __call__(self, images: jax.Array, *, train: bool = False) -> dict[str, jax.Array]:
    x = nn.with_logical_constraint(images.astype(self.dtype), ACTIVATION_AXES)
    layer = dict(dtype=self.dtype, param_dtype=self.param_dtype, precision=self.precision)
    for stage in LAYOUT:
      if isinstance(stage, PoolSpec):
        x = pool(stage, x)
      elif isinstance(stage, ConvSpec):
        x = ConvBN(**layer, spec=stage, name=stage.name)(x, train)
      elif isinstance(stage, MixedSpec):
        x = nn.with_logical_constraint(Mixed(**layer, spec=stage, name=stage.name)(x, train), ACTIVATION_AXES)
      else:
        x = Residual(**layer, spec=stage, name=stage.name)(x, train)
    grid = nn.with_logical_constraint(x, ACTIVATION_AXES)
    pooled = nn.with_logical_constraint(grid.astype(jnp.float32).mean(axis=(1, 2)), ("batch", "channels"))
    outputs = {"grid": grid, "pooled": pooled.astype(self.dtype)}
    if self.num_classes is not None:
      logits = nn.Dense(
        self.num_classes, dtype=self.dtype, param_dtype=self.param_dtype, precision=self.precision,
        kernel_init=nn.with_logical_partitioning(nn.initializers.glorot_uniform(), HEAD_KERNEL_AXES),
        bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), HEAD_BIAS_AXES),
        name=HEAD_NAME)(pooled.astype(self.dtype))
      outputs["logits"] = nn.with_logical_constraint(logits, ("batch", "classes"))
    return outputs


def preprocess(images: jax.Array | np.ndarray) -> jax.Array:
  """uint8 pixels [0, 255] → float32 in [-1, 1] (Keras's `preprocess_input` in "tf" mode)."""
  return jnp.asarray(images, jnp.float32) / 127.5 - 1.0


def resize(images: jax.Array, size: int = IMAGE_SIZE) -> jax.Array:
  """(B, H, W, C) → (B, size, size, C), bilinear with antialiasing when shrinking (as PIL's BILINEAR)."""
  batch, _, _, channels = images.shape
  return jax.image.resize(images.astype(jnp.float32), (batch, size, size, channels), "bilinear", antialias=True)


def abstract_variables(model: InceptionResNetV2, image_size: int = IMAGE_SIZE) -> Variables:
  """Shapes, dtypes and logical axes of every variable, without allocating them."""
  images = jax.ShapeDtypeStruct((1, image_size, image_size, 3), jnp.float32)
  return jax.eval_shape(model.init, jax.random.key(0), images)


@functools.lru_cache(maxsize=4)
def variable_shapes(num_classes: int | None = 1000) -> Variables:
  """`abstract_variables` of the released layout with `num_classes`, unboxed, traced once per process (seconds of
  tracing that loading, converting and drawing random weights share). Shapes only: nothing to mutate."""
  return nn.meta.unbox(abstract_variables(InceptionResNetV2(num_classes=num_classes)))


def count_params(variables: Variables) -> int:
  """Number of scalars in all collections (params and batch_stats), counted like Keras's `count_params`."""
  leaves = jax.tree_util.tree_leaves(nn.meta.unbox(variables))
  return int(sum(np.prod(leaf.shape, dtype=np.int64) for leaf in leaves))


def random_like(abstract: Any, rng: np.random.Generator, kernel_gain: float = 1.0) -> Any:
  """Numpy draws of every leaf's shape: normals scaled by 1/sqrt(fan-in) (kernels by `kernel_gain`/sqrt(fan-in)),
  batch-norm variances in [0.5, 2] (XLA's init of a whole Inception-ResNet-v2 takes about a minute to compile on a
  2-core CPU; this, a second)."""
  def draw(path: tuple, leaf: jax.ShapeDtypeStruct) -> np.ndarray:
    if getattr(path[-1], "key", None) == "var":
      return rng.uniform(0.5, 2.0, leaf.shape).astype(leaf.dtype)
    fan_in = int(np.prod(leaf.shape[:-1])) if len(leaf.shape) > 1 else 25
    gain = kernel_gain if len(leaf.shape) > 1 else 1.0
    return rng.normal(0, gain / np.sqrt(fan_in), leaf.shape).astype(leaf.dtype)
  return jax.tree_util.tree_map_with_path(draw, abstract)


RANDOM_FORMAT = "random"  # metadata "format" of untrained weights (`random_variables`)


def random_variables(num_classes: int | None = 1000, seed: int = 0) -> Variables:
  """Untrained weights and batch-norm statistics of the released layout (the ImageNet head's 1,000 classes by
  default), as a conversion gives them: for trying the feature path without a download, never for results."""
  abstract = variable_shapes(num_classes)
  # He's gain, sqrt(2), for a network of ReLUs: with 1/sqrt(fan-in) each ReLU halves the signal, and 200 layers on the
  # features of any two pictures (black, white, noise) differed by 3% of their size, so a captioner trained on them
  # captioned every picture alike; with it, by a quarter.
  return random_like(abstract, np.random.default_rng(seed), kernel_gain=np.sqrt(2.0))


def random_metadata(variables: Variables, num_classes: int | None, seed: int) -> dict[str, Any]:
  """The metadata.json of `random_variables`: its format says they are random, so no one takes them for ImageNet's."""
  return {"model": "inception_resnet_v2", "format": RANDOM_FORMAT, "num_classes": num_classes, "seed": seed,
          "num_params": count_params(variables),
          "note": "random weights, not trained: their features and labels are noise — convert Keras or timm "
                  "ImageNet weights for real use"}


def is_random(metadata: Mapping[str, Any]) -> bool:
  """Whether converted weights' metadata says they are untrained (`random_metadata`)."""
  return metadata.get("format") == RANDOM_FORMAT


def random_warning(directory: str | pathlib.Path) -> str:
  """The line a command prints on stderr when it is given random weights."""
  return (f"warning: {directory} holds random weights (convert_weights --format=random): the features are noise — "
          "fine for trying the path; convert Keras or timm ImageNet weights for real use")


METADATA_FILE = "metadata.json"
VARIABLES_DIR = "variables"


def save_converted(directory: str | pathlib.Path, variables: Variables, metadata: Mapping[str, Any]) -> pathlib.Path:
  """Writes `variables` as an orbax checkpoint in `directory/variables` and `metadata` as JSON beside it."""
  tree = jax.tree_util.tree_map(np.asarray, nn.meta.unbox(dict(variables)))
  text = json.dumps(dict(metadata), indent=2, sort_keys=True) + "\n"
  return model_io.save(directory, {VARIABLES_DIR: tree}, {METADATA_FILE: text})


def read_metadata(directory: str | pathlib.Path) -> dict[str, Any]:
  """The JSON metadata written by `save_converted` (format, num_classes, source sha256, ...)."""
  path = pathlib.Path(directory) / METADATA_FILE
  if not path.exists():
    raise FileNotFoundError(f"{path} is missing — convert weights first with "
                            "`python -m capjax.tools.convert_weights --format=keras|timm --input=FILE --output=DIR`")
  try:
    metadata = json.loads(path.read_text(encoding="utf-8"))
  except (ValueError, OSError) as error:  # truncated, not UTF-8, not JSON, unreadable
    raise WeightsError(f"{path} is not readable JSON ({error}) — convert the weights again with "
                       "`python -m capjax.tools.convert_weights`") from error
  if not isinstance(metadata, dict) or not isinstance(metadata.get("num_classes"), int):
    raise WeightsError(f"{path} has no integer num_classes: it was not written by capjax.tools.convert_weights — "
                       "convert the weights again")
  return metadata


def load_converted(directory: str | pathlib.Path) -> dict[str, Any]:
  """Variables ({"params", "batch_stats"}, numpy arrays) converted by `capjax.tools.convert_weights`."""
  directory = pathlib.Path(directory).resolve()
  metadata = read_metadata(directory)
  try:
    if not (directory / VARIABLES_DIR).is_dir():  # before tracing the network for its shapes (seconds)
      raise model_io.ParamsError(f"no {VARIABLES_DIR}/ folder")
    return model_io.restore(directory / VARIABLES_DIR, variable_shapes(metadata["num_classes"]))
  except model_io.ParamsError as error:  # a missing, cut or foreign checkpoint, or parameters of other shapes
    cause = error.cause if isinstance(error, model_io.RestoreError) else error
    raise WeightsError(f"{directory / VARIABLES_DIR} does not hold Inception-ResNet-v2 variables with "
                       f"{metadata['num_classes']} classes ({type(cause).__name__}: {str(cause)[:200]}) — convert the "
                       "weights again with `python -m capjax.tools.convert_weights`") from error
