"""What a run trains for, as the one seam of `capjax.train`'s loop: maximum likelihood here, SCST in `capjax.scst`.

The loop asks its objective once for each concern (the checks before any work, the vocabulary, the training split,
the initial state, the train step) instead of testing for a variant at each. The start from a trained workdir
(`init_from`: its vocabulary and best parameters) lives here once, for any objective that starts from one.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
from absl import logging

from capjax import checkpoints, finetune
from capjax.config_util import ConfigError
from capjax.data.vocab import VOCAB_FILENAME


class Objective:
  """The loop's questions, each answered for a run that starts from scratch; a subclass answers `train_step` and
  changes the others where its objective needs it. An objective with an `init_from` starts from that workdir's
  vocabulary and best parameters (`adopt_vocabulary`, `initial_state`) whatever it trains for."""

  name = "training"  # in the start's messages: "SCST from checkpoint 12 of WORKDIR"

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config

  @property
  def init_from(self) -> str:
    """The trained workdir this run starts from, or "" (random parameters, a vocabulary of its own)."""
    return ""

  def check(self, workdir: str) -> None:
    """A ConfigError before any work (the settings, the run it starts from); `freeze` by default."""
    del workdir
    finetune.check_freeze(self.config)

  def adopt_vocabulary(self, workdir: str, train_source) -> None:
    """init_from's vocabulary copied into the workdir (the ids its parameters were trained on), unless it is there;
    without init_from the loop builds one from the training captions (`train_source`'s)."""
    del train_source
    if self.init_from:
      adopt_vocabulary(self.init_from, workdir)

  def training_split(self, train_source):
    """The records the training batches are made of: the training split as it is by default."""
    return train_source

  def initial_state(self, setup) -> Any:
    """The train state a fresh run starts from on `setup`'s mesh (`capjax.train.Setup`): init_from's best parameters
    at step 0 with a fresh optimizer state, else `setup.init`'s random ones (a resumed run restores its own)."""
    if self.init_from:
      return best_state(setup, self.config, self.init_from, self.name)
    return setup.init(jax.random.key(self.config.seed))

  def train_step(self, setup, workdir: str, vocab, train_source, start: int):
    """`step(state, batch) -> (state, metrics)` on `setup`'s mesh, with `metrics["loss"]` (the loop logs the means of
    the metrics but `tokens`, and stops on a loss that is not finite); `start` is the token captions start from."""
    raise NotImplementedError


class MaximumLikelihood(Objective):
  """The paper's objective: the teacher-forced cross-entropy of the references (`capjax.train.loss_fn`), the step
  `capjax.train.make_setup` compiles. With `init_from` it fine-tunes (`capjax.finetune`): that workdir's model at
  step 0 with a fresh optimizer, its vocabulary kept and grown by the new captions' words."""

  name = "MLE"

  @property
  def init_from(self) -> str:
    return finetune.init_from(self.config)

  def check(self, workdir: str) -> None:
    finetune.check(self.config, workdir)

  def adopt_vocabulary(self, workdir: str, train_source) -> None:
    if self.init_from:
      finetune.adopt_vocabulary(self.config, workdir, train_source)

  def initial_state(self, setup) -> Any:
    if self.init_from:
      return finetune.start_state(setup, self.config, setup.model.config.num_words)
    return super().initial_state(setup)

  def train_step(self, setup, workdir: str, vocab, train_source, start: int):
    del workdir, vocab, train_source, start
    return setup.train_step


# ----------------------------------------------------------------------------------------------------------
# The start from a trained workdir (init_from)
# ----------------------------------------------------------------------------------------------------------
def adopt_vocabulary(init_from: str, workdir: str) -> None:
  """Copies init_from's vocabulary into `workdir` (the first process, atomically), unless the workdir has one."""
  target = os.path.join(workdir, VOCAB_FILENAME)
  if jax.process_index() == 0 and not os.path.isfile(target):
    shutil.copyfile(os.path.join(init_from, VOCAB_FILENAME), target + ".tmp")
    os.replace(target + ".tmp", target)


def best_state(setup, config: ml_collections.ConfigDict, init_from: str, name: str) -> Any:
  """init_from's best checkpoint (by validation CIDEr-D) on `setup`'s mesh, at step 0 with a fresh optimizer state:
  the start of a run of objective `name` from it. A ConfigError when it has none, or one of another model."""
  mngr = checkpoints.checkpoint_manager(init_from, config)
  try:
    step = checkpoints.best_step(mngr)
    if step is None:
      raise ConfigError(f"--config.init_from={init_from} has no checkpoint — train it first")
    try:
      state = checkpoints.restore_state(mngr, step, setup)
    except Exception as error:  # noqa: BLE001 (orbax, tensorstore and json each raise their own)
      raise ConfigError(f"checkpoint {step} of --config.init_from={init_from} does not fit this model or "
                        f"optimizer ({checkpoints.why(error)}) — start {name} with the config of that run") from None
  finally:
    checkpoints.close_manager(mngr)
  logging.info("%s from checkpoint %d of %s", name, step, init_from)
  fresh = jax.jit(lambda st: st.replace(step=jnp.zeros((), jnp.int32), opt_state=setup.tx.init(st.params)),
                  out_shardings=setup.state_shardings)
  return fresh(state)
