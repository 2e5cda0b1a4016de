"""One table of what an accelerator does with capjax: run it first on a new GPU or TPU machine.

usage: python benchmarks/accelerator_check.py [--small] [--steps=5]
       (benchmarks/accelerator_check.sh picks --small on a machine without an accelerator)

Rows: the device's peak (jitted 8192² matmuls in float32 and bfloat16, measured in this run); the paper's T2T 8x8
train step on frozen features at batch 256 in float32 and bfloat16 (examples/s and MFU: analytic FLOPs, see
`train_step_speed.t2t_flops_per_example`, over the peak of the same dtype); Inception-ResNet-v2 feature extraction
at 299 px (images/s); beam-4 decoding of T2T 8x8 with the key/value cache at batch 256 (captions/s). One device,
random weights and inputs: speed does not depend on them. `--small` shrinks every size (a 1+1-layer d=64 T2T,
batch 8, 75 px images, 512² matmuls) so that a CPU runs it in a minute, which keeps the script working in CI; its
figures mean nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

import train_step_speed
from capjax import cli, config_util, decode, models, sharding
from capjax.models import inception_resnet_v2 as irv2
from capjax.train import make_setup

FLAGS = flags.FlagValues()
_SMALL = flags.DEFINE_boolean("small", False, "tiny sizes, for a CPU (CI): the figures mean nothing",
                              flag_values=FLAGS)
_STEPS = flags.DEFINE_integer("steps", 5, "timed calls of each function (the median counts)", lower_bound=1,
                              flag_values=FLAGS)
VOCAB_SIZE = 25_000


@dataclasses.dataclass(frozen=True)
class Sizes:
  matmul: int
  batch: int
  decode_batch: int
  extract_batch: int
  image_size: int
  d_model: int
  mlp_dim: int
  num_heads: int
  layers: int
  vocab_size: int


FULL = Sizes(matmul=8192, batch=256, decode_batch=256, extract_batch=128, image_size=irv2.IMAGE_SIZE, d_model=512,
             mlp_dim=2048, num_heads=8, layers=6, vocab_size=VOCAB_SIZE)
SMALL = Sizes(matmul=512, batch=8, decode_batch=8, extract_batch=2, image_size=irv2.MIN_IMAGE_SIZE, d_model=64,
              mlp_dim=128, num_heads=2, layers=1, vocab_size=500)


def median_seconds(fn: Callable[[], object], steps: int) -> float:
  """Median wall time of `steps` calls of `fn` after one warm-up call (compilation), each waited for."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def matmul_peak(n: int, dtype: jnp.dtype, steps: int) -> float:
  a = jax.random.normal(jax.random.key(0), (n, n), dtype)
  b = jax.random.normal(jax.random.key(1), (n, n), dtype)
  matmul = jax.jit(jnp.matmul)
  return 2 * n**3 / median_seconds(lambda: matmul(a, b), steps)


def t2t_config(sizes: Sizes, dtype: str, batch: int):
  c = config_util.load("configs/t2t.py:8x8")
  c.batch_size = batch
  c.model.update(d_model=sizes.d_model, mlp_dim=sizes.mlp_dim, num_heads=sizes.num_heads,
                 encoder_layers=sizes.layers, decoder_layers=sizes.layers, dtype=dtype)
  return c


def train_step_rate(sizes: Sizes, dtype: str, steps: int) -> tuple[float, float]:
  """(examples/s, FLOP/s) of the T2T 8x8 train step."""
  c = t2t_config(sizes, dtype, sizes.batch)
  mesh = sharding.make_mesh(c, jax.devices()[:1])
  setup = make_setup(c, sizes.vocab_size, mesh)
  state = setup.init(jax.random.key(0))
  batch = sharding.host_to_global(train_step_speed._batch(c, sizes.vocab_size), mesh)
  step = setup.train_step.lower(state, batch).compile()
  holder = {"state": state}

  def one():
    holder["state"], metrics = step(holder["state"], batch)
    return metrics

  seconds = median_seconds(one, steps)
  flops = c.batch_size * train_step_speed.t2t_flops_per_example(
      d=sizes.d_model, ff=sizes.mlp_dim, layers=sizes.layers, vocab=sizes.vocab_size)
  return c.batch_size / seconds, flops / seconds


def extraction_rate(sizes: Sizes, steps: int) -> float:
  """Images/s of the headless Inception-ResNet-v2 forward pass (what extract_tfds_features runs), float32."""
  model = irv2.InceptionResNetV2(num_classes=None)
  images = np.random.default_rng(0).integers(0, 256, (sizes.extract_batch, sizes.image_size, sizes.image_size, 3),
                                             dtype=np.uint8)
  # Numpy draws on the device once (XLA's init of the whole network compiles for 20 s on a CPU, CI's half of the
  # script's time), so that no timed call copies the weights.
  variables = jax.device_put(irv2.random_variables(num_classes=None))
  encode = jax.jit(lambda v, x: model.apply(v, irv2.preprocess(x))["grid"])
  images = jax.device_put(images)
  return sizes.extract_batch / median_seconds(lambda: encode(variables, images), steps)


def beam_rate(sizes: Sizes, steps: int) -> float:
  """Captions/s of beam-4 search with the cache on T2T 8x8 (float32)."""
  c = t2t_config(sizes, "float32", sizes.decode_batch)
  model = models.build(c, sizes.vocab_size)
  max_len = c.max_caption_tokens + 1
  features = np.random.default_rng(0).normal(size=(sizes.decode_batch, *c.dataset.feature_shape)).astype(np.float32)
  params = jax.jit(lambda: nn.unbox(model.init(jax.random.key(0), features[:1], np.zeros((1, max_len), np.int32))
                                    ["params"]))()
  search = jax.jit(lambda p, x: decode.beam_search(decode.cached_step(model, p), x, max_len, 4, 0.6)[0])
  features = jax.device_put(features)
  return sizes.decode_batch / median_seconds(lambda: search(params, features), steps)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  sizes = SMALL if _SMALL.value else FULL
  steps = _STEPS.value
  device = jax.devices()[0]
  note = " --small: sizes for a CPU, figures mean nothing" if _SMALL.value else ""
  print(f"{device.platform} ({device.device_kind}){note}")
  peaks = {dtype: matmul_peak(sizes.matmul, jnp.dtype(dtype), steps) for dtype in ("float32", "bfloat16")}
  print("| measure | float32 | bfloat16 |")
  print("|---|---:|---:|")
  print(f"| matmul peak ({sizes.matmul}², TFLOP/s) | {peaks['float32'] / 1e12:.2f} | {peaks['bfloat16'] / 1e12:.2f} |",
        flush=True)
  rates = {dtype: train_step_rate(sizes, dtype, steps) for dtype in ("float32", "bfloat16")}
  print(f"| T2T 8x8 train step, batch {sizes.batch} (examples/s) | {rates['float32'][0]:.1f} | "
        f"{rates['bfloat16'][0]:.1f} |")
  print(f"| T2T 8x8 train step MFU | {rates['float32'][1] / peaks['float32']:.0%} | "
        f"{rates['bfloat16'][1] / peaks['bfloat16']:.0%} |", flush=True)
  print(f"| IRv2 features at {sizes.image_size} px, batch {sizes.extract_batch} (images/s) | "
        f"{extraction_rate(sizes, steps):.1f} | |", flush=True)
  print(f"| T2T 8x8 beam 4 with the cache, batch {sizes.decode_batch} (captions/s) | {beam_rate(sizes, steps):.1f} | |")


if __name__ == "__main__":
  cli.run(main)
