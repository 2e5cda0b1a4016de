"""CLIP score throughput on this machine for ViT-B/32 shapes (random weights: speed does not depend on them), and the
projected hours to score CC3M (3.3M pairs) and a 5-billion-candidate pool, here and on an accelerator whose
throughput is ASSUMED (--accelerator_pairs_per_s), not measured.

usage: python benchmarks/clip_speed.py [--batch=32] [--caption_tokens=32] [--repeats=3]
           [--accelerator_pairs_per_s=5000] [--tiny]
Rows: the image tower on a batch of 224-pixel images, the text tower on a batch of captions padded to
--caption_tokens (CC3M's captions are 10 words on average: 32 tokens hold most; CLIP's context is 77), the pair
(both towers), and the CPU preprocessing (JPEG decode, bicubic resize, crop, normalize: `clip_score.preprocess`)
of a 500x375 JPEG. Times are the best of --repeats after one compiling call; process CPU seconds are shown beside
wall seconds (on a shared machine the wall clock also counts other work), and the CPU projection is in core-hours
of the towers' CPU time (preprocessing adds its own row's). GFLOP are XLA's count of the compiled towers. --tiny
runs a 2-layer 32-wide CLIP at 32 pixels (the test's check that the benchmark runs), whose figures mean nothing.
"""

from __future__ import annotations

import io
import resource
import time
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from PIL import Image

from capjax import cli
from capjax.image import io as image_io
from capjax.text_models import clip, clip_score

POOLS = {"CC3M": 3_300_000, "5B candidates": 5_000_000_000}
FLAGS = flags.FlagValues()
_BATCH = flags.DEFINE_integer("batch", 32, "images (and captions) per call", lower_bound=1, flag_values=FLAGS)
_TOKENS = flags.DEFINE_integer("caption_tokens", 32, "caption length the text tower runs at (at most 77)",
                               lower_bound=2, upper_bound=77, flag_values=FLAGS)
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls per row (the best is shown)", lower_bound=1,
                                flag_values=FLAGS)
_ACCELERATOR = flags.DEFINE_float("accelerator_pairs_per_s", 5000.0, "ASSUMED image-caption pairs/s of one "
                                  "accelerator on ViT-B/32 (an A100-class GPU in bfloat16 with its input pipeline "
                                  "keeping up): the projection's assumption, not a measurement", lower_bound=1e-9,
                                  flag_values=FLAGS)
_TINY = flags.DEFINE_bool("tiny", False, "a 2-layer 32-wide CLIP at 32 pixels: checks that the benchmark runs",
                          flag_values=FLAGS)


def config() -> clip.CLIPConfig:
  if not _TINY.value:
    return clip.CLIPConfig()  # Hugging Face's defaults are openai/clip-vit-base-patch32's shapes
  tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
  return clip.CLIPConfig(clip.CLIPTextConfig(**tower, vocab_size=1000),
                         clip.CLIPVisionConfig(**tower, image_size=32, patch_size=8), projection_dim=16)


def random_params(c: clip.CLIPConfig) -> dict:
  """normal(0, 0.02) for every parameter, drawn with numpy (no compile of a 150M-parameter initializer)."""
  rng = np.random.default_rng(0)
  return jax.tree.map(lambda x: jnp.asarray(rng.standard_normal(x.shape, np.float32) * 0.02),
                      nn.meta.unbox(clip.abstract_params(c)))


def cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def best_of(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
  """(wall seconds, process CPU seconds) of the fastest of `repeats` calls."""
  best = (float("inf"), float("inf"))
  for _ in range(repeats):
    wall, cpu = time.perf_counter(), cpu_seconds()
    jax.block_until_ready(fn())
    best = min(best, (time.perf_counter() - wall, cpu_seconds() - cpu))
  return best


def gflop(compiled) -> float:
  analysis = compiled.cost_analysis()
  analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
  return float(analysis.get("flops", float("nan"))) / 1e9


def jpeg(width: int = 500, height: int = 375) -> bytes:
  """A smooth synthetic photo-sized JPEG (noise would make decoding unrepresentatively slow)."""
  y, x = np.mgrid[0:height, 0:width]
  pixels = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], -1).astype(np.uint8)
  out = io.BytesIO()
  Image.fromarray(pixels).save(out, "JPEG", quality=90)
  return out.getvalue()


def hours(count: int, per_second: float) -> str:
  return f"{count / per_second / 3600:,.1f} h"


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  c, batch, tokens = config(), _BATCH.value, min(_TOKENS.value, config().text.max_position_embeddings)
  module, variables = clip.CLIP(c), {"params": random_params(c)}
  rng = np.random.default_rng(1)
  size = c.vision.image_size
  pixels = jnp.asarray(rng.standard_normal((batch, size, size, c.vision.num_channels), np.float32))
  ids = rng.integers(0, c.text.vocab_size - 1, (batch, tokens)).astype(np.int32)
  ids[:, -1] = c.text.vocab_size - 1  # every row ends with the highest id, as CLIP's <|endoftext|> is
  ids, mask = jnp.asarray(ids), jnp.ones((batch, tokens), jnp.int32)

  image = jax.jit(lambda v, x: clip.normalize(module.apply(v, x, method="embed_image")))
  text = jax.jit(lambda v, i, m: clip.normalize(module.apply(v, i, m, method="embed_text")))
  image_c = image.lower(variables, pixels).compile()
  text_c = text.lower(variables, ids, mask).compile()
  image_c(variables, pixels).block_until_ready()
  text_c(variables, ids, mask).block_until_ready()
  image_s = best_of(lambda: image_c(variables, pixels), _REPEATS.value)
  text_s = best_of(lambda: text_c(variables, ids, mask), _REPEATS.value)
  pair = (image_s[0] + text_s[0], image_s[1] + text_s[1])
  image_gflop, text_gflop = gflop(image_c) / batch, gflop(text_c) / batch

  data = jpeg()
  pre_s = best_of(lambda: [clip_score.preprocess(image_io.load_rgb(data), c) for _ in range(batch)], _REPEATS.value)

  shape = "tiny CLIP (2 layers, 32 wide, 32 px)" if _TINY.value else "ViT-B/32 (224 px) + 12-layer 512-wide text"
  print(f"CLIP speed on {jax.devices()[0].platform} ({jax.device_count()} device(s)), {shape}, batch {batch}, "
        f"captions of {tokens} tokens, best of {_REPEATS.value}")
  print("| measure | wall s / batch | CPU s / batch | per second (wall) | per CPU second | GFLOP each |")
  print("|---|---|---|---|---|---|")
  for name, (wall, cpu), flop in (("image tower", image_s, image_gflop), ("text tower", text_s, text_gflop),
                                  ("pair (both towers)", pair, image_gflop + text_gflop),
                                  ("preprocess a 500x375 JPEG", pre_s, float("nan"))):
    flops = "—" if flop != flop else f"{flop:.2f}"
    print(f"| {name} | {wall:.3f} | {cpu:.3f} | {batch / wall:,.1f} | {batch / cpu:,.1f} | {flops} |")
  achieved = (image_gflop + text_gflop) * batch / pair[0]
  print(f"\nthis machine: {batch / pair[0]:,.1f} pairs/s wall ({achieved:,.1f} GFLOP/s), {batch / pair[1]:,.1f} "
        f"per CPU second; preprocessing {batch / pre_s[1]:,.1f} images per CPU second")
  print(f"accelerator: {_ACCELERATOR.value:,.0f} pairs/s ASSUMED (--accelerator_pairs_per_s; not measured here), "
        f"which is {_ACCELERATOR.value * (image_gflop + text_gflop) / 1e3:,.1f} TFLOP/s of the counted work")
  print("\n| pool | pairs | CPU core-hours here (towers) | one accelerator, hours (assumed rate) |")
  print("|---|---|---|---|")
  for name, count in POOLS.items():
    print(f"| {name} | {count:,} | {hours(count, batch / pair[1])} | {hours(count, _ACCELERATOR.value)} |")


if __name__ == "__main__":
  cli.run(main)
