"""Parameter EMA (`optimizer.ema_decay`, issue 32): the debiased average kept in the train state equals the weighted
mean of the checkpointed parameters, a run stopped by SIGTERM and resumed equals an uninterrupted one (parameters,
optimizer state and average, bit for bit), validations and the test evaluation decode with the average (or not, with
`eval.use_ema=False`), as `--mode=eval` and `caption` do, a run without EMA keeps the state it had before, the
average is sharded as the parameters, and a decay outside [0, 1) is refused.

The real loop runs on the tiny synthetic scenes; the evaluations are replaced (as in test_checkpoints.py) to record
the parameters they get and to choose the validation scores.
"""

import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from capjax import config_util, ema, inference, sharding, train
from capjax import evaluate as evaluate_lib
from capjax import workdir as workdir_lib
from capjax.config_util import ConfigError
from capjax.data import sources

pytestmark = pytest.mark.slow  # the module fixture trains (conftest.py: the slow rule)

DECAY = 0.8
STEPS = 4
SCORES = {2: 0.5, 4: 0.2}  # validation CIDEr-D at eval_every=2: the best is step 2, not the latest


def _config(data_dir, **optimizer):
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  config.update(num_train_steps=STEPS, eval_every=2, checkpoint_every=1, keep_checkpoints=STEPS, log_every=2,
                debug_nans=False)
  config.optimizer.update(ema_decay=DECAY, **optimizer)
  return config


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("tfds")
  sources.prepare(_config(directory).dataset)
  return directory


def _recorded_evaluations(monkeypatch, on_validation=None, resumed_at: int = 0) -> dict[str, list]:
  """Validations (of a run that starts at step `resumed_at`) score SCORES[step] and record their parameters
  (`validated`), test evaluations too (`tested`)."""
  seen = {"validated": [], "tested": []}

  def evaluate_split(setup, params, source, vocab, config, num_examples=None, judges=None):
    del setup, source, vocab, config, judges
    if num_examples is None:
      seen["tested"].append(jax.device_get(params))
      return evaluate_lib.EvalResult({"cider_d": 0.0}, [], [], [], None)
    seen["validated"].append(jax.device_get(params))
    step = resumed_at + 2 * len(seen["validated"])
    if on_validation:
      on_validation(step)
    return evaluate_lib.EvalResult({"cider_d": SCORES[step]}, [], [], [], None)

  monkeypatch.setattr(evaluate_lib, "evaluate_split", evaluate_split)
  return seen


def _state(workdir, step: int) -> dict:
  with ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "data")) as mngr:
    return mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))["state"]


def _assert_equal_trees(got, want) -> None:
  got_leaves, want_leaves = jax.tree_util.tree_leaves_with_path(got), jax.tree_util.tree_leaves_with_path(want)
  assert [p for p, _ in got_leaves] == [p for p, _ in want_leaves]
  for (path, a), (_, b) in zip(got_leaves, want_leaves):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=jax.tree_util.keystr(path))


@pytest.fixture(scope="module")
def straight(data_dir, tmp_path_factory):
  """(workdir, recorded evaluations) of one uninterrupted run with EMA, a checkpoint every step."""
  workdir = tmp_path_factory.mktemp("straight")
  with pytest.MonkeyPatch.context() as monkeypatch:
    seen = _recorded_evaluations(monkeypatch)
    train.train_and_evaluate(_config(data_dir), str(workdir))
  return workdir, seen


def test_the_average_is_the_debiased_weighted_mean_of_the_parameters_of_every_step(straight):
  workdir, _ = straight
  states = {step: _state(workdir, step) for step in range(1, STEPS + 1)}
  for t in (1, 2, STEPS):
    weights = np.array([DECAY ** (t - i) for i in range(1, t + 1)])
    expected = jax.tree.map(lambda *ps: sum(w * np.asarray(p, np.float64) for w, p in zip(weights, ps)) / weights.sum(),
                            *(states[i]["params"] for i in range(1, t + 1)))
    for got, want in zip(jax.tree.leaves(states[t]["ema_params"]), jax.tree.leaves(expected), strict=True):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  _assert_equal_trees(states[1]["ema_params"], states[1]["params"])  # step 1: the parameters themselves
  assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(states[STEPS]["ema_params"]),
                                                        jax.tree.leaves(states[STEPS]["params"])))


def test_validations_and_the_test_evaluation_of_the_best_checkpoint_decode_with_the_average(straight):
  workdir, seen = straight
  assert len(seen["validated"]) == 2 and len(seen["tested"]) == 1
  for step, params in zip((2, 4), seen["validated"]):
    _assert_equal_trees(params, _state(workdir, step)["ema_params"])
  _assert_equal_trees(seen["tested"][0], _state(workdir, 2)["ema_params"])  # the best validation: step 2's


def test_a_run_with_ema_stopped_by_sigterm_and_resumed_equals_the_uninterrupted_one(straight, data_dir, tmp_path,
                                                                                    monkeypatch):
  workdir, _ = straight
  config = _config(data_dir)
  config.checkpoint_every = 1000  # the stopped run's one checkpoint is the signal's
  _recorded_evaluations(monkeypatch, on_validation=lambda step: step == 2 and os.kill(os.getpid(), signal.SIGTERM))
  assert train.train_and_evaluate(config, str(tmp_path))["interrupted_at"] == 2
  seen = _recorded_evaluations(monkeypatch, resumed_at=2)
  train.train_and_evaluate(config, str(tmp_path))
  resumed = _state(tmp_path, STEPS)
  assert set(resumed) == {"step", "params", "opt_state", "ema_params"}
  _assert_equal_trees(resumed, _state(workdir, STEPS))
  _assert_equal_trees(seen["tested"][0], _state(workdir, 2)["ema_params"])


def test_mode_eval_and_caption_load_the_average_of_the_best_checkpoint_unless_told_not_to(straight, data_dir):
  workdir, _ = straight
  config = _config(data_dir)
  _, params, _, step = inference.load_trained(config, str(workdir))
  assert step == 2  # the best validation
  _assert_equal_trees(params, _state(workdir, 2)["ema_params"])
  config.eval.use_ema = False
  _assert_equal_trees(inference.load_trained(config, str(workdir))[1], _state(workdir, 2)["params"])


def test_eval_use_ema_false_evaluates_the_trained_parameters():
  config = config_util.load("configs/t2t.py:shapes,debug")
  state = ema.EmaTrainState(jnp.int32(1), {"w": jnp.ones(2)}, (), ema_params={"w": jnp.zeros(2)})
  assert ema.eval_params(state, config) is state.ema_params and ema.describe(state, config) == "EMA parameters"
  config.eval.use_ema = False
  assert ema.eval_params(state, config) is state.params and ema.describe(state, config) == "parameters"


def test_without_ema_the_train_state_is_the_one_of_runs_from_before_it():
  config = config_util.load("configs/t2t.py:shapes,debug")
  assert config.optimizer.ema_decay == 0.0 and config.eval.use_ema
  _, _, init_fn = train.state_init_fn(config, 40, sources.input_spec(config))
  state = jax.eval_shape(init_fn, jax.random.key(0))
  assert type(state) is train.TrainState  # no ema_params: its checkpoints restore into runs from before EMA
  config.optimizer.ema_decay = 0.5
  _, _, init_fn = train.state_init_fn(config, 40, sources.input_spec(config))
  assert type(jax.eval_shape(init_fn, jax.random.key(0))) is ema.EmaTrainState


def test_a_workdir_from_before_ema_resumes_without_it_and_refuses_it():
  config = config_util.load("configs/t2t.py:shapes,debug")
  saved = workdir_lib.as_json_dict(config)
  del saved["optimizer"]["ema_decay"]  # a config.json written before the field existed
  assert workdir_lib.config_changes(saved, workdir_lib.as_json_dict(config)) == []
  config.optimizer.ema_decay = 0.9  # another run: its state has an average that the checkpoints lack
  assert workdir_lib.config_changes(saved, workdir_lib.as_json_dict(config)) == ["optimizer.ema_decay: 0.0 → 0.9"]


@pytest.mark.parametrize("decay", [1.0, -0.1, 1.5, float("nan")])
def test_a_decay_outside_zero_to_one_is_refused(decay):
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.optimizer.ema_decay = decay
  with pytest.raises(ConfigError, match=r"--config\.optimizer\.ema_decay=.* — set --config\.optimizer\.ema_decay"):
    config_util.validate(config)


def test_the_average_is_sharded_as_the_parameters_are():
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.optimizer.ema_decay = 0.9
  config.mesh.update(rules="fsdp", data=4, fsdp=2)
  setup = train.make_setup(config, 40, sharding.make_mesh(config))
  shardings = setup.state_shardings
  assert jax.tree.leaves(shardings.ema_params) == jax.tree.leaves(shardings.params)
  assert any(s.spec and "fsdp" in jax.tree.leaves(tuple(s.spec)) for s in jax.tree.leaves(shardings.ema_params))
