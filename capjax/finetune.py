"""Fine-tuning: a maximum-likelihood run of any config that starts from a trained workdir's model (`init_from`, its
best checkpoint or `init_step`'s) with a fresh optimizer, on another dataset.

What it owns: the checks before any work (a checkpoint to start from, the same architecture: the config fields that
shape the parameters, each differing one named), the vocabulary (the pretrained ids kept, the new training captions'
frequent words appended unless `vocab.extend` is false), the parameters (restored without the pretrained optimizer's
state, so the optimizer may change; the word-embedding table grown by the new words' rows) and the optional freezing of
the image side (`freeze`). `capjax.objective.MaximumLikelihood` calls it; `capjax.train` builds its optimizer with
`with_frozen`.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import optax
import orbax.checkpoint as ocp
from absl import logging

from capjax import checkpoints, distributed
from capjax import workdir as workdir_lib
from capjax.config_util import ConfigError
from capjax.data import pipeline
from capjax.data.vocab import VOCAB_FILENAME, Vocabulary, tokenize
from capjax.tokens import SPECIALS

# The fields that shape the parameters or give them their meaning: a run that differs in one of them cannot start
# from the other's checkpoint (or would start from parameters that mean something else: features of another kind).
ARCHITECTURE_FIELDS = ("model", "dataset.features", "dataset.feature_key", "dataset.feature_shape")
# Of those, what a fine-tune may change: regularisation, compute type, the embedding's padding (rows are copied by
# id) and the weights `--mode=caption` extracts features with.
MAY_CHANGE = ("model.dropout_rate", "model.dtype", "model.vocab_multiple", "model.encoder.weights")
# `freeze`: what stays as the pretrained run left it, by the parameters' top-level names in capjax.models.
# encoder: the image side, everything the decoder's cross-attention (T2T) or initial state (RNN) reads: the image
# encoder (conv or IRv2; a features model has none), the visual projection, and T2T's encoder layers and norm or the
# RNN's encoder LSTM (`encoder_cell`). The word embedding (tied to the output layer) and the decoder train.
FREEZE = {
    "": lambda name: False,
    "encoder": lambda name: name in ("image_encoder", "visual_proj") or name.startswith("encoder"),
    "image_encoder": lambda name: name == "image_encoder",
}
EMBEDDING = ("embed", "embedding")  # the word embedding's path in the parameters (tied: also the output layer)


def init_from(config: ml_collections.ConfigDict) -> str:
  """`config.init_from`, or "" (a config file written before the field existed)."""
  return config.get("init_from", "") or ""


def extend(config: ml_collections.ConfigDict) -> bool:
  return bool(config.vocab.get("extend", True))


# ----------------------------------------------------------------------------------------------------------
# The checks before any work
# ----------------------------------------------------------------------------------------------------------
def check_freeze(config: ml_collections.ConfigDict) -> None:
  freeze = config.get("freeze", "")
  if freeze not in FREEZE:
    raise ConfigError(f"--config.freeze={freeze} is not a part to freeze — use encoder (train the decoder only), "
                      "image_encoder, or nothing")


def saved_steps(folder: str) -> list[int]:
  """The checkpoint steps a workdir holds (its `checkpoints/` folders with a number for a name), without orbax."""
  directory = os.path.join(folder, "checkpoints")
  if not os.path.isdir(directory):
    return []
  return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def _flat_config(path: str, init: str) -> dict[str, Any]:
  try:
    with open(path, encoding="utf-8") as f:
      return workdir_lib.flatten(json.load(f))
  except (UnicodeDecodeError, ValueError, AttributeError) as error:
    raise ConfigError(f"{path} cannot be read ({' '.join(str(error).split())[:200]}) — give --config.init_from="
                      f"the workdir of a training run (not {init})") from None


def _architecture(flat: dict[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in flat.items() if any(k == f or k.startswith(f + ".") for f in ARCHITECTURE_FIELDS)
          and not any(k == f or k.startswith(f + ".") for f in MAY_CHANGE)}


def architecture_changes(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
  """'field: X there, Y here' for each architecture field (flattened configs) that differs."""
  a, b = _architecture(theirs), _architecture(ours)
  return [f"{k}: {json.dumps(a.get(k))} there, {json.dumps(b.get(k))} here" for k in sorted(a.keys() | b.keys())
          if a.get(k) != b.get(k)]


def check(config: ml_collections.ConfigDict, workdir: str) -> None:
  """ConfigError before any work (nothing written): `freeze`, and with `init_from` a workdir that holds no trained
  run (config.json, vocab.txt, a checkpoint, `init_step`'s when given), is the run's own workdir, or holds a model
  of another architecture (each differing field named). A fine-tune that resumes (checkpoints of its own) reads
  nothing of init_from, which may since have gone."""
  check_freeze(config)
  init = init_from(config)
  if not init:
    return
  if os.path.abspath(init) == os.path.abspath(workdir):
    raise ConfigError(f"--config.init_from={init} is this run's own --workdir — fine-tune in another workdir, so "
                      "that the pretrained run stays as it is")
  if saved_steps(workdir):
    return
  for name in (workdir_lib.CONFIG_FILENAME, VOCAB_FILENAME):
    if not os.path.isfile(os.path.join(init, name)):
      raise ConfigError(f"--config.init_from={init} has no {name}, so it holds no trained model — give the workdir "
                        "of a training run")
  changes = architecture_changes(_flat_config(os.path.join(init, workdir_lib.CONFIG_FILENAME), init),
                                 workdir_lib.flatten(workdir_lib.as_json_dict(config)))
  if changes:
    raise ConfigError(f"--config.init_from={init} holds a model of another architecture ({'; '.join(changes)}) — "
                      "fine-tune with that run's model settings (only the dataset, the steps, the optimizer, dropout "
                      "and the vocabulary's growth may change)")
  steps = saved_steps(init)
  if not steps:
    raise ConfigError(f"--config.init_from={init} has no checkpoint — train it first")
  step = config.get("init_step", -1)
  if step is not None and step >= 0 and step not in steps:
    raise ConfigError(f"--config.init_step={step}: {init} has checkpoints of steps {', '.join(map(str, steps))} — "
                      "pick one of them, or -1 for the best by validation CIDEr-D")


# ----------------------------------------------------------------------------------------------------------
# The vocabulary
# ----------------------------------------------------------------------------------------------------------
def extended_vocabulary(pretrained: Vocabulary, captions, min_count: int) -> tuple[Vocabulary, int]:
  """(vocabulary, words appended): `pretrained`'s words at their ids, then the words of `captions` seen at least
  `min_count` times that it lacks, most frequent first (ties alphabetical, as `build_vocabulary`)."""
  known = set(pretrained.words)
  counts = collections.Counter(w for c in captions for w in tokenize(c) if w not in known)
  new = sorted((w for w, n in counts.items() if n >= min_count and w not in SPECIALS), key=lambda w: (-counts[w], w))
  return Vocabulary(pretrained.words + tuple(new)), len(new)


def adopt_vocabulary(config: ml_collections.ConfigDict, workdir: str, train_source) -> None:
  """The fine-tune's vocabulary in the workdir (first process, atomically), unless it is there (a resumed run):
  init_from's words at their ids (the ids its parameters were trained on), then the new training captions' words
  seen `vocab.min_count` times, unless `vocab.extend` is false (they read as <UNK>). Logs one line: "N new words".
  The other processes wait for it: the loop's `load_or_build_vocab` would otherwise build one of their own."""
  if jax.process_index() == 0 and not os.path.isfile(os.path.join(workdir, VOCAB_FILENAME)):
    _write_vocabulary(config, workdir, train_source)
  distributed.sync("finetune_vocabulary")


def _write_vocabulary(config: ml_collections.ConfigDict, workdir: str, train_source) -> None:
  pretrained = Vocabulary.load(init_from(config))
  vocab, new = extended_vocabulary(pretrained, pipeline.split_captions(train_source), config.vocab.min_count)
  if extend(config):
    pretrained = vocab
    logging.info("%d new words (seen at least %d times in the training captions, not in %s's %d) appended to the "
                 "vocabulary", new, config.vocab.min_count, init_from(config), len(vocab) - new)
  else:
    logging.info("0 new words: vocab.extend=false keeps %s's %d; %d words seen at least %d times in the training "
                 "captions read as <UNK>", init_from(config), len(pretrained), new, config.vocab.min_count)
  pretrained.save(workdir)


# ----------------------------------------------------------------------------------------------------------
# The parameters
# ----------------------------------------------------------------------------------------------------------
def _rows(words: int, multiple: int) -> int:
  return -(-words // multiple) * multiple


def start_params(setup, config: ml_collections.ConfigDict, vocab_size: int, fresh: Any) -> tuple[Any, int]:
  """(parameters, step): init_from's checkpoint (`init_step`, or the best by validation CIDEr-D) on `setup`'s mesh,
  its EMA parameters where that run evaluated with them, without its optimizer state (restored alone, so the
  fine-tune's optimizer may be another), the word embedding grown to `vocab_size` words by `grow_embedding` (the rows
it adds from `fresh`, this model's initial parameters)."""
  init = init_from(config)
  with open(os.path.join(init, workdir_lib.CONFIG_FILENAME), encoding="utf-8") as f:
    theirs = ml_collections.ConfigDict(json.load(f))
  old_words = len(Vocabulary.load(init))
  old_rows = _rows(old_words, theirs.model.get("vocab_multiple", 1))
  uses_ema = bool(theirs.optimizer.get("ema_decay", 0.0)) and theirs.eval.get("use_ema", True)
  field = "ema_params" if uses_ema else "params"
  abstract = checkpoints.abstract_state(setup).params
  abstract = {**abstract, "embed": {"embedding": _with_rows(abstract["embed"]["embedding"], old_rows)}}
  mngr = checkpoints.checkpoint_manager(init, config)
  try:
    step = config.get("init_step", -1)
    step = checkpoints.best_step(mngr) if step is None or step < 0 else step
    if step is None:
      raise ConfigError(f"--config.init_from={init} has no checkpoint — train it first")
    restore = ocp.args.PyTreeRestore(item={field: abstract}, restore_args=ocp.checkpoint_utils.construct_restore_args(
        {field: abstract}), partial_restore=True)
    try:
      params = mngr.restore(step, args=ocp.args.Composite(state=restore))["state"][field]
    except Exception as error:  # noqa: BLE001 (orbax, tensorstore and json each raise their own)
      raise ConfigError(f"checkpoint {step} of --config.init_from={init} does not fit this model "
                        f"({checkpoints.why(error)}) — fine-tune with the model settings of that run") from None
  finally:
    checkpoints.close_manager(mngr)
  grown = jax.jit(lambda p, f: grow_embedding(p, f, old_words, vocab_size), out_shardings=setup.state_shardings.params)
  return grown(params, fresh), step


def _with_rows(leaf: jax.ShapeDtypeStruct, rows: int) -> jax.ShapeDtypeStruct:
  return jax.ShapeDtypeStruct((rows, *leaf.shape[1:]), leaf.dtype, sharding=leaf.sharding)


def grow_embedding(params: Any, fresh: Any, old_words: int, new_words: int) -> Any:
  """`params` (the pretrained run's, its embedding of `old_words` real rows) with the embedding of `fresh` (this
  model's initialisation, already `new_words` padded rows): the pretrained rows at their ids (its padding rows too, as
  far as they fit: a vocabulary that did not grow is restored whole), each new word's row the mean of the pretrained
  words' rows (specials left out), the padding rows beyond the pretrained table's as initialised (their logits are
  masked).

  Why the mean: the embedding is tied to the output layer (T2T and the RNN both), so a new row is also a new logit.
  At the mean, a new word's logit is the average of the known words' and the pretrained model's distribution over
  them barely moves (Hewitt 2021, "Initializing new word embeddings for pretrained language models"); a random row
  at the init's scale gives logits of arbitrary size, the first steps unlearn them at the cost of the pretrained
  words' probabilities.
  """
  old = params["embed"]["embedding"]
  table = fresh["embed"]["embedding"]
  kept = min(old.shape[0], table.shape[0])
  table = table.at[:kept].set(old[:kept])
  if new_words > old_words:
    mean = old[len(SPECIALS):old_words].mean(axis=0)
    table = table.at[old_words:new_words].set(jnp.broadcast_to(mean, (new_words - old_words, table.shape[1])))
  return {**params, "embed": {**params["embed"], "embedding": table}}


def start_state(setup, config: ml_collections.ConfigDict, vocab_size: int) -> Any:
  """The fine-tune's train state at step 0: `start_params` with a fresh optimizer state (and average, with EMA)."""
  state = setup.init(jax.random.key(config.seed))
  params, step = start_params(setup, config, vocab_size, state.params)
  logging.info("fine-tuning from checkpoint %d of %s (a fresh optimizer)", step, init_from(config))

  def restart(state, p):
    state = state.replace(step=jnp.zeros((), jnp.int32), params=p, opt_state=setup.tx.init(p))
    return state.replace(ema_params=p) if hasattr(state, "ema_params") else state

  return jax.jit(restart, out_shardings=setup.state_shardings)(state, params)


# ----------------------------------------------------------------------------------------------------------
# Freezing
# ----------------------------------------------------------------------------------------------------------
def with_frozen(tx: optax.GradientTransformation, config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """`tx` for the trained parameters and no update (`optax.set_to_zero`, no optimizer state) for those `freeze`
  names: they stay bit-identical. `tx` itself without `freeze`."""
  freeze = config.get("freeze", "")
  if not freeze:
    return tx
  frozen = FREEZE[freeze]

  def labels(params):  # a prefix of the parameters: one label per top-level module, which masks its whole subtree
    return {name: "frozen" if frozen(name) else "trained" for name in params}

  return optax.multi_transform({"trained": tx, "frozen": optax.set_to_zero()}, labels)
