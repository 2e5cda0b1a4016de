"""Test-time ensembles (issue 32): the mixture that greedy and beam search decode with is the mean of the models'
probabilities (a toy of two bigram tables where it picks what neither model nor a mean of log-probabilities would),
an ensemble of one model decodes exactly as the model (tokens and beam scores), two differently initialised T2Ts
decode along their mean distribution, a trained workdir with itself as ensemble captions as it does alone, and
`--mode=eval --ensemble` writes its outputs in a folder of its own. Bad input (another vocabulary, --ensemble in
training) is in test_hostile_main.py.
"""

from __future__ import annotations

import itertools
import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from capjax import config_util, decode, ensemble, inference
from capjax import evaluate
from capjax.data import sources
from capjax.models import encoders
from capjax.models.t2t import T2T, T2TConfig
from capjax.tokens import BOS_ID, EOS_ID

# --- A toy: two models that are bigram tables -----------------------------------------------------------------------
V, L = 5, 3
# Seed 14 makes each image's mixture greedy path differ from both models' and from the mean of log-probabilities'.
TABLES = np.random.default_rng(14).normal(0, 2.5, (2, 2, L, V, V)).astype(np.float32)  # model, image, i, prev, next


def _table_model(m: int) -> decode.StepFunctions:
  """Model m: the logits of the next token are TABLES[m, image, position, previous token]; the state is the image."""
  table = jnp.asarray(TABLES[m])
  return decode.StepFunctions(lambda images: images, lambda image, token, i: (table[image, i, token], image))


def _softmax(x: np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _mixture(image: int, i: int, prev: int) -> np.ndarray:
  return (_softmax(TABLES[0, image, i, prev]) + _softmax(TABLES[1, image, i, prev])) / 2


def _greedy_path(probs, image: int) -> tuple[int, ...]:
  prev, path = BOS_ID, []
  for i in range(L):
    prev = int(np.argmax(probs(image, i, prev)))
    path.append(prev)
    if prev == EOS_ID:
      break
  return tuple(path)


def _tokens(row) -> tuple[int, ...]:
  row = list(np.asarray(row))
  return tuple(row[:row.index(EOS_ID) + 1] if EOS_ID in row else row)


def test_greedy_search_of_two_models_follows_the_mean_of_their_probabilities():
  fns = ensemble.mixture([_table_model(0), _table_model(1)])
  got = decode.greedy_search(fns, jnp.arange(2), L)
  for image in range(2):
    want = _greedy_path(_mixture, image)
    assert _tokens(got[image]) == want
    alone = [_greedy_path(lambda im, i, p, m=m: _softmax(TABLES[m, im, i, p]), image) for m in range(2)]
    log_mean = _greedy_path(lambda im, i, p: sum(np.log(_softmax(TABLES[m, im, i, p])) for m in range(2)), image)
    assert want not in (*alone, log_mean)  # the toy tells the mixture from each model and from a product of experts


def test_beam_search_of_two_models_finds_the_mixtures_best_sequence_and_its_score():
  fns = ensemble.mixture([_table_model(0), _table_model(1)])
  alpha = 0.6
  tokens, scores = decode.beam_search(fns, jnp.arange(2), L, beam_size=V ** (L - 1), alpha=alpha)  # exhaustive

  def score(image: int, seq: tuple[int, ...]) -> float:
    logp = sum(np.log(_mixture(image, i, prev)[t]) for i, (prev, t) in enumerate(zip((BOS_ID, *seq), seq)))
    return logp / ((5 + len(seq)) / 6) ** alpha

  for image in range(2):
    candidates = [seq[:seq.index(EOS_ID) + 1] if EOS_ID in seq else seq
                  for seq in itertools.product(range(V), repeat=L)]
    best = max(set(candidates), key=lambda seq: score(image, seq))
    assert _tokens(tokens[image]) == best
    np.testing.assert_allclose(float(scores[image]), score(image, best), rtol=1e-5)


# --- Real captioners ----------------------------------------------------------------------------------------------
MODEL = T2T(T2TConfig(vocab_size=11, d_model=16, num_heads=2, mlp_dim=32, encoder_layers=1, decoder_layers=1,
                      max_len=6, dropout_rate=0.0), encoders.FeatureGrid())
FEATURES = jnp.asarray(np.random.default_rng(0).normal(size=(4, 2, 2, 8)).astype(np.float32))


@jax.jit
def _init(key: jax.Array):
  return MODEL.init(key, FEATURES, jnp.zeros((4, 6), jnp.int32), train=False)["params"]


@jax.jit
def _greedy_and_beam(params):
  """(greedy tokens, beam tokens, beam scores) of one model's params or of `ensemble.Members`."""
  fns = ensemble.step_functions(MODEL, params)
  return (decode.greedy_search(fns, FEATURES, 6), *decode.beam_search(fns, FEATURES, 6, 3))


def test_an_ensemble_of_one_model_decodes_exactly_as_the_model():
  params = _init(jax.random.key(0))
  for got, want in zip(_greedy_and_beam(ensemble.Members((params,))), _greedy_and_beam(params), strict=True):
    np.testing.assert_array_equal(got, want)


@jax.jit
def _mean_probabilities(members: ensemble.Members, prefix: jax.Array) -> jax.Array:
  """The mean of the members' next-token probabilities at every position of `prefix`, without the cache."""
  return jnp.mean(jnp.stack([
      jax.nn.softmax(MODEL.apply({"params": p}, MODEL.apply({"params": p}, FEATURES, method=MODEL.encode), prefix,
                                 method=MODEL.decode)) for p in members.params]), axis=0)


def test_two_differently_initialised_captioners_decode_along_their_mean_distribution():
  members = ensemble.Members((_init(jax.random.key(1)), _init(jax.random.key(2))))
  got = np.asarray(decode.greedy_search(ensemble.step_functions(MODEL, members), FEATURES, 6))
  prefix = np.zeros((4, 6), np.int32)
  prefix[:, 0], prefix[:, 1:] = BOS_ID, got[:, :-1]  # the decoded captions as teacher-forced inputs
  probs = np.asarray(_mean_probabilities(members, jnp.asarray(prefix)))
  for i in range(6):  # each token the argmax of the mean probability at its position (tokens after EOS are PAD)
    live = np.all(got[:, :i] != EOS_ID, axis=1)
    chosen = probs[np.arange(4), i, got[:, i]]
    assert np.all(chosen[live] >= probs[live, i].max(axis=1) - 1e-6)


# --- The command: --mode=eval --ensemble ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def twins(shapes_debug_run, tmp_path_factory):
  """(config, workdir, twin): two copies of the shared trained run (tests may not write in it), and its config."""
  data_dir, trained, _ = shapes_debug_run
  root = tmp_path_factory.mktemp("twins")
  for name in ("a", "b"):
    shutil.copytree(trained, root / name, ignore=shutil.ignore_patterns("eval", "compilation_cache", "plugins"))
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  return config, root / "a", root / "b"


def test_a_trained_workdir_with_itself_as_ensemble_captions_as_the_workdir_alone(twins):
  config, workdir, twin = twins
  source = sources.data_source(config.dataset, "validation[:32]")
  setup, params, vocab, step = inference.load_trained(config, str(workdir))
  captions = evaluate.decode_split(setup, params, source, vocab, config)
  setup, members, vocab, ensemble_step = inference.load_trained(config, str(workdir), ensemble=[str(twin)])
  assert isinstance(members, ensemble.Members) and len(members.params) == 2 and ensemble_step == step
  assert evaluate.decode_split(setup, members, source, vocab, config) == captions
  assert len(set(captions[1])) > 1  # the trained model tells images apart: the comparison is not of constants


def test_eval_of_an_ensemble_writes_its_outputs_in_a_folder_of_its_own_naming_its_workdirs(twins, monkeypatch):
  config, workdir, twin = twins
  config.eval.update(gallery_size=0, rating_sheet_size=0)
  decoded = []

  def evaluate_split(setup, params, source, vocab, config, num_examples=None, judges=None):
    decoded.append(params)
    return evaluate.EvalResult({"cider_d": 0.5}, ["a caption"], [["a reference"]], [0], None)

  monkeypatch.setattr(evaluate, "evaluate_split", evaluate_split)
  result = inference.run_eval(config, str(workdir), "validation", ensemble=[str(twin)])
  assert isinstance(decoded[0], ensemble.Members) and len(decoded[0].params) == 2
  out = pathlib.Path(result["outputs"]["metrics"]).parent
  assert out.parent == workdir / "eval" and out.name.startswith("validation_step") and out.name.endswith("_ensemble2")
  assert json.loads((out / "metrics.json").read_text())["ensemble"] == [str(workdir), str(twin)]


@pytest.mark.parametrize("words, difference", [
    (("<PAD>", "<BOS>", "<EOS>", "<UNK>", "a", "b"), None),
    (("<PAD>", "<BOS>", "<EOS>", "<UNK>", "a", "c"), "id 5 is 'b' there and 'c' here"),
    (("<PAD>", "<BOS>", "<EOS>", "<UNK>", "a"), "6 words there and 5 here"),
])
def test_vocabularies_differ_at_their_first_other_word_or_in_size(words, difference):
  from capjax.data.vocab import Vocabulary
  first = Vocabulary(("<PAD>", "<BOS>", "<EOS>", "<UNK>", "a", "b"))
  assert ensemble.vocabulary_difference(first, Vocabulary(words)) == difference
