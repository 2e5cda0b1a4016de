"""Greedy and beam search on a T2T trained to say known captions: what each decoder returns, beam 1 is greedy,
cached equals uncached, a wide beam finds the enumerated optimum, every output ends with EOS then padding.

A randomly initialised T2T says the same thing of every image (the fixtures here used to decode BOS, BOS, ... for
all of them: the tied embedding makes the input token the likeliest output, and the image barely moves the
logits), so "beam 1 is greedy" and "cached equals uncached" compared two constants and "EOS then padding" checked
nothing. The fixture trains a tiny T2T instead, and checks without capjax.decode that it learned what the tests
below expect of it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from capjax import decode
from capjax import decode_sampling
from capjax.models import encoders
from capjax.models.t2t import T2T, T2TConfig
from capjax.tokens import BOS_ID, EOS_ID, PAD_ID

import helpers

VOCAB, MAX_LEN = 11, 8
E = EOS_ID
# (image, caption, probability): what the fixture's model learns to say of each of 8 images. Images 0-5 have one
# caption each, 6 and 7 a distribution over three.
TRAINING = (
    (0, (4, 5, E), 1.0),
    (1, (4, 6, 7, E), 1.0),             # 0's first word: the image decides the second
    (2, (8, 9, 10, 4, 5, 6, E), 1.0),   # 7's long caption but for its sixth word: the image again
    (3, (5, 5, 5, 7, 7, 7, 9, 9), 1.0),  # no EOS within MAX_LEN
    (4, (E,), 1.0),                     # the empty caption
    (5, (9, 8, 7, 6, 5, E), 1.0),
    (6, (10, 8, E), 0.30), (6, (10, 9, E), 0.25), (6, (7, E), 0.45),
    (7, (8, E), 0.40), (7, (8, 9, 10, 4, 5, E), 0.35), (7, (6, 6, E), 0.25),
)
NUM_IMAGES = 8
# Greedy: image 6's first word is 10 (0.30 + 0.25 > 0.45), then 8 (0.30 > 0.25); image 7's 8 (0.75), then EOS.
GREEDY = ((4, 5, E), (4, 6, 7, E), (8, 9, 10, 4, 5, 6, E), (5, 5, 5, 7, 7, 7, 9, 9), (E,), (9, 8, 7, 6, 5, E),
          (10, 8, E), (8, E))
# Beam search finds image 6's [7, EOS] (0.45 > 0.30, penalized or not). Image 7's long caption (0.35) loses to
# [8, EOS] (0.40) on log p alone but wins under the penalty: log 0.35 / (11/6)**0.6 = -0.73 > log 0.40 / (7/6)**0.6
# = -0.84. Learned probabilities within 0.02 of these (the fixture checks) keep every order used here.
BEAM = {0.0: GREEDY[:6] + ((7, E), (8, E)), 0.6: GREEDY[:6] + ((7, E), (8, 9, 10, 4, 5, E))}
TRAIN_STEPS = 400

MODEL = T2T(T2TConfig(vocab_size=VOCAB, d_model=16, num_heads=2, mlp_dim=32, encoder_layers=1, decoder_layers=2,
                      max_len=MAX_LEN, dropout_rate=0.0),
            encoders.FeatureGrid())
# One 2x2 grid of 8-channel features per image: four visual tokens for cross-attention to choose from.
FEATURES = np.random.default_rng(0).normal(size=(NUM_IMAGES, 2, 2, 8)).astype(np.float32)


def _padded(captions: Sequence[Sequence[float]], length: int = MAX_LEN, dtype: type = np.int32) -> np.ndarray:
  """(N, length) rows of `captions`, PAD_ID (0) after each."""
  out = np.full((len(captions), length), PAD_ID, dtype)
  for j, c in enumerate(captions):
    out[j, :len(c)] = c
  return out


def _teacher_forcing(captions: Sequence[Sequence[int]], length: int) -> tuple[np.ndarray, np.ndarray]:
  """Decoder inputs (BOS, then each caption but its last token) and targets (the caption), (N, length) each."""
  targets = _padded(captions, length)
  return np.concatenate([np.full((len(captions), 1), BOS_ID, np.int32), targets[:, :-1]], axis=1), targets


@jax.jit
def _train(key: jax.Array):
  """Initialise, then Adam on the cross-entropy of TRAINING: each caption weighted by its probability."""
  inputs, targets = _teacher_forcing([c for _, c, _ in TRAINING], MAX_LEN)
  weights = _padded([[p] * len(c) for _, c, p in TRAINING], dtype=np.float32)  # 0 on padding
  features = FEATURES[[i for i, _, _ in TRAINING]]
  params = nn.unbox(MODEL.init(key, features, inputs)["params"])
  optimizer = optax.adam(optax.cosine_decay_schedule(1e-2, TRAIN_STEPS))

  def loss(p):
    logits = MODEL.apply({"params": p}, features, inputs)
    return (optax.softmax_cross_entropy_with_integer_labels(logits, targets) * weights).sum() / NUM_IMAGES

  def step(_, carry):
    p, state = carry
    updates, state = optimizer.update(jax.grad(loss)(p), state, p)
    return optax.apply_updates(p, updates), state

  return jax.lax.fori_loop(0, TRAIN_STEPS, step, (params, optimizer.init(params)))[0]


@jax.jit
def _teacher_forced_logits(params, features: jax.Array, inputs: jax.Array) -> jax.Array:
  memory = MODEL.apply({"params": params}, features, method=MODEL.encode)
  return MODEL.apply({"params": params}, memory, inputs, method=MODEL.decode)


def _log_probs(params, images: Sequence[int], captions: Sequence[Sequence[int]], length: int = MAX_LEN):
  """log p(caption | image) for each (image, caption) pair by teacher forcing: (N,) float64."""
  inputs, targets = _teacher_forcing(captions, length)
  logp = np.asarray(jax.nn.log_softmax(_teacher_forced_logits(params, FEATURES[list(images)], inputs)), np.float64)
  picked = np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
  return np.asarray([picked[j, :len(c)].sum() for j, c in enumerate(captions)])


def _penalized(log_p: np.ndarray, captions: Sequence[Sequence[int]], alpha: float) -> np.ndarray:
  return log_p / ((5.0 + np.asarray([len(c) for c in captions])) / 6.0) ** alpha


def _reference_greedy(params) -> tuple[list[tuple[int, ...]], float]:
  """Greedy decoding without capjax.decode: teacher forcing on the whole prefix, one position at a time.

  Returns each image's caption (EOS included) and the smallest lead of a chosen token's logit over the
  runner-up's, the room rounding has before it could change a choice.
  """
  prefix = np.full((NUM_IMAGES, MAX_LEN), PAD_ID, np.int32)
  prefix[:, 0] = BOS_ID
  captions: list[list[int]] = [[] for _ in range(NUM_IMAGES)]
  lead = np.inf
  for i in range(MAX_LEN):
    logits = np.asarray(_teacher_forced_logits(params, FEATURES, prefix))[:, i]
    for b, caption in enumerate(captions):
      if caption[-1:] == [E]:
        continue
      top2 = np.sort(logits[b])[-2:]
      lead = min(lead, top2[1] - top2[0])
      caption.append(int(np.argmax(logits[b])))
      if i + 1 < MAX_LEN:
        prefix[b, i + 1] = caption[-1]
  return [tuple(c) for c in captions], lead


@pytest.fixture(scope="module")
@helpers.slow_fixture  # trains a tiny T2T
def params():
  """The trained T2T's parameters, after checking that it says GREEDY and learned TRAINING's probabilities."""
  params = _train(jax.random.key(0))
  captions, lead = _reference_greedy(params)
  assert captions == list(GREEDY), "the fixture model did not learn its captions: train longer"
  # What the tests rely on: different captions per image, EOS at different positions, and one without EOS.
  assert len(set(captions)) == NUM_IMAGES
  eos_at = [c.index(E) for c in captions if E in c]
  assert len(set(eos_at)) >= 5 and len(eos_at) < NUM_IMAGES
  assert lead > 0.1, f"a greedy choice leads its runner-up by {lead:.3g} only: rounding could flip it"
  probs = np.exp(_log_probs(params, [i for i, _, _ in TRAINING], [c for _, c, _ in TRAINING]))
  np.testing.assert_allclose(probs, [p for _, _, p in TRAINING], atol=0.02)
  return params


def _steps(params, cached: bool, max_len: int = MAX_LEN) -> decode.StepFunctions:
  return decode.cached_step(MODEL, params) if cached else decode.uncached_step(MODEL, params, max_len)


@functools.partial(jax.jit, static_argnames=("cached",))
def _greedy(params, features, cached: bool):
  if cached:
    return decode.greedy(MODEL, params, features, MAX_LEN)
  return decode.greedy_search(_steps(params, cached), features, MAX_LEN)


@functools.partial(jax.jit, static_argnames=("beam_size", "cached", "max_len"))
def _beam(params, features, alpha, beam_size: int, cached: bool = True, max_len: int = MAX_LEN):
  """alpha is traced: one compilation serves every length penalty."""
  return decode.beam_search(_steps(params, cached, max_len), features, max_len, beam_size, alpha)


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
def test_greedy_says_what_the_model_learned(params, cached):
  np.testing.assert_array_equal(_greedy(params, FEATURES, cached), _padded(GREEDY))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_returns_the_best_caption_under_the_length_penalty(params, alpha):
  tokens, scores = _beam(params, FEATURES, alpha, 4)
  np.testing.assert_array_equal(tokens, _padded(BEAM[alpha]))
  want = _penalized(_log_probs(params, range(NUM_IMAGES), BEAM[alpha]), BEAM[alpha], alpha)
  np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_returns_the_enumerated_best_sequence(params, alpha):
  max_len = 3
  words = [t for t in range(VOCAB) if t != E]
  # Every hypothesis: some words then EOS, or max_len words with no EOS.
  seqs = [(*w, E) for n in range(max_len) for w in itertools.product(words, repeat=n)]
  seqs += list(itertools.product(words, repeat=max_len))
  pairs = [(b, s) for b in range(NUM_IMAGES) for s in seqs]
  log_p = _log_probs(params, [b for b, _ in pairs], [s for _, s in pairs], max_len)
  scores = _penalized(log_p, [s for _, s in pairs], alpha).reshape(NUM_IMAGES, len(seqs))
  k = len(words) ** (max_len - 1)  # as many beams as prefixes: the search is exhaustive
  tokens, best = _beam(params, FEATURES, alpha, k, max_len=max_len)
  runner_up, top = np.sort(scores, axis=1)[:, -2:].T
  assert np.all(top - runner_up > 1e-3), "near-tied optima: rounding could pick either"
  assert seqs[int(np.argmax(scores[6]))] != GREEDY[6], "image 6's optimum must be one greedy decoding misses"
  for b in range(NUM_IMAGES):
    j = int(np.argmax(scores[b]))
    np.testing.assert_array_equal(tokens[b], _padded([seqs[j]], max_len)[0])
    np.testing.assert_allclose(best[b], scores[b, j], rtol=1e-4, atol=1e-5)


def test_early_exit_waits_for_a_caption_the_penalty_prefers(params):
  """One beam, image 7 alone (another image's live beams would keep the loop going): [8, EOS] finishes at
  -0.84 while [8, 9] lives on with log p = log 0.35, which the largest penalty, at MAX_LEN, could still lift
  above it (-1.05 / (13/6)**0.6 = -0.66). Stopping there would miss the long caption's -0.73."""
  only_7 = FEATURES[[7] * NUM_IMAGES]  # the batch shape the other tests compiled for
  tokens, _ = _beam(params, only_7, 0.6, 1)
  np.testing.assert_array_equal(tokens, _padded(BEAM[0.6][7:] * NUM_IMAGES))


@pytest.mark.parametrize("k", [1, 3, 8])
def test_sort_based_top_k_equals_lax_top_k_ties_included(k):
  """Beam search's top-k is a stable sort (TensorFlow cannot run an exported `lax.top_k`): the same values and
  indices as `lax.top_k`, ties to the lower index, on rows full of ties, NEG_INF slots and signed zeros."""
  rng = np.random.default_rng(0)
  x = rng.choice(np.asarray([-1e9, -2.5, -1.0, -0.0, 0.0, -0.25], np.float32), size=(64, 12))
  x = np.concatenate([x, rng.normal(size=(4, 12)).astype(np.float32), np.full((1, 12), -1e9, np.float32)])
  want_values, want_index = jax.lax.top_k(x, k)
  got_values, got_index = jax.jit(decode.top_k, static_argnums=1)(x, k)
  np.testing.assert_array_equal(got_values, want_values)
  np.testing.assert_array_equal(got_index, want_index)


def test_beam_of_one_is_greedy(params):
  beam, _ = _beam(params, FEATURES, 0.0, 1)
  np.testing.assert_array_equal(beam, _greedy(params, FEATURES, True))


def test_cached_and_uncached_beam_search_agree(params):
  cached, cached_scores = _beam(params, FEATURES, 0.6, 4, cached=True)
  uncached, uncached_scores = _beam(params, FEATURES, 0.6, 4, cached=False)
  np.testing.assert_array_equal(cached, uncached)
  # The two paths sum the same log-probabilities in another order (cached attention over one new key at a
  # time vs. the whole prefix at once). Each step's log-softmax subtracts a log-sum-exp of logits of size
  # ~1-10, so float32 rounds it by ~|logit| * 2**-24 ~ 1e-7 per step, and up to 8 steps add up to ~1e-6 of
  # absolute error whatever the score's size: a score near -0.002 cannot meet a relative 1e-5 alone
  # (observed: 0 apart on images 0-5, 1.0e-6 on image 6's -0.73, an eighth of what its tolerance allows).
  # A wrong token or a wrong cache changes a score by far more than 1e-6.
  np.testing.assert_allclose(cached_scores, uncached_scores, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("beam_size", [None, 1, 4], ids=["greedy", "beam1", "beam4"])
def test_output_ends_with_eos_then_padding(params, beam_size):
  tokens = _greedy(params, FEATURES, True) if beam_size is None else _beam(params, FEATURES, 0.6, beam_size)[0]
  eos_at = []
  for row in np.asarray(tokens).tolist():
    if E in row:
      e = row.index(E)
      eos_at.append(e)
      assert PAD_ID not in row[:e] and row[e + 1:] == [PAD_ID] * (MAX_LEN - e - 1), row
    else:
      assert PAD_ID not in row, row  # no EOS: MAX_LEN words
  # Not vacuous: EOS at several positions, and a caption that runs to MAX_LEN without one.
  assert len(set(eos_at)) >= 4 and len(eos_at) < NUM_IMAGES


def _successor_steps(vocab: int) -> decode.StepFunctions:
  """A model that always says the token after its input (mod vocab), sure of it: what a decoder starts from shows
  in every token it returns."""
  return decode.StepFunctions(init=lambda inputs: jnp.zeros((inputs.shape[0],)),
                              step=lambda state, token, i: (20.0 * jax.nn.one_hot((token + 1) % vocab, vocab), state))


@pytest.mark.parametrize("beam_size", [None, 4], ids=["greedy", "beam4"])
def test_decoding_starts_from_the_given_token(beam_size):
  """A style-conditioned captioner decodes from its style's tag instead of BOS (`start`): from 5 the successor
  model counts 6, 7, ..., 10, 0, 1 and then says EOS (2); from BOS (1) it says EOS at once."""
  fns, images = _successor_steps(VOCAB), np.zeros((3, 1), np.float32)

  def run(**start):
    if beam_size is None:
      return decode.greedy_search(fns, images, MAX_LEN, **start)
    return decode.beam_search(fns, images, MAX_LEN, beam_size, 0.6, **start)[0]
  np.testing.assert_array_equal(run(start=5), [[6, 7, 8, 9, 10, 0, 1, E]] * 3)
  np.testing.assert_array_equal(run(), [[E] + [PAD_ID] * (MAX_LEN - 1)] * 3)
  assert BOS_ID == 1 and E == 2  # what the expected rows above spell out


# ----------------------------------------------------------------------------------------------------------
# Sampling (capjax.decode_sampling) through the trained model's cache; its other tests: test_decode_sampling.py
# ----------------------------------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("s",))
def _sampled(params, features, rng, s: decode_sampling.Sampling):
  return decode_sampling.sample_search(decode.cached_step(MODEL, params), features, MAX_LEN, rng, s)


def test_top_k_1_is_greedy_search(params):
  samples = _sampled(params, FEATURES, jax.random.key(0), decode_sampling.Sampling(num_samples=3, top_k=1))
  assert samples.shape == (len(FEATURES), 3, MAX_LEN)
  for j in range(3):
    np.testing.assert_array_equal(samples[:, j], _padded(GREEDY))


def test_sampled_captions_of_the_trained_model_follow_its_caption_distribution(params):
  # Images 6 and 7 say one of three captions with the probabilities the fixture checked (within 0.02).
  n = 600
  samples = np.asarray(_sampled(params, FEATURES[6:8], jax.random.key(3), decode_sampling.Sampling(num_samples=n)))
  for image in (6, 7):
    captions = [c for i, c, _ in TRAINING if i == image]
    probs = np.array([p for i, _, p in TRAINING if i == image])
    rows = [tuple(int(t) for t in row if t != PAD_ID) for row in samples[image - 6]]
    assert all(r[-1] == EOS_ID for r in rows)
    counts = np.array([sum(r == c for r in rows) for c in captions])
    assert counts.sum() >= n * 0.95  # the rest: other captions, of the small mass the model leaves elsewhere
    _, p_value = stats.chisquare(counts, probs / probs.sum() * counts.sum())
    assert p_value > 1e-3, (counts, probs)
