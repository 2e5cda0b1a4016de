"""The gold set and its scorer: the shipped rows are well formed, the command line runs, the scores hold their floor."""

import os
import subprocess
import sys

import pytest

from capjax.text import gold
from capjax.text.filters import Reason

# Measured with the default configuration (`python -m capjax.text.gold`); raise them as the pipeline improves.
EXACT_FLOOR = 205
DECISION_FLOOR = 206
PAPER_EXACT_FLOOR = 5


@pytest.fixture(scope="module")
def rows():
  return gold.load()


@pytest.fixture(scope="module")
def score(rows):
  return gold.score(rows)


def test_the_gold_set_is_well_formed(rows):
  assert len(rows) >= 150
  assert len({r.id for r in rows}) == len(rows)
  assert len({r.alt_text for r in rows}) == len(rows)
  assert [r.id for r in rows if r.source == "paper"] == ["g001", "g002", "g003", "g004", "g005"]
  reasons = {str(r) for r in Reason}
  for r in rows:
    assert (r.caption is None) == (r.reason is not None), r
    assert r.reason is None or r.reason in reasons, r
    assert r.caption is None or r.caption == r.caption.lower().strip(), r
  categories = {r.category for r in rows}
  assert {"names", "places", "dates", "counts", "units", "titles", "venues", "organisations", "products", "quotes",
          "boilerplate", "non-english", "emoji"} <= categories


def test_parse_reads_captions_and_rejections():
  rows = gold.parse([
      "# comment", "id\tsource\tcategory\talt_text\texpected\tnote",
      "a\tcapjax\tplain\tTwo dogs play in the park.\tdogs play in the park .\t",
      "b\tcapjax\tfilters\tRed dress\treject:too_short",
  ])
  assert rows == [
      gold.GoldRow("a", "capjax", "plain", "Two dogs play in the park.", "dogs play in the park .", None, ""),
      gold.GoldRow("b", "capjax", "filters", "Red dress", None, "too_short", ""),
  ]
  with pytest.raises(ValueError, match="header"):
    gold.parse(["alt_text\tcaption"])


def test_scores_hold_the_measured_floor(score):
  assert score.total >= 150
  assert score.exact >= EXACT_FLOOR
  assert score.decisions >= DECISION_FLOOR
  assert score.paper_exact >= PAPER_EXACT_FLOOR
  assert len(score.misses) == score.total - score.exact
  assert sum(t for _, t in score.by_category.values()) == score.total


def test_report_lists_each_miss(score):
  text = gold.report(score)
  assert text.startswith(f"exact:     {score.exact}/{score.total}")
  assert "funnel: input " in text and f"concepts {score.funnel['kept']}" in text
  for miss in score.misses:
    assert f"  {miss.row.id} [{miss.row.category}] {miss.row.alt_text}" in text


def _run(*args):
  return subprocess.run([sys.executable, "-m", "capjax.text.gold", *args], capture_output=True, text=True,
                        env=dict(os.environ), timeout=300)


def test_command_line_prints_the_scores(tmp_path):
  path = tmp_path / "g.tsv"
  path.write_text("id\tsource\tcategory\talt_text\texpected\tnote\n"
                  "1\tcapjax\tplain\tTwo dogs play with a ball in the park.\tdogs play with a ball in the park .\t\n"
                  "2\tcapjax\tfilters\tRed dress\treject:too_short\t\n", encoding="utf-8")
  done = _run(f"--gold={path}")
  assert done.returncode == 0, done.stderr
  assert done.stdout.splitlines()[:3] == ["exact:     2/2 = 100.0%", "decisions: 2/2 = 100.0%", "paper:     0/0 exact"]


def test_command_line_errors_are_one_line(tmp_path):
  done = _run(f"--gold={tmp_path / 'missing.tsv'}")
  assert done.returncode == 2
  assert done.stderr == f"error: --gold={tmp_path / 'missing.tsv'} does not exist — give the path of a gold TSV\n"


def test_the_held_out_set_holds_its_first_score():
  # capjax/text/data/gold_heldout.tsv was written after the rules and scored once, untuned: 40/44 exact, 43/44
  # decisions. It tells how the rules generalize; a drop here is a regression the development set may not show.
  # 39/44 since "for an hour" stays (h021): the released CC3M captions keep "for a week" (5) and have no
  # counted duration, so only counted durations go.
  import importlib.resources

  text = importlib.resources.files("capjax.text").joinpath("data", "gold_heldout.tsv").read_text(encoding="utf-8")
  held_out = gold.score(gold.parse(text.splitlines()))
  assert (held_out.total, held_out.exact >= 39, held_out.decisions >= 43) == (44, True, True)
