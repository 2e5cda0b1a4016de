"""The training loop: state initialised on the mesh, the jitted train step, periodic evaluation, checkpoints.

Read top to bottom: mesh, input, model and optimizer, sharded init, checkpoint restore, train loop, final eval.
What the run trains for is its objective (`capjax.objective`: maximum likelihood, or `capjax.scst`'s SCST), picked
once from the config and asked once for each concern: checks, vocabulary, training split, initial state, train step.
A SIGTERM or SIGINT during the loop stops it after a step with a checkpoint: the current step in one process, the
step all processes agree on in several (`capjax.preemption.AgreedStop`: JAX's preemption sync point).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import logging
from clu import metric_writers, periodic_actions

from capjax import checkpoints, config_util, ensemble, finetune, gradients, models, optimizer, preemption, run_log
from capjax import sharding
from capjax import decode as decode_lib
from capjax import ema as ema_lib
from capjax import evaluate as evaluate_lib
from capjax import objective as objective_lib
from capjax import scst as scst_lib
from capjax import workdir as workdir_lib
from capjax.config_util import ConfigError
from capjax.data import pipeline, sources
from capjax.data.vocab import Vocabulary, build_vocabulary
from capjax.tokens import BOS_ID, FACTUAL, PAD_ID, style_tag


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: Any
  opt_state: Any


# ----------------------------------------------------------------------------------------------------------
# Model state on the mesh
# ----------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Setup:
  """Everything a run needs besides data: model, optimizer, mesh, shardings and compiled functions."""

  config: ml_collections.ConfigDict
  model: nn.Module
  tx: optax.GradientTransformation
  mesh: jax.sharding.Mesh
  state_shardings: Any
  init: Any
  train_step: Any
  decode: Any
  inputs: sources.InputSpec
  rules: sharding.Rules


def dummy_inputs(inputs: sources.InputSpec, max_caption_tokens: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
  """Blank images (or features) and token ids of the shapes the model is built for."""
  return inputs.zeros(batch), np.zeros((batch, max_caption_tokens + 1), np.int32)


def loss_fn(model: nn.Module, params: Any, batch: dict[str, jax.Array], rng: jax.Array,
            label_smoothing: float, num_words: int) -> tuple[jax.Array, jax.Array]:
  """Mean token cross-entropy over non-PAD targets, and the number of those tokens.

  Label smoothing spreads its mass over the `num_words` real words only: the embedding's padding rows have
  masked logits, and any target mass on them would add ~1e9 to the loss.
  """
  logits = model.apply({"params": params}, batch["image"], batch["inputs"], train=True, rngs={"dropout": rng})
  targets = jax.nn.one_hot(batch["targets"], logits.shape[-1])
  if label_smoothing:
    uniform = (jnp.arange(logits.shape[-1]) < num_words) / num_words
    targets = targets * (1.0 - label_smoothing) + label_smoothing * uniform
  loss = optax.softmax_cross_entropy(logits, targets)
  mask = (batch["targets"] != PAD_ID).astype(jnp.float32)
  tokens = mask.sum()
  return (loss * mask).sum() / jnp.maximum(tokens, 1.0), tokens


def decode_tokens(model: nn.Module, decode_config: ml_collections.ConfigDict, max_len: int, params: Any,
                  images: jax.Array, start: int = BOS_ID) -> jax.Array:
  """Caption token ids (B, max_len) by greedy or beam search (`config.decode`), from the token `start`, with one
  model's `params` or the mixture of `capjax.ensemble.Members`."""
  fns = ensemble.step_functions(model, params)
  if decode_config.method == "greedy":
    return decode_lib.greedy_search(fns, images, max_len, start)
  if decode_config.method == "beam":
    return decode_lib.beam_search(fns, images, max_len, decode_config.beam_size, decode_config.alpha, start)[0]
  raise ValueError(f"decode.method={decode_config.method!r}: use 'greedy' or 'beam'")


def state_init_fn(config: ml_collections.ConfigDict, vocab_size: int, inputs: sources.InputSpec):
  """(model, optimizer, init_fn): `init_fn(rng)` makes the TrainState with its leaves boxed in their logical axis
  names (`nn.Partitioned`); the optimizer state's leaves carry their parameter's names (optax maps over params)."""
  model = models.build(config, vocab_size)
  tx = finetune.with_frozen(optimizer.make_optimizer(config), config)  # `freeze`'s parameters get no update
  images, tokens = dummy_inputs(inputs, config.max_caption_tokens, 1)

  def init_fn(rng):
    params = model.init(rng, images, tokens, train=False)["params"]
    state = TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))
    return ema_lib.with_average(state, config)  # an EmaTrainState with optimizer.ema_decay > 0

  return model, tx, init_fn


def make_setup(config: ml_collections.ConfigDict, vocab_size: int, mesh: jax.sharding.Mesh,
               inputs: sources.InputSpec | None = None, start: int = BOS_ID) -> Setup:
  """The model, optimizer and compiled functions; `inputs` (default: resolved from `config`) fixes what it reads,
  and `start` is the token decoding starts from (`decode_start`).

  The state is stored as `config.mesh.rules` places its logical axes, and every compiled function traces its model
  inside those rules (`sharding.axis_rules`), so the models' activation constraints apply.
  """
  inputs = inputs or sources.input_spec(config)
  rules = sharding.rules_of(config)
  model, tx, init_fn = state_init_fn(config, vocab_size, inputs)
  abstract = jax.eval_shape(init_fn, jax.random.key(0))
  state_shardings = sharding.logical_to_shardings(mesh, abstract, rules)

  def init(rng):
    with sharding.axis_rules(mesh, rules):
      return nn.unbox(init_fn(rng))

  init = jax.jit(init, out_shardings=state_shardings)
  data_sharding = sharding.batch_sharding(mesh)
  base_rng = jax.random.key(config.seed)

  accumulate = config.optimizer.get("accumulate_steps", 1)

  def train_step(state: TrainState, batch: dict[str, jax.Array]) -> tuple[TrainState, dict[str, jax.Array]]:
    rng = jax.random.fold_in(base_rng, state.step)
    with sharding.axis_rules(mesh, rules):
      if accumulate > 1:
        (loss, tokens), grads = gradients.accumulated(
            lambda p, b, r: loss_fn(model, p, b, r, config.label_smoothing, vocab_size), state.params, batch, rng,
            accumulate)
      else:
        grad_fn = jax.value_and_grad(
            lambda p: loss_fn(model, p, batch, rng, config.label_smoothing, vocab_size), has_aux=True)
        (loss, tokens), grads = grad_fn(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "tokens": tokens, "grad_norm": optax.tree.norm(grads)}
    return ema_lib.advance(state, params, opt_state, config), metrics  # the step, and the EMA with one

  def decode(params: Any, images: jax.Array) -> jax.Array:
    with sharding.axis_rules(mesh, rules):
      return decode_tokens(model, config.decode, config.max_caption_tokens + 1, params, images, start)

  decode = jax.jit(decode, in_shardings=(state_shardings.params, data_sharding), out_shardings=data_sharding)
  train_step = jax.jit(train_step, in_shardings=(state_shardings, data_sharding),
                       out_shardings=(state_shardings, sharding.replicated(mesh)), donate_argnums=0)
  return Setup(config, model, tx, mesh, state_shardings, init, train_step, decode, inputs, rules)


# ----------------------------------------------------------------------------------------------------------
# Vocabulary
# ----------------------------------------------------------------------------------------------------------
def start_tokens(config: ml_collections.ConfigDict) -> tuple[str, ...]:
  """The style tags a style-conditioned captioner (`dataset.factual_split` set) starts its captions with: its
  style's and the factual one; none otherwise (captions start with BOS)."""
  if not config.dataset.get("factual_split"):
    return ()
  return (style_tag(config.dataset.style), style_tag(FACTUAL))


def decode_start(config: ml_collections.ConfigDict, vocab: Vocabulary) -> int:
  """The token captions are decoded from: the style's tag in a style-conditioned captioner, else BOS."""
  tags = start_tokens(config)
  if not tags:
    return BOS_ID
  try:
    return vocab.id_of(tags[0])
  except KeyError:
    raise ConfigError(f"the vocabulary has no {tags[0]} (it was built for a captioner without "
                      "dataset.factual_split) — train in a fresh workdir") from None


def load_or_build_vocab(config: ml_collections.ConfigDict, workdir: str, train_source) -> Vocabulary:
  """The vocabulary saved in the workdir, so evaluation and resumed runs reuse exactly the same ids."""
  path = os.path.join(workdir, "vocab.txt")
  damaged = None
  if os.path.exists(path):
    try:
      return Vocabulary.load(workdir)
    except ValueError as error:  # emptied or cut short: built again, the same words from the same captions
      damaged = error
  vocab = build_vocabulary(pipeline.split_captions(train_source), config.vocab.min_count, start_tokens(config))
  if jax.process_index() == 0:
    if damaged:
      os.replace(path, path + ".damaged")
      logging.warning("%s; built it again from the training captions (the damaged file is %s.damaged)", damaged,
                      path)
    vocab.save(workdir)
  logging.info("Vocabulary: %d words (min count %d), saved to %s", len(vocab), config.vocab.min_count, path)
  return vocab


# ----------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------
PROGRESS_EVERY_S = 60.0  # at least one progress line a minute between log steps


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Trains (resuming from the latest checkpoint), then evaluates the best checkpoint on the test split.

  Returns {"metrics": test metrics, "outputs": {kind: path}}. A SIGTERM or SIGINT during training instead saves
  the current step and returns {"metrics": {}, "outputs": {}, "interrupted_at": step}: the same command resumes.
  """
  config_util.validate(config, jax.process_count())  # impossible values (batch 0, NaN, a caption too long) fail first
  objective = objective_for(config)
  objective.check(workdir)  # its settings and the run it starts from (init_from)
  inputs = sources.input_spec(config)  # pixels or pre-extracted features: a mismatched config fails before any work
  # The stylized metrics' classifier and LM, built once: a wrong path fails before any work, and the final
  # evaluation judges with them.
  judges = evaluate_lib.StyleJudges(config) if config.dataset.get("style") else None
  # Writable, and no other process writing it; the checkpoint manager and the metric writer are closed however
  # the run ends (a file left open would keep a full disk busy).
  with workdir_lib.claim(workdir, "a training"), contextlib.ExitStack() as closing:
    return _train_and_evaluate(config, workdir, objective, inputs, closing, judges)


def objective_for(config: ml_collections.ConfigDict) -> objective_lib.Objective:
  """What the run trains for: SCST with the scst variant, else maximum likelihood (the paper's)."""
  return scst_lib.Scst(config) if scst_lib.enabled(config) else objective_lib.MaximumLikelihood(config)


def _train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, objective: objective_lib.Objective,
                        inputs: sources.InputSpec, closing: contextlib.ExitStack,
                        judges: evaluate_lib.StyleJudges | None) -> dict[str, Any]:
  workdir_lib.prepare(workdir, config, write=jax.process_index() == 0)  # no other config's run
  if config.debug_nans:
    jax.config.update("jax_debug_nans", True)

  # --- Set up Mesh ---
  mesh = sharding.make_mesh(config)
  logging.info("Mesh %s over %d devices (%s), rules %s", dict(mesh.shape), mesh.size, jax.devices()[0].platform,
               sharding.rules_name(config.mesh))
  shards = sharding.batch_shards(mesh)
  for name, size in (("batch_size", config.batch_size), ("eval.batch_size", config.eval.batch_size)):
    if size % shards:
      raise ConfigError(f"{name}={size} is not divisible by the mesh's data x fsdp axes ({shards}) — "
                       f"set --config.{name} to a multiple of it, or --config.mesh.data to a divisor")

  mngr = checkpoints.checkpoint_manager(workdir, config)
  closing.callback(checkpoints.close_manager, mngr)

  # --- Input Pipeline ---
  train_source = sources.train_source(config.dataset)  # with an augmented dataset when one is named
  # Every split opened before the vocabulary is written: a bad one (an empty slice) fails now, not after training.
  val_source = sources.data_source(config.dataset, config.dataset.eval_split)
  test_source = sources.data_source(config.dataset, config.dataset.test_split)
  objective.adopt_vocabulary(workdir, train_source)  # init_from's, the ids its parameters were trained on
  vocab = load_or_build_vocab(config, workdir, train_source)
  train_iter = pipeline.train_iterator(config, objective.training_split(train_source), vocab, inputs.key)

  # --- Create Model & Optimizer, Shard & Transfer ---
  start = decode_start(config, vocab)
  setup = make_setup(config, len(vocab), mesh, inputs, start)
  train_step = objective.train_step(setup, workdir, vocab, train_source, start)
  writer = metric_writers.create_default_writer(workdir, just_logging=jax.process_index() > 0)
  closing.callback(writer.close)

  # --- Load Checkpoint: the newest that restores, its step registered at once with JAX's preemption sync point
  # (AgreedStop: a notice before that is lost) ---
  state, latest = checkpoints.restore_latest_intact(mngr, setup, train_iter, workdir)
  stop = preemption.AgreedStop(latest or 0)
  if latest is not None:
    logging.info("Resumed from step %d", latest)
  else:
    state = objective.initial_state(setup)  # init_from's best parameters, else random ones
    param_count = sum(x.size for x in jax.tree.leaves(state.params))
    logging.info("Initialised %s with %s parameters", config.model.name, f"{param_count:,}")
    writer.write_hparams({k: str(v) for k, v in config.to_dict().items()})

  # --- Train Loop ---
  step = int(state.step)
  total = config.num_train_steps
  log = run_log.RunLog(workdir, step, total, config.batch_size, writer)
  interrupted = False
  interval: list[dict[str, jax.Array]] = []  # the metrics of the steps since the last log step
  need = checkpoints.checkpoint_bytes(state)
  first_step = step
  # clu's hooks: a progress line (rate, share done, ETA; steps/s and uptime to TensorBoard) at least every
  # PROGRESS_EVERY_S, since log steps are 100 apart in the paper's configs (minutes on a CPU), and with
  # --config.profile_steps=N a profile of N steps into the workdir. The history keeps log steps only.
  report_progress = periodic_actions.ReportProgress(num_train_steps=total, writer=writer, every_secs=PROGRESS_EVERY_S)
  hooks = [report_progress]
  if config.get("profile_steps", 0) and jax.process_index() == 0:
    hooks.append(periodic_actions.Profile(logdir=workdir, num_profile_steps=config.profile_steps,
                                          profile_duration_ms=None, first_profile=first_step + 10, every_secs=3600.0))
  if step < total:
    logging.info("compiling the train step (the first step waits for it; a run of this config in this workdir "
                 "before loads it from the compilation cache)")
  with stop, checkpoints.disk_full_is_one_error(workdir, lambda: need, mngr):
    while step < total:
      batch = sharding.host_to_global(next(train_iter), mesh)
      state, metrics = train_step(state, batch)
      step += 1
      interval.append(metrics)
      # JAX dispatches asynchronously: unchecked, the loop queues step after step ahead of the device, and a stop
      # (SIGTERM, with 30 s of grace on a preempted TPU) must wait for the whole queue before the checkpoint can be
      # written. Waiting for step N - max_steps_ahead's loss keeps the queue short while the host still reads the
      # next batch during the current step (as big_vision's and MaxText's loops do); a log step waits for all.
      if len(interval) > config.max_steps_ahead:
        interval[-1 - config.max_steps_ahead]["loss"].block_until_ready()
      log_step = step % config.log_every == 0 or step == total
      if log_step:
        log.log_step(step, interval)  # a DivergedError at a loss that is not finite
        interval = []
      elif step == first_step + 1:
        log.compiled(step, interval[-1])  # the rates logged next leave the compilation out
      for hook in hooks:
        hook(step)
      scores = None
      if step % config.eval_every == 0 or step == total:
        with report_progress.timed("eval", wait_jax_async_dispatch=False):
          result = evaluate_lib.evaluate_split(setup, ema_lib.eval_params(state, config), val_source, vocab,
                                               config, num_examples=config.eval.num_examples)
        writer.write_scalars(step, {f"val/{k}": v for k, v in result.metrics.items()})
        logging.info("step %d validation: %s", step, run_log.format_metrics(result.metrics))
        scores = {checkpoints.BEST_METRIC: float(result.metrics[checkpoints.BEST_METRIC])}
      # Checked after the validation: a signal during it waits for its end, so the checkpoint has its score and
      # the resumed run keeps and picks checkpoints as an uninterrupted one would.
      interrupted = stop.after(step, log_step)
      if scores is not None or interrupted or step % config.checkpoint_every == 0:
        run_log.interval_means(interval, step)  # a diverged state is never saved
        if jax.process_count() == 1:  # processes of a job could disagree on it: there, ENOSPC itself stops them
          mngr.wait_until_finished()  # as `save` does first: the space the previous save takes is then known
          need = checkpoints.ensure_space(workdir, need, checkpoints.committed_step(workdir))
        mngr.save(step, args=checkpoints.save_args(state, train_iter), metrics=scores or {})
      if interrupted:
        break
    # Inside the handlers: a second signal while the last checkpoint is written ends the process at once.
    mngr.wait_until_finished()
    writer.flush()
  # A signal while the last step's checkpoint was written skips the final evaluation too (one process: several
  # must all take the same path, and only the loop's checks are agreed).
  interrupted = interrupted or (stop.requested and jax.process_count() == 1)
  if interrupted:
    logging.warning("Stopped by %s at step %d: checkpoint saved; rerun the same command to resume",
                    stop.name, step)
    return {"metrics": {}, "outputs": {}, "interrupted_at": step}

  # --- Final evaluation of the best checkpoint ---
  best = checkpoints.best_step(mngr)
  if best is not None and best != step:
    state = checkpoints.restore_state(mngr, best, setup)
  logging.info("Evaluating checkpoint of step %s on %s with its %s", best if best is not None else step,
               config.dataset.test_split, ema_lib.describe(state, config))
  result = evaluate_lib.evaluate_split(setup, ema_lib.eval_params(state, config), test_source, vocab, config,
                                       judges=judges)
  final_step = best if best is not None else step
  outputs = evaluate_lib.write_outputs(result, workdir, config.dataset.test_split, step=final_step,
                                       config=config, history_path=log.path)
  evaluate_lib.report(result, config.dataset.test_split, final_step, config)
  return {"metrics": result.metrics, "outputs": outputs}

