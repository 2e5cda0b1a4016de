"""Sampling (`capjax.decode_sampling`): the sampled tokens follow the model's distribution after temperature, top-k
and top-p (chi-square tests on a fixed toy model), top-k=1 is an LSTM's greedy search, and impossible settings are
refused in one line. The trained T2T's sampling tests are in test_decode.py, which trains that model."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from capjax import config_util, decode, models
from capjax import decode_sampling as ds
from capjax.config_util import ConfigError

# The toy model: every step's logits are these, whatever the image and the prefix.
TOY_LOGITS = np.array([0.0, 1.0, 2.0, 0.5, -1.0, 1.5, -3.0, 0.2], np.float32)
TOY_DRAWS = 20_000


def _toy_steps() -> decode.StepFunctions:
  def init(inputs):
    return {"logits": jnp.broadcast_to(jnp.asarray(TOY_LOGITS), (inputs.shape[0], len(TOY_LOGITS)))}
  return decode.StepFunctions(init, lambda state, token, i: (state["logits"], state))


def _expected(s: ds.Sampling) -> np.ndarray:
  """The toy model's next-token probabilities after temperature, top-k and top-p, by hand."""
  p = np.exp(TOY_LOGITS.astype(np.float64) / s.temperature)
  p /= p.sum()
  order = np.argsort(-p)
  keep = np.zeros(len(p), bool)
  keep[order[:s.top_k or len(p)]] = True
  before = np.cumsum(p[order]) - p[order]
  keep[order[before >= s.top_p]] = False
  q = np.where(keep, p, 0.0)
  return q / q.sum()


@functools.partial(jax.jit, static_argnames=("s",))
def _toy_first_tokens(rng, s: ds.Sampling):
  return ds.sample_search(_toy_steps(), jnp.zeros((1, 1)), 1, rng, s)[0, :, 0]


@pytest.mark.parametrize("s", [ds.Sampling(TOY_DRAWS), ds.Sampling(TOY_DRAWS, temperature=0.6),
                               ds.Sampling(TOY_DRAWS, top_k=3), ds.Sampling(TOY_DRAWS, top_p=0.8),
                               ds.Sampling(TOY_DRAWS, temperature=2.0, top_k=5, top_p=0.9)],
                         ids=["plain", "temperature", "top_k", "top_p", "all"])
def test_sampled_token_frequencies_match_the_models_distribution(s):
  want = _expected(s)
  counts = np.bincount(np.asarray(_toy_first_tokens(jax.random.key(1), s)), minlength=len(TOY_LOGITS))
  assert counts.sum() == TOY_DRAWS
  assert np.all(counts[want == 0] == 0), (counts, want)  # filtered tokens are never drawn
  kept = want > 0
  assert kept.sum() >= 2
  _, p_value = stats.chisquare(counts[kept], want[kept] * TOY_DRAWS)
  assert p_value > 1e-3, (counts, want * TOY_DRAWS)


def test_the_filters_keep_what_they_promise():
  logits = jnp.asarray([[3.0, 2.0, 1.0, 0.0]])
  kept = lambda s: np.asarray(ds.filter_logits(logits, s)[0] > ds.NEG_INF / 2)  # noqa: E731
  assert kept(ds.Sampling(top_k=2)).tolist() == [True, True, False, False]
  assert kept(ds.Sampling(top_p=0.5)).tolist() == [True, False, False, False]  # the likeliest alone: 0.64
  assert kept(ds.Sampling(top_p=0.7)).tolist() == [True, True, False, False]   # 0.64 + 0.24
  assert kept(ds.Sampling(top_p=1.0, top_k=0)).tolist() == [True] * 4
  np.testing.assert_allclose(ds.filter_logits(logits, ds.Sampling(temperature=2.0)), logits / 2.0)


def test_top_k_1_is_greedy_search_for_the_lstm():
  config = config_util.load("configs/rnn.py:shapes,debug")
  config.update(max_caption_tokens=6)
  config.dataset.update(features="irv2", feature_shape=(2, 2, 8))
  config.model.encoder.name = "features"
  model = models.build(config, 20)
  features = np.random.default_rng(0).normal(size=(4, 2, 2, 8)).astype(np.float32)
  variables = model.init(jax.random.key(0), features[:1], np.zeros((1, 7), np.int32), train=False)
  fns = decode.cached_step(model, nn.unbox(variables["params"]))
  greedy = decode.greedy_search(fns, features, 7)
  sampled = ds.sample_search(fns, features, 7, jax.random.key(5), ds.Sampling(num_samples=2, top_k=1))
  np.testing.assert_array_equal(sampled[:, 0], greedy)
  np.testing.assert_array_equal(sampled[:, 1], greedy)


@pytest.mark.parametrize("s, message", [
    (ds.Sampling(num_samples=0), r"--config.scst.num_samples=0 is impossible — set --config.scst.num_samples to at "
     r"least 1 \(captions sampled per image\)"),
    (ds.Sampling(top_p=0.0), r"--config.scst.top_p=0.0 is impossible — set --config.scst.top_p in \(0, 1\]"),
    (ds.Sampling(top_p=1.5), r"--config.scst.top_p=1.5 is impossible — set --config.scst.top_p in \(0, 1\]"),
    (ds.Sampling(temperature=0.0), r"--config.scst.temperature=0.0 is impossible"),
    (ds.Sampling(top_k=-1), r"--config.scst.top_k=-1 is impossible"),
])
def test_impossible_settings_are_refused(s, message):
  with pytest.raises(ConfigError, match=message):
    ds.check_sampling(s)
