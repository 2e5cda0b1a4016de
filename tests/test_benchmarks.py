"""The benchmarks run (their figures are read by people, never asserted: no test checks a time)."""

import json
import os
import pathlib
import subprocess
import sys

import helpers
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import train_step_profile  # noqa: E402
import train_step_speed  # noqa: E402

pytestmark = pytest.mark.slow  # runs the benchmarks in subprocesses (conftest.py: the slow rule)

# helpers.FAST_COMPILE for the benchmarks run here: their compiles take about half the CPU time, and no test reads
# a figure.


def _env(xla_flags: str | None = None) -> dict[str, str]:
  """The environment of a benchmark run on the CPU: `xla_flags` (default: this session's) plus helpers.FAST_COMPILE."""
  flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
  return dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"{flags} {helpers.FAST_COMPILE}".strip())


def test_t2t_flops_are_counted_from_the_shapes():
  # The paper's T2T 8x8 at vocab 25,000: 4.10 GFLOP forward per example, three times that with the backward.
  assert train_step_speed.t2t_flops_per_example() == 3 * 4_099_538_944
  # One layer each, d=2, ff=4, 1 visual token of 1 feature, 1 position, vocab 1: every term counted by hand.
  encoder = 2 * (4 * 2 * 2 + 2 * 2 + 2 * 2 * 4)          # projections, scores and mixing, MLP
  decoder = 2 * (4 * 2 * 2 + 2 * 2 + 2 * 2 * 2 + 2 * 2 * 2 + 2 * 2 + 2 * 2 * 4)
  forward = 2 * 1 * 1 * 2 + encoder + decoder + 2 * 1 * 2 * 1
  assert train_step_speed.t2t_flops_per_example(d=2, ff=4, layers=1, visual_tokens=1, feature_dim=1, length=1,
                                                vocab=1) == 3 * forward


def test_accelerator_check_prints_its_table_on_a_cpu():
  env = _env(xla_flags="") | {"PYTHON": sys.executable}  # one device, as on a machine with one accelerator
  proc = subprocess.run(["bash", "benchmarks/accelerator_check.sh", "--steps=1"], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| ")]
  assert rows == ["measure", "matmul peak (512², TFLOP/s)", "T2T 8x8 train step, batch 8 (examples/s)",
                  "T2T 8x8 train step MFU", "IRv2 features at 75 px, batch 2 (images/s)",
                  "T2T 8x8 beam 4 with the cache, batch 8 (captions/s)"]
  assert "--small" in proc.stdout.splitlines()[0]


def test_the_profiles_matmul_list_counts_the_same_flops_as_the_analytic_formula():
  for batch, vocab in ((25, 25_000), (3, 7)):
    products = train_step_profile.t2t_matmuls(batch, vocab=vocab)
    assert 3 * train_step_profile.matmul_flops(products) == batch * train_step_speed.t2t_flops_per_example(
        vocab=vocab)
  # 1 visual projection, 6 x (8 encoder + 14 decoder) products, the output projection.
  assert len(train_step_profile.t2t_matmuls(1)) == 1 + 6 * (8 + 14) + 1


def test_decode_speed_prints_its_tables():
  proc = subprocess.run([sys.executable, "benchmarks/decode_speed.py", "--config=configs/t2t.py:shapes,debug",
                         "--batch=2", "--repeats=1", "--train_steps=1", "--vocab_size=50"],
                        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in proc.stdout.splitlines()
          if line.startswith("| configs/")]
  assert [row[:2] for row in rows[:2]] == [["configs/t2t.py:shapes,debug", "beam4"],
                                          ["configs/t2t.py:shapes,debug", "greedy"]]
  # The validation share of the debug config: eval_every 10, 64 images, decoded greedily as the demo does.
  assert len(rows) == 3 and rows[2][0] == "configs/t2t.py:shapes,debug"
  assert rows[2][1].endswith("(16)") and rows[2][2:5] == ["10", "64", "greedy"] and rows[2][6].endswith("%")


def test_retrieval_speed_prints_both_backends_and_the_projection():
  proc = subprocess.run([sys.executable, "benchmarks/retrieval_speed.py", "--queries=300", "--bank=2000", "--dim=32",
                         "--k=5", "--query_batch=128"],
                        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in proc.stdout.splitlines()
          if line.startswith("| jax") or line.startswith("| faiss")]
  try:
    import faiss  # noqa: F401
    assert [row[0] for row in rows] == ["jax", "faiss"]
    assert "same top-5 ids from both: 100.00% of queries" in proc.stdout
  except ModuleNotFoundError:
    assert [row[0] for row in rows] == ["jax"] and "faiss: not installed" in proc.stdout
  scale = (1_000_000 / 300) * (100_000 / 2_000)  # 300 x 2,000 measured; the projection scales to 1M x 100k
  for row in rows:  # seconds printed to 3 decimals, the projection to whole seconds
    seconds, projected = float(row[1]), float(row[3].split()[0].replace(",", ""))
    assert abs(projected - seconds * scale) <= 0.0005 * scale + 1


def test_input_pipeline_prints_the_waiting_share_of_the_demo(tmp_path):
  proc = subprocess.run([sys.executable, "benchmarks/input_pipeline.py", "--cases=shapes", "--setting=1/2",
                         "--shapes_builder_config=tiny", "--steps=2", f"--data_dir={tmp_path}"],
                        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in proc.stdout.splitlines()
          if line.startswith("| 1/2")]
  assert len(rows) == 1 and len(rows[0]) == 5 and rows[0][4].endswith("%")


def test_clip_speed_prints_its_rows_and_the_projection():
  proc = subprocess.run([sys.executable, "benchmarks/clip_speed.py", "--tiny", "--batch=2", "--repeats=1",
                         "--accelerator_pairs_per_s=1000"], cwd=REPO, env=_env(), capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in proc.stdout.splitlines()
          if line.startswith("| ") and not line.startswith(("| measure", "| pool"))]
  assert [row[0] for row in rows] == ["image tower", "text tower", "pair (both towers)",
                                      "preprocess a 500x375 JPEG", "CC3M", "5B candidates"]
  assert "1,000 pairs/s ASSUMED" in proc.stdout
  # The accelerator's hours are the pool over the assumed rate: 3.3M / 1,000 / 3,600 and 5B / 1,000 / 3,600.
  assert rows[4][1] == "3,300,000" and rows[4][3] == "0.9 h" and rows[5][3] == "1,388.9 h"
  pairs_per_s = float(rows[2][4].replace(",", ""))  # this CPU's column: the pool over the rate per CPU second
  for row, count in ((rows[4], 3_300_000), (rows[5], 5_000_000_000)):
    expected = count / pairs_per_s / 3600
    assert abs(float(row[2].split()[0].replace(",", "")) - expected) <= 0.01 * expected + 0.05


def test_finetune_gain_writes_its_table_json_and_plot(shapes_debug_run, tmp_path):
  """Tiny (`--tiny`: the tests' 30-step run fine-tuned, and trained from scratch, for 2 steps on 16 vivid examples,
  one seed; each run is a training subprocess, so the spread over seeds is checked below on given figures): the two
  runs, their rows, and the plot."""
  _, pretrained, _ = shapes_debug_run
  output = tmp_path / "gain"
  proc = subprocess.run([sys.executable, "benchmarks/finetune_gain.py", "--tiny", f"--pretrained={pretrained}",
                         "--sizes=16", "--seeds=0", "--steps=2", f"--data_dir={tmp_path / 'data'}",
                         f"--output={output}"], cwd=REPO, env=_env("--xla_force_host_platform_device_count=1"),
                        capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  runs = json.loads((output / "finetune_gain.json").read_text())["runs"]
  assert sorted((r["arm"], r["seed"]) for r in runs) == [("finetune", 0), ("scratch", 0)]
  rows = [line for line in (output / "finetune_gain.md").read_text().splitlines() if line.startswith("| 16 |")]
  assert [row.split("|")[2].strip() for row in rows] == ["finetune", "scratch"]
  assert all(row.count("± 0.000") == 3 for row in rows)  # one seed: no spread
  assert (output / "finetune_gain.png").read_bytes()[:4] == b"\x89PNG"


def test_finetune_gain_gives_the_mean_and_sample_spread_over_seeds():
  import finetune_gain  # benchmarks/, on sys.path above
  runs = [{"arm": arm, "size": 100, "seed": seed, "metrics": {"cider_d": c, "relation_accuracy": r, "exact_match": e}}
          for arm, seed, c, r, e in (("finetune", 0, 1.0, 0.5, 0.25), ("finetune", 1, 3.0, 0.7, 0.25),
                                     ("scratch", 0, 0.5, 0.1, 0.0), ("scratch", 1, 0.5, 0.3, 0.0))]
  stats = finetune_gain.summary(runs)
  assert stats["finetune", 100]["cider_d"] == (2.0, 2 ** 0.5)  # statistics.stdev: the sample deviation
  assert stats["scratch", 100]["exact_match"] == (0.0, 0.0)
  lines = finetune_gain.table(stats, [100], seeds=2, steps=300).splitlines()
  assert lines[0] == "Vivid test split; 300 training steps per run; mean ± standard deviation over 2 seeds."
  assert lines[4:] == ["| 100 | finetune | 2.000 ± 1.414 | 0.600 ± 0.141 | 0.250 ± 0.000 |",
                       "| 100 | scratch | 0.500 ± 0.000 | 0.200 ± 0.141 | 0.000 ± 0.000 |"]
