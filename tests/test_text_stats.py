"""Caption statistics: the paper's table row for the released CC3M validation file."""

import json
import subprocess
import sys

from capjax.text.stats import caption_stats


def test_stats_cli_on_cc3m_validation(cc3m_validation_tsv, repo_root):
  out = subprocess.run(
      [sys.executable, "-m", "capjax.text.stats", str(cc3m_validation_tsv)],
      cwd=repo_root, capture_output=True, text=True, check=True,
  ).stdout
  assert json.loads(out) == {"examples": 15833, "unique_tokens": 10898, "tokens_mean": 10.4035,
                             "tokens_std": 4.7322, "tokens_median": 9.0}


def test_caption_stats_on_a_small_list():
  stats = caption_stats(["a dog .", "a dog in the park .", "two cats"])
  assert stats == {"examples": 3, "unique_tokens": 8, "tokens_mean": 3.6667, "tokens_std": 1.6997, "tokens_median": 3.0}


def test_column_and_pipeline_output_are_read(tmp_path, capsys):
  from capjax.text import stats

  tsv = tmp_path / "alt.tsv"
  tsv.write_text("1\tactors attend the premiere\n2\tdogs play\n", encoding="utf-8")
  stats.main([str(tsv), "--column=1"])
  assert json.loads(capsys.readouterr().out)["tokens_mean"] == 3.0
  jsonl = tmp_path / "out.jsonl"
  jsonl.write_text('{"kept": true, "caption": "a b c"}\n{"kept": false, "caption": null}\n', encoding="utf-8")
  stats.main([str(jsonl)])
  assert json.loads(capsys.readouterr().out)["examples"] == 1
