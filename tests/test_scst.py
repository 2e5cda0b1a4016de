"""Self-critical sequence training (`capjax.scst`, the `scst` config variant): the loss's gradient against a
hand-computed one, the baselines, a run from the shared trained workdir (tests/trained_models.py) on 8 devices that
logs its rewards, and a run stopped by SIGTERM and resumed that ends with the uninterrupted run's parameters;
`init_from` of another model or vocabulary is refused."""

from __future__ import annotations

import json
import os
import signal

import flax.linen as nn
import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from capjax import checkpoints, config_util, models, scst, train
from capjax import evaluate as evaluate_lib
from capjax.config_util import ConfigError
from capjax.tokens import PAD_ID

STEPS = 4


def test_the_scst_loss_and_its_gradient_are_the_hand_computed_ones():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 4, 5)).astype(np.float32)
  tokens = np.array([[3, 2, PAD_ID, PAD_ID], [4, 4, 1, 2], [2, PAD_ID, PAD_ID, PAD_ID]], np.int32)
  advantage = np.array([1.0, -0.5, 2.0], np.float32)
  (loss, count), grad = jax.value_and_grad(lambda x: scst.scst_loss(x, tokens, advantage), has_aux=True)(logits)
  # By hand: N = 7 tokens; loss = -1/N sum_r a_r sum_t log softmax(logits[r, t])[tokens[r, t]], and its gradient in
  # logits[r, t] is -a_r / N (onehot(tokens[r, t]) - softmax(logits[r, t])) on non-PAD positions, 0 elsewhere.
  p = np.exp(logits.astype(np.float64))
  p /= p.sum(-1, keepdims=True)
  mask = tokens != PAD_ID
  assert count == mask.sum() == 7
  want_loss = -sum(advantage[r] * np.log(p[r, t, tokens[r, t]]) for r in range(3) for t in range(4) if mask[r, t]) / 7
  onehot = np.eye(5)[tokens]
  want_grad = -(advantage[:, None, None] * mask[..., None] / 7) * (onehot - p)
  np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
  np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-7)


def test_the_baselines_and_drop_worst():
  rewards = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
  base, advantage, kept = scst.advantages(rewards, None, "mean", False)
  np.testing.assert_allclose(base, [[2.5, 2.0, 1.5], [3.0, 3.0, 0.0]])  # the mean of the other two samples
  np.testing.assert_allclose(advantage, [[-1.5, 0.0, 1.5], [-3.0, -3.0, 6.0]])
  assert kept.all()
  base, advantage, kept = scst.advantages(rewards, np.array([2.0, 1.0]), "greedy", True)
  np.testing.assert_allclose(base, [[2.0] * 3, [1.0] * 3])
  np.testing.assert_allclose(advantage, [[0.0, 0.0, 1.0], [0.0, -1.0, 5.0]])  # each row's worst (the first) dropped
  assert kept.tolist() == [[False, True, True], [False, True, True]]


@pytest.mark.parametrize("spec", ["configs/t2t.py:shapes,debug", "configs/rnn.py:shapes,debug"])
def test_samples_logits_encode_each_image_once_and_equal_the_repeated_images_logits(spec):
  config = config_util.load(spec)
  config.max_caption_tokens = 5
  model = models.build(config, 20)
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (2, 16, 16, 3)).astype(np.uint8)
  tokens = rng.integers(4, 20, (2, 3, 6)).astype(np.int32)  # 3 samples per image
  params = nn.unbox(jax.jit(lambda x, t: model.init(jax.random.key(0), x, t))(images[:1], tokens[0, :1])["params"])
  got = jax.jit(lambda p: scst.samples_logits(model, p, images, tokens, jax.random.key(1)))(params)
  want = jax.jit(lambda p: model.apply({"params": p}, np.repeat(images, 3, axis=0), tokens.reshape(6, 6), train=True,
                                       rngs={"dropout": jax.random.key(1)}))(params)  # dropout is off in shapes
  np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def _config(data_dir, init_from):
  config = config_util.load("configs/t2t.py:shapes,debug,scst")
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  config.update(init_from=str(init_from), num_train_steps=STEPS, eval_every=2, checkpoint_every=1000, log_every=2,
                debug_nans=False)
  config.scst.num_samples = 3
  return config


def _scored(setup, params, source, vocab, config, num_examples=None, judges=None):
  """evaluate_split without decoding (the loop's evaluation is MLE's, tested in test_checkpoints and test_main)."""
  del setup, params, source, vocab, config, judges
  return evaluate_lib.EvalResult({"cider_d": 0.5 if num_examples else 0.0}, [], [], [], None)


def _params(workdir, step: int):
  with ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "data")) as mngr:
    return mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))["state"]["params"]


@pytest.fixture(scope="module")
def straight(shapes_debug_run, tmp_path_factory):
  """(config, workdir, result) of an uninterrupted SCST run from the shared trained workdir."""
  data_dir, mle, _ = shapes_debug_run
  workdir = tmp_path_factory.mktemp("scst") / "straight"
  config = _config(data_dir, mle)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(evaluate_lib, "evaluate_split", _scored)
    return config, workdir, train.train_and_evaluate(config, str(workdir))


def test_an_scst_run_starts_from_the_best_checkpoint_and_logs_its_rewards(straight, shapes_debug_run):
  config, workdir, result = straight
  _, mle, _ = shapes_debug_run
  assert (workdir / "vocab.txt").read_bytes() == (mle / "vocab.txt").read_bytes()
  df = json.loads((workdir / scst.DF_FILENAME).read_text())
  assert df["num_documents"] == 512  # tiny's training split: computed once, saved
  history = [json.loads(line) for line in (workdir / "train_history.jsonl").read_text().splitlines()]
  assert [h["step"] for h in history] == [2, 4]
  for h in history:
    assert {"loss", "grad_norm", "reward", "baseline", "positive_advantages", "examples_per_s"} <= h.keys()
    assert h["reward"] >= 0 and 0 <= h["positive_advantages"] <= 1
    assert h["baseline"] == pytest.approx(h["reward"], rel=1e-6)  # the mean baseline averages to the mean reward
  assert os.path.isfile(result["outputs"]["metrics"])
  with ocp.CheckpointManager(os.path.join(mle, "checkpoints"), item_names=("state", "data")) as mngr:
    best = checkpoints.best_step(mngr)
  start = jax.tree.leaves(_params(mle, best))
  end = jax.tree.leaves(_params(workdir, STEPS))
  assert any(not np.array_equal(a, b) for a, b in zip(start, end))  # it trained
  assert all(a.shape == b.shape for a, b in zip(start, end))


def test_a_resumed_scst_run_ends_with_the_uninterrupted_runs_parameters(straight, tmp_path, monkeypatch):
  config, straight_dir, _ = straight
  def evaluate_split(setup, params, source, vocab, config, num_examples=None, judges=None):
    if num_examples is not None and not stopped:
      stopped.append(True)
      os.kill(os.getpid(), signal.SIGTERM)  # during the validation of step 2: its checkpoint is saved, then stop
    return _scored(setup, params, source, vocab, config, num_examples, judges)

  stopped: list[bool] = []
  monkeypatch.setattr(evaluate_lib, "evaluate_split", evaluate_split)
  workdir = tmp_path / "resumed"
  assert train.train_and_evaluate(config, str(workdir)) == {"metrics": {}, "outputs": {}, "interrupted_at": 2}
  result = train.train_and_evaluate(config, str(workdir))
  assert result["metrics"] and stopped == [True]
  history = [json.loads(line) for line in (workdir / "train_history.jsonl").read_text().splitlines()]
  assert [h["step"] for h in history] == [2, 4]
  for got, want in zip(jax.tree.leaves(_params(workdir, STEPS)), jax.tree.leaves(_params(straight_dir, STEPS)),
                       strict=True):
    np.testing.assert_array_equal(got, want)


def _mle_folder(tmp_path, config, **changes) -> str:
  """A folder that looks like a trained MLE run of `config` with `changes` (dotted fields) to its config.json."""
  folder = tmp_path / "mle"
  folder.mkdir()
  saved = json.loads(config.to_json_best_effort())
  del saved["scst"], saved["init_from"]
  for field, value in changes.items():
    *parents, leaf = field.split(".")
    node = saved
    for p in parents:
      node = node[p]
    node[leaf] = value
  (folder / "config.json").write_text(json.dumps(saved))
  (folder / "vocab.txt").write_text("<pad>\n<s>\n</s>\n<unk>\na\n")
  return str(folder)


@pytest.mark.parametrize("changes, message", [
    ({"model.d_model": 64}, r"model.d_model: 64 there, 32 here"),
    ({"model.name": "rnn"}, r'model.name: "rnn" there, "t2t" here'),
    ({"vocab.min_count": 1}, r"vocab.min_count: 1 there, 4 here"),
    ({"dataset.name": "stylized_scenes"}, r'dataset.name: "stylized_scenes" there, "synthetic_scenes" here'),
])
def test_init_from_a_run_of_another_model_or_vocabulary_is_refused(tmp_path, changes, message):
  config = _config(tmp_path, "")
  config.init_from = _mle_folder(tmp_path, config, **changes)
  with pytest.raises(ConfigError, match=r"--config.init_from=\S+ holds a run of another model or vocabulary \(" +
                     message):
    scst.check(config, str(tmp_path / "w"))


def test_a_workdir_with_another_vocabulary_is_refused(tmp_path):
  config = _config(tmp_path, "")
  config.init_from = _mle_folder(tmp_path, config)
  scst.check(config, str(tmp_path / "w"))  # the same model and vocabulary: accepted
  (tmp_path / "w").mkdir()
  (tmp_path / "w" / "vocab.txt").write_text("<pad>\n<s>\n</s>\n<unk>\nb\n")
  with pytest.raises(ConfigError, match=r"vocab.txt is not the vocabulary of --config.init_from="):
    scst.check(config, str(tmp_path / "w"))


def test_the_config_variants():
  for spec in ("configs/t2t.py:shapes,scst", "configs/t2t.py:scst", "configs/rnn.py:shapes,scst",
               "configs/rnn.py:scst"):
    config = config_util.load(spec)
    assert config.scst.num_samples == (3 if "shapes" in spec else 5)  # the scenes': docs/training.md's gain table
    assert config.scst.baseline == "mean" and config.init_from == ""
    assert config.optimizer.schedule == "constant" and config.optimizer.warmup_steps == 0
  scenes = config_util.load("configs/t2t.py:shapes,scst")
  assert (scenes.optimizer.learning_rate, scenes.batch_size, scenes.num_train_steps) == (7e-5, 16, 414)
  assert config_util.load("configs/t2t.py:coco,scst").optimizer.learning_rate == 1e-3  # Adagrad
  with pytest.raises(ConfigError, match="scst.baseline=mean needs at least 2 samples"):
    config = _config("/nowhere", "/mle")
    config.scst.num_samples = 1
    scst.check(config, "/w")
