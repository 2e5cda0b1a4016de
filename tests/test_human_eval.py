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
  usage = ("error: expected `sheets --predictions=... --images=... --output=DIR` or `aggregate [--key=KEY] "
           "RATINGS.csv ...` — see --help")
  cases = [
      (("aggregate", str(bad)), f"error: {bad}: line 3: rating 'MAYBE' is not GOOD or BAD — rate each image GOOD "
                                "or BAD"),
      (("aggregate", str(missing)), f"error: {missing} does not exist — give the path of the ratings CSV a rating "
                                    "sheet downloads"),
      (("aggregate",), usage),
      (("summarize", str(bad)), usage),
      (("aggregate", str(bad), "--raters=0"), "error: flag --raters=0: 0 is not an integer in the range [1, 100] — "
                                              "see --help"),
  ]
  for args, stderr in cases:
    run = _run(*args)
    assert (run.returncode, run.stdout, run.stderr) == (2, "", stderr + "\n"), args


def test_cli_help_shows_the_usage_and_says_what_each_sheet_s_button_downloads():
  run = _run("--help")
  for usage in ("python -m capjax.metrics.human_eval sheets --predictions=NAME=PREDICTIONS.json",
                "python -m capjax.metrics.human_eval aggregate --key=DIR/key.json RATINGS.csv",
                "python -m capjax.metrics.human_eval aggregate RATINGS.csv"):
    assert usage in run.stdout
  for flag in ("--raters", "--predictions", "--images", "--output", "--key", "--seed", "--num"):
    assert flag in run.stdout, flag
  # One button a sheet: a rater sheet's downloads that rater's CSV, one model's sheet downloads everyone's.
  text = " ".join(run.stdout.split())
  assert "Each sheet has one button; it downloads that rater's ratings_rater_K.csv" in text
  assert "all raters on one page, whose one button downloads everyone's ratings as ratings.csv" in text
  page = human_eval.rating_sheet([1], [np.zeros((8, 8, 3), np.uint8)], ["a caption"])
  assert page.count("<button") == 1 and '"ratings.csv"' in page


# The blind study: three models, two images. "b" and "c" wrote the same caption of image 0: one item.
PREDICTIONS = {"a": {"0": "a red square", "1": "a blue circle", "9": "only a captioned this"},
               "b": {"0": "a green square", "1": "a blue circle."},
               "c": {"0": "a green square", "1": "two circles"}}


def test_blind_items_mix_the_models_captions_of_the_common_images_one_item_per_distinct_caption():
  items = human_eval.blind_items(PREDICTIONS, seed=0)
  assert sorted((i.image_id, i.caption, i.models) for i in items) == [
      ("0", "a green square", ("b", "c")), ("0", "a red square", ("a",)),
      ("1", "a blue circle", ("a",)), ("1", "a blue circle.", ("b",)), ("1", "two circles", ("c",))]
  assert [i.item for i in items] == ["q1", "q2", "q3", "q4", "q5"]  # numbered after the shuffle
  assert items == human_eval.blind_items(PREDICTIONS, seed=0)  # seeded
  assert [i.caption for i in items] != [i.caption for i in human_eval.blind_items(PREDICTIONS, seed=1)]
  assert {i.image_id for i in human_eval.blind_items(PREDICTIONS, num=1)} == {"0"}
  with pytest.raises(ValueError, match="no image in common"):
    human_eval.blind_items({"a": {"0": "x"}, "b": {"1": "y"}})


def test_each_rater_sheet_has_every_item_in_its_own_order_and_names_no_model():
  items = human_eval.blind_items(PREDICTIONS, seed=0)
  pictures = {i: human_eval.picture_uri(np.full((30, 50, 3), 100, np.uint8)) for i in ("0", "1")}
  orders = [[i.item for i in human_eval.rater_order(items, r)] for r in (1, 2, 3)]
  assert all(sorted(o) == sorted(i.item for i in items) for o in orders) and len({tuple(o) for o in orders}) > 1
  page = human_eval.rater_sheet(human_eval.rater_order(items, 2), pictures, 2)
  assert page.count('type="radio"') == 2 * len(items) and 'name="q1-r2"' in page and "-r1" not in page
  assert page.count("data:image/jpeg;base64,") == 2  # each picture once, however many captions it has
  assert '"ratings_rater_2.csv"' in page and page.count("<button") == 1
  human_eval.study_key(items, 3, 0, "x:test", list(PREDICTIONS))
  for name in ('"a"', '"b"', '"c"', "models"):
    assert name not in page.split("<script>")[0], name


def test_an_image_id_is_a_split_index_only_in_ascii_digits_within_int64():
  # "²" and "٣" are digits to str.isdigit, which int() refuses or reads: neither is predictions.json's index.
  ids = ("0", "42", "\u00b2", "\u0663", "-1", "1" * 18, "1" * 19, "")
  assert [human_eval.split_index(i) for i in ids] == [0, 42, None, None, None, int("1" * 18), None, None]
  items = human_eval.blind_items({"a": {"\u00b2": "x", "10": "y", "9": "z"}})
  assert {i.image_id for i in items} == {"\u00b2", "10", "9"}


def _ratings(votes: dict[str, str]) -> list[tuple[str, int, str]]:
  """{item: "GBG" (rater 1, 2, 3)} as rows."""
  return [(item, r, {"G": "GOOD", "B": "BAD"}[v]) for item, vs in votes.items() for r, v in enumerate(vs, 1)]


def test_the_study_aggregate_joins_the_ratings_with_the_key_per_model():
  items = {i.caption: i.item for i in human_eval.blind_items(PREDICTIONS)}
  key = human_eval.study_key(human_eval.blind_items(PREDICTIONS), 3, 0, "x:test", ["a", "b", "c"])
  rows = _ratings({items["a red square"]: "GGB", items["a blue circle"]: "BBB", items["a green square"]: "GGG",
                   items["a blue circle."]: "GBB", items["two circles"]: "BBB"})
  results = human_eval.aggregate_study(key, rows)
  assert results == [
      {"model": "a", "1+_good": 0.5, "2+_good": 0.5, "3_good": 0.0, "images": 2.0},   # GGB, BBB
      {"model": "b", "1+_good": 1.0, "2+_good": 0.5, "3_good": 0.5, "images": 2.0},   # GGG, GBB
      {"model": "c", "1+_good": 0.5, "2+_good": 0.5, "3_good": 0.5, "images": 2.0}]   # GGG, BBB
  assert human_eval.table(results).splitlines() == [
      "| model | images | 1+ GOOD | 2+ GOOD | 3 GOOD |", "|---|---:|---:|---:|---:|",
      "| a | 2 | 50.0% | 50.0% | 0.0% |", "| b | 2 | 100.0% | 50.0% | 50.0% |", "| c | 2 | 50.0% | 50.0% | 50.0% |"]
  with pytest.raises(ValueError, match=r"1 of 5 items lack ratings, e.g. item q\d from rater\(s\) \[3\] — give"):
    human_eval.aggregate_study(key, rows[:-1])
  with pytest.raises(ValueError, match=r"5 of 5 items lack ratings.*\(no CSV of rater\(s\) \[2\] given\)"):
    human_eval.aggregate_study(key, [r for r in rows if r[1] != 2])
  with pytest.raises(ValueError, match="item q99 is not in the key"):
    human_eval.aggregate_study(key, [*rows, ("q99", 1, "GOOD")])
  with pytest.raises(ValueError, match="rater 1 voted twice — give each rater's CSV once"):
    human_eval.aggregate_study(key, rows + rows[:1])


def test_the_table_splits_model_and_training_set():
  results = [{"model": "t2t8x8/cc3m", "1+_good": 0.5, "2+_good": 0.25, "3_good": 0.0, "images": 4.0}]
  assert human_eval.table(results).splitlines()[::2] == [
      "| model | training | images | 1+ GOOD | 2+ GOOD | 3 GOOD |", "| t2t8x8 | cc3m | 4 | 50.0% | 25.0% | 0.0% |"]


def test_cli_sheets_and_study_aggregate_report_bad_input_in_one_line(tmp_path):
  preds = tmp_path / "p.json"
  preds.write_text(json.dumps([{"image_id": 0, "caption": "x"}]))
  key = tmp_path / "key.json"
  key.write_text("{}")
  ratings = tmp_path / "r.csv"
  ratings.write_text("item,rater,rating\nq1,1,GOOD\n")
  cases = [
      (("sheets", "--images=cc3m:validation", f"--output={tmp_path}/o"), "error: sheets needs --predictions — give "
       "NAME=FILE,... (each model's predictions.json from --mode=eval)"),
      (("sheets", f"--predictions={preds}", "--images=cc3m:validation", f"--output={tmp_path}/o"),
       f"error: --predictions: '{preds}' is not NAME=FILE — e.g. --predictions=t2t/cc3m=workdir/t2t/eval/"
       "test_step1000/predictions.json"),
      (("sheets", f"--predictions=a={preds},a={preds}", "--images=cc3m:validation", f"--output={tmp_path}/o"),
       "error: --predictions: the name 'a' is given twice — give each model its own name"),
      (("sheets", f"--predictions=a={key}", "--images=cc3m:validation", f"--output={tmp_path}/o"),
       f"error: --predictions: {key} is not a COCO results list of {{image_id, caption}} (it is not a non-empty "
       "list of objects) — give the predictions.json that --mode=eval writes"),
      (("sheets", f"--predictions=a={preds}", "--images=cc3m", f"--output={tmp_path}/o"),
       "error: --images=cc3m is not DATASET[/CONFIG]:SPLIT — give the split the predictions are of, e.g. "
       "--images=karpathy/flickr30k:test"),
      (("sheets", f"--predictions=a={preds}", "--images=cc3m:validation", f"--output={tmp_path}"),
       f"error: {key} exists: a study's sheets are written once (raters may hold them) — choose another --output"),
      (("aggregate", f"--key={key}", str(ratings)), f"error: --key={key}: it is not a key of `sheets` (version 1: "
       "raters, models, items with image_id and models) — give the key.json that `sheets` wrote"),
  ]
  for args, stderr in cases:
    run = _run(*args)
    assert (run.returncode, run.stdout, run.stderr) == (2, "", stderr + "\n"), args
