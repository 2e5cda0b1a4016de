"""Beam search: beam 1 is greedy, a wide beam finds the enumerated optimum, cached equals uncached."""

import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from capjax import decode
from capjax.models import encoders
from capjax.models.t2t import T2T, T2TConfig
from capjax.tokens import BOS_ID, EOS_ID, PAD_ID


def _model(vocab: int, max_len: int) -> T2T:
  cfg = T2TConfig(vocab_size=vocab, d_model=16, num_heads=2, mlp_dim=32, encoder_layers=1, decoder_layers=2,
                  max_len=max_len, dropout_rate=0.0)
  return T2T(cfg, encoders.ConvGridEncoder(widths=(4, 8, 8), out_features=8))


def _params(model: T2T, batch: int, seed: int, scale: float = 1.0):
  images = np.random.default_rng(seed).integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8)
  tokens = np.zeros((batch, model.config.max_len), np.int32)
  params = nn.unbox(model.init(jax.random.key(seed), images, tokens)["params"])
  # A larger embedding makes the next-token distribution peaked and different per prefix.
  params["embed"]["embedding"] = params["embed"]["embedding"] * scale
  return params, images


def _sequence_scores(model, params, images, seqs, alpha):
  """Teacher-forced log p(seq) / GNMT penalty for each (image, candidate) pair."""
  max_len = model.config.max_len
  memory = model.apply({"params": params}, images, method=model.encode)
  scores = np.zeros((images.shape[0], len(seqs)))
  inputs = np.full((len(seqs), max_len), PAD_ID, np.int32)
  inputs[:, 0] = BOS_ID
  for j, s in enumerate(seqs):
    inputs[j, 1:len(s)] = s[:-1] if len(s) == max_len else s[:len(s) - 1]
  for b in range(images.shape[0]):
    mem = jnp.repeat(memory[b:b + 1], len(seqs), axis=0)
    logp = np.asarray(jax.nn.log_softmax(model.apply({"params": params}, mem, inputs, method=model.decode)))
    for j, s in enumerate(seqs):
      total = logp[j, np.arange(len(s)), s].sum()
      scores[b, j] = total / ((5.0 + len(s)) / 6.0) ** alpha
  return scores


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_returns_the_enumerated_best_sequence(alpha):
  vocab, max_len = 6, 3
  model = _model(vocab, max_len)
  params, images = _params(model, batch=3, seed=1, scale=6.0)
  words = [t for t in range(vocab) if t != EOS_ID]
  # Every hypothesis: some words then EOS, or max_len words with no EOS.
  seqs = [list(w) + [EOS_ID] for n in range(max_len) for w in itertools.product(words, repeat=n)]
  seqs += [list(w) for w in itertools.product(words, repeat=max_len)]
  scores = _sequence_scores(model, params, images, seqs, alpha)
  k = len(words) ** (max_len - 1)  # as many beams as prefixes: the search is exhaustive
  tokens, best = jax.jit(lambda p, x: decode.beam_search(decode.cached_step(model, p), x, max_len, k, alpha))(
      params, images)
  for b in range(3):
    j = int(np.argmax(scores[b]))
    want = seqs[j] + [PAD_ID] * (max_len - len(seqs[j]))
    np.testing.assert_array_equal(tokens[b], want)
    np.testing.assert_allclose(best[b], scores[b, j], rtol=1e-4, atol=1e-5)


def test_beam_of_one_is_greedy():
  model = _model(11, 8)
  params, images = _params(model, batch=4, seed=2, scale=3.0)
  greedy = jax.jit(lambda p, x: decode.greedy(model, p, x, 8))(params, images)
  beam, _ = jax.jit(lambda p, x: decode.beam_search(decode.cached_step(model, p), x, 8, 1, 0.0))(params, images)
  np.testing.assert_array_equal(beam, greedy)


def test_cached_and_uncached_beam_search_agree():
  model = _model(11, 8)
  params, images = _params(model, batch=4, seed=3, scale=3.0)
  run = lambda fns: jax.jit(lambda x: decode.beam_search(fns, x, 8, 4, 0.6))(images)  # noqa: E731
  cached, cached_scores = run(decode.cached_step(model, params))
  uncached, uncached_scores = run(decode.uncached_step(model, params, 8))
  np.testing.assert_array_equal(cached, uncached)
  # The two paths sum the same log-probabilities in another order (cached attention over one new key at a
  # time vs. the whole prefix at once). Each step's log-softmax subtracts a log-sum-exp of logits of size
  # ~1-10, so float32 rounds it by ~|logit| * 2**-24 ~ 1e-7 per step, and up to 8 steps add up to ~1e-6 of
  # absolute error whatever the score's size: a score near -0.007 cannot meet a relative 1e-5 alone
  # (observed: 7.5e-8 apart). A wrong token or a wrong cache changes a score by far more than 1e-6.
  np.testing.assert_allclose(cached_scores, uncached_scores, rtol=1e-5, atol=1e-6)


def test_beam_search_output_ends_with_eos_then_padding():
  model = _model(11, 8)
  params, images = _params(model, batch=4, seed=4, scale=3.0)
  tokens, _ = decode.beam_search(decode.cached_step(model, params), images, 8, 4, 0.6)
  for row in np.asarray(tokens):
    if EOS_ID in row:
      e = list(row).index(EOS_ID)
      assert (row[e + 1:] == PAD_ID).all()
