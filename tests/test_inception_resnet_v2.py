"""Specification of capjax.models.inception_resnet_v2 (layout, shapes, axes, batch norm); its ImageNet classes are
in test_image_labels.py.

Parity with Keras on real weights files is in test_convert_weights.py.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

from capjax.models import inception_resnet_v2 as irv2

KERAS_PARAMS = 55_873_736  # keras.applications.InceptionResNetV2(weights=None).count_params(), BN statistics included
HEAD_PARAMS = irv2.GRID_FEATURES * 1000 + 1000


def output_shapes(model: irv2.InceptionResNetV2, batch: int = 2, size: int = irv2.IMAGE_SIZE,
                  variables: dict | None = None) -> dict:
  images = jax.ShapeDtypeStruct((batch, size, size, 3), jnp.float32)
  return jax.eval_shape(model.apply, variables or irv2.abstract_variables(model, size), images)


@pytest.fixture(scope="module")
def abstract_variables() -> dict:
  """Variables of the Keras-equivalent model (1000 classes, float32), as shapes with logical axes."""
  return irv2.abstract_variables(irv2.InceptionResNetV2())


def test_299_images_give_8x8x1536_grid_pooled_vector_and_1000_logits(abstract_variables):
  shapes = output_shapes(irv2.InceptionResNetV2(), variables=abstract_variables)
  assert {k: (v.shape, v.dtype) for k, v in shapes.items()} == {
    "grid": ((2, 8, 8, 1536), jnp.float32), "pooled": ((2, 1536), jnp.float32), "logits": ((2, 1000), jnp.float32)}


def test_the_smallest_input_keras_accepts_gives_a_1x1_grid(abstract_variables):
  shapes = output_shapes(irv2.InceptionResNetV2(), 1, irv2.MIN_IMAGE_SIZE, abstract_variables)
  assert shapes["grid"].shape == (1, 1, 1, 1536)


def test_head_is_optional_and_sized_by_num_classes():
  assert set(output_shapes(irv2.InceptionResNetV2(num_classes=None))) == {"grid", "pooled"}
  assert output_shapes(irv2.InceptionResNetV2(num_classes=1001))["logits"].shape == (2, 1001)


def test_parameter_count_equals_keras_count_params(abstract_variables):
  assert irv2.count_params(abstract_variables) == KERAS_PARAMS
  headless = irv2.abstract_variables(irv2.InceptionResNetV2(num_classes=None))
  assert irv2.count_params(headless) == KERAS_PARAMS - HEAD_PARAMS


def test_released_layout_has_10_20_and_10_residual_blocks_with_slim_scales():
  residuals = [s for s in irv2.LAYOUT if isinstance(s, irv2.ResidualSpec)]
  assert [(s.name.split("_")[0], s.scale, s.activate) for s in residuals] == (
    [("block35", 0.17, True)] * 10 + [("block17", 0.10, True)] * 20 + [("block8", 0.20, True)] * 9
    + [("block8", 1.0, False)])


def expected_axes(path: tuple[str, ...]) -> tuple[str, ...]:
  if path[1] == irv2.HEAD_NAME:
    return irv2.HEAD_KERNEL_AXES if path[-1] == "kernel" else irv2.HEAD_BIAS_AXES
  return irv2.CONV_KERNEL_AXES if path[-1] == "kernel" else irv2.CHANNEL_AXES


def test_every_variable_carries_logical_axis_names(abstract_variables):
  flat = traverse_util.flatten_dict(abstract_variables)
  assert {path[0] for path in flat} == {"params", "batch_stats"}
  for path, leaf in flat.items():
    assert isinstance(leaf, nn.LogicallyPartitioned), path
    assert leaf.names == expected_axes(path), path


def test_convolutions_have_no_bias_and_batch_norm_no_scale_except_residual_projections(abstract_variables):
  params = traverse_util.flatten_dict(abstract_variables["params"])
  leaf_names = {(path[-2], path[-1]) for path in params}
  assert leaf_names == {("conv", "kernel"), ("bn", "bias"), ("Conv2d_1x1", "kernel"), ("Conv2d_1x1", "bias"),
                        (irv2.HEAD_NAME, "kernel"), (irv2.HEAD_NAME, "bias")}
  assert sum(path[-2] == "Conv2d_1x1" and path[-1] == "bias" for path in params) == 40


def test_bfloat16_compute_keeps_float32_parameters():
  model = irv2.InceptionResNetV2(dtype=jnp.bfloat16)
  variables = irv2.abstract_variables(model)
  assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(nn.meta.unbox(variables))} == {np.dtype(np.float32)}
  assert output_shapes(model)["grid"].dtype == jnp.bfloat16


def test_train_mode_returns_updated_batch_stats_for_every_batch_norm(abstract_variables):
  model = irv2.InceptionResNetV2()
  variables = nn.meta.unbox(abstract_variables)
  images = jax.ShapeDtypeStruct((2, irv2.MIN_IMAGE_SIZE, irv2.MIN_IMAGE_SIZE, 3), jnp.float32)
  _, updates = jax.eval_shape(lambda v, x: model.apply(v, x, train=True, mutable=["batch_stats"]), variables, images)
  assert jax.tree_util.tree_structure(updates["batch_stats"]) == jax.tree_util.tree_structure(variables["batch_stats"])


# --- batch norm ----------------------------------------------------------------------------------------------------


@pytest.fixture
def bn_variables() -> dict:
  return {"params": {"bias": jnp.array([0.5, -1.0])},
          "batch_stats": {"mean": jnp.array([1.0, 2.0]), "var": jnp.array([4.0, 0.25])}}


def test_batch_norm_inference_uses_moving_statistics_and_epsilon_1e_3(bn_variables):
  x = jnp.arange(8.0).reshape(1, 2, 2, 2)
  y = irv2.BatchNorm().apply(bn_variables, x, train=False)
  expected = (x - jnp.array([1.0, 2.0])) / jnp.sqrt(jnp.array([4.0, 0.25]) + 1e-3) + jnp.array([0.5, -1.0])
  np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_batch_norm_training_uses_batch_statistics_and_moves_averages_with_momentum_0_99(bn_variables):
  x = jax.random.normal(jax.random.key(0), (4, 3, 3, 2)) * 3 + 5
  y, updates = irv2.BatchNorm().apply(bn_variables, x, train=True, mutable=["batch_stats"])
  mean, var = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))
  np.testing.assert_allclose(y, (x - mean) / jnp.sqrt(var + 1e-3) + jnp.array([0.5, -1.0]), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(updates["batch_stats"]["mean"], 0.99 * jnp.array([1.0, 2.0]) + 0.01 * mean, rtol=1e-6)
  np.testing.assert_allclose(updates["batch_stats"]["var"], 0.99 * jnp.array([4.0, 0.25]) + 0.01 * var, rtol=1e-5)


# --- inputs --------------------------------------------------------------------------------------------------------


def test_preprocess_maps_uint8_pixels_to_minus_one_one():
  np.testing.assert_allclose(irv2.preprocess(np.array([0, 51, 255], np.uint8)), [-1.0, -0.6, 1.0], rtol=1e-6)
  assert irv2.preprocess(np.zeros(3, np.uint8)).dtype == jnp.float32


def test_resize_gives_square_299_images_and_keeps_flat_colour():
  images = jnp.full((2, 400, 250, 3), 17.0)
  resized = irv2.resize(images)
  assert resized.shape == (2, 299, 299, 3)
  np.testing.assert_allclose(resized, 17.0, rtol=1e-6)
