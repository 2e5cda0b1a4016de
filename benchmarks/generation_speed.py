"""Captions/s of ERG's generator: batched KV-cached greedy or beam decoding of `[CLS] phrase [SEP] caption`
prompts, at the tiny from-scratch size and at GPT-2 small's (768 wide, 12 layers, 50,261 ids), random weights.

usage: python benchmarks/generation_speed.py [--sizes=small,gpt2] [--batch=64] [--beam_size=1] [--prompt_length=24]
           [--caption_length=24]
Random weights rarely emit <EOS>, so every caption runs all --caption_length steps: a worst case for the decode
loop (a trained generator stops at the longest caption of the batch). Compilation is not timed; the figure is the
best of three runs. The prompts are stylized_scenes' test captions with their planted phrases.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from flax import linen as nn

from capjax import cli
from capjax.erg import generate
from capjax.text_models import gpt2 as gpt2_lib

SIZES = {
    "small": generate.TINY,
    "gpt2": dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50_257 + 4),
}
FLAGS = flags.FlagValues()
_SIZES = flags.DEFINE_list("sizes", list(SIZES), f"of {list(SIZES)}", flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch", 64, "captions per batch", lower_bound=1, flag_values=FLAGS)
_BEAM = flags.DEFINE_integer("beam_size", 1, "1: greedy; more: beam search", lower_bound=1, flag_values=FLAGS)
_PROMPT = flags.DEFINE_integer("prompt_length", 24, "prompt positions", lower_bound=8, flag_values=FLAGS)
_CAPTION = flags.DEFINE_integer("caption_length", 24, "caption positions", lower_bound=2, flag_values=FLAGS)


def random_generator(size: str, pairs: Sequence[generate.Pair]) -> generate.Generator:
  vocab = generate.WordVocab.from_texts(t for p in pairs for t in (p.phrase, p.content))
  fields = {**SIZES[size]}
  config = gpt2_lib.GPT2Config(vocab_size=fields.pop("vocab_size", vocab.size), **fields)
  params = nn.meta.unbox(gpt2_lib.GPT2(config).init(jax.random.key(0), jnp.zeros((1, 2), jnp.int32))["params"])
  return generate.Generator(config, jax.tree.map(np.asarray, params), vocab, _PROMPT.value, _CAPTION.value)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if unknown := sorted(set(_SIZES.value) - set(SIZES)):
    cli.fail(f"--sizes: unknown {unknown} — choose from {list(SIZES)}")
  pairs = generate.scene_pairs(-(-_BATCH.value // 2), split_index=2)[:_BATCH.value]
  print(f"{jax.devices()[0].platform}: batch {len(pairs)}, beam {_BEAM.value}, {_CAPTION.value} caption steps")
  for size in _SIZES.value:
    generator = random_generator(size, pairs)
    try:
      rate = generate.captions_per_second(generator, pairs, _BEAM.value)
    except generate.GeneratorError as error:
      cli.fail(f"{error}")
    print(f"{size}: {rate:,.1f} captions/s")


if __name__ == "__main__":
  cli.run(main)
