"""What augmenting CC3M's 3.3M captions with ERG would cost: each stage of `python -m capjax.erg.augment
--mode=t2t` timed here on real captions, then projected to --captions on this machine and on an accelerator.

usage: python benchmarks/augment_projection.py [--captions=3300000] [--n=512] [--bank=7000] [--gen_batch=64]
           [--accelerator_tflops=989] [--mfu=0.3] [--host_cores=16] [--tiny]
The stages, per factual caption (the paper's sizes, random weights where speed does not depend on them):
  tokenize  MiniLM's WordPiece on the host (only when the minilm extra is installed);
  embed     the query caption through the retriever's text tower: the real all-MiniLM-L6-v2 (minilm extra) when
            installed, otherwise a random-weight network of its shape;
  search    exact cosine top-1 against a stylized bank of --bank scenes (FlickrStyle10K's size), 384-d;
  generate  GPT-2 small (the paper's generator), greedy, 24 caption steps after a 24-position prompt, KV cache:
            random weights never stop early, so every caption takes all 24 steps (a worst case);
  classify  the style classifier's BERT-base forward (the paper's BERT), 32 positions;
  ppl       the trigram perplexity filter (`capjax.metrics.stylized_lm`), host Python.
Captions are CC3M's validation captions (../shared/data/cc3m) when present, else stylized_scenes'. The
accelerator column is a projection, not a measurement: FLOPs per caption counted analytically (2 x multiply-adds
of every dense layer and attention product), over --accelerator_tflops x --mfu (989: an H100/H200's dense
bfloat16 peak from its spec sheet; 0.3: an assumed utilization); the host stages (tokenize, ppl) stay on the
host, over --host_cores. Run this script on the accelerator itself to measure instead of projecting: every model
stage is JAX and runs on the default device. --tiny swaps in 2-layer random models everywhere (MiniLM is not
used), so that a test can check the script runs; its figures mean nothing.
"""

from __future__ import annotations

import csv
import pathlib
import tempfile
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags, logging
from flax import linen as nn

from capjax import cli
from capjax.erg import generate, retrieve
from capjax.metrics import stylized_lm
from capjax.text_models import bert as bert_lib
from capjax.text_models import embed as embed_lib
from capjax.text_models import gpt2 as gpt2_lib
from capjax.text_models import minilm

CC3M_TSV = (pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "cc3m"
            / "Validation_GCC-1.1.0-Validation.tsv")
MINILM = bert_lib.BertConfig(vocab_size=30_522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                             intermediate_size=1536)
BERT_BASE = bert_lib.BertConfig(vocab_size=30_522)
GPT2_SMALL = dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024)
GPT2_VOCAB = 50_257
POSITIONS, PROMPT, STEPS = 32, 24, 24
TINY_BERT = bert_lib.BertConfig(vocab_size=2_000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64)
TINY_GPT2 = dict(n_embd=32, n_layer=2, n_head=2, n_positions=64)

FLAGS = flags.FlagValues()
_CAPTIONS = flags.DEFINE_integer("captions", 3_300_000, "factual captions to project to (CC3M: 3.3M)",
                                 lower_bound=1, flag_values=FLAGS)
_N = flags.DEFINE_integer("n", 512, "captions timed per stage (embed, classify, ppl)", lower_bound=8,
                          flag_values=FLAGS)
_BANK = flags.DEFINE_integer("bank", 7_000, "stylized scenes in the bank", lower_bound=1, flag_values=FLAGS)
_GEN_BATCH = flags.DEFINE_integer("gen_batch", 64, "captions per generation batch", lower_bound=1, flag_values=FLAGS)
_TFLOPS = flags.DEFINE_float("accelerator_tflops", 989.0, "the accelerator's dense peak, TFLOP/s", lower_bound=0.001,
                             flag_values=FLAGS)
_MFU = flags.DEFINE_float("mfu", 0.3, "the utilization assumed on the accelerator", lower_bound=0.001,
                          upper_bound=1.0, flag_values=FLAGS)
_TINY = flags.DEFINE_bool("tiny", False, "2-layer random models: checks the script runs (figures mean nothing)",
                          flag_values=FLAGS)
_HOST_CORES = flags.DEFINE_integer("host_cores", 16, "host cores for the ppl stage on the accelerator machine",
                                   lower_bound=1, flag_values=FLAGS)


def captions(n: int) -> tuple[list[str], str]:
  if CC3M_TSV.exists():
    with CC3M_TSV.open(encoding="utf-8", newline="") as f:
      rows = [row[0] for row, _ in zip(csv.reader(f, delimiter="\t"), range(n))]
    return rows, "CC3M validation"
  pairs = generate.scene_pairs(n, split_index=2)
  return [p.content for p in pairs][:n], "stylized_scenes"


def encoder_flops(config: bert_lib.BertConfig, positions: int) -> float:
  """Forward FLOPs of one sequence: the dense layers (q, k, v, output, two feed-forward) and the attention."""
  d, ff = config.hidden_size, config.intermediate_size
  return config.num_hidden_layers * positions * (2 * (4 * d * d + 2 * d * ff) + 4 * positions * d)


def generation_flops(width: int, layers: int, vocab: int, prompt: int, steps: int) -> float:
  """One caption: the prompt's forward, then each step's one position over its cached context and its logits."""
  per_position = 2 * (4 * width * width + 8 * width * width)  # q, k, v, out and the 4x-wide feed-forward
  prompt_cost = layers * prompt * (per_position + 2 * prompt * width)
  step_cost = sum(layers * (per_position + 4 * (prompt + t) * width) + 2 * width * vocab for t in range(steps))
  return prompt_cost + step_cost


def best_rate(fn: Callable[[], object], items: int, repeats: int = 3) -> float:
  fn()  # compile
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    best = min(best, time.perf_counter() - start)
  return items / best


def random_bert(config: bert_lib.BertConfig) -> Callable[[np.ndarray, np.ndarray], jax.Array]:
  module = bert_lib.Bert(config)
  params = nn.meta.unbox(jax.jit(module.init)(jax.random.key(0), jnp.zeros((1, POSITIONS), jnp.int32))["params"])
  forward = jax.jit(lambda p, i, m: bert_lib.mean_pool(module.apply({"params": p}, i, m).last_hidden_state, m))
  return lambda ids, mask: forward(params, ids, mask)


def padded_ids(n: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, vocab, (n, POSITIONS), dtype=np.int32)
  mask = np.ones((n, POSITIONS), np.int32)
  return ids, mask


def time_embed(texts: Sequence[str], config: bert_lib.BertConfig) -> list[tuple[str, float, float, str]]:
  """The embed row, and a host `tokenize` row before it when the real MiniLM (and its WordPiece) is installed."""
  flops = encoder_flops(config, POSITIONS)
  try:
    source = None if _TINY.value else minilm.model_dir()
  except minilm.MissingError:
    source = None
  if source is None:
    forward = random_bert(config)
    ids, mask = padded_ids(len(texts), config.vocab_size)
    return [("embed", best_rate(lambda: forward(ids, mask), len(texts)), flops,
             f"random weights, {config.hidden_size} wide (tokenizing not timed: minilm extra not installed)")]
  from capjax.tools import convert_weights
  with tempfile.TemporaryDirectory() as tmp:
    convert_weights.convert_hf("hf_bert", source, tmp)
    embedder = embed_lib.Embedder.load(tmp)
    tokenize = best_rate(lambda: embedder.tokenizer.encode(list(texts)), len(texts))
    rate = best_rate(lambda: embedder.embed(list(texts), batch_size=256)[0], len(texts))
  return [("tokenize", tokenize, 0.0, "MiniLM's WordPiece (tensorflow-text), one host"),
          ("embed", 1 / (1 / rate - 1 / tokenize), flops, "all-MiniLM-L6-v2 forward (timed with tokenizing, "
           "which is subtracted)")]


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  logging.set_verbosity(logging.WARNING)  # orbax logs every step of the MiniLM conversion at INFO
  texts, source = captions(_N.value)
  print(f"{jax.devices()[0].platform}: {len(texts)} {source} captions timed per stage; projecting to "
        f"{_CAPTIONS.value:,} captions")
  rows = []
  text_tower, classifier = (TINY_BERT, TINY_BERT) if _TINY.value else (MINILM, BERT_BASE)
  gpt2_size = TINY_GPT2 if _TINY.value else GPT2_SMALL

  rows.extend(time_embed(texts, text_tower))

  rng = np.random.default_rng(0)
  dim = MINILM.hidden_size
  bank = retrieve.Bank(rng.standard_normal((_BANK.value, dim), np.float32))
  queries = retrieve.normalize(rng.standard_normal((max(len(texts), 1024), dim), np.float32))
  rate = best_rate(lambda: bank.search(queries, k=1).ids, len(queries))
  rows.append(("search", rate, 2.0 * _BANK.value * dim, f"top-1 of {_BANK.value:,} x {dim}, JAX"))

  pairs = generate.scene_pairs(-(-_GEN_BATCH.value // 2), split_index=2)[:_GEN_BATCH.value]
  vocab = generate.WordVocab.from_texts(t for p in pairs for t in (p.phrase, p.content))
  config = gpt2_lib.GPT2Config(vocab_size=GPT2_VOCAB + 4, **gpt2_size)
  params = nn.meta.unbox(jax.jit(gpt2_lib.GPT2(config).init)(jax.random.key(0), jnp.zeros((1, 2), jnp.int32))["params"])
  generator = generate.Generator(config, params, vocab, PROMPT, STEPS)
  rate = generate.captions_per_second(generator, pairs, beam_size=1, repeats=2)
  rows.append(("generate", rate, generation_flops(config.n_embd, config.n_layer, GPT2_VOCAB, PROMPT, STEPS),
               f"GPT-2 {config.n_layer} layers x {config.n_embd}, greedy, batch {len(pairs)}, {STEPS} steps"))

  forward = random_bert(classifier)
  ids, mask = padded_ids(len(texts), classifier.vocab_size)
  rows.append(("classify", best_rate(lambda: forward(ids, mask), len(texts)), encoder_flops(classifier, POSITIONS),
               f"BERT {classifier.num_hidden_layers} layers x {classifier.hidden_size} forward, random weights"))

  lm = stylized_lm.StyleLanguageModel.train([p.caption or f"{p.phrase} {p.content}"
                                             for p in generate.scene_pairs(2000)], "romantic")
  lm.perplexity(texts[:1])  # builds nltk's model and its index once
  start = time.perf_counter()
  for text in texts:
    lm.perplexity([text])
  rows.append(("ppl", len(texts) / (time.perf_counter() - start), 0.0, "Kneser-Ney trigram, one host core"))

  total = _CAPTIONS.value
  accel = _TFLOPS.value * 1e12 * _MFU.value
  print(f"\n| stage | here (captions/s) | hours here for {total:,} | GFLOP a caption | accelerator minutes "
        f"({_TFLOPS.value:g} TFLOP/s x {_MFU.value:g}; host stages over {_HOST_CORES.value} cores) | what ran |")
  print("|---|---:|---:|---:|---:|---|")
  here_total = accel_total = 0.0
  for stage, rate, flops, what in rows:
    hours = total / rate / 3600
    accel_minutes = total * flops / accel / 60 if flops else hours * 60 / _HOST_CORES.value
    here_total += hours
    accel_total += accel_minutes
    where = "" if flops else " (host)"
    print(f"| {stage} | {rate:,.1f} | {hours:,.1f} | {flops / 1e9:.2f} | {accel_minutes:,.1f}{where} | {what} |")
  print(f"| all | {total / (here_total * 3600):,.1f} | {here_total:,.1f} | | {accel_total:,.1f} | stages in turn |")


if __name__ == "__main__":
  cli.run(main)
