"""Parameter EMA (`optimizer.ema_decay`): the exponential moving average of a run's parameters that the train step
keeps beside them (in the train state, sharded, checkpointed and resumed as they are), and which parameters
evaluation decodes with (`eval.use_ema`).

The average is debiased as Adam's moments and `optax.ema(debias=True)` are: after step t it is
sum_i decay^(t-i) params_i / sum_i decay^(t-i) over steps 1..t, so that it never leans on the initialisation (a
plain EMA started at the initial parameters weighs them decay^t: 0.999^1000 = 37% after 1000 steps). It is kept
debiased, one `optax.incremental_update` a step with the step size (1 - decay) / (1 - decay^t), so that evaluation
reads it as it is.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import ml_collections
import optax


@flax.struct.dataclass
class EmaTrainState:
  """`capjax.train.TrainState` (step, params, opt_state) with the average: the train state of a run with
  `optimizer.ema_decay` > 0. A run without keeps TrainState, whose checkpoints are those of runs from before EMA."""

  step: jax.Array
  params: Any
  opt_state: Any
  ema_params: Any  # the debiased average of `params`, with their shapes, dtypes and shardings


def with_average(state: Any, config: ml_collections.ConfigDict) -> Any:
  """`state` (a new run's TrainState) with an average when `config` asks for one (an EmaTrainState): the initial
  parameters, which the first step replaces whole."""
  if not decay_of(config):
    return state
  return EmaTrainState(state.step, state.params, state.opt_state, jax.tree.map(jnp.copy, state.params))


def advance(state: Any, params: Any, opt_state: Any, config: ml_collections.ConfigDict) -> Any:
  """The train state after one step: its count, the new parameters and optimizer state, and the average updated
  where the state keeps one."""
  state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
  if isinstance(state, EmaTrainState):
    state = state.replace(ema_params=update(state.ema_params, params, decay_of(config), state.step))
  return state


def decay_of(config: ml_collections.ConfigDict) -> float:
  """`optimizer.ema_decay` (0, the default and the value of configs from before it existed: no EMA)."""
  return float(config.optimizer.get("ema_decay", 0.0))


def update(ema_params: Any, params: Any, decay: float, step: jax.Array) -> Any:
  """The debiased average after step `step` (1 for the first update), from the one after step - 1 and the
  parameters `params` of step `step`. At step 1 it is `params` itself, whatever `ema_params` was."""
  t = step.astype(jnp.float32)
  step_size = (1.0 - decay) / (1.0 - jnp.float32(decay) ** t)
  return optax.incremental_update(params, ema_params, step_size)


def eval_params(state: Any, config: ml_collections.ConfigDict) -> Any:
  """The parameters a validation, a test evaluation or `--mode=eval/caption` decodes with: the average where the
  run keeps one and `eval.use_ema` (default True) asks for it, else the trained parameters."""
  ema_params = getattr(state, "ema_params", None)
  if ema_params is not None and config.eval.get("use_ema", True):
    return ema_params
  return state.params


def describe(state: Any, config: ml_collections.ConfigDict) -> str:
  """'EMA parameters' or 'parameters': which ones `eval_params` gives, for log lines."""
  return "EMA parameters" if eval_params(state, config) is not state.params else "parameters"
