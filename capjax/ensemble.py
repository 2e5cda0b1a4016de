"""Test-time ensembles (`--ensemble` of `--mode=eval` and `--mode=caption`): the step function that runs several
captioners side by side and gives greedy and beam search (`capjax.decode`) their mixture's log-probabilities, and
the check that the models share one vocabulary.

The mixture is the log of the mean of the models' probabilities, log((1/M) sum_m p_m(w | prefix)), not the mean of
their log-probabilities: it is a distribution (beam scores stay the log-probabilities of a sequence model, the
ensemble's, and the length penalty means what it means for one model), and a word one model finds likely is not
vetoed by another that finds it unlikely, as the product of experts that a mean of log-probabilities is would do.
ImageCaptioning.pytorch's AttEnsemble averages probabilities too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import flax
import jax
import jax.numpy as jnp

from capjax import decode as decode_lib
from capjax.config_util import ConfigError
from capjax.data.vocab import Vocabulary


@flax.struct.dataclass
class Members:
  """The parameters of an ensemble's models, one tree per model (each of the same model: one config), in order."""

  params: tuple[Any, ...]


def mixture(members: Sequence[decode_lib.StepFunctions]) -> decode_lib.StepFunctions:
  """The step functions of the models `members` run together: the state is a tuple of theirs, and each step gives
  log((1/M) sum_m softmax(logits_m)) in float32 (`log_probs`: beam search takes them as they are). One member gives
  its own log-softmax, to the bit (logsumexp over one value is that value)."""
  def init(inputs):
    return tuple(m.init(inputs) for m in members)

  def step(state, token, i):
    outs = [m.step(s, token, i) for m, s in zip(members, state)]
    logp = jnp.stack([jax.nn.log_softmax(logits.astype(jnp.float32)) for logits, _ in outs])
    mean = jax.nn.logsumexp(logp, axis=0) - jnp.log(jnp.float32(len(members)))
    return mean, tuple(s for _, s in outs)

  return decode_lib.StepFunctions(init, step, log_probs=True)


def step_functions(model, params: Any) -> decode_lib.StepFunctions:
  """`model`'s cached step functions with `params`: one model's, or the mixture of `Members`' models."""
  if isinstance(params, Members):
    return mixture([decode_lib.cached_step(model, p) for p in params.params])
  return decode_lib.cached_step(model, params)


def vocabulary_difference(first: Vocabulary, other: Vocabulary) -> str | None:
  """None when the two vocabularies are the same word list, else what differs first (their sizes, or the first id
  that holds another word): an ensemble averages distributions over ids, which must mean the same words."""
  for i, (a, b) in enumerate(zip(first.words, other.words)):
    if a != b:
      return f"id {i} is {a!r} there and {b!r} here"
  if len(first) != len(other):
    return f"{len(first)} words there and {len(other)} here"
  return None


def check_members(workdir: str, others: Sequence[str]) -> None:
  """ConfigError when `others` (`--ensemble`) names `workdir` or one of its workdirs twice, whatever the spelling
  (`a/`, `./a`, a symlink to it: their resolved paths are compared): the mixture would average that model as two,
  weighting it double, and call the result an ensemble of more models than it holds."""
  seen = {os.path.realpath(workdir): f"--workdir={workdir}"}
  for other in others:
    path = os.path.realpath(other)
    if path in seen:
      raise ConfigError(f"--ensemble's {other} is the same workdir as {seen[path]} — name each workdir once: drop it "
                        "from --ensemble (the mixture would count its model twice)")
    seen[path] = f"--ensemble's {other}"
