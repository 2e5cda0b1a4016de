"""Training a generator: its settings (`PAPER` fine-tuning, `SCRATCH` from random weights, the `TINY` model), the
training sequences and loss weights, a new generator sized for its pairs, and `train` through
`capjax.small_trainer`."""

from __future__ import annotations

import dataclasses
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from capjax import small_trainer
from capjax.erg.generator.model import Generator, GeneratorError, Pair
from capjax.erg.generator.vocab import BPEVocab, Vocab, WordVocab
from capjax.text_models import gpt2 as gpt2_lib


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  learning_rate: float
  epochs: int
  batch_size: int = 64
  weight_decay: float = 0.01
  seed: int = 0


PAPER = TrainSettings(learning_rate=5e-5, epochs=1, batch_size=32)
SCRATCH = TrainSettings(learning_rate=3e-3, epochs=20, batch_size=32)
# From scratch: big enough to copy words through attention (two layers make an induction head), small enough for
# tens of seconds on 2 CPU cores. No dropout: 20 short epochs do not overfit a copying task.
TINY = dict(n_embd=64, n_layer=2, n_head=2, n_positions=64, dropout_rate=0.0, attention_dropout_rate=0.0)


def sequences(generator: Generator, pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(ids, attention mask, loss weights), each (N, P + C): the left-padded prompt, `<BOS>` caption `<EOS>`;
  the weights mark the positions whose next token is a caption token or `<EOS>`."""
  v, length, total = generator.vocab, generator.prompt_length, generator.prompt_length + generator.caption_length
  prompt, prompt_mask = generator.prompts(pairs)
  ids = np.full((len(pairs), total), v.pad_id, np.int32)
  mask, weights = np.zeros_like(ids), np.zeros((len(pairs), total), np.float32)
  ids[:, :length], mask[:, :length] = prompt, prompt_mask
  for row, pair in enumerate(pairs):
    target = [v.bos_id, *v.encode(pair.caption), v.eos_id]
    if len(target) > generator.caption_length:
      raise GeneratorError(f"the caption {pair.caption!r} is {len(target) - 1} tokens with <EOS>, more than this "
                           f"generator's {generator.caption_length} — train with a longer caption_length")
    ids[row, length:length + len(target)] = target
    mask[row, length:length + len(target)] = 1
    weights[row, length:length + len(target) - 1] = 1.0  # position t predicts token t + 1
  return ids, mask, weights


def new_generator(pairs: Sequence[Pair], weights_dir: str | pathlib.Path | None = None, seed: int = 0,
                  model: dict[str, Any] | None = None) -> Generator:
  """An untrained generator sized for `pairs`: imported GPT-2 (its embedding grown by the added ids) when
  `weights_dir` is given, otherwise a randomly initialised GPT-2 (`TINY` unless `model` says otherwise) over the
  pairs' words."""
  if weights_dir is not None:
    from capjax.text_models import checkpoint  # noqa: PLC0415 (only imported weights need orbax)
    loaded = checkpoint.load(weights_dir, "gpt2")
    vocab: Vocab = BPEVocab(loaded.directory)
    config = dataclasses.replace(loaded.config, vocab_size=vocab.size)
    params = jax.tree.map(np.asarray, dict(loaded.params))
    wte = params["wte"]["embedding"]
    extra = np.random.default_rng(seed).normal(0, 0.02, (vocab.size - wte.shape[0], wte.shape[1]))
    params["wte"] = {"embedding": np.concatenate([wte, extra.astype(wte.dtype)])}
  else:
    vocab = WordVocab.from_texts([text for p in pairs for text in (p.phrase, p.content, p.caption)])
    config = gpt2_lib.GPT2Config(vocab_size=vocab.size, **{**TINY, **(model or {})})
    params = None
  prompt = max(len(vocab.encode(p.phrase)) + len(vocab.encode(p.content)) + 2 for p in pairs)
  caption = max(len(vocab.encode(p.caption)) + 2 for p in pairs)
  # Room for longer inputs than the training ones, within the model's positions.
  prompt_length = min(prompt + 4, config.n_positions // 2)
  caption_length = min(caption + 4, config.n_positions - prompt_length)
  if prompt > prompt_length or caption > caption_length:
    raise GeneratorError(f"training prompts of {prompt} and captions of {caption} tokens do not fit in "
                         f"n_positions={config.n_positions} — use a model with more positions")
  if params is None:
    init = small_trainer.jitted_init(gpt2_lib.GPT2(config))
    params = jax.tree.map(np.asarray, init(jax.random.key(seed), jnp.zeros((1, 2), jnp.int32)))
  return Generator(config, params, vocab, prompt_length, caption_length)


def train(pairs: Sequence[Pair], settings: TrainSettings | None = None, weights_dir: str | pathlib.Path | None = None,
          model: dict[str, Any] | None = None, log: bool = False) -> Generator:
  """Fine-tunes (imported weights, `PAPER` by default) or trains (from scratch, `SCRATCH`) a generator: AdamW,
  cross-entropy on the caption and its `<EOS>` only, shuffled batches, the last partial batch dropped."""
  if not pairs:
    raise GeneratorError("no stylized captions to train on — give a non-empty stylized training split")
  settings = settings or (PAPER if weights_dir is not None else SCRATCH)
  generator = new_generator(pairs, weights_dir, settings.seed, model)
  ids, mask, weights = sequences(generator, pairs)
  batch_size = min(settings.batch_size, len(pairs))
  steps_per_epoch = len(pairs) // batch_size
  schedule = optax.cosine_decay_schedule(settings.learning_rate, max(1, steps_per_epoch * settings.epochs))
  optimizer = optax.adamw(schedule, weight_decay=settings.weight_decay)
  module, dropout = generator.module, generator.config.dropout_rate > 0 or generator.config.attention_dropout_rate > 0

  def loss_fn(params, batch, rng, frozen):
    del frozen  # every parameter trains
    ids, mask, weights = batch
    logits = module.apply({"params": params}, ids, mask, deterministic=not dropout, rngs={"dropout": rng}).logits
    losses = optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], ids[:, 1:])
    return jnp.sum(losses * weights[:, :-1]) / jnp.maximum(jnp.sum(weights), 1.0)

  batches = ((epoch, (ids[rows], mask[rows], weights[rows]))
             for epoch, rows in small_trainer.epoch_batches(len(pairs), batch_size, settings.epochs, settings.seed))
  printed = (lambda line: print(line, file=sys.stderr)) if log else None
  params, _ = small_trainer.fit(loss_fn, optimizer, generator.params, batches, rng=jax.random.key(settings.seed),
                                epochs=settings.epochs, log=printed)
  return dataclasses.replace(generator, params=jax.tree.map(np.asarray, params))
