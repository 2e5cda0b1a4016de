"""Recaptioning throughput: images/s (and per CPU core) of `python -m capjax.recaption`'s job, greedy and beam 4, at
batch 1, 8 and 64, on a trained workdir's model, and what that projects to for CC3M's 3.3M images.

usage: python benchmarks/recaption_speed.py --workdir=W --data_dir=D [--dataset=synthetic_scenes/tiny:train]
           [--examples=128] [--batches=1,8,64] [--methods=greedy,beam4]
The workdir is any training run (tests/trained_models.py's tiny `:shapes,debug` run: `python -m capjax.main
--config=configs/t2t.py:shapes,debug --config.dataset.builder_config=tiny --config.num_train_steps=30 ...`). The
steady rate leaves out the first batch, which compiles the search; the JSONL is written and fsynced as in a real
run, into a temporary folder. Runs on the devices JAX sees (one CPU device by default).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

from absl import flags

from capjax import cli

CC3M_IMAGES = 3_318_333  # CC3M's training split
FLAGS = flags.FlagValues()
_WORKDIR = flags.DEFINE_string("workdir", None, "a trained workdir", flag_values=FLAGS, required=True)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of --dataset", flag_values=FLAGS)
_DATASET = flags.DEFINE_string("dataset", "synthetic_scenes/tiny:train", "NAME[/CONFIG]:SPLIT", flag_values=FLAGS)
_EXAMPLES = flags.DEFINE_integer("examples", 128, "images per measurement (beyond the first batch)", lower_bound=1,
                                 flag_values=FLAGS)
_BATCHES = flags.DEFINE_list("batches", ["1", "8", "64"], "global batch sizes", flag_values=FLAGS)
_METHODS = flags.DEFINE_list("methods", ["greedy", "beam4"], "greedy, beamK", flag_values=FLAGS)


def cores() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def measure(method: str, batch: int, folder: str) -> dict:
  from capjax.recaption import job as job_lib
  decode, beam = ("greedy", 0) if method == "greedy" else ("beam", int(method.removeprefix("beam")))
  name, split = _DATASET.value.rsplit(":", 1)
  count = batch + _EXAMPLES.value  # the first batch compiles; the rest is measured
  request = job_lib.Request(workdir=_WORKDIR.value, dataset=f"{name}:{split}[:{count}]",
                            output=os.path.join(folder, f"{method}_{batch}.jsonl"), data_dir=_DATA_DIR.value,
                            batch_size=batch, decode=decode, beam_size=beam, progress_every=1e9)
  return job_lib.run(job_lib.resolve(request), log=lambda line: None)


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  import jax
  n = cores()
  print(f"{jax.device_count()} {jax.default_backend()} device(s), {n} CPU core(s); {_EXAMPLES.value} images timed "
        "per row after a first (compiling) batch")
  print(f"{'search':<8} {'batch':>5} {'images/s':>9} {'per core':>9} {'CC3M (3.3M) hours':>18} "
          f"{'CC3M core-hours':>16}")
  with tempfile.TemporaryDirectory() as folder:
    for method in _METHODS.value:
      for batch in (int(b) for b in _BATCHES.value):
        rate = measure(method, batch, folder)["steady_images_per_s"]
        print(f"{method:<8} {batch:>5} {rate:>9.1f} {rate / n:>9.1f} {CC3M_IMAGES / rate / 3600:>18.1f} "
              f"{CC3M_IMAGES / (rate / n) / 3600:>16.1f}", flush=True)
  return 0


if __name__ == "__main__":
  cli.run(main)
