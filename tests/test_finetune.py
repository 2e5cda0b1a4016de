"""Fine-tuning (`--config.init_from=WORKDIR` with any config, `capjax.finetune`): the shared trained `:shapes,debug`
run (tests/trained_models.py, synthetic_scenes/tiny: the plain domain) fine-tuned for 1-2 steps on the vivid domain
(`vivid_tiny`). The first step's loss is the pretrained model's on that batch, the vocabulary keeps its ids (new words
appended, or none with vocab.extend=false), freeze=encoder leaves the image side bit-identical, and a start from a
workdir without a checkpoint or of another model is one `error:` line before anything is written."""

from __future__ import annotations

import collections
import json
import logging
import os
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from capjax import checkpoints, config_util, finetune, models, sharding, train
from capjax import evaluate as evaluate_lib
from capjax.config_util import ConfigError
from capjax.data import pipeline, sources
from capjax.data.captions import all_captions
from capjax.data.vocab import Vocabulary, tokenize
from trained_models import REPO, main_env

FROZEN = ("encoder_0", "encoder_norm", "image_encoder", "visual_proj")  # T2T's image side (freeze=encoder)


def _scored(setup, params, source, vocab, config, num_examples=None, judges=None):
  """evaluate_split without decoding (the loop's evaluation is tested in test_main and test_checkpoints)."""
  del setup, params, source, vocab, config, judges
  return evaluate_lib.EvalResult({"cider_d": 0.5 if num_examples else 0.0}, [], [], [], None)


def _params(workdir, step: int | None = None):
  """The parameters of checkpoint `step` of `workdir` (its best by default) as numpy arrays, and the step."""
  with ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "data")) as mngr:
    step = checkpoints.best_step(mngr) if step is None else step
    state = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))["state"]
  return jax.tree.map(np.asarray, state["params"]), step


@pytest.fixture(scope="module")
def vivid_data_dir(tmp_path_factory):
  return tmp_path_factory.mktemp("vivid_data")


def _config(data_dir, init_from, **changes):
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.dataset.update(builder_config="vivid_tiny", data_dir=str(data_dir))
  config.update(init_from=str(init_from), num_train_steps=2, eval_every=1000, log_every=1, debug_nans=False)
  for field, value in changes.items():
    *parents, leaf = field.split(".")
    node = config
    for p in parents:
      node = node[p]
    node[leaf] = value
  return config


def _fine_tune(config, workdir):
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(evaluate_lib, "evaluate_split", _scored)
    return train.train_and_evaluate(config, str(workdir))


def _first_loss(workdir) -> float:
  history = [json.loads(line) for line in (workdir / "train_history.jsonl").read_text().splitlines()]
  assert history[0]["step"] == 1
  return history[0]["loss"]


def _loss(config, vocab: Vocabulary, params) -> float:
  """train.loss_fn of `params` on the first training batch of `config` with `vocab` (the run's own batch: the
  iterator is seeded)."""
  source = sources.train_source(config.dataset)
  batch = next(pipeline.train_iterator(config, source, vocab, sources.input_spec(config).key))
  batch = {k: batch[k] for k in ("image", "inputs", "targets")}
  model = models.build(config, len(vocab))
  loss, _ = jax.jit(lambda p, b: train.loss_fn(model, p, b, jax.random.key(0), 0.0, len(vocab)))(params, batch)
  return float(loss)


@pytest.fixture(scope="module")
def kept(shapes_debug_run, vivid_data_dir, tmp_path_factory):
  """(config, workdir): one step fine-tuned with vocab.extend=false (the pretrained vocabulary as it is)."""
  _, mle, _ = shapes_debug_run
  workdir = tmp_path_factory.mktemp("finetune") / "kept"
  config = _config(vivid_data_dir, mle, num_train_steps=1, **{"vocab.extend": False})
  _fine_tune(config, workdir)
  return config, workdir


@pytest.fixture(scope="module")
def extended(shapes_debug_run, vivid_data_dir, tmp_path_factory):
  """(config, workdir, log): two steps fine-tuned with the vocabulary extended and freeze=encoder; embedding rows in
  multiples of 8 (the pretrained 64 rows become 56: the table changes shape)."""
  _, mle, _ = shapes_debug_run
  workdir = tmp_path_factory.mktemp("finetune") / "extended"
  config = _config(vivid_data_dir, mle, freeze="encoder", **{"model.vocab_multiple": 8})
  handler, logger = _Lines(), logging.getLogger("absl")
  level = logger.level
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  try:
    _fine_tune(config, workdir)
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)
  return config, workdir, handler.lines


class _Lines(logging.Handler):
  def __init__(self):
    super().__init__(logging.INFO)
    self.lines: list[str] = []

  def emit(self, record):
    self.lines.append(record.getMessage())


def test_the_first_step_starts_from_the_pretrained_parameters(kept, shapes_debug_run):
  config, workdir = kept
  _, mle, _ = shapes_debug_run
  params, _ = _params(mle)
  want = _loss(config, Vocabulary.load(mle), params)
  assert _first_loss(workdir) == pytest.approx(want, rel=1e-5)


def test_init_step_starts_from_that_checkpoint(kept, shapes_debug_run):
  config, _ = kept
  _, mle, _ = shapes_debug_run
  config = config.copy_and_resolve_references()
  config.init_step = 27  # the best is 30
  words = len(Vocabulary.load(mle))
  setup = train.make_setup(config, words, sharding.make_mesh(config), sources.input_spec(config))
  got, step = finetune.start_params(setup, config, words, setup.init(jax.random.key(0)).params)
  assert step == 27
  want, best = _params(mle, 27)[0], _params(mle)
  assert best[1] == 30
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_array_equal(a, b)
  assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(best[0])))


def test_without_extend_the_vocabulary_is_the_pretrained_one(kept, shapes_debug_run):
  _, workdir = kept
  _, mle, _ = shapes_debug_run
  assert (workdir / "vocab.txt").read_bytes() == (mle / "vocab.txt").read_bytes()


def test_the_pretrained_words_keep_their_ids_and_new_words_are_appended(extended, shapes_debug_run):
  config, workdir, lines = extended
  _, mle, _ = shapes_debug_run
  old, new = Vocabulary.load(mle), Vocabulary.load(workdir)
  assert new.words[:len(old)] == old.words
  counts = collections.Counter(w for c in all_captions(sources.train_source(config.dataset)) for w in tokenize(c))
  want = sorted((w for w, n in counts.items() if n >= config.vocab.min_count and w not in old.words),
                key=lambda w: (-counts[w], w))
  assert want and list(new.words[len(old):]) == want
  assert sum(f"{len(want)} new words" in line for line in lines) == 1, lines


def test_new_words_start_at_the_mean_of_the_pretrained_rows(extended, shapes_debug_run):
  """The first step's loss is the pretrained model's with each new word's row the mean of the pretrained words'."""
  config, workdir, _ = extended
  _, mle, _ = shapes_debug_run
  old, new = Vocabulary.load(mle), Vocabulary.load(workdir)
  params, _ = _params(mle)
  table = params["embed"]["embedding"]
  mean = table[4:len(old)].mean(axis=0)
  rows = models.build(config, len(new)).config.vocab_size
  assert rows == 56 and table.shape[0] == 64
  grown = np.zeros((rows, table.shape[1]), table.dtype)
  grown[:len(old)] = table[:len(old)]
  grown[len(old):len(new)] = mean
  params["embed"]["embedding"] = grown
  assert _first_loss(workdir) == pytest.approx(_loss(config, new, params), rel=1e-5)


def test_freeze_encoder_leaves_the_image_side_bit_identical(extended, shapes_debug_run):
  _, workdir, _ = extended
  _, mle, _ = shapes_debug_run
  before, _ = _params(mle)
  after, _ = _params(workdir, 2)
  assert set(FROZEN) < set(after)
  for name in FROZEN:
    for a, b in zip(jax.tree.leaves(before[name]), jax.tree.leaves(after[name]), strict=True):
      np.testing.assert_array_equal(a, b)
  for name in ("decoder_0", "decoder_norm"):
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before[name]), jax.tree.leaves(after[name])))
  old = len(Vocabulary.load(mle))
  assert not np.array_equal(before["embed"]["embedding"][:old], after["embed"]["embedding"][:old])


def test_with_frozen_labels_the_image_side_of_both_models():
  for spec, frozen in (("configs/t2t.py:shapes,debug", set(FROZEN)),
                       ("configs/rnn.py:shapes,debug", {"encoder_cell", "image_encoder", "visual_proj"})):
    config = config_util.load(spec)
    model = models.build(config, 10)
    images, tokens = np.zeros((1, 64, 64, 3), np.uint8), np.zeros((1, 4), np.int32)
    names = set(jax.eval_shape(lambda m=model: m.init(jax.random.key(0), images, tokens))["params"])
    assert {n for n in names if finetune.FREEZE["encoder"](n)} == frozen
    assert {"embed"} <= names - frozen and any(n.startswith("decoder") for n in names - frozen)


def _run_main(*args) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "capjax.main", *args], cwd=REPO, env=main_env(), capture_output=True,
                        text=True, timeout=300)


@pytest.mark.parametrize("case", ["no-checkpoint", "another-shape"])
def test_a_bad_init_from_is_one_error_line_and_writes_nothing(case, shapes_debug_run, tmp_path):
  data_dir, mle, _ = shapes_debug_run
  init = tmp_path / "pretrained"
  init.mkdir()
  for name in ("config.json", "vocab.txt"):
    (init / name).write_bytes((mle / name).read_bytes())
  args = ["--config=configs/t2t.py:shapes,debug", "--config.dataset.builder_config=vivid_tiny",
          f"--config.dataset.data_dir={data_dir}", f"--config.init_from={init}", f"--workdir={tmp_path / 'w'}"]
  if case == "no-checkpoint":
    match = f"error: --config.init_from={init} has no checkpoint — train it first"
  else:
    (init / "checkpoints" / "30").mkdir(parents=True)
    args.append("--config.model.d_model=64")
    match = f"error: --config.init_from={init} holds a model of another architecture (model.d_model: 32 there, 64 here)"
  proc = _run_main(*args)
  assert proc.returncode == 2, proc.stderr[-2000:]
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and errors[0].startswith(match), proc.stderr[-2000:]
  assert not (tmp_path / "w").exists()


def test_every_config_has_the_fine_tuning_fields():
  for spec in ("configs/t2t.py", "configs/t2t.py:shapes", "configs/t2t.py:coco", "configs/rnn.py:shapes,debug",
               "configs/t2t.py:shapes,scst"):
    config = config_util.load(spec)
    assert (config.init_from, config.init_step, config.freeze, config.vocab.extend) == ("", -1, "", True)


def test_an_unknown_freeze_or_an_absent_init_step_is_refused(shapes_debug_run, tmp_path):
  _, mle, _ = shapes_debug_run
  with pytest.raises(ConfigError, match="--config.freeze=decoder is not a part to freeze"):
    finetune.check(_config(tmp_path, "", freeze="decoder"), str(tmp_path / "w"))
  with pytest.raises(ConfigError, match=r"--config.init_step=7: \S+ has checkpoints of steps 27, 30 — pick one"):
    finetune.check(_config(tmp_path, mle, init_step=7), str(tmp_path / "w"))
  with pytest.raises(ConfigError, match="is this run's own --workdir"):
    finetune.check(_config(tmp_path, mle), str(mle))
  finetune.check(_config(tmp_path, mle, init_step=27, **{"model.dropout_rate": 0.1}), str(tmp_path / "w"))


def test_a_resumed_fine_tune_needs_nothing_of_init_from(kept, tmp_path):
  config, workdir = kept
  config = config.copy_and_resolve_references()
  config.init_from = str(tmp_path / "gone")
  finetune.check(config, str(workdir))  # its own checkpoints: init_from is not read
  with pytest.raises(ConfigError, match="has no config.json"):
    finetune.check(config, str(tmp_path / "fresh"))
