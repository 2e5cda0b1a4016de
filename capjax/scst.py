"""Self-critical sequence training (Rennie et al., CVPR 2017) as `capjax.train`'s objective (`Scst`, the `scst` config
variant): the start from a trained workdir's best checkpoint (`init_from`, checked here to be a run of the same model
and vocabulary, taken through `capjax.objective`), the training split's CIDEr-D document frequencies (computed once,
saved in the workdir), and the SCST train step that takes the MLE step's place: n captions sampled per image on the
mesh (`capjax.decode_sampling`), scored with CIDEr-D on the host against the image's references, each sample's
advantage over a baseline (the mean of the image's other samples, Luo 2020's "new self-critical", or the greedy
caption's score, Rennie et al.'s), and the policy-gradient update on the mesh (`scst_loss`). The loop, its
checkpoints, resume and validation are MLE's.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import logging

from capjax import gradients, objective, sharding
from capjax import ema as ema_lib
from capjax import workdir as workdir_lib
from capjax import decode as decode_lib
from capjax import decode_sampling as sampling_lib
from capjax.config_util import ConfigError
from capjax.data import sources
from capjax.data.captions import captions_of
from capjax.data.vocab import VOCAB_FILENAME, tokenize
from capjax.metrics.cider import CiderD, DocumentFrequency
from capjax.tokens import PAD_ID

DF_FILENAME = "cider_df.json"  # the training split's CIDEr-D document frequencies, in the SCST workdir
BASELINES = ("mean", "greedy")
INDEX_KEY = "example_index"  # the training batch's field naming each row's example, for its references
# The config fields a workdir given as init_from must share with the SCST run: the model (its parameters' shapes and
# meaning) and what its vocabulary was built from (the ids the parameters were trained on).
SAME_RUN_FIELDS = ("model", "max_caption_tokens", "vocab", "dataset.name", "dataset.builder_config",
                   "dataset.train_split", "dataset.caption_field", "dataset.style", "dataset.factual_split",
                   "dataset.augmented", "dataset.features", "dataset.feature_key")
# model.encoder.weights: used by --mode=caption only; vocab.extend: how a fine-tune grows init_from's vocabulary
# (an SCST run keeps it whole), absent from the config.json of runs from before it.
_IGNORED_FIELDS = ("model.encoder.weights", "vocab.extend")


def enabled(config: ml_collections.ConfigDict) -> bool:
  return "scst" in config


def sampling(config: ml_collections.ConfigDict) -> sampling_lib.Sampling:
  s = config.scst
  return sampling_lib.Sampling(s.num_samples, s.temperature, s.top_k, s.top_p)


# ----------------------------------------------------------------------------------------------------------
# The start: the checks of init_from
# ----------------------------------------------------------------------------------------------------------
def _selected(flat: dict[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in flat.items() if any(k == f or k.startswith(f + ".") for f in SAME_RUN_FIELDS)
          and k not in _IGNORED_FIELDS}


def check(config: ml_collections.ConfigDict, workdir: str) -> None:
  """ConfigError before any work: the sampling settings, the baseline, and an `init_from` that is not a finished
  MLE run of this config's model and vocabulary (its config.json compared field by field), or a workdir whose
  vocabulary is not init_from's. Nothing to check without the scst variant."""
  if not enabled(config):
    return
  s = config.scst
  sampling_lib.check_sampling(sampling(config))
  if s.baseline not in BASELINES:
    raise ConfigError(f"scst.baseline={s.baseline!r} is not a baseline — set --config.scst.baseline to mean (the "
                      "other samples' mean reward) or greedy (the greedy caption's)")
  if s.baseline == "mean" and s.num_samples < 2:
    raise ConfigError(f"scst.baseline=mean needs at least 2 samples per image (scst.num_samples={s.num_samples}) — "
                      "set --config.scst.num_samples=5, or --config.scst.baseline=greedy")
  init_from = config.init_from
  if not init_from:
    raise ConfigError("the scst variant starts from a trained model — give its workdir with "
                      "--config.init_from=WORKDIR (an MLE run of the same model and dataset)")
  if os.path.abspath(init_from) == os.path.abspath(workdir):
    raise ConfigError(f"--config.init_from={init_from} is the SCST run's own --workdir — train SCST in another "
                      "workdir, so that the MLE run stays as it is")
  config_path = os.path.join(init_from, "config.json")
  for name in (config_path, os.path.join(init_from, VOCAB_FILENAME)):
    if not os.path.isfile(name):
      raise ConfigError(f"--config.init_from={init_from} has no {os.path.basename(name)}, so it holds no trained "
                        "model — give the workdir of an MLE training run of this model")
  try:
    with open(config_path, encoding="utf-8") as f:
      theirs = _selected(workdir_lib.flatten(json.load(f)))
  except (UnicodeDecodeError, ValueError, AttributeError) as error:
    raise ConfigError(f"{config_path} cannot be read ({' '.join(str(error).split())[:200]}) — give the workdir of "
                      "an MLE training run") from None
  ours = _selected(workdir_lib.flatten(json.loads(config.to_json_best_effort())))
  changes = [f"{k}: {json.dumps(theirs.get(k))} there, {json.dumps(ours.get(k))} here"
             for k in sorted(theirs.keys() | ours.keys()) if theirs.get(k) != ours.get(k)]
  if changes:
    raise ConfigError(f"--config.init_from={init_from} holds a run of another model or vocabulary "
                      f"({'; '.join(changes[:5])}) — start SCST with the config of that run (plus the scst variant)")
  ours_vocab = os.path.join(workdir, VOCAB_FILENAME)
  if os.path.isfile(ours_vocab) and not _same_file(ours_vocab, os.path.join(init_from, VOCAB_FILENAME)):
    raise ConfigError(f"{ours_vocab} is not the vocabulary of --config.init_from={init_from} — SCST from that "
                      "workdir in a fresh --workdir")


def _same_file(a: str, b: str) -> bool:
  with open(a, "rb") as fa, open(b, "rb") as fb:
    return fa.read() == fb.read()


# ----------------------------------------------------------------------------------------------------------
# References and document frequencies
# ----------------------------------------------------------------------------------------------------------
def _with_index(record: dict[str, Any], index: int) -> dict[str, Any]:
  return {**record, INDEX_KEY: np.int32(index)}


def references_of(record: dict[str, Any]) -> list[str]:
  """A record's reference captions as CIDEr-D reads them (lowercased, split on white space, as the vocabulary)."""
  return [" ".join(tokenize(c)) for c in captions_of(record)]


class References:
  """The references of training examples by index, read on first use and kept."""

  def __init__(self, source):
    self.source, self.cache = source, {}

  def __getitem__(self, index: int) -> list[str]:
    if index not in self.cache:
      self.cache[index] = references_of(self.source[int(index)])
    return self.cache[index]


def document_frequency(workdir: str, train_source) -> DocumentFrequency:
  """The training split's CIDEr-D document frequencies: computed on the first start (one pass over its captions) and
  saved in the workdir (`DF_FILENAME`), read from there on resume."""
  path = os.path.join(workdir, DF_FILENAME)
  if os.path.isfile(path):
    try:
      return DocumentFrequency.load(path)
    except (ValueError, KeyError) as error:
      logging.warning("%s is damaged (%s): computed again", path, error)
  df = DocumentFrequency.from_references(references_of(train_source[i]) for i in range(len(train_source)))
  if jax.process_index() == 0:
    df.save(path + ".tmp")
    os.replace(path + ".tmp", path)
  return df


# ----------------------------------------------------------------------------------------------------------
# Loss and rewards
# ----------------------------------------------------------------------------------------------------------
def scst_loss(logits: jax.Array, tokens: jax.Array, advantage: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(loss, tokens): -sum over rows r and non-PAD positions t of advantage[r] * log p(tokens[r, t]), divided by the
  number of those tokens (EOS counts); `logits` (R, T, V), `tokens` (R, T), `advantage` (R,). Its gradient pushes
  up the samples that beat their baseline and down those that do not."""
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  picked = jnp.take_along_axis(logp, tokens[..., None], axis=-1)[..., 0]
  mask = (tokens != PAD_ID).astype(jnp.float32)
  count = mask.sum()
  return -(advantage[:, None] * picked * mask).sum() / jnp.maximum(count, 1.0), count


def flat_samples(x: jax.Array) -> jax.Array:
  """(B, n, ...) -> (B * n, ...): sample j of image b is row b * n + j."""
  return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def samples_logits(model, params, images: jax.Array, tokens: jax.Array, rng: jax.Array) -> jax.Array:
  """Teacher-forced training logits (B, n, T, V) of n captions per image, `tokens` (B, n, T): each image is encoded
  once and its memory repeated for its n samples. The logits of the images repeated n times (equal where dropout is
  off; with dropout an image's samples share its encoder's masks), at an n-th of the encoder's work. On the synthetic
  scenes the decoder is most of the work (measured: the update of 3 samples per image costs 3.3 MLE steps), so it is
  a few percent of a step there; more with a deep encoder."""
  batch, n = tokens.shape[:2]

  def apply(module, images, tokens):
    memory = jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), module.encode(images, train=True))
    return module.decode(memory, tokens, train=True)

  logits = model.apply({"params": params}, images, flat_samples(tokens), rngs={"dropout": rng}, method=apply)
  return logits.reshape(batch, n, *logits.shape[1:])


def advantages(rewards: np.ndarray, greedy: np.ndarray | None, baseline: str, drop_worst: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(baseline, advantage, kept), each (B, n), of the rewards (B, n) of n samples per image: the baseline is the mean of
  the image's other samples (`mean`) or its greedy caption's reward (`greedy`, `greedy` (B,)). With `drop_worst` the
  worst sample of each image gets no advantage (it still counts in the others' mean): `kept` is False there."""
  n = rewards.shape[1]
  if baseline == "mean":
    base = (rewards.sum(axis=1, keepdims=True) - rewards) / max(n - 1, 1)
  else:
    base = np.repeat(greedy[:, None], n, axis=1)
  advantage = rewards - base
  kept = np.ones(rewards.shape, bool)
  if drop_worst:
    kept[np.arange(len(rewards)), np.argmin(rewards, axis=1)] = False
  return base, np.where(kept, advantage, 0.0), kept


# ----------------------------------------------------------------------------------------------------------
# The train step
# ----------------------------------------------------------------------------------------------------------
SAMPLE_SALT = 0x5C57  # the sampling keys: fold_in(fold_in(key(seed), SAMPLE_SALT), step), apart from dropout's


class TrainStep:
  """`step(state, batch) -> (state, metrics)`, the SCST step in the MLE step's place (`capjax.train.Setup`): sampling
  and the update run jitted on the mesh (the batch sharded on the data axes), the rewards on the host between them.
  `reward_seconds` and `seconds` add up the host reward's time and the whole steps' (wall clock), for benchmarks."""

  def __init__(self, setup, config: ml_collections.ConfigDict, vocab, references, df: DocumentFrequency,
               start: int):
    self.config, self.vocab, self.references = config, vocab, references
    self.scorer = CiderD(df)
    self.mesh = setup.mesh
    self.reward_seconds = self.seconds = 0.0
    s = sampling(config)
    self.greedy = config.scst.baseline == "greedy"
    max_len = config.max_caption_tokens + 1
    model, tx, rules, mesh = setup.model, setup.tx, setup.rules, setup.mesh
    base_rng = jax.random.key(config.seed)
    sample_rng = jax.random.fold_in(base_rng, SAMPLE_SALT)
    data = sharding.batch_sharding(mesh)
    accumulate = config.optimizer.get("accumulate_steps", 1)

    def sample(params, images, step):
      with sharding.axis_rules(mesh, rules):
        fns = decode_lib.cached_step(model, params)
        samples = sampling_lib.sample_search(fns, images, max_len, jax.random.fold_in(sample_rng, step), s, start)
        greedy = (decode_lib.greedy_search(fns, images, max_len, start) if self.greedy
                  else jnp.zeros((images.shape[0], max_len), jnp.int32))
      return samples, greedy

    def loss_of(params, b, rng):
      logits = samples_logits(model, params, b["image"], b["inputs"], rng)
      return scst_loss(flat_samples(logits), flat_samples(b["targets"]), b["advantage"].reshape(-1))

    def update(state, images, samples, advantage):
      rng = jax.random.fold_in(base_rng, state.step)
      inputs = jnp.concatenate([jnp.full((*samples.shape[:2], 1), start, jnp.int32), samples[..., :-1]], axis=-1)
      # Rows stay images (B, n, ...): accumulation's micro-batches split images, each with its samples.
      b = {"image": images, "inputs": inputs, "targets": samples, "advantage": advantage}
      with sharding.axis_rules(mesh, rules):
        if accumulate > 1:
          (loss, _), grads = gradients.accumulated(loss_of, state.params, b, rng, accumulate)
        else:
          (loss, _), grads = jax.value_and_grad(lambda p: loss_of(p, b, rng), has_aux=True)(state.params)
      updates, opt_state = tx.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      return ema_lib.advance(state, params, opt_state, config), {  # the average too, where the run keeps one
          "loss": loss, "grad_norm": optax.tree.norm(grads)}

    self.sample = jax.jit(sample, in_shardings=(setup.state_shardings.params, data, None),
                          out_shardings=(data, data))
    self.update = jax.jit(update, in_shardings=(setup.state_shardings, data, data, data),
                          out_shardings=(setup.state_shardings, sharding.replicated(mesh)), donate_argnums=0)

  def rewards(self, samples: np.ndarray, greedy: np.ndarray, index: np.ndarray) -> dict[str, np.ndarray]:
    """CIDEr-D of every sample (B, n, T) against its image's references, the baseline and advantage (B, n)."""
    batch, n, _ = samples.shape
    refs = [self.references[int(i)] for i in index]
    texts = [self.vocab.decode(row) for row in samples.reshape(batch * n, -1)]
    rewards = self.scorer.scores(texts, [r for r in refs for _ in range(n)]).reshape(batch, n)
    greedy_rewards = (self.scorer.scores([self.vocab.decode(row) for row in greedy], refs) if self.greedy
                      else None)
    base, advantage, kept = advantages(rewards, greedy_rewards, self.config.scst.baseline,
                                       self.config.scst.drop_worst)
    return {"reward": rewards, "baseline": base, "advantage": advantage.astype(np.float32), "kept": kept}

  def __call__(self, state, batch: dict[str, jax.Array]):
    start = time.perf_counter()
    samples, greedy = self.sample(state.params, batch["image"], state.step)
    samples_host = sharding.global_batch_to_host(samples)  # waits for the sampling
    reward_start = time.perf_counter()
    r = self.rewards(samples_host, sharding.global_batch_to_host(greedy),
                     sharding.global_batch_to_host(batch[INDEX_KEY]))
    self.reward_seconds += time.perf_counter() - reward_start
    advantage = jax.make_array_from_callback(r["advantage"].shape, sharding.batch_sharding(self.mesh),
                                             lambda index: r["advantage"][index])
    state, metrics = self.update(state, batch["image"], samples, advantage)
    metrics.update(reward=float(r["reward"].mean()), baseline=float(r["baseline"].mean()),
                   positive_advantages=float((r["advantage"][r["kept"]] > 0).mean()))
    self.seconds += time.perf_counter() - start
    return state, metrics


class Scst(objective.Objective):
  """The scst variant as `capjax.train`'s objective: init_from's vocabulary and best parameters (`Objective`'s start),
  the training split with each record's index, and `TrainStep` in the MLE step's place; the loop, its checkpoints
  and validation stay `capjax.train`'s."""

  name = "SCST"

  @property
  def init_from(self) -> str:
    return self.config.init_from

  def check(self, workdir: str) -> None:
    super().check(workdir)
    check(self.config, workdir)

  def training_split(self, train_source):
    """The training split with each record's index, which the training batches then carry (`INDEX_KEY`) for the
    rewards to find their references."""
    return sources.RecordView(train_source, _with_index)

  def train_step(self, setup, workdir: str, vocab, train_source, start: int) -> TrainStep:
    """The SCST step, sampling from the token `start`; the document frequencies computed (or read) here."""
    return TrainStep(setup, self.config, vocab, References(train_source), document_frequency(workdir, train_source),
                     start)
