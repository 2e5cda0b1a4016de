"""benchmarks/augment_projection.py: its FLOP counts against hand counts, and a --tiny run prints every stage."""

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import augment_projection as ap  # noqa: E402

from capjax.text_models import bert as bert_lib  # noqa: E402


def test_encoder_flops_count_the_dense_layers_and_attention():
  config = bert_lib.BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=3, num_attention_heads=2,
                               intermediate_size=8)
  # Per layer and position: q, k, v, out (4 x 4x4) and two feed-forward (2 x 4x8) multiply-adds = 128, x2 FLOPs;
  # attention: scores and the weighted sum, 2 x positions x width multiply-adds, x2.
  assert ap.encoder_flops(config, 5) == 3 * 5 * (2 * 128 + 4 * 5 * 4)


def test_generation_flops_count_the_prompt_the_steps_and_the_logits():
  # Width 2: q, k, v, out and a 4x-wide feed-forward are 12 x 2 x 2 = 48 multiply-adds a position, 96 FLOPs.
  # The prompt (3 positions, attention over 3): 3 x (96 + 2 x 3 x 2) = 324. Step 0 (context 3): 96 + 4 x 3 x 2
  # + logits 2 x 2 x 7 = 148; step 1 (context 4): 96 + 32 + 28 = 156. One layer: 324 + 148 + 156 = 628.
  assert ap.generation_flops(2, 1, 7, 3, 2) == 628


@pytest.mark.slow  # runs the benchmark in a subprocess (conftest.py: the slow rule)
def test_a_tiny_run_prints_every_stage_and_the_total():
  proc = subprocess.run([sys.executable, "benchmarks/augment_projection.py", "--tiny", "--n=8", "--gen_batch=2",
                         "--bank=50", "--captions=1000"], cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| ")]
  assert rows == ["stage", "embed", "search", "generate", "classify", "ppl", "all"]
  assert "projecting to 1,000 captions" in proc.stdout
