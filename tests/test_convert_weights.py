"""Specification of capjax.tools.convert_weights: released Keras and timm files give the Keras network in capjax.

Keras builds a RANDOM Inception-ResNet-v2 here (no downloads): random kernels, biases, betas and BN statistics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib

import jax
import numpy as np
import pytest

from capjax.models import inception_resnet_v2 as irv2
from capjax.tools import convert_weights as cw
from capjax.tools import extract_features

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy:DeprecationWarning")

IMAGE_SIZE = 139  # a 3×3 grid, to keep Keras and XLA on 2 CPU cores quick; 299 → 8×8 is in the model's tests
KERAS_PARAMS = 55_873_736  # keras.applications.InceptionResNetV2(weights=None).count_params()


@dataclasses.dataclass(frozen=True)
class KerasRelease:
  """A random Keras IRv2 saved both ways, with its outputs on `images`."""
  legacy_h5: pathlib.Path
  weights_h5: pathlib.Path
  images: np.ndarray  # uint8 (2, IMAGE_SIZE, IMAGE_SIZE, 3)
  outputs: dict[str, np.ndarray]  # grid, pooled, logits
  count_params: int
  weights: dict[str, list[np.ndarray]]  # by Keras layer name


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
  return float(np.linalg.norm(np.asarray(actual, np.float64) - expected) / np.linalg.norm(expected))


def _randomize(model, rng: np.random.Generator) -> None:
  """Non-trivial BN statistics, betas and biases, so that a wrong mapping cannot hide behind zeros and ones."""
  for layer in model.layers:
    weights = layer.get_weights()
    if layer.__class__.__name__ == "BatchNormalization":
      beta, mean, variance = weights
      layer.set_weights([rng.normal(0, 0.2, beta.shape), rng.normal(0, 0.2, mean.shape),
                         rng.uniform(0.5, 2.0, variance.shape)])
    elif len(weights) == 2:  # the residual 1×1 convolutions and the head have biases
      layer.set_weights([weights[0], rng.normal(0, 0.05, weights[1].shape)])


@pytest.fixture(scope="module")
def keras_release(tmp_path_factory: pytest.TempPathFactory) -> KerasRelease:
  import h5py
  import keras
  from keras.src.legacy.saving import legacy_h5_format
  keras.utils.set_random_seed(0)
  model = keras.applications.InceptionResNetV2(
    weights=None, input_shape=(IMAGE_SIZE, IMAGE_SIZE, 3), classifier_activation=None)
  _randomize(model, np.random.default_rng(0))
  folder = tmp_path_factory.mktemp("keras")
  legacy_h5, weights_h5 = folder / "inception_resnet_v2.h5", folder / "inception_resnet_v2.weights.h5"
  with h5py.File(legacy_h5, "w") as f:
    legacy_h5_format.save_weights_to_hdf5_group(f, model)
  model.save_weights(weights_h5)
  images = np.random.default_rng(1).integers(0, 256, (2, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
  probe = keras.Model(model.inputs, [model.get_layer("conv_7b_ac").output, model.get_layer("avg_pool").output,
                                     model.output])
  x = keras.applications.inception_resnet_v2.preprocess_input(images.astype(np.float32))
  grid, pooled, logits = (np.asarray(o) for o in probe([x], training=False))
  return KerasRelease(legacy_h5, weights_h5, images, {"grid": grid, "pooled": pooled, "logits": logits},
                      model.count_params(), {layer.name: layer.get_weights() for layer in model.layers})


@pytest.fixture(scope="module")
def keras_variables(keras_release: KerasRelease) -> dict:
  variables, _ = cw.convert_file("keras", keras_release.legacy_h5)
  return variables


def assert_same_variables(actual: dict, expected: dict) -> None:
  assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected)
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(actual), jax.tree_util.tree_leaves(expected)):
    np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))


# --- Keras ---------------------------------------------------------------------------------------------------------


def test_keras_legacy_h5_gives_keras_features_and_logits(keras_release, keras_variables):
  # The feature extractor's compiled encoder: uint8 pixels → preprocess → capjax model.
  outputs = extract_features.encode(irv2.InceptionResNetV2(num_classes=1000), keras_variables, keras_release.images)
  assert outputs["grid"].shape == (2, 3, 3, irv2.GRID_FEATURES)
  for key in ("grid", "pooled", "logits"):
    assert relative_error(outputs[key], keras_release.outputs[key]) <= 1e-4, key


def test_keras3_weights_h5_gives_the_same_variables_as_legacy_h5(keras_release, keras_variables):
  variables, metadata = cw.convert_file("keras", keras_release.weights_h5)
  assert metadata["format"] == "keras3-weights-h5"
  assert_same_variables(variables, keras_variables)


def test_count_params_counts_like_keras(keras_release, keras_variables):
  assert irv2.count_params(keras_variables) == keras_release.count_params == KERAS_PARAMS


def test_cli_writes_orbax_checkpoint_and_metadata_that_load_converted_reads(keras_release, keras_variables, tmp_path):
  cw.main(["convert_weights", "--format=keras", f"--input={keras_release.legacy_h5}",
           f"--output={tmp_path / 'irv2'}"])
  metadata = json.loads((tmp_path / "irv2" / irv2.METADATA_FILE).read_text())
  assert metadata == {
    "model": "inception_resnet_v2", "format": "keras-legacy-h5", "num_classes": 1000,
    "background_class_dropped": False, "source_file": "inception_resnet_v2.h5", "num_params": KERAS_PARAMS,
    "source_sha256": hashlib.sha256(keras_release.legacy_h5.read_bytes()).hexdigest()}
  assert_same_variables(irv2.load_converted(tmp_path / "irv2"), keras_variables)


@pytest.fixture(scope="module")
def keras_tensors(keras_release: KerasRelease) -> dict[str, np.ndarray]:
  return cw.read_keras_h5(keras_release.legacy_h5)[1]


def test_keras_layers_are_matched_by_creation_number_not_name_text(keras_tensors):
  flat, _ = cw.keras_variables("file.h5", keras_tensors)
  # Creation order: the stem's 5 convs are conv2d..conv2d_4, Mixed_5b's branches conv2d_5..conv2d_11. Text
  # order ("conv2d_1" < "conv2d_10" < "conv2d_100" < "conv2d_11") would give Mixed_5b/Branch_3 a block17 kernel.
  assert flat[("params", "Mixed_5b", "Branch_3", "Conv2d_0b_1x1", "conv", "kernel")].source == "conv2d_11/kernel"
  assert flat[("params", "Conv2d_1a_3x3", "conv", "kernel")].source == "conv2d/kernel"


def test_missing_keras_tensor_is_named(keras_tensors):
  tensors = {k: v for k, v in keras_tensors.items() if k != "block17_4_conv/bias"}
  with pytest.raises(cw.ConversionError, match="block17_4_conv/bias"):
    cw.keras_variables("file.h5", tensors)


def test_extra_keras_tensor_is_named(keras_tensors):
  tensors = {**keras_tensors, "conv2d_999/kernel": np.zeros((1, 1, 3, 3), np.float32)}
  with pytest.raises(cw.ConversionError, match="unexpected tensor 'conv2d_999/kernel'"):
    cw.keras_variables("file.h5", tensors)


def test_wrong_shape_names_the_tensor_and_the_capjax_variable(keras_tensors):
  tensors = {**keras_tensors, "conv2d_20/kernel": keras_tensors["conv2d_20/kernel"][..., :-1]}
  flat, _ = cw.keras_variables("file.h5", tensors)
  expected = r"conv2d_20/kernel has shape \(3, 3, 32, 31\) but params/block35_2/Branch_1/Conv2d_0b_3x3/conv/kernel"
  with pytest.raises(cw.ConversionError, match=expected):
    cw.assemble(flat, 1000)


def test_1001_class_head_loses_the_background_class(keras_tensors):
  kernel = np.random.default_rng(0).normal(size=(irv2.GRID_FEATURES, 1001)).astype(np.float32)
  tensors = {**keras_tensors, "predictions/kernel": kernel, "predictions/bias": np.arange(1001, dtype=np.float32)}
  flat, dropped = cw.keras_variables("file.h5", tensors)
  assert dropped
  np.testing.assert_array_equal(flat[("params", irv2.HEAD_NAME, "kernel")].value, kernel[:, 1:])
  np.testing.assert_array_equal(flat[("params", irv2.HEAD_NAME, "bias")].value, np.arange(1, 1001))


# --- timm ----------------------------------------------------------------------------------------------------------


def _timm_block(prefix: str, branch_lengths: tuple[int, ...]) -> list[str]:
  """timm keeps a one-conv branch as the BasicConv2d itself and wraps longer ones in nn.Sequential."""
  return [f"{prefix}.branch{k}" + (f".{j}" if n > 1 else "") for k, n in enumerate(branch_lengths) for j in range(n)]


# timm's BasicConv2d modules in forward order, written from timm/models/inception_resnet_v2.py; that order is
# TF-slim's and therefore Keras's creation order.
TIMM_CONVS = [
  "conv2d_1a", "conv2d_2a", "conv2d_2b", "conv2d_3b", "conv2d_4a",
  "mixed_5b.branch0", "mixed_5b.branch1.0", "mixed_5b.branch1.1", "mixed_5b.branch2.0", "mixed_5b.branch2.1",
  "mixed_5b.branch2.2", "mixed_5b.branch3.1",  # branch3 is (AvgPool2d, BasicConv2d)
  *(name for i in range(10) for name in _timm_block(f"repeat.{i}", (1, 2, 3))),
  "mixed_6a.branch0", "mixed_6a.branch1.0", "mixed_6a.branch1.1", "mixed_6a.branch1.2",
  *(name for i in range(20) for name in _timm_block(f"repeat_1.{i}", (1, 3))),
  "mixed_7a.branch0.0", "mixed_7a.branch0.1", "mixed_7a.branch1.0", "mixed_7a.branch1.1", "mixed_7a.branch2.0",
  "mixed_7a.branch2.1", "mixed_7a.branch2.2",
  *(name for i in range(9) for name in _timm_block(f"repeat_2.{i}", (1, 3))),
  *_timm_block("block8", (1, 3)),
  "conv2d_7b",
]
TIMM_RESIDUALS = [*(f"repeat.{i}" for i in range(10)), *(f"repeat_1.{i}" for i in range(20)),
                  *(f"repeat_2.{i}" for i in range(9)), "block8"]
KERAS_RESIDUALS = [*(f"block35_{i}" for i in range(1, 11)), *(f"block17_{i}" for i in range(1, 21)),
                   *(f"block8_{i}" for i in range(1, 11))]


def _creation_order(weights: dict[str, list[np.ndarray]], prefix: str) -> list[str]:
  numbered = [(int(name[len(prefix) + 1:] or 0), name) for name in weights
              if name == prefix or (name.startswith(prefix + "_") and name[len(prefix) + 1:].isdigit())]
  return [name for _, name in sorted(numbered)]


def timm_state_dict(weights: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
  """What timm's `model.state_dict()` holds for these Keras weights: OIHW convs, BN weight 1, int64 counters."""
  convs = _creation_order(weights, "conv2d") + ["conv_7b"]
  norms = _creation_order(weights, "batch_normalization") + ["conv_7b_bn"]
  assert len(convs) == len(norms) == len(TIMM_CONVS)
  tensors = {}
  for prefix, conv, norm in zip(TIMM_CONVS, convs, norms):
    (kernel,), (beta, mean, variance) = weights[conv], weights[norm]
    tensors |= {f"{prefix}.conv.weight": kernel.transpose(3, 2, 0, 1), f"{prefix}.bn.weight": np.ones_like(beta),
                f"{prefix}.bn.bias": beta, f"{prefix}.bn.running_mean": mean,
                f"{prefix}.bn.running_var": variance, f"{prefix}.bn.num_batches_tracked": np.array(0, np.int64)}
  for prefix, block in zip(TIMM_RESIDUALS, KERAS_RESIDUALS):
    kernel, bias = weights[f"{block}_conv"]
    tensors |= {f"{prefix}.conv2d.weight": kernel.transpose(3, 2, 0, 1), f"{prefix}.conv2d.bias": bias}
  kernel, bias = weights["predictions"]
  return tensors | {"classif.weight": kernel.T, "classif.bias": bias}


@pytest.fixture(scope="module")
def timm_tensors(keras_release: KerasRelease) -> dict[str, np.ndarray]:
  return timm_state_dict(keras_release.weights)


def test_timm_safetensors_gives_the_keras_variables(timm_tensors, keras_variables, tmp_path):
  path = tmp_path / "model.safetensors"
  cw.write_safetensors(path, timm_tensors, {"format": "pt"})
  variables, metadata = cw.convert_file("timm", path)
  assert metadata["format"] == "timm-safetensors" and metadata["num_classes"] == 1000
  assert_same_variables(variables, keras_variables)


def test_missing_timm_tensor_is_named(timm_tensors):
  tensors = {k: v for k, v in timm_tensors.items() if k != "repeat_1.3.branch1.2.conv.weight"}
  with pytest.raises(cw.ConversionError, match=r"missing tensor 'repeat_1\.3\.branch1\.2\.conv\.weight'"):
    cw.timm_variables("model.safetensors", tensors)


def test_extra_timm_tensor_is_named(timm_tensors):
  tensors = {**timm_tensors, "repeat.10.conv2d.weight": np.zeros((320, 128, 1, 1), np.float32)}
  with pytest.raises(cw.ConversionError, match=r"unexpected tensor 'repeat\.10\.conv2d\.weight'"):
    cw.timm_variables("model.safetensors", tensors)


def test_timm_batch_norm_scale_other_than_one_is_refused(timm_tensors):
  tensors = {**timm_tensors, "mixed_6a.branch0.bn.weight": np.full(384, 2.0, np.float32)}
  with pytest.raises(cw.ConversionError, match=r"mixed_6a\.branch0\.bn\.weight is not all ones"):
    cw.timm_variables("model.safetensors", tensors)


# --- safetensors ---------------------------------------------------------------------------------------------------


def test_safetensors_round_trip_keeps_values_and_dtypes(tmp_path):
  tensors = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3), "counter": np.array(7, np.int64),
             "bf16": np.array([1.5, -2.0], cw.SAFETENSORS_DTYPES["BF16"]), "mask": np.array([True, False]),
             "empty": np.zeros((0, 4), np.float16)}
  cw.write_safetensors(tmp_path / "t.safetensors", tensors, {"format": "pt"})
  read = cw.read_safetensors(tmp_path / "t.safetensors")
  assert sorted(read) == sorted(tensors)
  for name, value in tensors.items():
    assert read[name].dtype == value.dtype and read[name].shape == value.shape
    np.testing.assert_array_equal(read[name], value)


def _raw_safetensors(header: bytes, data: bytes = b"", declared: int | None = None) -> bytes:
  return (len(header) if declared is None else declared).to_bytes(8, "little") + header + data


def _header(**entries: object) -> bytes:
  return json.dumps(entries).encode()


F32_2 = {"dtype": "F32", "shape": [2]}


@pytest.mark.parametrize("contents, message", [
  (b"\x01\x02", "too short"),
  (_raw_safetensors(b"{}", declared=10**9), "header length 1000000000 exceeds the file"),
  (_raw_safetensors(b"[1, 2]"), "must be a JSON object"),
  (_raw_safetensors(b"{not json"), "not valid JSON"),
  (_raw_safetensors(b'{"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}, "a": {}}'), "repeats a key: 'a'"),
  (_raw_safetensors(_header(a={**F32_2, "data_offsets": [0, 8]}), b"\0" * 4), r"\[0, 8\] outside the 4-byte"),
  (_raw_safetensors(_header(a={**F32_2, "data_offsets": [-8, 0]}), b"\0" * 8), "outside"),
  (_raw_safetensors(_header(a={"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}), b"\0" * 8),
   "span 8 bytes but F32\\[3\\] needs 12"),
  (_raw_safetensors(_header(a={**F32_2, "data_offsets": [0, 8]}, b={**F32_2, "data_offsets": [4, 12]}), b"\0" * 12),
   "'a' and 'b' overlap"),
  (_raw_safetensors(_header(a={"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}), b"\0" * 8),
   "unsupported dtype 'C64'"),
  (_raw_safetensors(_header(a={"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]})), "invalid shape"),
  (_raw_safetensors(_header(a={**F32_2, "data_offsets": [0, 8], "pickle": "x"}), b"\0" * 8), "exactly dtype"),
  (_raw_safetensors(_header(__metadata__={"n": 1})), "__metadata__ must map strings to strings"),
])
def test_hostile_safetensors_file_is_refused_with_the_reason(tmp_path, contents, message):
  path = tmp_path / "hostile.safetensors"
  path.write_bytes(contents)
  with pytest.raises(cw.ConversionError, match=message):
    cw.read_safetensors(path)


def test_random_format_writes_untrained_weights_shaped_like_the_models_init(tmp_path, capsys):
  output = tmp_path / "random"
  cw.main(["convert_weights", "--format=random", f"--output={output}", "--seed=1"])
  metadata = json.loads(capsys.readouterr().out)
  assert metadata == irv2.read_metadata(output)
  assert (metadata["format"], metadata["num_classes"], metadata["seed"]) == ("random", 1000, 1)
  assert irv2.is_random(metadata) and "not trained" in metadata["note"]
  loaded = irv2.load_converted(output)
  import flax.linen as nn
  init = nn.meta.unbox(irv2.abstract_variables(irv2.InceptionResNetV2(num_classes=1000)))
  assert jax.tree_util.tree_structure(loaded) == jax.tree_util.tree_structure(init)
  same = jax.tree_util.tree_map(lambda a, b: (a.shape, a.dtype) == (b.shape, b.dtype), loaded, init)
  assert jax.tree_util.tree_leaves(same) == [True] * len(jax.tree_util.tree_leaves(init))
  assert metadata["num_params"] == irv2.count_params(loaded) == 55_873_736
  variances = loaded["batch_stats"]["Conv2d_1a_3x3"]["bn"]["var"]
  assert variances.min() >= 0.5 and variances.max() <= 2.0  # drawn, not zeros: the file holds the draws


def test_the_command_names_the_library_s_formats_without_importing_it():
  from capjax.tools import weights
  assert cw.FORMATS == weights.FORMATS  # the command's flag spells them out so that --help loads no JAX
