"""The LSTM baseline: its carry is its decoding cache, parameters match the analytic count, tied embeddings."""

import flax.linen as nn
import jax
import numpy as np
import pytest

from capjax import decode
from capjax.models import encoders, rnn
from helpers import assert_decode_steps_match_teacher_forcing

VOCAB = 19


def _model(grid: str = "8x8") -> rnn.RNN:
  cfg = rnn.RNNConfig(vocab_size=VOCAB, d_model=24, max_len=8, dropout_rate=0.0, grid=grid)
  return rnn.RNN(cfg, encoders.ConvGridEncoder(widths=(8, 16, 16), out_features=12))


def _init(model, seed=0):
  images = np.random.default_rng(seed).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
  tokens = np.random.default_rng(seed + 1).integers(0, VOCAB, (3, 8)).astype(np.int32)
  return nn.unbox(model.init(jax.random.key(seed), images, tokens)["params"]), images, tokens


@pytest.mark.parametrize("grid", ["8x8", "1x1"])
def test_decode_step_matches_teacher_forcing(grid):
  model = _model(grid)
  params, images, tokens = _init(model)
  assert_decode_steps_match_teacher_forcing(model, params, images, tokens, atol=1e-5)


def test_cached_and_uncached_beam_search_agree():
  model = _model()
  params, images, _ = _init(model, seed=2)
  params["embed"]["embedding"] = params["embed"]["embedding"] * 8.0
  cached = decode.beam_search(decode.cached_step(model, params), images, 8, 4, 0.6)
  uncached = decode.beam_search(decode.uncached_step(model, params, 8), images, 8, 4, 0.6)
  np.testing.assert_array_equal(cached[0], uncached[0])


def test_parameter_count_matches_the_analytic_count():
  model = _model()
  params, _, _ = _init(model)
  encoder = sum(x.size for x in jax.tree.leaves(params["image_encoder"]))
  total = sum(x.size for x in jax.tree.leaves(params))
  assert total - encoder == rnn.count_params(VOCAB, 24, feature_dim=12)


def test_embedding_is_tied_to_the_output_projection():
  model = _model()
  params, images, tokens = _init(model)
  params["embed"]["embedding"] = params["embed"]["embedding"].at[7].set(0.0)
  logits = model.apply({"params": params}, images, tokens)
  np.testing.assert_array_equal(logits[..., 7], 0.0)
