"""The generator: a GPT-2 with its vocabulary and sequence layout (the prompt left-padded to `prompt_length`, then
`<BOS>` caption `<EOS>`), batched greedy or beam search over the key/value cache through `capjax.decode`, and top-p
sampling (`nucleus`)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from capjax import decode, tokens
from capjax.erg.generator.vocab import Vocab, WordVocab
from capjax.text_models import gpt2 as gpt2_lib


class GeneratorError(ValueError):
  """Input the generator cannot use (an empty batch, a prompt longer than the model's positions, a directory that
  is not a generator): the message says what is wrong and what to do."""


@dataclasses.dataclass(frozen=True)
class Pair:
  """One training or inference example: the style phrase, the caption without it and (training) the target."""

  phrase: str
  content: str
  caption: str = ""


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



def captions_per_second(generator: Generator, pairs: Sequence[Pair], beam_size: int = 1, repeats: int = 3) -> float:
  """Batched generation speed, compile excluded: the best of `repeats` timed runs."""
  generator.generate_ids(pairs, beam_size)
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    generator.generate_ids(pairs, beam_size)
    best = min(best, time.perf_counter() - start)
  return len(pairs) / best
