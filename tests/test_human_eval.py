"""The paper's human evaluation: a 3-rater GOOD/BAD sheet and the 1+/2+/3 GOOD fractions."""

import io

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
  with pytest.raises(ValueError, match="header"):
    _csv("id,who,what\n")


def test_rating_sheet_has_one_item_per_image_and_three_raters():
  images = [np.zeros((64, 64, 3), np.uint8)] * 2
  page = human_eval.rating_sheet([7, 8], images, ["a red circle", "a <b>bold</b> claim"])
  assert page.count('data-image="') == 2
  assert page.count('type="radio"') == 2 * 3 * 2
  assert "a &lt;b&gt;bold&lt;/b&gt; claim" in page  # captions are escaped
  assert page.count("data:image/png;base64,") == 2


def test_cli_aggregates_files(tmp_path, capsys):
  path = tmp_path / "r.csv"
  path.write_text("image_id,rater,rating\nx,1,GOOD\nx,2,BAD\nx,3,BAD\n")
  assert human_eval.main(["aggregate", str(path)]) == 0
  assert '"1+_good": 1.0' in capsys.readouterr().out
