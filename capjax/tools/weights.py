"""Released weights into capjax's layout, the library of `python -m capjax.tools.convert_weights`: the safetensors
reader and writer (hostile files refused: sizes, offsets, dtypes, duplicate keys), Inception-ResNet-v2 from Keras
HDF5 and timm safetensors (name maps checked against the capjax module), Hugging Face BERT-family, GPT-2 and CLIP
directories (`capjax.text_models`), and untrained Inception-ResNet-v2 weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from capjax.models import inception_resnet_v2 as irv2
from capjax.text_models import checkpoint, hf_import
from capjax.text_models.config import ConfigError
from capjax.strings import as_str

Key = tuple[str, ...]  # (collection, *module path, variable), e.g. ("params", "Mixed_5b", ..., "kernel")
FORMATS = ("keras", "timm", "hf_bert", "hf_gpt2", "hf_clip", irv2.RANDOM_FORMAT)
HF_FORMATS = {"hf_bert": "bert", "hf_gpt2": "gpt2", "hf_clip": "clip"}
IMAGENET_CLASSES = 1000


class ConversionError(ValueError):
  """The input file does not hold exactly the released Inception-ResNet-v2 tensors."""


@dataclasses.dataclass(frozen=True)
class Tensor:
  """A source array and the name it has in the input file (for error messages)."""
  source: str
  value: np.ndarray


# --- safetensors --------------------------------------------------------------------------------------------------

SAFETENSORS_DTYPES: dict[str, np.dtype] = {
  "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
  "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
  "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
MAX_SAFETENSORS_HEADER = 100 * 2**20  # the reference implementation's limit


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  keys = [k for k, _ in pairs]
  if len(set(keys)) != len(keys):
    raise ConversionError(f"safetensors header repeats a key: {sorted(k for k in keys if keys.count(k) > 1)[0]!r}")
  return dict(pairs)


def _tensor_entry(name: str, info: Any, data_size: int) -> tuple[np.dtype, tuple[int, ...], int, int]:
  """Validates one header entry; returns (dtype, shape, begin, end) relative to the data section."""
  if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
    raise ConversionError(f"safetensors entry {name!r} must have exactly dtype, shape, data_offsets: {info!r}")
  dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
  if dtype not in SAFETENSORS_DTYPES:
    raise ConversionError(f"safetensors entry {name!r} has unsupported dtype {dtype!r}")
  if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
    raise ConversionError(f"safetensors entry {name!r} has an invalid shape {shape!r}")
  if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
      or not 0 <= offsets[0] <= offsets[1] <= data_size):
    raise ConversionError(f"safetensors entry {name!r} has data_offsets {offsets!r} outside the "
                          f"{data_size}-byte data section")
  nbytes = math.prod(shape) * SAFETENSORS_DTYPES[dtype].itemsize
  if offsets[1] - offsets[0] != nbytes:
    raise ConversionError(f"safetensors entry {name!r}: data_offsets {offsets!r} span {offsets[1] - offsets[0]} "
                          f"bytes but {dtype}{shape} needs {nbytes}")
  return SAFETENSORS_DTYPES[dtype], tuple(shape), offsets[0], offsets[1]


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
  """Reads a safetensors file, trusting nothing in it: every offset, size and dtype is checked first."""
  file_size = os.path.getsize(path)
  with open(path, "rb") as f:
    prefix = f.read(8)
    if len(prefix) != 8:
      raise ConversionError(f"{path}: too short to be a safetensors file ({file_size} bytes)")
    header_size = int.from_bytes(prefix, "little")
    if header_size > min(MAX_SAFETENSORS_HEADER, file_size - 8):
      raise ConversionError(f"{path}: header length {header_size} exceeds the file ({file_size} bytes) "
                            f"or the {MAX_SAFETENSORS_HEADER}-byte limit")
    try:
      header = json.loads(f.read(header_size).decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
      raise ConversionError(f"{path}: the safetensors header is not valid JSON ({error})") from error
    except RecursionError as error:  # arrays nested thousands deep: no safetensors header is
      raise ConversionError(f"{path}: the safetensors header is nested deeper than the JSON parser follows") \
          from error
  if not isinstance(header, dict):
    raise ConversionError(f"{path}: the safetensors header must be a JSON object")
  metadata = header.pop("__metadata__", {})
  if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
    raise ConversionError(f"{path}: __metadata__ must map strings to strings")
  data_start, data_size = 8 + header_size, file_size - 8 - header_size
  entries = {name: _tensor_entry(name, info, data_size) for name, info in header.items()}
  spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items())
  for (_, end, before), (begin, _, after) in zip(spans, spans[1:]):
    if begin < end:
      raise ConversionError(f"{path}: tensors {before!r} and {after!r} overlap in the data section")
  data = np.memmap(path, np.uint8, "r", data_start, (data_size,)) if data_size else np.zeros(0, np.uint8)
  return {name: np.frombuffer(data[begin:end].tobytes(), dtype).reshape(shape)
          for name, (dtype, shape, begin, end) in entries.items()}


def write_safetensors(path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray],
                      metadata: Mapping[str, str] | None = None) -> None:
  """Writes `tensors` in the safetensors layout (header padded to 8 bytes, tensors in name order)."""
  codes = {dtype: code for code, dtype in SAFETENSORS_DTYPES.items()}
  header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
  arrays, offset = [], 0
  for name in sorted(tensors):
    array = np.asarray(tensors[name])  # tobytes() below writes C order; ascontiguousarray would make scalars 1-D
    array = array.astype(array.dtype.newbyteorder("<")) if array.dtype.byteorder == ">" else array
    if array.dtype not in codes:
      raise ValueError(f"{name}: dtype {array.dtype} has no safetensors code")
    header[name] = {"dtype": codes[array.dtype], "shape": list(array.shape),
                    "data_offsets": [offset, offset + array.nbytes]}
    arrays.append(array)
    offset += array.nbytes
  encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
  encoded += b" " * (-len(encoded) % 8)
  with open(path, "wb") as f:
    f.write(len(encoded).to_bytes(8, "little"))
    f.write(encoded)
    for array in arrays:
      f.write(array.tobytes())


# --- where each capjax variable lives in the released files --------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConvSite:
  """A ConvBN unit of the capjax module, with the prefix timm gives the same unit."""
  path: Key  # module path, e.g. ("Mixed_5b", "Branch_1", "Conv2d_0b_5x5")
  timm: str  # e.g. "mixed_5b.branch1.1"


def timm_stage(stage: irv2.Stage) -> str:
  """timm's attribute name for a top-level stage: conv2d_1a, mixed_5b, repeat.3, repeat_1.0, repeat_2.8, block8."""
  if isinstance(stage, irv2.ResidualSpec):
    kind, index = stage.name.rsplit("_", 1)
    if not stage.activate:
      return "block8"
    return {"block35": "repeat", "block17": "repeat_1", "block8": "repeat_2"}[kind] + f".{int(index) - 1}"
  match = re.fullmatch(r"Conv2d_(\d[a-z])_\d+x\d+", stage.name)
  return f"conv2d_{match.group(1)}" if match else stage.name.lower()


def conv_sites(layout: Sequence[irv2.Stage] = irv2.LAYOUT) -> list[ConvSite]:
  """Every ConvBN unit in creation order (the order Keras numbers its unnamed `conv2d_N` layers)."""
  sites = []
  for stage in layout:
    if isinstance(stage, irv2.ConvSpec):
      sites.append(ConvSite((stage.name,), timm_stage(stage)))
    elif isinstance(stage, (irv2.MixedSpec, irv2.ResidualSpec)):
      for k, branch in enumerate(stage.branches):
        for j, op in enumerate(branch):
          if isinstance(op, irv2.ConvSpec):
            suffix = f".{j}" if len(branch) > 1 else ""  # timm wraps multi-op branches in nn.Sequential
            sites.append(ConvSite((stage.name, f"Branch_{k}", op.name), f"{timm_stage(stage)}.branch{k}{suffix}"))
  return sites


def residual_stages(layout: Sequence[irv2.Stage] = irv2.LAYOUT) -> list[irv2.ResidualSpec]:
  return [stage for stage in layout if isinstance(stage, irv2.ResidualSpec)]


class _Source:
  """The input tensors by name; each can be taken once, and what is never taken is reported as extra."""

  def __init__(self, path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray]):
    self.path, self._tensors = str(path), dict(tensors)

  def __contains__(self, name: str) -> bool:
    return name in self._tensors

  def take(self, name: str, needed_for: str) -> Tensor:
    if name not in self._tensors:
      raise ConversionError(f"missing tensor {name!r} in {self.path} (needed for {needed_for})")
    return Tensor(name, self._tensors.pop(name))

  def names(self) -> list[str]:
    return list(self._tensors)

  def finish(self, ignored: str | None = None) -> None:
    extra = sorted(n for n in self._tensors if not (ignored and re.fullmatch(ignored, n)))
    if extra:
      raise ConversionError(f"unexpected tensor {extra[0]!r} in {self.path} ({len(extra)} unexpected in all: "
                            f"{', '.join(extra[:5])}{', ...' if len(extra) > 5 else ''})")


def _check_unit_gamma(gamma: Tensor) -> None:
  """The released networks have BN without scale; a stored gamma must be all ones to be droppable."""
  if not np.allclose(gamma.value, 1.0, rtol=0, atol=1e-6):
    raise ConversionError(f"{gamma.source} is not all ones: capjax's batch norm has no scale (gamma)")


def _head(kernel: Tensor, bias: Tensor) -> tuple[dict[Key, Tensor], bool]:
  """Head variables (kernel (1536, C)); a 1001-way TF-slim head loses its background class 0."""
  drop = kernel.value.ndim == 2 and kernel.value.shape[1] == IMAGENET_CLASSES + 1
  if drop:
    kernel, bias = Tensor(kernel.source, kernel.value[:, 1:]), Tensor(bias.source, bias.value[1:])
  return {("params", irv2.HEAD_NAME, "kernel"): kernel, ("params", irv2.HEAD_NAME, "bias"): bias}, drop


# --- Keras ---------------------------------------------------------------------------------------------------------

_KERAS3_VARIABLES = {"conv2d": ("kernel", "bias"), "dense": ("kernel", "bias"),
                     "batch_normalization": ("gamma", "beta", "moving_mean", "moving_variance")}


def read_keras_h5(path: str | os.PathLike[str]) -> tuple[str, dict[str, np.ndarray]]:
  """Keras weights as {"<layer name>/<variable>": array} and the layout ("keras-legacy-h5" or "keras3-weights-h5").

  Reads the legacy layout (`layer_names`/`weight_names` attributes; what `keras.applications` downloads)
  and Keras 3's `.weights.h5` (`layers/<key>/vars/<i>`, the layer's name in the `vars` group's "name").
  """
  import h5py  # noqa: PLC0415 (only the Keras path needs h5py)
  tensors: dict[str, np.ndarray] = {}
  with h5py.File(path, "r") as f:
    if "layers" in f and "layer_names" not in f.attrs:
      for key, group in f["layers"].items():
        variables = group.get("vars")
        if variables is None or not len(variables):
          continue
        if "name" not in variables.attrs:
          raise ConversionError(f"{path}: layers/{key}/vars has no 'name' attribute, so layers cannot be matched "
                                "by creation order; re-save it with this Keras version or in the legacy layout")
        layer, kind = as_str(variables.attrs["name"]), re.sub(r"_\d+$", "", key)
        names = _KERAS3_VARIABLES.get(kind)
        if names is None:
          raise ConversionError(f"unexpected tensor {layer}/0 in {path}: layer type {kind!r} has no weights in IRv2")
        if kind == "batch_normalization" and len(variables) == 3:
          names = names[1:]
        for i, name in enumerate(names[:len(variables)]):
          tensors[f"{layer}/{name}"] = np.asarray(variables[str(i)])
      return "keras3-weights-h5", tensors
    root = f["model_weights"] if "model_weights" in f else f
    if "layer_names" not in root.attrs:
      raise ConversionError(f"{path}: neither a legacy Keras weights file (no 'layer_names') nor a .weights.h5")
    for layer in map(as_str, root.attrs["layer_names"]):
      group = root[layer]
      for weight in map(as_str, group.attrs.get("weight_names", [])):
        tensors[f"{layer}/{weight.split('/')[-1].split(':')[0]}"] = np.asarray(group[weight])
  return "keras-legacy-h5", tensors


def _numbered(names: list[str], prefix: str) -> list[str]:
  """Auto-named layers `prefix`, `prefix_1`, ... in creation order (numeric, not text, order)."""
  layers = {n.split("/")[0] for n in names}
  found = [(int(m.group(1) or 0), layer) for layer in layers if (m := re.fullmatch(rf"{prefix}(?:_(\d+))?", layer))]
  return [layer for _, layer in sorted(found)]


def keras_variables(path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray]
                    ) -> tuple[dict[Key, Tensor], bool]:
  """Maps Keras layers to capjax variables: unnamed conv2d_N/batch_normalization_N by creation order."""
  source = _Source(path, tensors)
  sites = conv_sites()
  convs, norms = _numbered(source.names(), "conv2d"), _numbered(source.names(), "batch_normalization")
  named = {sites[-1].path: ("conv_7b", "conv_7b_bn")}
  flat: dict[Key, Tensor] = {}
  for i, site in enumerate(sites):
    where = "/".join(site.path)
    if site.path in named:
      conv, norm = named[site.path]
    elif i < len(convs) and i < len(norms):
      conv, norm = convs[i], norms[i]
    else:
      raise ConversionError(f"missing tensor in {path}: it has {len(convs)} unnamed conv2d and {len(norms)} "
                            f"batch_normalization layers, but {len(sites) - 1} are needed (none left for {where})")
    flat[("params", *site.path, "conv", "kernel")] = source.take(f"{conv}/kernel", where)
    if f"{norm}/gamma" in source:
      _check_unit_gamma(source.take(f"{norm}/gamma", where))
    flat[("params", *site.path, "bn", "bias")] = source.take(f"{norm}/beta", where)
    flat[("batch_stats", *site.path, "bn", "mean")] = source.take(f"{norm}/moving_mean", where)
    flat[("batch_stats", *site.path, "bn", "var")] = source.take(f"{norm}/moving_variance", where)
  for stage in residual_stages():
    for variable in ("kernel", "bias"):
      flat[("params", stage.name, "Conv2d_1x1", variable)] = source.take(f"{stage.name}_conv/{variable}", stage.name)
  dropped = False
  if "predictions/kernel" in source:
    head, dropped = _head(source.take("predictions/kernel", irv2.HEAD_NAME),
                          source.take("predictions/bias", irv2.HEAD_NAME))
    flat.update(head)
  source.finish()
  return flat, dropped


# --- timm ----------------------------------------------------------------------------------------------------------


def timm_variables(path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray]) -> tuple[dict[Key, Tensor], bool]:
  """Maps timm's `inception_resnet_v2` state dict (OIHW convs, BN with weight=1) to capjax variables."""
  source = _Source(path, tensors)

  def hwio(tensor: Tensor) -> Tensor:
    if tensor.value.ndim != 4:
      raise ConversionError(f"{tensor.source} has shape {tensor.value.shape}; a conv weight is 4-D (OIHW)")
    return Tensor(tensor.source, tensor.value.transpose(2, 3, 1, 0))

  flat: dict[Key, Tensor] = {}
  for site in conv_sites():
    where = "/".join(site.path)
    flat[("params", *site.path, "conv", "kernel")] = hwio(source.take(f"{site.timm}.conv.weight", where))
    _check_unit_gamma(source.take(f"{site.timm}.bn.weight", where))
    flat[("params", *site.path, "bn", "bias")] = source.take(f"{site.timm}.bn.bias", where)
    flat[("batch_stats", *site.path, "bn", "mean")] = source.take(f"{site.timm}.bn.running_mean", where)
    flat[("batch_stats", *site.path, "bn", "var")] = source.take(f"{site.timm}.bn.running_var", where)
  for stage in residual_stages():
    prefix = timm_stage(stage)
    flat[("params", stage.name, "Conv2d_1x1", "kernel")] = hwio(source.take(f"{prefix}.conv2d.weight", stage.name))
    flat[("params", stage.name, "Conv2d_1x1", "bias")] = source.take(f"{prefix}.conv2d.bias", stage.name)
  dropped = False
  if "classif.weight" in source:
    kernel = source.take("classif.weight", irv2.HEAD_NAME)
    if kernel.value.ndim != 2:
      raise ConversionError(f"classif.weight has shape {kernel.value.shape}; a linear weight is 2-D")
    head, dropped = _head(Tensor(kernel.source, kernel.value.T), source.take("classif.bias", irv2.HEAD_NAME))
    flat.update(head)
  source.finish(ignored=r".*\.num_batches_tracked")
  return flat, dropped


# --- checking and writing ------------------------------------------------------------------------------------------


def assemble(flat: Mapping[Key, Tensor], num_classes: int | None) -> dict[str, Any]:
  """Nested float32 variables, after checking names and shapes against the capjax module."""
  from flax import traverse_util  # noqa: PLC0415
  expected = traverse_util.flatten_dict(irv2.variable_shapes(num_classes))
  for key in expected:
    if key not in flat:
      raise ConversionError(f"missing tensor for {'/'.join(key)}")
  for key, tensor in flat.items():
    if key not in expected:
      raise ConversionError(f"unexpected tensor {tensor.source} (would be {'/'.join(key)})")
    if tuple(tensor.value.shape) != tuple(expected[key].shape):
      raise ConversionError(f"{tensor.source} has shape {tuple(tensor.value.shape)} but {'/'.join(key)} "
                            f"needs {tuple(expected[key].shape)}")
  return traverse_util.unflatten_dict({key: np.asarray(t.value, np.float32) for key, t in flat.items()})


def sha256(path: str | os.PathLike[str]) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(2**20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def convert_file(weights_format: str, path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
  """(variables, metadata) from a Keras HDF5 ("keras") or a timm safetensors ("timm") file."""
  if weights_format == "keras":
    layout, tensors = read_keras_h5(path)
    flat, dropped = keras_variables(path, tensors)
  elif weights_format == "timm":
    layout, tensors = "timm-safetensors", read_safetensors(path)
    flat, dropped = timm_variables(path, tensors)
  else:
    raise ValueError(f"unknown format {weights_format!r}: use one of {FORMATS}")
  head = flat.get(("params", irv2.HEAD_NAME, "bias"))
  num_classes = None if head is None else int(head.value.shape[0])
  variables = assemble(flat, num_classes)
  metadata = {"model": "inception_resnet_v2", "format": layout, "num_classes": num_classes,
              "background_class_dropped": dropped, "source_file": pathlib.Path(path).name,
              "source_sha256": sha256(path), "num_params": irv2.count_params(variables)}
  return variables, metadata


def convert(weights_format: str, path: str | os.PathLike[str], output: str | os.PathLike[str]) -> dict[str, Any]:
  """Converts `path` and writes the orbax checkpoint and metadata into `output`; returns the metadata."""
  variables, metadata = convert_file(weights_format, path)
  irv2.save_converted(output, variables, metadata)
  return metadata


# --- Hugging Face text models -------------------------------------------------------------------------------------


def convert_hf(weights_format: str, input_dir: str | os.PathLike[str], output: str | os.PathLike[str]
               ) -> dict[str, Any]:
  """Converts a Hugging Face checkpoint directory (see the module docstring) into `output`; returns the metadata."""
  kind, source = HF_FORMATS[weights_format], pathlib.Path(input_dir)
  weights = source / "model.safetensors"
  try:
    hf_import.check_files(kind, source)
    try:
      tensors = read_safetensors(weights)
    except ConversionError as error:  # name the file: the directory was given
      raise ConversionError(str(error) if str(weights) in str(error) else f"{weights}: {error}") from error
    config, params = hf_import.convert(kind, source, tensors)
  except (checkpoint.WeightsError, ConfigError, hf_import.CheckpointError) as error:
    raise ConversionError(str(error)) from error
  metadata = {"model": kind, "format": f"hf-{kind}-safetensors", "source_file": weights.name,
              "source_sha256": sha256(weights), "num_params": irv2.count_params(params)}
  checkpoint.save(output, kind, config, params, metadata, source)
  return metadata


def write_random(output: str | os.PathLike[str], seed: int = 0) -> dict[str, Any]:
  """Untrained Inception-ResNet-v2 weights (1,000-class head) and their metadata in `output`; returns the metadata."""
  variables = irv2.random_variables(IMAGENET_CLASSES, seed)
  metadata = irv2.random_metadata(variables, IMAGENET_CLASSES, seed)
  irv2.save_converted(output, variables, metadata)
  return metadata
