"""The paper's human evaluation: a 3-rater GOOD/BAD sheet and the 1+/2+/3 GOOD fractions."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from capjax.metrics import human_eval


def _csv(text: str):
  return human_eval.read_ratings(io.StringIO(text))


def test_aggregate_counts_images_by_good_votes():
  rows = _csv("image_id,rater,rating\n"
              "a,1,GOOD\na,2,GOOD\na,3,GOOD\n"    # 3 GOOD
              "b,1,GOOD\nb,2,bad\nb,3,GOOD\n"     # 2 GOOD (case-insensitive)
              "c,1,BAD\nc,2,GOOD\nc,3,BAD\n"      # 1 GOOD
              "d,1,BAD\nd,2,BAD\nd,3,BAD\n")      # 0 GOOD
  assert human_eval.aggregate(rows) == {"1+_good": 0.75, "2+_good": 0.5, "3_good": 0.25, "images": 4.0}


def test_missing_and_repeated_votes_are_errors_that_name_the_image():
  with pytest.raises(ValueError, match=r"image b from rater\(s\) \[3\]"):
    human_eval.aggregate(_csv("image_id,rater,rating\na,1,GOOD\na,2,GOOD\na,3,BAD\nb,1,GOOD\nb,2,GOOD\n"))
  with pytest.raises(ValueError, match="image a: rater 1 voted twice"):
    human_eval.aggregate(_csv("image_id,rater,rating\na,1,GOOD\na,1,BAD\n"))


def test_bad_rows_are_reported_with_their_line():
  with pytest.raises(ValueError, match="line 3: rating 'MAYBE'"):
    _csv("image_id,rater,rating\na,1,GOOD\na,2,MAYBE\n")
  # An empty image id counted as an image of its own, beside the sheet's: a malformed row, like the others.
  with pytest.raises(ValueError, match="line 3: the image_id is empty — give every rating the image id"):
    _csv("image_id,rater,rating\na,1,GOOD\n,2,GOOD\n")
  with pytest.raises(ValueError, match="line 2: the image_id is empty"):
    _csv("image_id,rater,rating\n \t,1,GOOD\n")
  with pytest.raises(ValueError, match="header"):
    _csv("id,who,what\n")


def test_rating_sheet_has_one_item_per_image_and_three_raters():
  images = [np.zeros((64, 64, 3), np.uint8)] * 2
  page = human_eval.rating_sheet([7, 8], images, ["a red circle", "a <b>bold</b> claim"])
  assert page.count('data-image="') == 2
  assert page.count('type="radio"') == 2 * 3 * 2
  assert "a &lt;b&gt;bold&lt;/b&gt; claim" in page  # captions are escaped
  assert page.count("data:image/png;base64,") == 2


def _run(*args: str) -> subprocess.CompletedProcess:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return subprocess.run([sys.executable, "-m", "capjax.metrics.human_eval", *args], capture_output=True, text=True,
                        timeout=120, cwd=root, env={**os.environ, "PYTHONPATH": root})


def test_cli_aggregates_files(tmp_path):
  first, second = tmp_path / "r1.csv", tmp_path / "r2.csv"
  first.write_text("image_id,rater,rating\nx,1,GOOD\nx,2,BAD\nx,3,BAD\n")
  second.write_text("image_id,rater,rating\ny,1,GOOD\ny,2,GOOD\ny,3,BAD\n")
  run = _run("aggregate", str(first), str(second))
  assert run.returncode == 0, run.stderr
  assert json.loads(run.stdout) == {"1+_good": 1.0, "2+_good": 0.5, "3_good": 0.0, "images": 2.0}
  run = _run("aggregate", str(first), "--raters=2")
  assert (run.returncode, run.stderr) == (2, "error: image x: rater 3 is outside 1..2 — number the raters 1..2, or "
                                             "pass --raters\n")


def test_cli_reports_bad_input_in_one_line(tmp_path):
  bad, missing = tmp_path / "bad.csv", tmp_path / "no.csv"
  bad.write_text("image_id,rater,rating\na,1,GOOD\na,2,MAYBE\n")
  usage = "error: expected `aggregate RATINGS.csv [RATINGS.csv ...]` — see --help"
  cases = [
      (("aggregate", str(bad)), f"error: {bad}: line 3: rating 'MAYBE' is not GOOD or BAD — rate each image GOOD "
                                "or BAD"),
      (("aggregate", str(missing)), f"error: {missing} does not exist — give the path of the ratings CSV a rating "
                                    "sheet downloads"),
      (("aggregate",), usage),
      (("summarize", str(bad)), usage),
      (("aggregate", str(bad), "--raters=0"), "error: flag --raters=0: 0 is not a positive integer — see --help"),
  ]
  for args, stderr in cases:
    run = _run(*args)
    assert (run.returncode, run.stdout, run.stderr) == (2, "", stderr + "\n"), args


def test_cli_help_shows_the_usage():
  run = _run("--help")
  assert "Usage: python -m capjax.metrics.human_eval aggregate RATINGS.csv" in run.stdout and "--raters" in run.stdout
