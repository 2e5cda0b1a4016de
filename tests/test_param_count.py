"""Parameter counts of the paper's four models equal the analytic formulas."""

import pytest

from capjax import config_util
from capjax.tools import param_count


@pytest.mark.parametrize("spec", ["configs/t2t.py:8x8", "configs/t2t.py:1x1", "configs/rnn.py:8x8",
                                  "configs/rnn.py:1x1", "configs/t2t.py:shapes", "configs/rnn.py:shapes"])
def test_measured_equals_analytic(spec):
  c = param_count.counts(config_util.load(spec), vocab_size=3920)
  assert c["measured"] == c["analytic"]


def test_paper_t2t_size():
  # 6+6 layers, d=512, ff 2048, tied 512-d embeddings over 3,920 (padded to 3,968) words, 1536-d features.
  c = param_count.counts(config_util.load("configs/t2t.py:8x8"), vocab_size=3920)
  d, m = 512, 2048
  layers = 6 * (4 * d * d + 4 * d + 2 * d * m + m + d + 4 * d) + 6 * (8 * d * d + 8 * d + 2 * d * m + m + d + 6 * d)
  assert c["measured"] == 3968 * d + 1536 * d + d + layers + 4 * d == 46_959_104


def test_cli_prints_a_row_per_config(capsys):
  assert param_count.main(["param_count", "--config=configs/rnn.py:1x1", "--vocab_size=100"]) == 0
  out = capsys.readouterr().out
  assert "configs/rnn.py:1x1" in out and "5,050,880" in out  # 128 padded rows, 512-d LSTMs


def test_cli_reports_a_missing_config_in_one_line(capsys):
  with pytest.raises(SystemExit) as exit_info:
    param_count.main(["param_count", "--config=configs/nothing.py:1x1"])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err.startswith("error: --config=configs/nothing.py:1x1: config file")


def test_cli_help_shows_usage(capsys):
  with pytest.raises(SystemExit) as exit_info:
    param_count.main(["param_count", "--help"])
  out = capsys.readouterr().out
  assert exit_info.value.code == 0
  assert "usage: python -m capjax.tools.param_count --config=" in out and "--vocab_size" in out
