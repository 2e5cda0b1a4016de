"""SCST step time against an MLE step of the same config, and the host reward's share of the SCST step.

usage: python benchmarks/scst_step.py [--config=configs/t2t.py:shapes,scst] [--rounds=5] [--vocab_size=60]
           [--num_samples=N] [--baseline=mean] [--scst_batch_size=B]
The MLE step has the batch of the MLE run (the spec without `scst`), the SCST step the scst config's batch (or
`--scst_batch_size` images) and samples (or `--num_samples`). One process on the default devices; random weights,
images and references (5 captions of 10 words per image, drawn from the vocabulary) with their CIDEr-D document
frequencies. The two steps run alternately (`--rounds` timed steps of each after one compiling and one warm-up
step) and each is timed by the wall clock and by process CPU seconds (all threads); the reward's share is the
host's CIDEr-D and baseline time within the SCST steps (wall clock).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence

import jax
import numpy as np
from absl import flags

from capjax import cli, config_util, scst, sharding
from capjax.data.vocab import Vocabulary
from capjax.metrics.cider import DocumentFrequency
from capjax.tokens import BOS_ID, SPECIALS
from capjax.train import make_setup

FLAGS = flags.FlagValues()
_CONFIG = flags.DEFINE_string("config", "configs/t2t.py:shapes,scst", "an scst config (configs/x.py:...,scst)",
                              flag_values=FLAGS)
_ROUNDS = flags.DEFINE_integer("rounds", 5, "timed steps of each, alternately", lower_bound=1, flag_values=FLAGS)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 60, "words in the random vocabulary", lower_bound=2,
                                   flag_values=FLAGS)
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 0, "SCST samples per image (0: the config's)", lower_bound=0,
                                    flag_values=FLAGS)
_BASELINE = flags.DEFINE_enum("baseline", "mean", list(scst.BASELINES), "SCST baseline", flag_values=FLAGS)
_SCST_BATCH = flags.DEFINE_integer("scst_batch_size", 0, "images per SCST step (0: the scst config's batch_size)",
                                   lower_bound=0, flag_values=FLAGS)


def _cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def _timed(step, state, batch):
  wall, cpu = time.perf_counter(), _cpu()
  state, metrics = step(state, batch)
  jax.block_until_ready((state, metrics["loss"]))
  return state, time.perf_counter() - wall, _cpu() - cpu


def mle_spec(spec: str) -> str:
  """The MLE run an scst config starts from: the same spec without the scst variant."""
  path, _, args = spec.partition(":")
  args = ",".join(a for a in args.split(",") if a and a != "scst")
  return f"{path}:{args}" if args else path


def run(spec: str, rounds: int, vocab_size: int, num_samples: int, baseline: str,
        scst_batch_size: int = 0) -> dict[str, float]:
  """Median step times of MLE (the MLE run's batch) and SCST (`scst_batch_size` images, or the scst config's)."""
  config = config_util.load(spec)
  config.scst.update(num_samples=num_samples or config.scst.num_samples, baseline=baseline)
  config.init_from = "(random weights)"
  words = tuple(f"w{i}" for i in range(vocab_size))
  vocab = Vocabulary(SPECIALS + words)
  rng = np.random.default_rng(0)
  b = config_util.load(mle_spec(spec)).batch_size
  bs = scst_batch_size or config.batch_size
  rows = max(b, bs)  # images (and their references) the two batches take their first rows from
  references = [[" ".join(rng.choice(words, 10)) for _ in range(5)] for _ in range(rows)]
  df = DocumentFrequency.from_references(references)
  mesh = sharding.make_mesh(config)
  mle = make_setup(config, len(vocab), mesh)
  step = scst.TrainStep(mle, config, vocab, references, df, start=BOS_ID)
  blank = mle.inputs.zeros(rows)
  images = (rng.integers(0, 256, blank.shape) if np.issubdtype(blank.dtype, np.integer)
            else rng.normal(size=blank.shape)).astype(blank.dtype)
  tokens = rng.integers(4, len(vocab), (rows, config.max_caption_tokens + 1)).astype(np.int32)

  def batch_of(n):
    return sharding.host_to_global({"image": images[:n], "inputs": tokens[:n], "targets": tokens[:n],
                                    scst.INDEX_KEY: np.arange(n, dtype=np.int32)}, mesh)

  batch, scst_batch = batch_of(b), batch_of(bs)
  mle_state = mle.init(jax.random.key(0))
  scst_state = mle.init(jax.random.key(0))
  times = {"mle": [], "scst": [], "mle_cpu": [], "scst_cpu": []}
  for i in range(rounds + 2):  # compile, warm up, then timed
    mle_state, wall, cpu = _timed(mle.train_step, mle_state, batch)
    if i >= 2:
      times["mle"].append(wall)
      times["mle_cpu"].append(cpu)
    if i == 2:
      step.reward_seconds = step.seconds = 0.0
    scst_state, wall, cpu = _timed(step, scst_state, scst_batch)
    if i >= 2:
      times["scst"].append(wall)
      times["scst_cpu"].append(cpu)
  result = {k: float(np.median(v)) for k, v in times.items()}
  result["ratio"] = result["scst"] / result["mle"]
  result["cpu_ratio"] = result["scst_cpu"] / result["mle_cpu"]
  result["reward_share"] = step.reward_seconds / step.seconds
  result["mle_batch"], result["scst_batch"], result["num_samples"] = b, bs, config.scst.num_samples
  return result


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  r = run(_CONFIG.value, _ROUNDS.value, _VOCAB_SIZE.value, _NUM_SAMPLES.value, _BASELINE.value, _SCST_BATCH.value)
  print(f"config {_CONFIG.value}, {jax.device_count()} {jax.devices()[0].platform} device(s), "
        f"{r['num_samples']} samples per image, baseline {_BASELINE.value}; batch: MLE {r['mle_batch']} images, "
        f"SCST {r['scst_batch']}")
  print("| step | wall s (median) | CPU s (median) |")
  print("|---|---|---|")
  print(f"| MLE | {r['mle']:.3f} | {r['mle_cpu']:.3f} |")
  print(f"| SCST | {r['scst']:.3f} | {r['scst_cpu']:.3f} |")
  print(f"SCST / MLE: {r['ratio']:.2f}x wall, {r['cpu_ratio']:.2f}x CPU; the host reward (CIDEr-D, baseline): "
        f"{100 * r['reward_share']:.1f}% of the SCST step")


if __name__ == "__main__":
  cli.run(main)
