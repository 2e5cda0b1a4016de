"""The contract every captioner keeps (capjax.models.captioner.Captioner), checked on T2T and the LSTM alike:
cached decoding equals teacher forcing, beams can tile the memory and cache, logical axes on every parameter,
tied embeddings, padding rows never predicted, parameters as the analytic count says.

What only one of them does is in test_t2t.py and test_rnn.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from capjax import decode
from capjax.models import encoders, rnn, t2t
from capjax.models.captioner import Captioner
from capjax.models.layers import NEG_INF

MAX_LEN = 8
BATCH = 3


@dataclasses.dataclass(frozen=True)
class Case:
  """A small captioner of one kind: how to build it, the analytic count of its non-encoder parameters, and
  how closely its decode steps must match teacher forcing in float32."""
  build: Callable[[str, int | None], nn.Module]
  vocab: int
  analytic_params: Callable[[nn.Module], int]
  step_atol: float


def _t2t(grid: str, num_words: int | None = None) -> t2t.T2T:
  cfg = t2t.T2TConfig(vocab_size=23, num_words=num_words, d_model=32, num_heads=4, mlp_dim=64, encoder_layers=2,
                      decoder_layers=2, max_len=MAX_LEN, dropout_rate=0.0, grid=grid)
  return t2t.T2T(cfg, encoders.ConvGridEncoder(widths=(8, 16, 16), out_features=24))


def _lstm(grid: str, num_words: int | None = None) -> rnn.RNN:
  cfg = rnn.RNNConfig(vocab_size=19, num_words=num_words, d_model=24, max_len=MAX_LEN, dropout_rate=0.0, grid=grid)
  return rnn.RNN(cfg, encoders.ConvGridEncoder(widths=(8, 16, 16), out_features=12))


CASES = {
    "t2t": Case(_t2t, 23, lambda m: t2t.count_params(m.config, feature_dim=24), step_atol=2e-5),
    "rnn": Case(_lstm, 19, lambda m: rnn.count_params(m.config.vocab_size, m.config.d_model, feature_dim=12),
                step_atol=1e-5),
}
GRIDS = ("8x8", "1x1")


def _init(case: Case, model: nn.Module, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
  """Boxed variables, uint8 images (B, 64, 64, 3) and random token ids (B, MAX_LEN)."""
  images = np.random.default_rng(seed).integers(0, 256, (BATCH, 64, 64, 3), dtype=np.uint8)
  tokens = np.random.default_rng(seed + 1).integers(0, case.vocab, (BATCH, MAX_LEN)).astype(np.int32)
  return model.init(jax.random.key(seed), images, tokens), images, tokens


@pytest.fixture(params=list(CASES))
def case(request) -> Case:
  return CASES[request.param]


@pytest.mark.parametrize("grid", GRIDS)
def test_is_a_captioner(case, grid):
  assert isinstance(case.build(grid, None), Captioner)


def test_every_parameter_has_logical_axis_names(case):
  variables, _, _ = _init(case, case.build("8x8", None))
  boxed = jax.tree.leaves(variables["params"], is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert boxed and all(isinstance(b, nn.Partitioned) for b in boxed)
  for b in boxed:
    assert len(b.names) == b.value.ndim


def test_embedding_is_tied_to_the_output_projection(case):
  model = case.build("8x8", None)
  variables, images, tokens = _init(case, model)
  params = nn.unbox(variables["params"])
  # No separate output kernel: zeroing word k's embedding row zeroes its logit everywhere.
  params["embed"]["embedding"] = params["embed"]["embedding"].at[5].set(0.0)
  logits = model.apply({"params": params}, images, tokens)
  assert logits.shape == (BATCH, MAX_LEN, case.vocab)
  np.testing.assert_array_equal(logits[..., 5], 0.0)
  assert np.all(np.abs(logits[..., 6]) > 0)


def test_padding_rows_of_the_embedding_are_never_predicted(case):
  model = case.build("8x8", case.vocab - 3)
  variables, images, tokens = _init(case, model)
  params = nn.unbox(variables["params"])
  logits = model.apply({"params": params}, images, tokens)
  np.testing.assert_array_equal(logits[..., -3:], NEG_INF)
  assert np.all(logits[..., :-3] > NEG_INF)
  memory = model.apply({"params": params}, images, method=model.encode)
  cache = model.apply({"params": params}, memory, method=model.init_cache)
  step, _ = model.apply({"params": params}, cache, jnp.asarray(tokens[:, 0]), jnp.int32(0), method=model.decode_step)
  np.testing.assert_array_equal(step[:, -3:], NEG_INF)


def test_memory_and_cache_hold_the_batch_on_axis_0(case):
  """Beam search tiles every leaf of the decoding state per beam and gathers rows by parent beam."""
  model = case.build("8x8", None)
  variables, images, _ = _init(case, model)
  memory = model.apply(variables, images, method=model.encode)
  cache = model.apply(variables, memory, method=model.init_cache)
  leaves = jax.tree.leaves(memory) + jax.tree.leaves(cache)
  assert leaves and all(leaf.shape[0] == BATCH for leaf in leaves)


@pytest.mark.parametrize("grid", GRIDS)
def test_decode_steps_match_teacher_forcing(case, grid):
  """Feeding the tokens one step at a time through the cache gives the logits of the full teacher-forced pass."""
  model = case.build(grid, None)
  variables, images, tokens = _init(case, model)
  params = {"params": nn.unbox(variables["params"])}
  memory = model.apply(params, images, method=model.encode)
  full = model.apply(params, memory, tokens, method=model.decode)
  cache = model.apply(params, memory, method=model.init_cache)
  for i in range(tokens.shape[1]):
    step, cache = model.apply(params, cache, jnp.asarray(tokens[:, i]), jnp.int32(i), method=model.decode_step)
    np.testing.assert_allclose(step, full[:, i], atol=case.step_atol, rtol=1e-5)


@pytest.mark.parametrize("grid", GRIDS)
def test_cached_greedy_equals_uncached(case, grid):
  model = case.build(grid, None)
  variables, images, _ = _init(case, model, seed=3)
  params = nn.unbox(variables["params"])
  cached = jax.jit(lambda p, x: decode.greedy(model, p, x, MAX_LEN))(params, images)
  uncached = jax.jit(lambda p, x: decode.greedy_search(decode.uncached_step(model, p, MAX_LEN), x, MAX_LEN))(
      params, images)
  np.testing.assert_array_equal(cached, uncached)


def test_cached_and_uncached_beam_search_agree(case):
  model = case.build("8x8", None)
  variables, images, _ = _init(case, model, seed=2)
  params = nn.unbox(variables["params"])
  # A larger embedding makes the next-token distribution peaked: no near-ties for rounding to flip.
  params["embed"]["embedding"] = params["embed"]["embedding"] * 8.0
  cached = decode.beam_search(decode.cached_step(model, params), images, MAX_LEN, 4, 0.6)
  uncached = decode.beam_search(decode.uncached_step(model, params, MAX_LEN), images, MAX_LEN, 4, 0.6)
  np.testing.assert_array_equal(cached[0], uncached[0])


@pytest.mark.parametrize("grid", GRIDS)
def test_parameter_count_matches_the_analytic_count(case, grid):
  model = case.build(grid, None)
  params = nn.unbox(_init(case, model)[0]["params"])
  encoder = sum(x.size for x in jax.tree.leaves(params["image_encoder"]))
  total = sum(x.size for x in jax.tree.leaves(params))
  assert total - encoder == case.analytic_params(model)
