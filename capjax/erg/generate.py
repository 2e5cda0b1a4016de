"""ERG's generator: GPT-2 that grafts a retrieved style phrase onto a factual caption.

Training reads stylized captions whose planted phrase is known: the prompt is `[CLS] phrase [SEP] content` (the
caption without the phrase) and the target is the stylized caption; the loss covers the target only. Inference
prompts with `[CLS] retrieved phrase [SEP] factual caption` and decodes with `capjax.decode`'s batched greedy or
beam search, or top-p sampling, over the GPT-2 key/value cache (the prompt runs once, then one token per step).

Layout of a sequence (P = `prompt_length`, fixed per model so that every row's caption starts at position P and a
batch needs no per-row positions): the prompt left-padded to P, then `<BOS>` caption `<EOS>`, right-padded.
`[CLS]`, `[SEP]`, `<BOS>`, `<EOS>`, `<PAD>` are added ids, never text, so a caption cannot spell them.

Two vocabularies:
  * `WordVocab` for a model trained from scratch: the caption vocabulary's word level (ids 0-3 are
    `capjax.tokens.SPECIALS`, then `[CLS]`, `[SEP]`, then the training words). The embedded data has ~70 words, so
    a word-level softmax is tiny and a caption is ~15 tokens; BPE's 50k rows would dominate a from-scratch model and
    split words that never need splitting.
  * `BPEVocab` for imported GPT-2 weights (a `convert_weights --format=hf_gpt2` directory): GPT-2's byte-level BPE
    plus four added ids after its 50,257 (the embedding grows by four rows), `<|endoftext|>` as the end.

`capjax.decode` feeds `BOS_ID` first and stops at `EOS_ID` (the caption vocabulary's 1 and 2); a BPE model's ids
for those differ, so its step function swaps the three special ids in and out (`token_map`, an involution).

Settings: the paper fine-tunes GPT-2 with AdamW at 5e-5 for one epoch (`PAPER`). A randomly initialised tiny model
learns nothing useful in one epoch at 5e-5 (its loss barely leaves log(vocab)): from scratch uses 3e-3 with cosine
decay over 20 epochs in batches of 32 (`SCRATCH`). On 500 stylized_scenes training images (1,000 captions) that
trains in ~30 s on 2 CPU cores to a caption loss of ~0.05 (what is left is mostly the placement of the phrase,
which the data draws at random); at 12 epochs the phrase-and-objects rate was 82%, at 20 it is 90%.

Command:
  python -m capjax.erg.generate --train --output=DIR [--weights=GPT2_DIR] [--num_train=500]
  python -m capjax.erg.generate --generator=DIR --input=PAIRS.jsonl|.tsv [--beam_size=4 | --top_p=0.9]
      [--output=OUT.jsonl]
A JSONL line is {"phrase": ..., "caption": ...}; a TSV line is `phrase<TAB>caption`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from capjax import decode, tokens
from capjax.text.lines import split_lines
from capjax.text_models import gpt2 as gpt2_lib
from capjax.text_models import tokenizers

CLS, SEP = "[CLS]", "[SEP]"
GENERATOR_FILE = "generator.json"
VARIABLES_DIR = "variables"
BPE_FILES = ("vocab.json", "merges.txt")
TRAIN_HINT = "train one with `python -m capjax.erg.generate --train --output=DIR`"


class GeneratorError(ValueError):
  """Input the generator cannot use (an empty batch, a prompt longer than the model's positions, a directory that
  is not a generator): the message says what is wrong and what to do."""


@dataclasses.dataclass(frozen=True)
class Pair:
  """One training or inference example: the style phrase, the caption without it and (training) the target."""

  phrase: str
  content: str
  caption: str = ""


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


# ----------------------------------------------------------------------------------------------------------
# Vocabularies
# ----------------------------------------------------------------------------------------------------------
class WordVocab:
  """Whitespace words: `capjax.tokens.SPECIALS` (ids 0-3), `[CLS]`, `[SEP]`, then `words` in the given order."""

  kind = "word"

  def __init__(self, words: Sequence[str]):
    self.words = list(tokens.SPECIALS) + [CLS, SEP] + [w for w in words if w not in tokens.SPECIALS + (CLS, SEP)]
    self.index = {w: i for i, w in enumerate(self.words)}
    # What text can spell: a caption holding "[SEP]" or "<EOS>" gets <UNK> there, never the special id.
    self.text_index = {w: i for w, i in self.index.items() if w not in tokens.SPECIALS + (CLS, SEP)}
    self.pad_id, self.bos_id, self.eos_id = tokens.PAD_ID, tokens.BOS_ID, tokens.EOS_ID
    self.cls_id, self.sep_id = self.index[CLS], self.index[SEP]
    self.size = len(self.words)
    self.token_map: np.ndarray | None = None  # decode ids are model ids

  @classmethod
  def from_texts(cls, texts: Iterable[str]) -> WordVocab:
    return cls(sorted({w for text in texts for w in text.split()}))

  def encode(self, text: str) -> list[int]:
    return [self.text_index.get(w, tokens.UNK_ID) for w in text.split()]

  def decode(self, ids: Sequence[int]) -> str:
    return " ".join(self.words[int(i)] for i in ids)

  def to_json(self) -> dict[str, Any]:
    return {"kind": self.kind, "words": self.words[len(tokens.SPECIALS) + 2:]}


class BPEVocab:
  """GPT-2's byte-level BPE plus added `[CLS]`, `[SEP]`, `<BOS>`, `<PAD>` ids after its vocabulary."""

  kind = "bpe"

  def __init__(self, directory: str | pathlib.Path):
    self.directory = pathlib.Path(directory)
    self.bpe = tokenizers.ByteLevelBPE(*(self.directory / name for name in BPE_FILES))
    base = len(self.bpe.vocab)
    self.cls_id, self.sep_id, self.bos_id, self.pad_id = base, base + 1, base + 2, base + 3
    self.eos_id = self.bpe.vocab["<|endoftext|>"]
    self.size = base + 4
    # decode's PAD/BOS/EOS (0, 1, 2) swapped with this model's ids: its own inverse.
    self.token_map = np.arange(self.size, dtype=np.int32)
    for decode_id, model_id in ((tokens.PAD_ID, self.pad_id), (tokens.BOS_ID, self.bos_id),
                                (tokens.EOS_ID, self.eos_id)):
      self.token_map[[decode_id, model_id]] = self.token_map[[model_id, decode_id]]

  def encode(self, text: str) -> list[int]:
    return self.bpe.encode(" " + text.strip())

  def decode(self, ids: Sequence[int]) -> str:
    return self.bpe.decode([int(i) for i in ids if int(i) < len(self.bpe.vocab)]).strip()

  def to_json(self) -> dict[str, Any]:
    return {"kind": self.kind}


Vocab = WordVocab | BPEVocab


# ----------------------------------------------------------------------------------------------------------
# The generator
# ----------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Generator:
  """A GPT-2 with its vocabulary and sequence layout: `prompt_length` prompt tokens, `caption_length` caption
  tokens (the `<EOS>` included); their sum is at most the model's `n_positions`."""

  config: gpt2_lib.GPT2Config
  params: Any
  vocab: Vocab
  prompt_length: int
  caption_length: int
  _searches: dict[tuple[int, bool, bool], Any] = dataclasses.field(init=False, default_factory=dict, repr=False,
                                                              compare=False)

  @property
  def module(self) -> gpt2_lib.GPT2:
    return gpt2_lib.GPT2(self.config)

  def prompt_ids(self, phrase: str, content: str) -> list[int]:
    """`[CLS] phrase [SEP] content` as ids; a GeneratorError when it is empty or longer than `prompt_length`."""
    if not phrase.strip() or not content.strip():
      raise GeneratorError(f"empty {'phrase' if not phrase.strip() else 'caption'} in ({phrase!r}, {content!r}) — "
                           "give a style phrase and a factual caption")
    ids = [self.vocab.cls_id, *self.vocab.encode(phrase), self.vocab.sep_id, *self.vocab.encode(content)]
    if len(ids) > self.prompt_length:
      raise GeneratorError(f"the prompt for ({phrase!r}, {content!r}) is {len(ids)} tokens, longer than this "
                           f"generator's {self.prompt_length} — shorten the phrase or caption, or train a generator "
                           "with longer prompts")
    return ids

  def prompts(self, pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask), each (B, prompt_length), left-padded so that every caption starts at position prompt_length."""
    if not pairs:
      raise GeneratorError("no (phrase, caption) pairs to generate from — give at least one")
    ids = np.full((len(pairs), self.prompt_length), self.vocab.pad_id, np.int32)
    mask = np.zeros_like(ids)
    for row, pair in enumerate(pairs):
      prompt = self.prompt_ids(pair.phrase, pair.content)
      ids[row, self.prompt_length - len(prompt):] = prompt
      mask[row, self.prompt_length - len(prompt):] = 1
    return ids, mask

  def _map(self, ids: jax.Array) -> jax.Array:
    return ids if self.vocab.token_map is None else jnp.asarray(self.vocab.token_map)[ids]

  def _logits(self, logits: jax.Array) -> jax.Array:
    """Model logits -> decode ids' logits, the ids a caption never holds (`<PAD>`, `<BOS>`, `<UNK>`, `[CLS]`,
    `[SEP]`) ruled out, so that no search or sample can put them in the text."""
    if self.vocab.token_map is not None:
      logits = logits[..., jnp.asarray(self.vocab.token_map)]
    banned = [tokens.PAD_ID, tokens.BOS_ID, self.vocab.cls_id, self.vocab.sep_id]
    if isinstance(self.vocab, WordVocab):
      banned.append(tokens.UNK_ID)
    return logits.at[..., jnp.asarray(banned)].set(decode.NEG_INF)

  def step_functions(self, cached: bool = True) -> decode.StepFunctions:
    """`capjax.decode` step functions over inputs (B, 2, P) = stacked prompt ids and mask. Cached: the prompt runs
    once into the key/value cache, then one token per step; uncached: every step reruns the whole sequence (the
    reference the cache must equal)."""
    model, variables, length = self.module, {"params": self.params}, self.prompt_length
    total = length + self.caption_length

    def init(inputs):
      ids, mask = inputs[:, 0], inputs[:, 1]
      full_mask = jnp.concatenate([mask, jnp.ones((ids.shape[0], self.caption_length), mask.dtype)], axis=1)
      if not cached:
        return {"ids": ids, "mask": full_mask, "prefix": jnp.full((ids.shape[0], self.caption_length),
                                                                  tokens.PAD_ID, jnp.int32)}
      cache = model.init_cache(ids.shape[0], total)
      out = model.apply(variables, ids, full_mask, cache, 0)
      return {"cache": out.cache, "mask": full_mask}

    def step(state, token, i):
      if not cached:
        prefix = jax.lax.dynamic_update_slice_in_dim(state["prefix"], token[:, None], i, axis=1)
        seq = jnp.concatenate([state["ids"], self._map(prefix)], axis=1)
        logits = model.apply(variables, seq, state["mask"]).logits
        return self._logits(jax.lax.dynamic_index_in_dim(logits, length + i, 1, False)), {**state, "prefix": prefix}
      out = model.apply(variables, self._map(token)[:, None], state["mask"], state["cache"], length + i)
      return self._logits(out.logits[:, 0]), {**state, "cache": out.cache}

    return decode.StepFunctions(init, step)

  def generate_ids(self, pairs: Sequence[Pair], beam_size: int = 1, cached: bool = True, top_p: float | None = None,
                   seed: int = 0) -> np.ndarray:
    """(B, caption_length) decode ids, `<EOS>` then `<PAD>`: greedy (beam_size 1), beam search, or with `top_p`
    nucleus sampling (reproducible per `seed`)."""
    if top_p is not None and not 0.0 < top_p <= 1.0:
      raise GeneratorError(f"top_p={top_p} is outside (0, 1] — give the probability mass to sample from")
    if top_p is not None and beam_size != 1:
      raise GeneratorError("top_p sampling and beam search are exclusive — give one of them")
    ids, mask = self.prompts(pairs)
    inputs = jnp.asarray(np.stack([ids, mask], axis=1))
    key = (beam_size, cached, top_p is not None)
    if key not in self._searches:  # jitted once per generator and mode; parameters, p and the seed are arguments
      self._searches[key] = jax.jit(self._search_fn(*key))
    return np.asarray(self._searches[key](self.params, inputs, jnp.float32(top_p or 1.0), jax.random.key(seed)))

  def _search_fn(self, beam_size: int, cached: bool, sample: bool):
    def run(params, inputs, top_p, rng):
      fns = dataclasses.replace(self, params=params).step_functions(cached)
      if sample:
        return decode.greedy_search(nucleus(fns, top_p, rng), inputs, self.caption_length)
      if beam_size == 1:
        return decode.greedy_search(fns, inputs, self.caption_length)
      return decode.beam_search(fns, inputs, self.caption_length, beam_size)[0]
    return run

  def generate(self, pairs: Sequence[Pair], beam_size: int = 1, batch_size: int = 256, top_p: float | None = None,
               seed: int = 0) -> list[str]:
    """The stylized caption of each (phrase, factual caption), in batches of `batch_size` rows."""
    captions = []
    for start in range(0, max(len(pairs), 1), batch_size):
      for row in self.generate_ids(pairs[start:start + batch_size], beam_size, top_p=top_p, seed=seed + start):
        words = []
        for token in row:
          if token in (tokens.EOS_ID, tokens.PAD_ID):
            break
          words.append(int(token) if self.vocab.token_map is None else int(self.vocab.token_map[token]))
        captions.append(self.vocab.decode(words))
    return captions


def nucleus(fns: decode.StepFunctions, top_p: jax.Array, rng: jax.Array) -> decode.StepFunctions:
  """Step functions whose argmax is a top-p sample, so that `decode.greedy_search` samples (Gumbel-max: the argmax
  of log p + Gumbel noise over the nucleus is a draw from p renormalised on it). The nucleus is the most probable
  tokens whose mass before them is < top_p; the first token is always in it, so top_p -> 0 is greedy."""

  def step(state, token, i):
    logits, state = fns.step(state, token, i)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32))
    order = jnp.argsort(-logp, axis=-1)
    sorted_p = jnp.exp(jnp.take_along_axis(logp, order, axis=-1))
    before = jnp.cumsum(sorted_p, axis=-1) - sorted_p
    keep = jnp.zeros_like(logp, bool).at[jnp.arange(logp.shape[0])[:, None], order].set(before < top_p)
    keep = keep.at[jnp.arange(logp.shape[0]), order[:, 0]].set(True)
    noise = jax.random.gumbel(jax.random.fold_in(rng, i), logp.shape)
    return jnp.where(keep, logp + noise, decode.NEG_INF), state

  return decode.StepFunctions(fns.init, step)


# ----------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------
def training_pairs(records: Iterable[dict[str, Any]]) -> list[Pair]:
  """Pairs from stylized_scenes records: per stylized caption, its planted phrase, the caption without the
  phrase's word span (`phrase_start`, `phrase_end`) as the content, and the caption as the target."""
  pairs = []
  for record in records:
    s = record["stylized"]
    for caption, phrase, start, end in zip(s["caption"], s["phrase"], s["phrase_start"], s["phrase_end"]):
      words = caption.split()
      pairs.append(Pair(phrase, " ".join(words[:int(start)] + words[int(end):]), caption))
  return pairs


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
    # Jitted: one compile, not one per operation (Flax init op by op takes seconds).
    init = jax.jit(lambda key, ids: nn.meta.unbox(gpt2_lib.GPT2(config).init(key, ids)["params"]))
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
  batch = min(settings.batch_size, len(pairs))
  steps_per_epoch = len(pairs) // batch
  schedule = optax.cosine_decay_schedule(settings.learning_rate, max(1, steps_per_epoch * settings.epochs))
  optimizer = optax.adamw(schedule, weight_decay=settings.weight_decay)
  module, dropout = generator.module, generator.config.dropout_rate > 0 or generator.config.attention_dropout_rate > 0

  def loss_fn(params, ids, mask, weights, rng):
    logits = module.apply({"params": params}, ids, mask, deterministic=not dropout, rngs={"dropout": rng}).logits
    losses = optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], ids[:, 1:])
    return jnp.sum(losses * weights[:, :-1]) / jnp.maximum(jnp.sum(weights), 1.0)

  @jax.jit
  def train_step(params, opt_state, ids, mask, weights, rng):
    loss, grads = jax.value_and_grad(loss_fn)(params, ids, mask, weights, rng)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  params = jax.tree.map(jnp.asarray, generator.params)
  opt_state = optimizer.init(params)
  rng, order_rng = jax.random.key(settings.seed), np.random.default_rng(settings.seed)
  start = time.perf_counter()
  for epoch in range(settings.epochs):
    order = order_rng.permutation(len(pairs))
    for step in range(steps_per_epoch):
      rows = order[step * batch:(step + 1) * batch]
      rng, sub = jax.random.split(rng)
      params, opt_state, loss = train_step(params, opt_state, ids[rows], mask[rows], weights[rows], sub)
    if log:
      print(f"epoch {epoch + 1}/{settings.epochs}: loss {float(loss):.4f} ({time.perf_counter() - start:.1f}s)",
            file=sys.stderr)
  return dataclasses.replace(generator, params=jax.tree.map(np.asarray, params))


# ----------------------------------------------------------------------------------------------------------
# Saving and loading
# ----------------------------------------------------------------------------------------------------------
def save(generator: Generator, directory: str | pathlib.Path) -> pathlib.Path:
  """`generator.json` (GPT-2 config, vocabulary, layout), the BPE files when it has them, `variables/` (orbax)."""
  import orbax.checkpoint as ocp  # noqa: PLC0415 (only saving and loading need orbax)
  directory = pathlib.Path(directory).resolve()
  directory.mkdir(parents=True, exist_ok=True)
  if isinstance(generator.vocab, BPEVocab):
    for name in BPE_FILES:
      shutil.copyfile(generator.vocab.directory / name, directory / name)
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(directory / VARIABLES_DIR, jax.tree.map(np.asarray, generator.params), force=True)
  meta = {"gpt2": generator.config.to_dict(), "vocab": generator.vocab.to_json(),
          "prompt_length": generator.prompt_length, "caption_length": generator.caption_length}
  (directory / GENERATOR_FILE).write_text(json.dumps(meta, indent=2) + "\n")
  return directory


def load(directory: str | pathlib.Path) -> Generator:
  """The generator saved in `directory`; a GeneratorError when it is not one."""
  import orbax.checkpoint as ocp  # noqa: PLC0415
  directory = pathlib.Path(directory).resolve()
  try:
    meta = json.loads((directory / GENERATOR_FILE).read_text(encoding="utf-8"))
    config = gpt2_lib.GPT2Config.from_dict(meta["gpt2"])
    vocab: Vocab = BPEVocab(directory) if meta["vocab"]["kind"] == "bpe" else WordVocab(meta["vocab"]["words"])
    prompt_length, caption_length = int(meta["prompt_length"]), int(meta["caption_length"])
  except FileNotFoundError as error:
    raise GeneratorError(f"{directory} is not a generator checkpoint ({error.filename} is missing) — "
                         f"{TRAIN_HINT}") from error
  except (ValueError, KeyError, TypeError, tokenizers.TokenizerError) as error:
    raise GeneratorError(f"{directory / GENERATOR_FILE} is not a readable generator description ({error}) — "
                         f"{TRAIN_HINT}") from error
  if vocab.size != config.vocab_size or prompt_length + caption_length > config.n_positions:
    raise GeneratorError(f"{directory / GENERATOR_FILE} does not agree with itself (vocabulary {vocab.size} vs "
                         f"{config.vocab_size} rows, or {prompt_length}+{caption_length} positions > "
                         f"{config.n_positions}) — {TRAIN_HINT}")
  target = jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), nn.meta.unbox(gpt2_lib.abstract_params(config)))
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      params = checkpointer.restore(directory / VARIABLES_DIR, target)
  except Exception as error:  # orbax raises many types for a missing or foreign checkpoint
    raise GeneratorError(f"{directory / VARIABLES_DIR} does not hold this generator's parameters "
                         f"({type(error).__name__}) — {TRAIN_HINT}") from error
  for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(target)):
    if np.shape(got) != want.shape:
      raise GeneratorError(f"{directory / VARIABLES_DIR} holds a parameter of shape {np.shape(got)} where the "
                           f"config needs {want.shape} — {TRAIN_HINT}")
  return Generator(config, jax.tree.map(np.asarray, params), vocab, prompt_length, caption_length)


def captions_per_second(generator: Generator, pairs: Sequence[Pair], beam_size: int = 1, repeats: int = 3) -> float:
  """Batched generation speed, compile excluded: the best of `repeats` timed runs."""
  generator.generate_ids(pairs, beam_size)
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    generator.generate_ids(pairs, beam_size)
    best = min(best, time.perf_counter() - start)
  return len(pairs) / best


# ----------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------
def scene_pairs(num: int, seed: int = 0, split_index: int = 0) -> list[Pair]:
  """Training pairs of the embedded data: stylized_scenes' split `split_index` (0: train) drawn in this process,
  as its builder draws it (`capjax.scenes` for the factual caption, `capjax.scenes.stylized` for the phrases):
  `tfds_builders` is an entry-point layer that `capjax.erg` may not import, and no build is needed."""
  from capjax import scenes  # noqa: PLC0415 (the command's data only)
  from capjax.scenes import stylized  # noqa: PLC0415
  pairs = []
  for index in range(num):
    factual = scenes.make_example(seed, split_index, index).captions[0]
    for c in stylized.stylized_captions(seed, split_index, index, factual):
      pairs.append(Pair(c.phrase, c.factual, c.caption))
  return pairs


def read_pairs(path: str) -> list[Pair]:
  """(phrase, factual caption) pairs from a JSONL file ({"phrase", "caption"} per line) or a TSV file
  (`phrase<TAB>caption`); a GeneratorError names the first bad line."""
  from capjax import files  # noqa: PLC0415 (a FIFO, a device, text not UTF-8: an `error:` line)
  lines = split_lines(files.read_text(path, "--input", "a UTF-8 JSONL or TSV file"))
  pairs = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    if path.endswith(".tsv"):
      fields = line.split("\t")
      if len(fields) != 2:
        raise GeneratorError(f"--input={path} line {number} has {len(fields)} tab-separated fields — write "
                             "`phrase<TAB>caption` on every line")
      phrase, caption = fields
    else:
      try:
        record = json.loads(line)
        phrase, caption = record["phrase"], record["caption"]
      except (ValueError, KeyError, TypeError, RecursionError) as error:  # RecursionError: nested thousands deep
        raise GeneratorError(f"--input={path} line {number} is not a JSON object with \"phrase\" and \"caption\" "
                             f"({type(error).__name__}: {error}) — write one such object per line, or a .tsv "
                             "file") from error
      if not isinstance(phrase, str) or not isinstance(caption, str):
        raise GeneratorError(f"--input={path} line {number}: \"phrase\" and \"caption\" must be strings — fix "
                             "that line")
    pairs.append(Pair(phrase.strip(), caption.strip()))
  if not pairs:
    raise GeneratorError(f"--input={path} holds no (phrase, caption) pairs — give at least one line")
  return pairs


def _flags():
  from absl import flags  # noqa: PLC0415 (only the command parses flags)
  values = flags.FlagValues()
  flags.DEFINE_boolean("train", False, "train a generator (else: generate from --generator and --input)",
                       flag_values=values)
  flags.DEFINE_string("output", None, "--train: the directory to save the generator in; generate: a JSONL file "
                      "to write (default: stdout)", flag_values=values)
  flags.DEFINE_string("weights", None, "--train: a converted GPT-2 directory (convert_weights --format=hf_gpt2) "
                      "to fine-tune; default: a tiny GPT-2 from scratch", flag_values=values)
  flags.DEFINE_integer("num_train", 500, "--train: stylized_scenes training images (two captions each)",
                       lower_bound=1, flag_values=values)
  flags.DEFINE_integer("epochs", None, "--train: epochs (default: 1 fine-tuning, 20 from scratch)", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_float("learning_rate", None, "--train: peak AdamW rate (default: 5e-5 fine-tuning, 3e-3 from "
                     "scratch)", lower_bound=0.0, flag_values=values)
  flags.DEFINE_string("generator", None, "generate: a directory saved by --train", flag_values=values)
  flags.DEFINE_string("input", None, "generate: a .jsonl ({\"phrase\", \"caption\"} per line) or .tsv "
                      "(phrase<TAB>caption) file", flag_values=values)
  flags.DEFINE_integer("beam_size", 1, "generate: 1 for greedy, more for beam search", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_float("top_p", None, "generate: sample from the nucleus of this probability mass instead of "
                     "searching (with --seed)", flag_values=values)
  flags.DEFINE_integer("seed", 0, "generate: the sampling seed for --top_p", flag_values=values)
  flags.DEFINE_integer("batch_size", 256, "generate: captions per batch", lower_bound=1, flag_values=values)
  return values


def main(argv: Sequence[str]) -> None:
  """argv as `app.run` passes it: the program name, then the flags."""
  from capjax import cli  # noqa: PLC0415
  values = _flags()
  cli.parse(values, argv, __doc__)
  if values["learning_rate"].value is not None:  # 0 is a value (that trains nothing), not "unset"
    cli.check_number("--learning_rate", values["learning_rate"].value, 0, low_open=True)
  if values["top_p"].value is not None:
    cli.check_number("--top_p", values["top_p"].value, 0, 1, low_open=True, hint=" (the probability mass to sample "
                     "from)")
  try:
    if values["train"].value:
      if not values["output"].value:
        cli.fail("--train needs --output=DIR — give the directory to save the generator in")
      output = cli.writable_dir(values["output"].value, "--output")
      base = PAPER if values["weights"].value else SCRATCH
      given = {k: values[k].value for k in ("epochs", "learning_rate") if values[k].value is not None}
      settings = dataclasses.replace(base, **given)
      from capjax.text_models import checkpoint  # noqa: PLC0415
      try:
        generator = train(scene_pairs(values["num_train"].value), settings, values["weights"].value, log=True)
      except checkpoint.WeightsError as error:  # says what to do
        cli.fail(f"--weights={values['weights'].value}: {error}")
      print(save(generator, output))
      return
    if not values["generator"].value or not values["input"].value:
      cli.fail("generating needs --generator=DIR and --input=PAIRS.jsonl|.tsv (or --train to train) — see --help")
    from capjax import files  # noqa: PLC0415
    files.text_input(values["input"].value, "--input", "a UTF-8 JSONL or TSV file")  # before the generator loads
    if values["output"].value is not None:  # checked before the generator loads: an input is never overwritten
      files.output_file(values["output"].value, inputs={"--input": values["input"].value}, example="stylized.jsonl")
    try:
      generator = load(values["generator"].value)
    except GeneratorError as error:
      cli.fail(f"--generator={values['generator'].value}: {error}")
    pairs = read_pairs(values["input"].value)
    captions = generator.generate(pairs, values["beam_size"].value, values["batch_size"].value,
                                  values["top_p"].value, values["seed"].value)
    lines = [json.dumps({"phrase": p.phrase, "caption": p.content, "stylized": c}) for p, c in zip(pairs, captions)]
    if values["output"].value:
      with files.writing(values["output"].value) as f:
        f.write("\n".join(lines) + "\n")
    else:
      print("\n".join(lines))
  except GeneratorError as error:
    cli.fail(str(error))


if __name__ == "__main__":
  from capjax import cli
  cli.run(main)
