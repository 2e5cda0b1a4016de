"""Which checkpoints a training run keeps (the README: "the latest two and the best by validation CIDEr-D") when it
is stopped by SIGTERM and resumed, and which one the final test evaluation reads.

The real loop, checkpoint manager and best-step choice run on the tiny synthetic scenes; only the evaluations are
replaced (a wrapped `evaluate_split`), to choose the validation scores so that the best is neither the first nor
the latest checkpoint, and to record which parameters the test split is evaluated with.
"""

import json
import os
import signal

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from capjax import config_util, train
from capjax import evaluate as evaluate_lib
from capjax.data import sources

# Validation CIDEr-D of the evaluations at steps 2, 4, ..., 10 (eval_every=2): the best, step 4, is not the latest.
SCORES = {2: 0.1, 4: 0.9, 6: 0.3, 8: 0.2, 10: 0.4}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("tfds")
  sources.prepare(_config(directory).dataset)
  return directory


def _config(data_dir):
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  config.update(num_train_steps=10, eval_every=2, checkpoint_every=3, log_every=5, debug_nans=False)
  return config


def _scored_evaluations(monkeypatch, on_validation=None) -> tuple[list[int], list]:
  """Validations score their step's SCORES (steps in call order, one per eval_every=2 steps, across runs); the
  test evaluations record the parameters they get. Returns (validated steps, those parameters), filled as runs go."""
  validated, tested = [], []

  def evaluate_split(setup, params, source, vocab, config, num_examples=None):
    del setup, source, vocab, config
    if num_examples is None:
      tested.append(jax.device_get(params))
      return evaluate_lib.EvalResult({"cider_d": 0.0}, [], [], [], None)
    step = 2 * (len(validated) + 1)
    validated.append(step)
    if on_validation:
      on_validation(step)
    return evaluate_lib.EvalResult({"cider_d": SCORES[step]}, [], [], [], None)

  monkeypatch.setattr(evaluate_lib, "evaluate_split", evaluate_split)
  return validated, tested


def _params(workdir, step: int):
  with ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "data")) as mngr:
    return mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))["state"]["params"]


def _kept_steps(workdir) -> list[int]:
  return sorted(int(name) for name in os.listdir(os.path.join(workdir, "checkpoints")))  # tmp dirs would fail


def test_a_run_stopped_by_sigterm_and_resumed_keeps_the_latest_two_and_the_best_and_tests_the_best(
    data_dir, tmp_path, monkeypatch):
  config = _config(data_dir)
  assert config.keep_checkpoints == 2
  handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
  validated, tested = _scored_evaluations(
      monkeypatch, on_validation=lambda step: step == 4 and os.kill(os.getpid(), signal.SIGTERM))

  # The signal comes during the validation of step 4: the run saves step 4 with its score and returns.
  result = train.train_and_evaluate(config, str(tmp_path))
  assert result == {"metrics": {}, "outputs": {}, "interrupted_at": 4}
  assert {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)} == handlers
  assert validated == [2, 4]
  # Saved: 2 and 4 with scores, 3 without (checkpoint_every=3). Kept: the latest two, 3 and 4 (also the best).
  assert _kept_steps(tmp_path) == [3, 4]
  with ocp.CheckpointManager(os.path.join(tmp_path, "checkpoints"), item_names=("state", "data")) as mngr:
    assert mngr.metrics(4) == {"cider_d": SCORES[4]}
  assert not tested and not (tmp_path / "eval").exists()

  # The same config resumes: 6, 8 and 10 with scores, 9 without. Step 4 stays as the best, known from its score on
  # disk after the restart; 9 is one of the latest two although it has no score.
  result = train.train_and_evaluate(config, str(tmp_path))
  assert validated == [2, 4, 6, 8, 10]
  assert _kept_steps(tmp_path) == [4, 9, 10]
  assert result["outputs"]["metrics"] == str(tmp_path / "eval" / "test_step4" / "metrics.json")
  with open(result["outputs"]["metrics"], encoding="utf-8") as f:
    assert json.load(f)["step"] == 4
  # The parameters the test split is evaluated with are step 4's, not the latest step's.
  assert len(tested) == 1
  best, latest = _params(tmp_path, 4), _params(tmp_path, 10)
  for got, want in zip(jax.tree.leaves(tested[0]), jax.tree.leaves(best), strict=True):
    np.testing.assert_array_equal(got, want)
  assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(best), jax.tree.leaves(latest)))
