"""Which checkpoints a training run keeps (the README: "the latest two and the best by validation CIDEr-D") when it
is stopped by SIGTERM and resumed, which one the final test evaluation reads, and how a resume falls back past a
damaged checkpoint, vocabulary or config.json.

The real loop, checkpoint manager and best-step choice run on the tiny synthetic scenes; only the evaluations are
replaced (a wrapped `evaluate_split`), to choose the validation scores so that the best is neither the first nor
the latest checkpoint, and to record which parameters the test split is evaluated with.
"""

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from capjax import checkpoints, config_util, run_log, train
from capjax import evaluate as evaluate_lib
from capjax.config_util import ConfigError
from capjax.data import pipeline, sources

pytestmark = pytest.mark.slow  # training runs, stopped and resumed (conftest.py: the slow rule)

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

  def evaluate_split(setup, params, source, vocab, config, num_examples=None, judges=None):
    del setup, source, vocab, config, judges
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
  return sorted(int(name) for name in os.listdir(os.path.join(workdir, "checkpoints")))  # a tmp folder fails


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


# --- A damaged workdir falls back -------------------------------------------------------------------------------
# A run trained to step 4 (checkpoints 2 and 4) is copied and damaged; the same config resumes. Where it resumes
# from step 2 it trains to 4 again only when `trained_on` says so (the first case: the parameters then equal the
# undamaged run's, so the fall-back is an exact resume); the other cases stop at step 2 (num_train_steps=2), with no
# training step to compile.

def _truncate_arrays(step_dir):
  for path in (step_dir / "state").rglob("d/*"):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _zero_manifests(step_dir):
  for path in (step_dir / "state").rglob("manifest.ocdbt"):
    path.write_bytes(bytes(path.stat().st_size))


def _garble_iterator(step_dir):
  (next((step_dir / "data").glob("process_*.json"))).write_text('{"next_index": ')


def _other_shapes(step_dir, data_dir):
  """Step 4 replaced by a checkpoint of a wider model (a folder copied from another run)."""
  config = _config(data_dir)
  config.model.d_model = 64
  vocab = train.Vocabulary.load(str(step_dir.parent.parent))
  inputs = sources.input_spec(config)
  _, _, init_fn = train.state_init_fn(config, len(vocab), inputs)
  state = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), nn.unbox(jax.eval_shape(init_fn, jax.random.key(0))))
  source = sources.train_source(config.dataset)
  other = step_dir.parent.parent.parent / "other"
  with ocp.CheckpointManager(other / "checkpoints", item_names=("state", "data")) as mngr:
    mngr.save(4, args=checkpoints.save_args(state, pipeline.train_iterator(config, source, vocab, inputs.key)))
  shutil.rmtree(step_dir)
  shutil.copytree(other / "checkpoints" / "4", step_dir)


def _unraisable(monkeypatch) -> list:
  """What reaches `sys.unraisablehook` from here on: the errors of TensorStore's threads, such as a read of a damaged
  checkpoint that ends after orbax closed its event loop (`RuntimeError: Event loop is closed`, a traceback each on
  stderr; `model_io.settled_event_loops` prevents them)."""
  seen = []
  monkeypatch.setattr(sys, "unraisablehook", seen.append)
  return seen


@pytest.fixture(scope="module")
def four_steps(data_dir, tmp_path_factory):
  """A workdir trained to step 4 without interruption (checkpoints 2 and 4), and its parameters at step 4."""
  workdir = tmp_path_factory.mktemp("four_steps")
  config = _config(data_dir)
  config.update(num_train_steps=4, eval_every=1000, checkpoint_every=2)
  with pytest.MonkeyPatch.context() as monkeypatch:
    _scored_evaluations(monkeypatch)
    train.train_and_evaluate(config, str(workdir))
  return workdir, _params(workdir, 4)


DAMAGES = {"array-data-cut-short": _truncate_arrays, "manifest-zeroed": _zero_manifests,
           "iterator-state-garbled": _garble_iterator, "other-shapes": _other_shapes}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_checkpoint_that_cannot_be_restored_is_set_aside_and_the_run_resumes_from_the_one_before(
    damage, four_steps, data_dir, tmp_path, monkeypatch, caplog):
  straight, params_at_4 = four_steps
  workdir = tmp_path / "w"
  shutil.copytree(straight, workdir)
  damage_fn = DAMAGES[damage]
  damage_fn(workdir / "checkpoints" / "4", *([data_dir] if damage == "other-shapes" else []))
  damaged_files = {p.relative_to(workdir / "checkpoints"): p.read_bytes()
                   for p in (workdir / "checkpoints" / "4").rglob("*") if p.is_file()}
  trained_on = damage == "array-data-cut-short"
  config = _config(data_dir)
  config.update(num_train_steps=4 if trained_on else 2, eval_every=1000, checkpoint_every=2)
  _scored_evaluations(monkeypatch)
  unraisable = _unraisable(monkeypatch)
  with caplog.at_level(logging.INFO):
    result = train.train_and_evaluate(config, str(workdir))
  assert "interrupted_at" not in result
  assert [repr(u.exc_value) for u in unraisable] == []
  assert re.search(r"checkpoint 4 in \S+ cannot be restored: \w+", caplog.text), caplog.text
  assert f"checkpoint 4 set aside as {workdir}/checkpoints.damaged/4" in caplog.text
  assert "Resumed from step 2" in caplog.text
  # Set aside as it was, byte for byte, never deleted.
  assert {p.relative_to(workdir / "checkpoints.damaged"): p.read_bytes()
          for p in (workdir / "checkpoints.damaged" / "4").rglob("*") if p.is_file()} == damaged_files
  if trained_on:  # steps 3 and 4 again, from step 2's state and data position: the same parameters
    for got, want in zip(jax.tree.leaves(_params(workdir, 4)), jax.tree.leaves(params_at_4), strict=True):
      np.testing.assert_array_equal(got, want)
  else:
    assert _kept_steps(workdir) == [2]


def test_when_no_checkpoint_restores_nothing_is_moved_and_the_error_names_each(four_steps, data_dir, tmp_path,
                                                                                monkeypatch):
  workdir = tmp_path / "w"
  shutil.copytree(four_steps[0], workdir)
  _zero_manifests(workdir / "checkpoints" / "4")
  _garble_iterator(workdir / "checkpoints" / "2")
  config = _config(data_dir)
  config.update(num_train_steps=4, eval_every=1000, checkpoint_every=2)
  _scored_evaluations(monkeypatch)
  unraisable = _unraisable(monkeypatch)
  with pytest.raises(ConfigError) as e:
    train.train_and_evaluate(config, str(workdir))
  assert [repr(u.exc_value) for u in unraisable] == []
  assert re.fullmatch(rf"no checkpoint in {workdir}/checkpoints can be restored \(step 4: \w+: .+; step 2: \w+: .+\) "
                      r"— if the config changed the model, resume with the run's own \(config.json\); otherwise "
                      r"move checkpoints/ aside to start over", str(e.value)), str(e.value)
  assert _kept_steps(workdir) == [2, 4] and not (workdir / "checkpoints.damaged").exists()
  assert not (workdir / "run.lock").exists()


def test_an_emptied_vocabulary_is_built_again_a_cut_config_replaced_and_a_partial_save_removed(
    four_steps, data_dir, tmp_path, monkeypatch, caplog):
  workdir = tmp_path / "w"
  shutil.copytree(four_steps[0], workdir)
  vocab = (workdir / "vocab.txt").read_text()
  (workdir / "vocab.txt").write_text("")
  config_json = (workdir / "config.json").read_text()
  (workdir / "config.json").write_text(config_json[:100])
  partial = workdir / "checkpoints" / "6.orbax-checkpoint-tmp" / "state.orbax-checkpoint-tmp"  # a kill while saving
  partial.mkdir(parents=True)
  (partial / "manifest.ocdbt").write_bytes(b"\x0c\xdb")
  config = _config(data_dir)
  config.update(num_train_steps=4, eval_every=1000, checkpoint_every=2)
  _scored_evaluations(monkeypatch)
  with caplog.at_level(logging.INFO):
    train.train_and_evaluate(config, str(workdir))
  assert (workdir / "vocab.txt").read_text() == vocab  # the same words, in the same order
  assert (workdir / "vocab.txt.damaged").read_text() == ""
  assert (workdir / "config.json.damaged").read_text() == config_json[:100]
  assert json.loads((workdir / "config.json").read_text()) == json.loads(config.to_json_best_effort())
  assert "Resumed from step 4" in caplog.text and _kept_steps(workdir) == [2, 4]  # the partial save is removed
  assert f"{workdir}/vocab.txt is damaged" in caplog.text and f"{workdir}/config.json is damaged" in caplog.text


# --- A full disk ------------------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path, four_steps):
  """A folder on a private tmpfs (root) with room for about one and a half checkpoints of the tiny model (sized by
  those of `four_steps`), unmounted afterwards; (folder, whether it is a tmpfs). Where mounting is not permitted the
  folder is on the ordinary disk."""
  folder = tmp_path / "disk"
  folder.mkdir()
  checkpoint = sum(p.stat().st_size for p in (four_steps[0] / "checkpoints" / "2").rglob("*") if p.is_file())
  size_kib = int(1.5 * checkpoint) // 1024 + 64  # and 64 KiB for the vocabulary, config, history, events
  mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
                           capture_output=True).returncode == 0
  yield folder, mounted
  if mounted:
    subprocess.run(["umount", str(folder)], check=True)


def _assert_disk_full(error: checkpoints.DiskFullError, workdir) -> list[int]:
  """Checks the one line and the workdir after a full disk; returns the checkpoints kept (the line names the newest:
  how many fit before the disk filled depends on how orbax's concurrent writes fell)."""
  assert not list((workdir / "checkpoints").glob("*orbax-checkpoint-tmp*"))  # nothing half-written is left
  assert not (workdir / "run.lock").exists()
  kept = _kept_steps(workdir)
  resume = f"rerun the same command to resume from step {kept[-1]}" if kept else "rerun the same command"
  assert re.fullmatch(rf"no space left on the disk of {workdir} \([\d.]+ (bytes|kB|MB) free; a checkpoint of this "
                      rf"run needs about [\d.]+ (kB|MB)\) — free space there or pass a --workdir on a larger disk, "
                      rf"then {resume}",
                      str(error)), str(error)
  return kept


def test_a_full_disk_ends_training_in_one_error_and_leaves_no_partial_checkpoint(small_disk, data_dir,
                                                                                 monkeypatch, capfd):
  disk, mounted = small_disk
  workdir = disk / "w"
  config = _config(data_dir)
  config.update(num_train_steps=8, eval_every=1000, checkpoint_every=2)
  _scored_evaluations(monkeypatch)
  kept = []
  if mounted:  # first the disk fills while orbax writes (no check before the save): ENOSPC itself
    with monkeypatch.context() as unchecked:
      unchecked.setattr(checkpoints, "ensure_space", lambda workdir, need, saved: need)
      with pytest.raises(checkpoints.DiskFullError) as e:
        train.train_and_evaluate(config, str(workdir))
    kept = _assert_disk_full(e.value, workdir)
    assert "Traceback" not in capfd.readouterr().err  # orbax's writer threads' tracebacks are not shown
  # Then with the check before each save, the disk looking full once one more checkpoint is kept: the resumed run
  # stops before writing what cannot fit (or, on the tmpfs, ENOSPC comes first), keeping what it had.
  real = shutil.disk_usage
  monkeypatch.setattr(checkpoints.shutil, "disk_usage", lambda path: real(path)._replace(
      free=0 if (checkpoints.committed_step(str(workdir)) or 0) > (kept[-1] if kept else 0) else real(path).free))
  with pytest.raises(checkpoints.DiskFullError) as e:
    train.train_and_evaluate(config, str(workdir))
  now = _assert_disk_full(e.value, workdir)
  assert now[:len(kept)] == kept and len(now) <= len(kept) + 1


def test_a_loss_that_is_not_finite_stops_the_run_before_its_state_is_saved(data_dir, tmp_path, monkeypatch, caplog):
  real = train.loss_fn

  def diverging(model, params, batch, rng, label_smoothing, num_words):  # the loss of step 1 on is NaN
    loss, tokens = real(model, params, batch, rng, label_smoothing, num_words)
    return loss * jnp.nan, tokens

  monkeypatch.setattr(train, "loss_fn", diverging)
  config = _config(data_dir)
  config.update(num_train_steps=8, eval_every=1000, checkpoint_every=2, log_every=5)
  _scored_evaluations(monkeypatch)
  monkeypatch.setattr(train, "PROGRESS_EVERY_S", 1e-9)  # clu's progress line at every step between log steps
  with pytest.raises(run_log.DivergedError) as e, caplog.at_level(logging.INFO):
    train.train_and_evaluate(config, str(tmp_path))
  # Between log steps the console still hears: the first step (with the compilation) at once, then clu's
  # time-based progress lines; neither reads the loss, so the NaN is found where it always is, before step 2's save.
  assert "compiling the train step" in caplog.text
  assert re.search(r"step 1/8  compiled the train step and ran it in [\d.]+ s\n", caplog.text), caplog.text
  assert re.search(r"Setting work unit notes: [\d.]+ steps/s, 25\.0% \(2/8\), ETA: \S+", caplog.text), caplog.text
  assert str(e.value) == (
      "the training loss is nan at step 1: the run diverged, and no state after it is saved — train again in another "
      "--workdir with a lower --config.optimizer.learning_rate or with --config.optimizer.grad_clip_norm set "
      "(--config.debug_nans=True names the operation)")
  assert _kept_steps(tmp_path) == [] and not (tmp_path / "run.lock").exists()


def test_the_committed_step_is_the_largest_folder_named_in_ascii_digits(tmp_path):
  """A folder named "²" (which str.isdigit takes and int() refuses) or "٣" beside the checkpoints is no step."""
  for name in ("5", "12", "²", "٣", "99.orbax-checkpoint-tmp", "1" * 30):
    (tmp_path / "checkpoints" / name).mkdir(parents=True)
  assert checkpoints.committed_step(str(tmp_path)) == 12
  assert checkpoints.committed_step(str(tmp_path / "elsewhere")) is None
