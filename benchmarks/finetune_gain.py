"""What pretraining gains: the synthetic scenes' plain-domain model fine-tuned on a few vivid examples, against the same
model trained from scratch on them for the same steps, scored on the vivid test split.

usage: python benchmarks/finetune_gain.py --output=DIR [--pretrained=WORKDIR] [--sizes=100,300,1000] [--seeds=0,1]
           [--steps=300] [--data_dir=DIR]
Without --pretrained it first pretrains `:shapes` on the plain domain (`--pretrain_steps`, the config's 2,000 by
default: about 10 minutes on a 2-core CPU) in DIR/pretrained; the demo's workdir will do (`--pretrained=WORKDIR`).
Each size N trains on the first N examples of the vivid training split (`train[:N]`), once per seed and arm
(`finetune`: `--config.init_from`, the vocabulary extended; `scratch`: random parameters, its own vocabulary), for
`--steps` steps, validated and saved once at the end. Writes DIR/finetune_gain.md (test CIDEr-D, relation accuracy and
exact match: mean ± standard deviation over the seeds), DIR/finetune_gain.json (every run's metrics) and
DIR/finetune_gain.png (each metric against N, both arms). `--tiny` runs the `:shapes,debug` model on the tiny builds
(a smoke test, not a measurement).
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from absl import flags

from capjax import cli

REPO = pathlib.Path(__file__).resolve().parent.parent
METRICS = ("cider_d", "relation_accuracy", "exact_match")
ARMS = ("finetune", "scratch")
FLAGS = flags.FlagValues()
_OUTPUT = flags.DEFINE_string("output", None, "folder for the workdirs, the table, the JSON and the plot",
                              flag_values=FLAGS, required=True)
_PRETRAINED = flags.DEFINE_string("pretrained", "", "a trained plain-domain `:shapes` workdir ('' -> pretrain one)",
                                  flag_values=FLAGS)
_PRETRAIN_STEPS = flags.DEFINE_integer("pretrain_steps", 0, "steps of the pretraining (0 -> the config's)",
                                       lower_bound=0, flag_values=FLAGS)
_SIZES = flags.DEFINE_list("sizes", ["100", "300", "1000"], "vivid training examples of each point", flag_values=FLAGS)
_SEEDS = flags.DEFINE_list("seeds", ["0", "1"], "seeds of each point (at least 2 for a spread)", flag_values=FLAGS)
_STEPS = flags.DEFINE_integer("steps", 300, "training steps of each run, both arms", lower_bound=1, flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", os.path.expanduser("~/tensorflow_datasets"), "TFDS data dir",
                                flag_values=FLAGS)
_TINY = flags.DEFINE_bool("tiny", False, "`:shapes,debug` on the tiny builds: a smoke test", flag_values=FLAGS)


def _ints(name: str, values: Sequence[str]) -> list[int]:
  try:
    numbers = [int(v) for v in values]
  except ValueError:
    cli.fail(f"--{name}={','.join(values)}: give whole numbers, comma separated")
  if not numbers or min(numbers) < (1 if name == "sizes" else 0):
    cli.fail(f"--{name}={','.join(values)}: give {'positive' if name == 'sizes' else 'non-negative'} numbers")
  return numbers


def base_args(tiny: bool, data_dir: str) -> list[str]:
  return [f"--config=configs/t2t.py:shapes{',debug' if tiny else ''}", f"--config.dataset.data_dir={data_dir}",
          "--config.debug_nans=False"]


def train(workdir: str, args: list[str]) -> dict[str, float]:
  """`python -m capjax.main` in `workdir` with `args`; the test metrics of its final evaluation."""
  proc = subprocess.run([sys.executable, "-m", "capjax.main", f"--workdir={workdir}", *args], cwd=REPO,
                        capture_output=True, text=True)
  if proc.returncode:
    cli.fail(f"the run in {workdir} failed ({proc.stderr.strip().splitlines()[-1:]}) — see its command: {args}")
  metrics = sorted(pathlib.Path(workdir, "eval").glob("test_step*/metrics.json"))
  return json.loads(metrics[-1].read_text())["metrics"]


def pretrain(output: str, tiny: bool, data_dir: str, steps: int) -> str:
  workdir = os.path.join(output, "pretrained")
  args = base_args(tiny, data_dir) + (["--config.dataset.builder_config=tiny"] if tiny else [])
  if steps:
    args.append(f"--config.num_train_steps={steps}")
  train(workdir, args)
  return workdir


def run_args(arm: str, size: int, seed: int, steps: int, pretrained: str, tiny: bool, data_dir: str) -> list[str]:
  """One run's flags: `size` vivid examples, `seed`, `steps` steps with a warm-up of a tenth, one validation."""
  args = base_args(tiny, data_dir) + [
      f"--config.dataset.builder_config={'vivid_tiny' if tiny else 'vivid'}",
      f"--config.dataset.train_split=train[:{size}]", f"--config.seed={seed}", f"--config.num_train_steps={steps}",
      f"--config.optimizer.warmup_steps={max(steps // 10, 1)}", f"--config.eval_every={steps}",
      f"--config.checkpoint_every={steps}", f"--config.log_every={min(steps, 50)}", "--config.eval.gallery_size=1",
      "--config.eval.rating_sheet_size=0"]
  if arm == "finetune":
    args.append(f"--config.init_from={pretrained}")
  return args


def summary(runs: list[dict]) -> dict[tuple[str, int], dict[str, tuple[float, float]]]:
  """(arm, size) -> metric -> (mean, standard deviation over the seeds; 0 with one seed)."""
  groups: dict[tuple[str, int], list[dict]] = {}
  for r in runs:
    groups.setdefault((r["arm"], r["size"]), []).append(r["metrics"])
  return {key: {m: (statistics.fmean(x[m] for x in ms), statistics.stdev(x[m] for x in ms) if len(ms) > 1 else 0.0)
                for m in METRICS} for key, ms in groups.items()}


def table(stats, sizes: Sequence[int], seeds: int, steps: int) -> str:
  lines = [f"Vivid test split; {steps} training steps per run; mean ± standard deviation over {seeds} seeds.", "",
           "| vivid examples | arm | " + " | ".join(METRICS) + " |", "|---:|---|" + "---:|" * len(METRICS)]
  for size in sizes:
    for arm in ARMS:
      cells = " | ".join(f"{stats[arm, size][m][0]:.3f} ± {stats[arm, size][m][1]:.3f}" for m in METRICS)
      lines.append(f"| {size:,} | {arm} | {cells} |")
  return "\n".join(lines) + "\n"


def plot(path: str, stats, sizes: Sequence[int]) -> None:
  import matplotlib  # here: the plot only
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.2))
  for ax, metric in zip(axes, METRICS):
    for arm in ARMS:
      means = [stats[arm, s][metric][0] for s in sizes]
      spreads = [stats[arm, s][metric][1] for s in sizes]
      ax.errorbar(sizes, means, yerr=spreads, marker="o", capsize=3, label=arm)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("vivid training examples")
    ax.set_title(metric)
  axes[0].legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  sizes, seeds = _ints("sizes", _SIZES.value), _ints("seeds", _SEEDS.value)
  output, tiny, data_dir = os.path.abspath(_OUTPUT.value), _TINY.value, os.path.abspath(_DATA_DIR.value)
  os.makedirs(output, exist_ok=True)
  if _PRETRAINED.value and not os.path.isfile(os.path.join(_PRETRAINED.value, "config.json")):
    cli.fail(f"--pretrained={_PRETRAINED.value} holds no training run (no config.json) — give a :shapes workdir, or "
             "leave it out to pretrain one")
  start = time.time()
  pretrained = (os.path.abspath(_PRETRAINED.value) if _PRETRAINED.value else
                pretrain(output, tiny, data_dir, _PRETRAIN_STEPS.value))
  runs = []
  for size in sizes:
    for seed in seeds:
      for arm in ARMS:
        workdir = os.path.join(output, f"{arm}_{size}_seed{seed}")
        metrics = train(workdir, run_args(arm, size, seed, _STEPS.value, pretrained, tiny, data_dir))
        runs.append({"arm": arm, "size": size, "seed": seed, "metrics": {m: metrics[m] for m in METRICS}})
        print(f"{arm} on {size} examples, seed {seed}: " + ", ".join(f"{m} {metrics[m]:.3f}" for m in METRICS),
              flush=True)
  stats = summary(runs)
  text = table(stats, sizes, len(seeds), _STEPS.value)
  pathlib.Path(output, "finetune_gain.md").write_text(text)
  pathlib.Path(output, "finetune_gain.json").write_text(json.dumps(
      {"pretrained": pretrained, "steps": _STEPS.value, "tiny": tiny, "runs": runs}, indent=2))
  plot(os.path.join(output, "finetune_gain.png"), stats, sizes)
  print("\n" + text + f"\n{len(runs)} runs in {time.time() - start:.0f} s; written to {output}")


if __name__ == "__main__":
  cli.run(main)
