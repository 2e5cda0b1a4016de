"""Measures how long a training run takes from SIGTERM to exit (its checkpoint written), with the loop's dispatch
bounded (`max_steps_ahead`, the default 1) and unbounded (the loop before the bound: every step queued at once),
alternately in one session, so that the machine's noise hits both alike.

`python benchmarks/stop_latency.py [--model=shapes|paper] [--repeats=2]`

shapes: `configs/t2t.py:shapes` at batch 512, log_every 50 (the demo's model). paper: the paper's T2T stack (6+6
layers, d=512, 8 heads, ff 2048, batch 25) on the synthetic scenes' 8x8 conv grid instead of Inception-ResNet-v2
features, which need a built and extracted Conceptual Captions: the transformer, the part that trains, is the
paper's; it logs every 20 steps here (the paper config: 100) so that a run takes minutes.

A log step waits for its step's loss, so the unbounded loop's queue empties there and refills up to the next one:
the signal goes out half-way between two log steps (after the second log line, the time of log_every / 2 steps),
where a stop waits for about log_every / 2 queued steps without the bound. Each run trains in a fresh workdir (the
dataset is built once, in --data_dir); the latency is from the signal to the process's exit.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

from absl import app, flags

REPO = pathlib.Path(__file__).resolve().parent.parent

_MODEL = flags.DEFINE_enum("model", "shapes", ["shapes", "paper"], "which model trains (see the docstring)")
_REPEATS = flags.DEFINE_integer("repeats", 2, "runs of each setting, alternated")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "where synthetic_scenes is (built on first use; default: a temp dir)")

UNBOUNDED = 1_000_000  # max_steps_ahead that never binds: the loop as it was before the bound

MODELS = {
    "shapes": ["--config=configs/t2t.py:shapes", "--config.batch_size=512", "--config.log_every=50"],
    "paper": ["--config=configs/t2t.py:shapes", "--config.batch_size=25", "--config.log_every=20",
              "--config.model.d_model=512", "--config.model.num_heads=8", "--config.model.mlp_dim=2048",
              "--config.model.encoder_layers=6", "--config.model.decoder_layers=6"],
}


def stop_latency(args: list[str], workdir: str) -> tuple[float, int, float]:
  """(seconds from SIGTERM to exit, the step the run stopped at, seconds per step before the signal)."""
  batch, log_every = (int(next(a for a in args if a.startswith(f"--config.{f}=")).split("=")[1])
                      for f in ("batch_size", "log_every"))
  command = [sys.executable, "-m", "capjax.main", *args, "--config.eval_every=100000",
             "--config.checkpoint_every=100000", "--config.num_train_steps=100000", f"--workdir={workdir}"]
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  lines, logs, rate = [], 0, 0.0
  for line in proc.stderr:
    lines.append(line)
    if m := re.search(r"step (\d+)/\d+  loss .* ([\d.]+) examples/s", line):  # a log step
      logs, rate = logs + 1, float(m.group(2))
      if logs == 2:  # the first log step's rate includes the compilation
        break
  else:
    raise SystemExit(f"the run ended before its second log step:\n{''.join(lines[-20:])}")
  time.sleep(log_every / 2 * batch / rate)
  sent = time.perf_counter()
  proc.send_signal(signal.SIGTERM)
  rest = proc.stderr.read()
  proc.wait()
  latency = time.perf_counter() - sent
  stopped = re.search(r"Stopped by SIGTERM at step (\d+)", rest)
  if proc.returncode != 0 or not stopped:
    raise SystemExit(f"the run did not stop cleanly (exit {proc.returncode}):\n{rest[-3000:]}")
  return latency, int(stopped.group(1)), batch / rate if rate else float("nan")


def main(argv: list[str]) -> None:
  del argv
  args = MODELS[_MODEL.value]
  with tempfile.TemporaryDirectory(prefix="capjax-stop-") as tmp:
    data_dir = _DATA_DIR.value or os.path.join(tmp, "tfds")
    args = [*args, f"--config.dataset.data_dir={data_dir}"]
    results: dict[int, list[tuple[float, int, float]]] = {1: [], UNBOUNDED: []}
    for repeat in range(_REPEATS.value):
      for ahead in results:
        workdir = os.path.join(tmp, f"run{repeat}_{ahead}")
        result = stop_latency([*args, f"--config.max_steps_ahead={ahead}"], workdir)
        results[ahead].append(result)
        print(f"max_steps_ahead={ahead:<8} SIGTERM half-way between two log steps: exit in "
              f"{result[0]:6.1f} s, stopped at step {result[1]} ({result[2]:.2f} s/step)", flush=True)
  bounded, unbounded = (sorted(r[0] for r in results[a]) for a in (1, UNBOUNDED))
  step_time = sorted(r[2] for r in results[1])[len(results[1]) // 2]
  print(f"\n{_MODEL.value}: median stop latency {bounded[len(bounded) // 2]:.1f} s bounded (max_steps_ahead=1) vs "
        f"{unbounded[len(unbounded) // 2]:.1f} s unbounded "
        f"({unbounded[len(unbounded) // 2] / bounded[len(bounded) // 2]:.1f}x); "
        f"one step takes {step_time:.2f} s")


if __name__ == "__main__":
  app.run(main)
