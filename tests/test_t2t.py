"""The T2T captioner: cached decoding equals teacher forcing, 1x1/8x8 token grids, logical axes everywhere."""

import flax.linen as nn
import jax
import numpy as np
import pytest

from capjax import decode
from capjax.models import encoders
from capjax.models.layers import sinusoidal_positions
from capjax.models.t2t import T2T, T2TConfig
from helpers import assert_decode_steps_match_teacher_forcing

VOCAB = 23


def _model(grid: str = "8x8") -> T2T:
  cfg = T2TConfig(vocab_size=VOCAB, d_model=32, num_heads=4, mlp_dim=64, encoder_layers=2, decoder_layers=2,
                  max_len=8, dropout_rate=0.0, grid=grid)
  return T2T(cfg, encoders.ConvGridEncoder(widths=(8, 16, 16), out_features=24))


def _init(model: T2T, seed: int = 0):
  images = np.random.default_rng(seed).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
  tokens = np.random.default_rng(seed + 1).integers(0, VOCAB, (3, 8)).astype(np.int32)
  variables = model.init(jax.random.key(seed), images, tokens)
  return variables, images, tokens


def test_every_parameter_has_logical_axis_names():
  variables, _, _ = _init(_model())
  boxed = jax.tree.leaves(variables["params"], is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert boxed and all(isinstance(b, nn.Partitioned) for b in boxed)
  for b in boxed:
    assert len(b.names) == b.value.ndim


def test_embedding_is_tied_to_the_output_projection():
  model = _model()
  variables, images, tokens = _init(model)
  params = nn.unbox(variables["params"])
  # No separate output kernel: zeroing word k's embedding row zeroes its logit everywhere.
  params["embed"]["embedding"] = params["embed"]["embedding"].at[5].set(0.0)
  logits = model.apply({"params": params}, images, tokens)
  assert logits.shape == (3, 8, VOCAB)
  np.testing.assert_array_equal(logits[..., 5], 0.0)
  assert np.all(np.abs(logits[..., 6]) > 0)


@pytest.mark.parametrize("grid,tokens", [("8x8", 64), ("1x1", 1)])
def test_visual_tokens_grid(grid, tokens):
  model = _model(grid)
  variables, images, _ = _init(model)
  memory = model.apply(variables, images, method=model.encode)
  assert memory.shape == (3, tokens, 32)


def test_decode_step_matches_teacher_forcing():
  model = _model()
  variables, images, tokens = _init(model)
  params = nn.unbox(variables["params"])
  assert_decode_steps_match_teacher_forcing(model, params, images, tokens, atol=2e-5)


@pytest.mark.parametrize("grid", ["8x8", "1x1"])
def test_cached_greedy_equals_uncached(grid):
  model = _model(grid)
  variables, images, _ = _init(model, seed=3)
  params = nn.unbox(variables["params"])
  cached = jax.jit(lambda p, x: decode.greedy(model, p, x, 8))(params, images)
  uncached = jax.jit(lambda p, x: decode.greedy_search(decode.uncached_step(model, p, 8), x, 8))(params, images)
  np.testing.assert_array_equal(cached, uncached)


def test_sinusoidal_positions_match_tensor2tensor_formula():
  pos = sinusoidal_positions(64, 8)
  # channel 0: sin(p), channel 4: cos(p) (timescale 1); channel 3: sin(p / 1e4).
  np.testing.assert_allclose(pos[:, 0], np.sin(np.arange(64)), atol=1e-6)
  np.testing.assert_allclose(pos[:, 4], np.cos(np.arange(64)), atol=1e-6)
  np.testing.assert_allclose(pos[:, 3], np.sin(np.arange(64) / 1e4), atol=1e-6)
