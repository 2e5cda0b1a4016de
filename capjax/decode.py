"""Caption decoding: batched greedy and beam search, each one `lax.while_loop`, over a step function.

A step function maps (state, previous token, position) to next-token logits and a new state. `cached_step`
keeps self-attention keys/values per layer and cross-attention keys/values computed once per image;
`uncached_step` recomputes the whole prefix (the reference the cache must equal). An LSTM's carry is its state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp

from capjax.models.captioner import Captioner
from capjax.tokens import BOS_ID, EOS_ID, PAD_ID

NEG_INF = -1e9
State = Any


@dataclasses.dataclass(frozen=True)
class StepFunctions:
  """`init(inputs) -> state` (leading batch axis on every leaf); `step(state, token, i) -> (logits, state)`.
  `log_probs`: the step gives normalised float32 log-probabilities (an ensemble's, `capjax.ensemble`), which beam
  search scores as they are rather than through another log-softmax."""

  init: Callable[[jax.Array], State]
  step: Callable[[State, jax.Array, jax.Array], tuple[jax.Array, State]]
  log_probs: bool = False


def cached_step(model: Captioner, params: Any) -> StepFunctions:
  variables = {"params": params}

  def init(inputs):
    memory = model.apply(variables, inputs, method=model.encode)
    return model.apply(variables, memory, method=model.init_cache)

  def step(cache, token, i):
    return model.apply(variables, cache, token, i, method=model.decode_step)

  return StepFunctions(init, step)


def uncached_step(model: Captioner, params: Any, max_len: int) -> StepFunctions:
  variables = {"params": params}

  def init(inputs):
    memory = model.apply(variables, inputs, method=model.encode)
    return {"memory": memory, "prefix": jnp.full((inputs.shape[0], max_len), PAD_ID, jnp.int32)}

  def step(state, token, i):
    prefix = jax.lax.dynamic_update_slice_in_dim(state["prefix"], token[:, None], i, axis=1)
    logits = model.apply(variables, state["memory"], prefix, method=model.decode)
    return jax.lax.dynamic_index_in_dim(logits, i, axis=1, keepdims=False), {**state, "prefix": prefix}

  return StepFunctions(init, step)


# ----------------------------------------------------------------------------------------------------------
# Greedy
# ----------------------------------------------------------------------------------------------------------
def token_loop(fns: StepFunctions, state: Any, rows: int, max_len: int, start: int,
               choose: Callable[[jax.Array, jax.Array], jax.Array]) -> jax.Array:
  """The one left-to-right loop of greedy search and sampling: from the token `start` and the decoder `state` of
  `rows` rows, `choose(logits, i)` picks each row's token at position i; (rows, max_len) token ids, EOS once then
  PAD. Stops when every row has ended."""
  return scored_token_loop(fns, state, rows, max_len, start, choose, score=False)[0]


def scored_token_loop(fns: StepFunctions, state: Any, rows: int, max_len: int, start: int,
                      choose: Callable[[jax.Array, jax.Array], jax.Array],
                      score: bool = True) -> tuple[jax.Array, jax.Array]:
  """`token_loop`, and each row's log-probability of the tokens it chose (EOS included; (rows,) float32) with
  `score`: the figure recaptioning writes beside a greedy caption. The tokens are the same either way (the scores
  only read the logits the choice was made from)."""
  out = jnp.full((rows, max_len), PAD_ID, jnp.int32)

  def cond(carry):
    i, _, _, done, _, _ = carry
    return (i < max_len) & ~jnp.all(done)

  def body(carry):
    i, state, token, done, out, logp = carry
    logits, state = fns.step(state, token, i)
    chosen = choose(logits, i).astype(jnp.int32)
    nxt = jnp.where(done, PAD_ID, chosen)
    if score:
      step_logp = logits if fns.log_probs else jax.nn.log_softmax(logits.astype(jnp.float32))
      taken = jnp.take_along_axis(step_logp, chosen[:, None], axis=-1)[:, 0]
      logp = logp + jnp.where(done, 0.0, taken)
    out = jax.lax.dynamic_update_slice_in_dim(out, nxt[:, None], i, axis=1)
    return i + 1, state, nxt, done | (nxt == EOS_ID), out, logp

  init = (jnp.int32(0), state, jnp.full((rows,), start, jnp.int32), jnp.zeros((rows,), bool), out,
          jnp.zeros((rows,), jnp.float32))
  _, _, _, _, out, logp = jax.lax.while_loop(cond, body, init)
  return out, logp


def greedy_search(fns: StepFunctions, inputs: jax.Array, max_len: int, start: int = BOS_ID) -> jax.Array:
  """Argmax decoding from the token `start` (BOS, or a style tag): (B, max_len) token ids, EOS once then PAD.
  Stops when every row has ended."""
  return token_loop(fns, fns.init(inputs), inputs.shape[0], max_len, start,
                    lambda logits, i: jnp.argmax(logits, axis=-1))


def greedy_search_scored(fns: StepFunctions, inputs: jax.Array, max_len: int,
                         start: int = BOS_ID) -> tuple[jax.Array, jax.Array]:
  """`greedy_search`'s tokens and each caption's log-probability (B,)."""
  return scored_token_loop(fns, fns.init(inputs), inputs.shape[0], max_len, start,
                           lambda logits, i: jnp.argmax(logits, axis=-1))


def greedy(model: Captioner, params: Any, inputs: jax.Array, max_len: int) -> jax.Array:
  return greedy_search(cached_step(model, params), inputs, max_len)


# ----------------------------------------------------------------------------------------------------------
# Beam search
# ----------------------------------------------------------------------------------------------------------
def length_penalty(length: jax.Array, alpha: float) -> jax.Array:
  """GNMT's ((5 + length) / 6) ** alpha; scores are log-probabilities divided by it."""
  return ((5.0 + length.astype(jnp.float32)) / 6.0) ** alpha


def top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
  """`jax.lax.top_k` over the last axis (the k largest, ties to the lower index) as one stable sort, because
  TensorFlow 2.21 cannot run an exported `lax.top_k` (JAX writes it as a StableHLO composite newer than TF reads):
  a sort is plain StableHLO, and `capjax.export`'s SavedModel decodes with it."""
  # `lax.top_k` orders floats totally (+0.0 above -0.0), where `lax.sort` takes the two zeros for one: sort on the
  # total order's integer key instead, inverted bitwise for largest first (a negation would overflow at INT_MIN).
  bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
  key = jnp.where(bits < 0, bits ^ jnp.int32(0x7FFFFFFF), bits)
  index = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
  _, index = jax.lax.sort((~key, index), dimension=x.ndim - 1, is_stable=True, num_keys=1)
  index = index[..., :k]
  return jnp.take_along_axis(x, index, axis=-1), index


def _tile(tree: State, k: int) -> State:
  return jax.tree.map(lambda x: jnp.repeat(x, k, axis=0), tree)


def _gather_beams(tree: State, beam_index: jax.Array, batch: int, old_k: int) -> State:
  """Rows of a (batch * old_k, ...) tree picked per batch element by beam_index (batch, new_k)."""
  def gather(x):
    x = x.reshape(batch, old_k, *x.shape[1:])
    y = jnp.take_along_axis(x, beam_index.reshape(batch, -1, *([1] * (x.ndim - 2))), axis=1)
    return y.reshape(batch * beam_index.shape[1], *x.shape[2:])
  return jax.tree.map(gather, tree)


@flax.struct.dataclass
class BeamState:
  """The loop state of `beam_search` for B images and k beams; the model state's rows are (image, beam)."""

  i: jax.Array           # () the position being decoded
  state: State           # the step function's state, tiled to B * k rows
  last: jax.Array        # (B * k,) each live beam's last token, the next step's input
  live_logp: jax.Array   # (B, k) log p of the live beams, best first
  live_seqs: jax.Array   # (B, k, max_len) their tokens, PAD after position i
  fin_scores: jax.Array  # (B, k) penalized scores of the best finished hypotheses, best first (NEG_INF: none)
  fin_seqs: jax.Array    # (B, k, max_len) their tokens, EOS included


def beam_search(fns: StepFunctions, inputs: jax.Array, max_len: int, beam_size: int = 4,
                alpha: float = 0.6, start: int = BOS_ID) -> tuple[jax.Array, jax.Array]:
  """The best sequence per image under log p / GNMT penalty, from the token `start` (BOS, or a style tag):
  (tokens (B, max_len), scores (B,)): the first of `beam_hypotheses`."""
  seqs, scores = beam_hypotheses(fns, inputs, max_len, beam_size, alpha, start)
  return seqs[:, 0], scores[:, 0]


def beam_hypotheses(fns: StepFunctions, inputs: jax.Array, max_len: int, beam_size: int = 4,
                    alpha: float = 0.6, start: int = BOS_ID) -> tuple[jax.Array, jax.Array]:
  """The k = `beam_size` best finished sequences per image, best first: (tokens (B, k, max_len), scores (B, k));
  a score of NEG_INF marks a slot no hypothesis filled (recaptioning writes the k best; an export serves them).

  Top-2k expansion keeps k live beams even when k candidates end; a finished hypothesis is scored with the
  penalty of its length (EOS included). The loop exits when no live beam can beat the k-th finished one.
  """
  batch, k = inputs.shape[0], beam_size
  best_penalty = length_penalty(jnp.asarray(max_len), alpha)

  def cond(s: BeamState) -> jax.Array:
    # Log-probabilities only fall, and the largest penalty is at max_len: an upper bound for live beams.
    can_improve = jnp.any(s.live_logp[:, 0] / best_penalty > s.fin_scores[:, -1])
    return (s.i < max_len) & can_improve

  def body(s: BeamState) -> BeamState:
    i, live_logp, live_seqs = s.i, s.live_logp, s.live_seqs
    logits, state = fns.step(s.state, s.last, i)
    vocab = logits.shape[-1]
    logp = (logits if fns.log_probs else jax.nn.log_softmax(logits.astype(jnp.float32))).reshape(batch, k, vocab)
    cand = (live_logp[:, :, None] + logp).reshape(batch, k * vocab)
    top_logp, top_index = top_k(cand, 2 * k)
    parent, token = top_index // vocab, (top_index % vocab).astype(jnp.int32)
    seqs = jnp.take_along_axis(live_seqs, parent[:, :, None], axis=1)
    seqs = jax.lax.dynamic_update_slice_in_dim(seqs, token[:, :, None], i, axis=2)
    ended = (token == EOS_ID) | (i == max_len - 1)
    # Finished: merge the ended candidates with those kept so far, best k first.
    new_fin = jnp.where(ended, top_logp / length_penalty(i + 1, alpha), NEG_INF)
    all_scores = jnp.concatenate([s.fin_scores, new_fin], axis=1)
    all_seqs = jnp.concatenate([s.fin_seqs, seqs], axis=1)
    fin_scores, keep = top_k(all_scores, k)
    fin_seqs = jnp.take_along_axis(all_seqs, keep[:, :, None], axis=1)
    # Live: the best k candidates that did not end.
    live_cand = jnp.where(ended, NEG_INF, top_logp)
    live_logp, keep = top_k(live_cand, k)
    live_seqs = jnp.take_along_axis(seqs, keep[:, :, None], axis=1)
    state = _gather_beams(state, jnp.take_along_axis(parent, keep, axis=1), batch, k)
    last = jnp.take_along_axis(token, keep, axis=1).reshape(batch * k)
    return BeamState(i + 1, state, last, live_logp, live_seqs, fin_scores, fin_seqs)

  init = BeamState(
      i=jnp.int32(0),
      state=_tile(fns.init(inputs), k),
      last=jnp.full((batch * k,), start, jnp.int32),
      live_logp=jnp.tile(jnp.asarray([0.0] + [NEG_INF] * (k - 1), jnp.float32), (batch, 1)),
      live_seqs=jnp.full((batch, k, max_len), PAD_ID, jnp.int32),
      fin_scores=jnp.full((batch, k), NEG_INF, jnp.float32),
      fin_seqs=jnp.full((batch, k, max_len), PAD_ID, jnp.int32))
  final = jax.lax.while_loop(cond, body, init)
  return final.fin_seqs, final.fin_scores
