"""The training loop: state initialised on the mesh, the jitted train step, periodic evaluation, checkpoints.

Read top to bottom: mesh, input, model and optimizer, sharded init, checkpoint restore, train loop, final eval.
A SIGTERM or SIGINT during the loop stops it after a step with a checkpoint: the current step in one process, the
step all processes agree on in several (`capjax.preemption.AgreedStop`: JAX's preemption sync point).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import logging as pylogging
import math
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import flax
import flax.linen as nn
import grain
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp
from absl import logging
from clu import metric_writers

from capjax import cli, config_util
from capjax import decode as decode_lib
from capjax import distributed
from capjax import evaluate as evaluate_lib
from capjax import models
from capjax import preemption
from capjax import sharding
from capjax import workdir as workdir_lib
from capjax.config_util import ConfigError
from capjax.data import pipeline, sources
from capjax.data.vocab import Vocabulary, build_vocabulary
from capjax.tokens import BOS_ID, FACTUAL, PAD_ID, style_tag

BEST_METRIC = "cider_d"


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: Any
  opt_state: Any


# ----------------------------------------------------------------------------------------------------------
# Optimizer
# ----------------------------------------------------------------------------------------------------------
def learning_rate_schedule(config: ml_collections.ConfigDict) -> optax.Schedule:
  o = config.optimizer
  if o.schedule == "constant":
    decay = optax.constant_schedule(o.learning_rate)
  elif o.schedule == "cosine":
    decay = optax.cosine_decay_schedule(o.learning_rate, max(config.num_train_steps - o.warmup_steps, 1))
  else:
    raise ValueError(f"optimizer.schedule={o.schedule!r}: use 'constant' or 'cosine'")
  if o.warmup_steps <= 0:
    return decay
  warmup = optax.linear_schedule(0.0, o.learning_rate, o.warmup_steps)
  return optax.join_schedules([warmup, decay], [o.warmup_steps])


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """Adagrad as in the paper (TF's initial accumulator 0.1; optax puts eps=1e-7 inside the square root, where
  next to an accumulator >= 0.1 it changes updates by < 1e-6 relative), or Adam for the demo."""
  o = config.optimizer
  lr = learning_rate_schedule(config)
  if o.name == "adagrad":
    opt = optax.adagrad(lr, initial_accumulator_value=o.initial_accumulator_value, eps=o.eps)
  elif o.name == "adam":
    opt = optax.adam(lr, b1=o.b1, b2=o.b2, eps=o.eps)
  else:
    raise ValueError(f"optimizer.name={o.name!r}: use 'adagrad' or 'adam'")
  if o.grad_clip_norm:
    opt = optax.chain(optax.clip_by_global_norm(o.grad_clip_norm), opt)
  return opt


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
  """Caption token ids (B, max_len) by greedy or beam search (`config.decode`), from the token `start`."""
  fns = decode_lib.cached_step(model, params)
  if decode_config.method == "greedy":
    return decode_lib.greedy_search(fns, images, max_len, start)
  if decode_config.method == "beam":
    return decode_lib.beam_search(fns, images, max_len, decode_config.beam_size, decode_config.alpha, start)[0]
  raise ValueError(f"decode.method={decode_config.method!r}: use 'greedy' or 'beam'")


def state_init_fn(config: ml_collections.ConfigDict, vocab_size: int, inputs: sources.InputSpec):
  """(model, optimizer, init_fn): `init_fn(rng)` makes the TrainState with its leaves boxed in their logical axis
  names (`nn.Partitioned`); the optimizer state's leaves carry their parameter's names (optax maps over params)."""
  model = models.build(config, vocab_size)
  tx = make_optimizer(config)
  images, tokens = dummy_inputs(inputs, config.max_caption_tokens, 1)

  def init_fn(rng):
    params = model.init(rng, images, tokens, train=False)["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

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

  def train_step(state: TrainState, batch: dict[str, jax.Array]) -> tuple[TrainState, dict[str, jax.Array]]:
    rng = jax.random.fold_in(base_rng, state.step)
    grad_fn = jax.value_and_grad(
        lambda p: loss_fn(model, p, batch, rng, config.label_smoothing, vocab_size), has_aux=True)
    with sharding.axis_rules(mesh, rules):
      (loss, tokens), grads = grad_fn(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "tokens": tokens, "grad_norm": optax.tree.norm(grads)}
    return TrainState(state.step + 1, params, opt_state), metrics

  def decode(params: Any, images: jax.Array) -> jax.Array:
    with sharding.axis_rules(mesh, rules):
      return decode_tokens(model, config.decode, config.max_caption_tokens + 1, params, images, start)

  decode = jax.jit(decode, in_shardings=(state_shardings.params, data_sharding), out_shardings=data_sharding)
  train_step = jax.jit(train_step, in_shardings=(state_shardings, data_sharding),
                       out_shardings=(state_shardings, sharding.replicated(mesh)), donate_argnums=0)
  return Setup(config, model, tx, mesh, state_shardings, init, train_step, decode, inputs, rules)


def abstract_state(setup: Setup) -> Any:
  """Shapes, dtypes and shardings of the train state, for restoring a checkpoint straight onto the mesh."""
  shapes = jax.eval_shape(setup.init, jax.random.key(0))
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                      shapes, setup.state_shardings)


# ----------------------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------------------
def checkpoint_manager(workdir: str, config: ml_collections.ConfigDict) -> ocp.CheckpointManager:
  """Keeps the latest `keep_checkpoints` and the best by validation CIDEr-D (never deletes the newest).

  `best_fn` makes orbax write each save's metrics beside it (without it, a preservation policy alone keeps them in
  memory only: `metrics(step)` reads None, and after a restart the best is forgotten and deleted). Saves without a
  validation pass empty metrics (orbax warns at each save without any), which rank below every score. A save cut
  short by a kill leaves its `*.orbax-checkpoint-tmp*` folder, which orbax removes here (`cleanup_tmp_directories`).
  """
  def score(metrics: dict[str, float]) -> float:
    return metrics.get(BEST_METRIC, -math.inf)

  policy = ocp.checkpoint_managers.AnyPreservationPolicy([
      ocp.checkpoint_managers.LatestN(n=config.keep_checkpoints),
      ocp.checkpoint_managers.BestN(get_metric_fn=score, n=1, keep_checkpoints_without_metrics=False),
  ])
  options = ocp.CheckpointManagerOptions(
      preservation_policy=policy, best_fn=score, best_mode="max",
      enable_async_checkpointing=config.async_checkpointing, cleanup_tmp_directories=True)
  return ocp.CheckpointManager(os.path.join(os.path.abspath(workdir), "checkpoints"), options=options,
                               item_names=("state", "data"))


def best_step(mngr: ocp.CheckpointManager) -> int | None:
  """The kept step with the highest validation CIDEr-D (the latest if none was evaluated)."""
  scored = [(m[BEST_METRIC], step) for step in mngr.all_steps() if (m := mngr.metrics(step)) and BEST_METRIC in m]
  return max(scored)[1] if scored else mngr.latest_step()


def restore_state(mngr: ocp.CheckpointManager, step: int, setup: Setup,
                  data_iter: grain.DatasetIterator | None = None) -> TrainState:
  args = {"state": ocp.args.StandardRestore(abstract_state(setup))}
  if data_iter is not None:
    args["data"] = grain.checkpoint.CheckpointRestore(data_iter)
  return mngr.restore(step, args=ocp.args.Composite(**args))["state"]


DAMAGED_DIRNAME = "checkpoints.damaged"  # beside checkpoints/: where checkpoints that cannot be restored are moved


def why(error: BaseException) -> str:
  """An exception as one short line (orbax and tensorstore nest long messages)."""
  text = " ".join(f"{type(error).__name__}: {error}".split())
  return text if len(text) <= 300 else text[:297] + "..."


def set_aside(workdir: str, step: int) -> str:
  """Moves checkpoint `step` to `checkpoints.damaged/` (never deletes it: the user may inspect or mend it)."""
  source = os.path.join(os.path.abspath(workdir), "checkpoints", str(step))
  target = os.path.join(os.path.abspath(workdir), DAMAGED_DIRNAME, str(step))
  os.makedirs(os.path.dirname(target), exist_ok=True)
  suffix = 1
  while os.path.exists(target):  # a step set aside before, in another attempt
    suffix += 1
    target = os.path.join(os.path.abspath(workdir), DAMAGED_DIRNAME, f"{step}.{suffix}")
  os.rename(source, target)
  return target


def restore_latest_intact(mngr: ocp.CheckpointManager, setup: Setup, data_iter: grain.DatasetIterator,
                          workdir: str) -> tuple[TrainState | None, int | None]:
  """(state, step) of the newest checkpoint that restores, with the data iterator at that step; (None, None) in a
  workdir without checkpoints.

  A checkpoint that does not restore (array data cut short, a garbled manifest or iterator state, arrays of other
  shapes) is reported in one line; when an older one restores, the newer damaged ones are moved to
  `checkpoints.damaged/` and the run resumes from it. Nothing is moved when none restores (then the fault may be
  this run's, not the files'): a ConfigError lists each checkpoint's reason.
  """
  failures: list[tuple[int, str]] = []
  for step in sorted(mngr.all_steps(), reverse=True):
    try:
      state = restore_state(mngr, step, setup, data_iter)
    except Exception as error:  # noqa: BLE001 (orbax, tensorstore, grain and json each raise their own)
      failures.append((step, why(error)))
      logging.warning("checkpoint %d in %s cannot be restored: %s", step, workdir, failures[-1][1])
      continue
    if failures:
      if jax.process_index() == 0:
        for damaged, _ in failures:
          logging.warning("checkpoint %d set aside as %s", damaged, set_aside(workdir, damaged))
      distributed.sync("checkpoints_set_aside")
      mngr.reload()
    return state, step
  if failures:
    reasons = "; ".join(f"step {step}: {reason}" for step, reason in failures)
    raise ConfigError(f"no checkpoint in {os.path.join(workdir, 'checkpoints')} can be restored ({reasons}) — if "
                      "the config changed the model, resume with the run's own (config.json); otherwise move "
                      "checkpoints/ aside to start over")
  return None, None


# ----------------------------------------------------------------------------------------------------------
# Disk space
# ----------------------------------------------------------------------------------------------------------
def checkpoint_bytes(state: TrainState) -> int:
  """About what a checkpoint of `state` takes on disk: its arrays, plus orbax's metadata (about 2 KiB a leaf)."""
  leaves = jax.tree.leaves(state)
  return sum(x.size * x.dtype.itemsize for x in leaves) + 2048 * len(leaves) + (64 << 10)


class _NoSpaceNoise(pylogging.Filter):
  """Drops the tracebacks of a full disk that orbax's writer threads and their asyncio tasks log (hundreds of
  lines, some at exit): `disk_full_is_one_error` reports it in one line."""

  def filter(self, record: pylogging.LogRecord) -> bool:
    return not ("No space left on device" in record.getMessage()
                and any(f"{os.sep}{name}{os.sep}" in record.pathname for name in ("orbax", "asyncio")))


def committed_step(workdir: str) -> int | None:
  """The newest checkpoint on disk (orbax's own list also holds a save still being written)."""
  folder = os.path.join(os.path.abspath(workdir), "checkpoints")
  steps = [int(name) for name in os.listdir(folder) if name.isdigit()] if os.path.isdir(folder) else []
  return max(steps, default=None)


@contextlib.contextmanager
def disk_full_is_one_error(workdir: str, need: Callable[[], int], mngr: ocp.CheckpointManager):
  """Inside, a full disk anywhere in the workdir (a checkpoint, the history, TensorBoard's events) ends the run with
  a `DiskFullError` naming the folder, what a checkpoint needs (`need()`) and the step it resumes from; the
  checkpoint being written when it happened (orbax's `*.orbax-checkpoint-tmp*`) is removed once `mngr`'s writer
  threads have stopped (removed earlier, a save still under way writes part of it again)."""
  noise = _NoSpaceNoise()
  handler = logging.get_absl_handler()
  handler.addFilter(noise)
  try:
    yield
  except Exception as error:
    if cli.no_space(error) is None:
      raise
    with contextlib.suppress(Exception):  # the save under way fails on the same full disk
      mngr.wait_until_finished()
    remove_partial_checkpoints(workdir)
    raise DiskFullError(workdir, need(), committed_step(workdir)) from None  # the filter stays: tasks log at exit
  handler.removeFilter(noise)


def remove_partial_checkpoints(workdir: str, quiet: float = 0.5, limit: float = 10.0) -> None:
  """Removes the checkpoint orbax was writing when the disk filled (`*.orbax-checkpoint-tmp*`). Orbax stops waiting at
  the first failed write while TensorStore's other writes of that save still run and create their folders again, so
  it removes until none has come back for `quiet` seconds (at most `limit`). A run killed while saving leaves one
  too: `checkpoint_manager` has orbax remove those when the next run starts."""
  pattern = os.path.join(os.path.abspath(workdir), "checkpoints", "*.orbax-checkpoint-tmp*")
  start = last_seen = time.monotonic()
  while time.monotonic() - last_seen < quiet and time.monotonic() - start < limit:
    partials = glob.glob(pattern)
    for partial in partials:
      shutil.rmtree(partial, ignore_errors=True)
    if partials:
      last_seen = time.monotonic()
    time.sleep(0.05)


class DiskFullError(ConfigError):
  """The workdir's disk cannot take the run's next checkpoint (checked before each save, and any ENOSPC)."""

  def __init__(self, workdir: str, need: int, resume_step: int | None):
    free = shutil.disk_usage(workdir).free
    resume = (f"rerun the same command to resume from step {resume_step}" if resume_step is not None
              else "rerun the same command")
    super().__init__(f"no space left on the disk of {workdir} ({cli.human_size(free)} free; a checkpoint of this run "
                     f"needs about {cli.human_size(need)}) — free space there or pass a --workdir on a larger disk, "
                     f"then {resume}")


class DivergedError(ConfigError):
  """The training loss is no longer a number (NaN or infinite): every later step would be as well."""

  def __init__(self, step: int, loss: float):
    super().__init__(f"the training loss is {loss} at step {step}: the run diverged, and no state after it is saved "
                     "— train again in another --workdir with a lower --config.optimizer.learning_rate or with "
                     "--config.optimizer.grad_clip_norm set (--config.debug_nans=True names the operation)")


def interval_means(interval: list[dict[str, jax.Array]], step: int) -> dict[str, float]:
  """The mean loss and gradient norm of the steps `interval` (the metrics of those up to `step`, since the last log:
  one batch's loss is noise), fetched in one transfer; a DivergedError at the first that is not finite."""
  values = jax.device_get(interval)
  for offset, v in enumerate(values):
    if not math.isfinite(float(v["loss"])):
      raise DivergedError(step - len(values) + 1 + offset, float(v["loss"]))
  return {k: float(np.mean([v[k] for v in values])) if values else math.nan for k in ("loss", "grad_norm")}


def ensure_space(workdir: str, need: int, saved: int | None) -> int:
  """Raises DiskFullError before a save that cannot fit (the previous ones are kept until it is committed), and
  returns what a checkpoint needs: `need`, or what the latest one (`saved`) took if that is more (orbax's files of a
  state replicated over several devices can take several times its arrays). What a file takes is the blocks the
  disk gave it (a tmpfs or a disk rounds each of orbax's many small files up to a page or block)."""
  if saved is not None:
    folder = os.path.join(os.path.abspath(workdir), "checkpoints", str(saved))
    need = max(need, sum(max(os.stat(os.path.join(d, f)).st_blocks * 512, os.path.getsize(os.path.join(d, f)))
                         for d, _, files in os.walk(folder) for f in files))
  if shutil.disk_usage(workdir).free < need:
    raise DiskFullError(workdir, need, saved)
  return need


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
PROGRESS_EVERY_S = 60.0  # at least one console line a minute between log steps


def _format_eta(seconds: float) -> str:
  seconds = int(max(seconds, 0))
  return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def truncate_history(path: str, step: int) -> None:
  """Drops log records past `step`: a run killed after logging them repeats those steps when it resumes."""
  if not os.path.exists(path):
    return
  with open(path, encoding="utf-8") as f:
    lines = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.writelines(lines)
  os.replace(path + ".tmp", path)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Trains (resuming from the latest checkpoint), then evaluates the best checkpoint on the test split.

  Returns {"metrics": test metrics, "outputs": {kind: path}}. A SIGTERM or SIGINT during training instead saves
  the current step and returns {"metrics": {}, "outputs": {}, "interrupted_at": step}: the same command resumes.
  """
  config_util.validate(config, jax.process_count())  # impossible values (batch 0, NaN, a caption too long) fail first
  inputs = sources.input_spec(config)  # pixels or pre-extracted features: a mismatched config fails before any work
  if config.dataset.get("style"):  # the stylized metrics' classifier and LM: a wrong path fails before any work
    evaluate_lib.StyleJudges(config)
  # Writable, and no other process writing it; the checkpoint manager and the metric writer are closed however
  # the run ends (a file left open would keep a full disk busy).
  with workdir_lib.claim(workdir, "a training"), contextlib.ExitStack() as closing:
    return _train_and_evaluate(config, workdir, inputs, closing)


def _close_checkpoints(mngr: ocp.CheckpointManager) -> None:
  """Closes `mngr`; a full disk that it reports again (its failed save) was reported already."""
  try:
    mngr.close()
  except Exception as error:
    if cli.no_space(error) is None:
      raise


def _train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, inputs: sources.InputSpec,
                        closing: contextlib.ExitStack) -> dict[str, Any]:
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

  mngr = checkpoint_manager(workdir, config)
  closing.callback(_close_checkpoints, mngr)

  # --- Input Pipeline ---
  train_source = sources.train_source(config.dataset)  # with an augmented dataset when one is named
  # Every split opened before the vocabulary is written: a bad one (an empty slice) fails now, not after training.
  val_source = sources.data_source(config.dataset, config.dataset.eval_split)
  test_source = sources.data_source(config.dataset, config.dataset.test_split)
  vocab = load_or_build_vocab(config, workdir, train_source)
  train_iter = pipeline.train_iterator(config, train_source, vocab, inputs.key)

  # --- Create Model & Optimizer, Shard & Transfer ---
  setup = make_setup(config, len(vocab), mesh, inputs, decode_start(config, vocab))
  writer = metric_writers.create_default_writer(workdir, just_logging=jax.process_index() > 0)
  closing.callback(writer.close)

  # --- Load Checkpoint: the newest that restores, its step registered at once with JAX's preemption sync point
  # (AgreedStop: a notice before that is lost) ---
  state, latest = restore_latest_intact(mngr, setup, train_iter, workdir)
  stop = preemption.AgreedStop(latest or 0)
  if latest is not None:
    logging.info("Resumed from step %d", latest)
  else:
    state = setup.init(jax.random.key(config.seed))
    param_count = sum(x.size for x in jax.tree.leaves(state.params))
    logging.info("Initialised %s with %s parameters", config.model.name, f"{param_count:,}")
    writer.write_hparams({k: str(v) for k, v in config.to_dict().items()})

  # --- Train Loop ---
  history_path = os.path.join(workdir, "train_history.jsonl")
  step = int(state.step)
  if jax.process_index() == 0:
    truncate_history(history_path, step)
  total = config.num_train_steps
  t_last, step_last = time.time(), step
  interrupted = False
  interval: list[dict[str, jax.Array]] = []  # the metrics of the steps since the last log step
  need = checkpoint_bytes(state)
  first_step, t_printed = step, time.time()
  if step < total:
    logging.info("compiling the train step (the first step waits for it; a run of this config in this workdir "
                 "before loads it from the compilation cache)")
  with stop, disk_full_is_one_error(workdir, lambda: need, mngr):
    while step < total:
      batch = sharding.host_to_global(next(train_iter), mesh)
      state, metrics = setup.train_step(state, batch)
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
        m = interval_means(interval, step)
        interval = []
        now = time.time()
        steps_per_s = (step - step_last) / max(now - t_last, 1e-9)
        record = {"step": step, "loss": m["loss"], "grad_norm": m["grad_norm"],
                  "examples_per_s": steps_per_s * config.batch_size}
        writer.write_scalars(step, {k: v for k, v in record.items() if k != "step"})
        logging.info("step %d/%d  loss %.4f  %.1f examples/s  ETA %s", step, total, record["loss"],
                     record["examples_per_s"], _format_eta((total - step) / max(steps_per_s, 1e-9)))
        if jax.process_index() == 0:
          with open(history_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        t_last, step_last, t_printed = now, step, now
      elif step == first_step + 1 or time.time() - t_printed >= PROGRESS_EVERY_S:
        # Between log steps (100 apart in the paper's configs: minutes on a CPU), the first step and then one line a
        # minute say that the run is alive; only the console sees them (the history and TensorBoard keep log steps).
        interval[-1]["loss"].block_until_ready()
        now = time.time()
        if step == first_step + 1:
          logging.info("step %d/%d  compiled the train step and ran it in %.1f s", step, total, now - t_last)
          t_last, step_last = now, step  # the rates logged next leave the compilation out
        else:
          steps_per_s = (step - step_last) / max(now - t_last, 1e-9)
          logging.info("step %d/%d  %.1f examples/s  ETA %s", step, total, steps_per_s * config.batch_size,
                       _format_eta((total - step) / max(steps_per_s, 1e-9)))
        t_printed = now
      scores = None
      if step % config.eval_every == 0 or step == total:
        result = evaluate_lib.evaluate_split(setup, state.params, val_source, vocab, config,
                                             num_examples=config.eval.num_examples)
        writer.write_scalars(step, {f"val/{k}": v for k, v in result.metrics.items()})
        logging.info("step %d validation: %s", step, _fmt_metrics(result.metrics))
        scores = {BEST_METRIC: float(result.metrics[BEST_METRIC])}
      # Checked after the validation: a signal during it waits for its end, so the checkpoint has its score and
      # the resumed run keeps and picks checkpoints as an uninterrupted one would.
      interrupted = stop.after(step, log_step)
      if scores is not None or interrupted or step % config.checkpoint_every == 0:
        interval_means(interval, step)  # a diverged state is never saved
        if jax.process_count() == 1:  # processes of a job could disagree on it: there, ENOSPC itself stops them
          mngr.wait_until_finished()  # as `save` does first: the space the previous save takes is then known
          need = ensure_space(workdir, need, committed_step(workdir))
        mngr.save(step, args=_save_args(state, train_iter), metrics=scores or {})
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
  best = best_step(mngr)
  if best is not None and best != step:
    state = restore_state(mngr, best, setup)
  logging.info("Evaluating checkpoint of step %s on %s", best if best is not None else step,
               config.dataset.test_split)
  result = evaluate_lib.evaluate_split(setup, state.params, test_source, vocab, config)
  final_step = best if best is not None else step
  outputs = evaluate_lib.write_outputs(result, workdir, config.dataset.test_split, step=final_step,
                                       config=config, history_path=history_path)
  evaluate_lib.report(result, config.dataset.test_split, final_step, config)
  return {"metrics": result.metrics, "outputs": outputs}


def _save_args(state: TrainState, data_iter: grain.DatasetIterator) -> ocp.args.Composite:
  return ocp.args.Composite(state=ocp.args.StandardSave(state),
                            data=grain.checkpoint.CheckpointSave(data_iter))


def _fmt_metrics(metrics: dict[str, float]) -> str:
  return "  ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
