"""Trains demo variants for the same wall-clock budget each and prints their test-split scores side by side.

usage: python benchmarks/demo_options.py --budget_s=600 [--variants=adam,adagrad,1x1] [--data_dir=DIR]
Each variant's speed is measured first (a short timed run); its step count is set so that training takes
`budget_s`, so every schedule runs to completion. Rows: docs/benchmarks.md's demo table (optimizer, 8x8 vs 1x1).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from absl import flags

from capjax import cli

REPO = pathlib.Path(__file__).resolve().parent.parent
BASE = "configs/t2t.py:shapes"
VARIANTS: dict[str, list[str]] = {
    "adam": [],  # the demo's default: Adam 1e-3, warm-up, cosine decay
    "adagrad": ["--config.optimizer.name=adagrad", "--config.optimizer.learning_rate=0.01",
                "--config.optimizer.warmup_steps=0", "--config.optimizer.schedule=constant"],
    "adagrad_0.1": ["--config.optimizer.name=adagrad", "--config.optimizer.learning_rate=0.1",
                    "--config.optimizer.warmup_steps=0", "--config.optimizer.schedule=constant"],
    "1x1": ["--config.model.grid=1x1"],
}
FLAGS = flags.FlagValues()
_BUDGET_S = flags.DEFINE_float("budget_s", 600.0, "training seconds per variant", lower_bound=1.0, flag_values=FLAGS)
_VARIANTS = flags.DEFINE_list("variants", ["adam", "adagrad", "adagrad_0.1", "1x1"],
                              f"comma-separated subset of {list(VARIANTS)}", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", os.path.expanduser("~/tensorflow_datasets"), "TFDS data dir",
                                flag_values=FLAGS)
METRICS = ("cider_d", "Bleu_4", "METEOR", "ROUGE_L", "object_precision", "object_recall", "relation_accuracy",
           "exact_match")


def run(workdir: str, data_dir: str, args: list[str]) -> tuple[float, dict]:
  cmd = [sys.executable, "-m", "capjax.main", f"--config={BASE}", f"--workdir={workdir}",
         f"--config.dataset.data_dir={data_dir}", *args]
  start = time.time()
  subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  elapsed = time.time() - start
  metrics = sorted(pathlib.Path(workdir, "eval").glob("test_step*/metrics.json"))
  return elapsed, json.loads(metrics[-1].read_text())


def seconds_per_step(workdir: str, data_dir: str, args: list[str], steps: int = 100) -> float:
  """Median over logged intervals of a short run (the first interval holds the compile and is dropped)."""
  run(workdir, data_dir, [*args, f"--config.num_train_steps={steps}", "--config.eval_every=100000",
                          "--config.log_every=10", "--config.eval.gallery_size=1"])
  history = [json.loads(x) for x in pathlib.Path(workdir, "train_history.jsonl").read_text().splitlines()]
  rates = sorted(h["examples_per_s"] for h in history[1:])
  return 64 / rates[len(rates) // 2]


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if unknown := sorted(set(_VARIANTS.value) - set(VARIANTS)):
    cli.fail(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for name in _VARIANTS.value:
      extra = VARIANTS[name]
      sps = seconds_per_step(os.path.join(tmp, f"{name}_speed"), _DATA_DIR.value, extra)
      steps = int(_BUDGET_S.value / sps)
      elapsed, result = run(os.path.join(tmp, name), _DATA_DIR.value, [*extra, f"--config.num_train_steps={steps}"])
      rows.append((name, sps, steps, elapsed, result["metrics"], result["constant_caption_baseline"]["metrics"]))
      print(f"{name}: {steps} steps ({sps * 1000:.0f} ms/step), {elapsed:.0f} s in all", flush=True)
  header = "| variant | steps | ms/step | " + " | ".join(METRICS) + " |"
  print("\n" + header + "\n|" + "---|" * (len(METRICS) + 3))
  for name, sps, steps, _, m, _ in rows:
    print(f"| {name} | {steps} | {sps * 1000:.0f} | "
          + " | ".join(f"{m.get(k, float('nan')):.3f}" for k in METRICS) + " |")
  base = rows[0][5]
  print("| constant caption | – | – | " + " | ".join(f"{base.get(k, float('nan')):.3f}" for k in METRICS) + " |")


if __name__ == "__main__":
  cli.run(main)
