"""The pages capjax writes, opened in a real headless Chromium (Debian's `chromium`): the blind study's rater sheets,
rated by a scripted rater whose downloaded CSVs aggregate to a hand-computed Table 4, one model's rating sheet of
--mode=eval, and the dataset page of
`python -m capjax.data.show` for the cc3m dummy data, whose images decode and whose captions are shown. Skipped,
saying how to install Chromium, where there is none; `make test` installs it when it runs as root.

CAPJAX_UPDATE_SCREENSHOTS=1 writes docs/datasets.md's screenshot, docs/data_show_cc3m.png, from the page test."""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

import browser
from capjax.data import build, show
from capjax.metrics import human_eval

REPO = pathlib.Path(__file__).resolve().parent.parent
CC3M_DUMMY = REPO / "tfds_builders" / "cc3m" / "dummy_data"
SCREENSHOT = REPO / "docs" / "data_show_cc3m.png"

pytestmark = [pytest.mark.slow,  # opens Chromium (conftest.py: the slow rule)
              pytest.mark.skipif(browser.find() is None, reason=browser.MISSING)]


@pytest.fixture(scope="module")
def cc3m_dir(tmp_path_factory) -> pathlib.Path:
  """cc3m built from its dummy data, as `python -m capjax.data.build` builds it."""
  directory = tmp_path_factory.mktemp("tfds")
  build.main(["capjax.data.build", "--dataset=cc3m", f"--manual_dir={CC3M_DUMMY}", f"--data_dir={directory}"])
  return directory


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> pathlib.Path:
  return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def chromium(downloads):
  page = browser.Browser(browser.find(), downloads)
  yield page
  page.close()


# Two models' captions of cc3m train images 0-2 (and one only the first captioned, left out of the study). Both wrote
# "a dog runs on the beach" of image 0: one item that counts for both.
PREDICTIONS = {
    "t2t/cc3m": [(0, "a dog runs on the beach"), (1, "a city street at night"), (2, "a bowl of soup"), (5, "extra")],
    "t2t/coco": [(0, "a dog runs on the beach"), (1, "a man riding a horse"), (2, "a plate of food on a table")],
}
# What the scripted raters answer to each caption: rater 1, 2, 3 (G: GOOD, B: BAD).
VOTES = {"a dog runs on the beach": "GGG", "a city street at night": "GBB", "a bowl of soup": "GGB",
         "a man riding a horse": "BBB", "a plate of food on a table": "BGG"}
# By hand: t2t/cc3m's images get 3, 1 and 2 GOOD votes; t2t/coco's get 3, 0 and 2.
TABLE_4 = """\
| model | training | images | 1+ GOOD | 2+ GOOD | 3 GOOD |
|---|---|---:|---:|---:|---:|
| t2t | cc3m | 3 | 100.0% | 66.7% | 33.3% |
| t2t | coco | 3 | 66.7% | 66.7% | 33.3% |
"""


def test_a_scripted_rater_s_downloaded_ratings_aggregate_to_the_hand_computed_table_4(
    cc3m_dir, chromium, downloads, tmp_path, capsys):
  specs = []
  for name, rows in PREDICTIONS.items():
    path = tmp_path / f"{name.replace('/', '_')}.json"
    path.write_text(json.dumps([{"image_id": i, "caption": c} for i, c in rows]))
    specs.append(f"{name}={path}")
  study = tmp_path / "study"
  assert human_eval.main(["human_eval", "sheets", f"--predictions={','.join(specs)}", "--images=cc3m:train",
                          f"--data_dir={cc3m_dir}", f"--output={study}"]) == 0
  ratings = []
  for rater in (1, 2, 3):
    chromium.open(study / f"rater_{rater}.html")
    shown = chromium.evaluate("""[...document.querySelectorAll("[data-image]")].map(e =>
        [e.dataset.image, e.querySelector(".caption").textContent, e.querySelector("img").naturalWidth])""")
    assert sorted(caption for _, caption, _ in shown) == sorted(VOTES)  # every distinct caption once
    assert all(width > 0 for _, _, width in shown)  # the pictures decoded
    assert "t2t" not in chromium.evaluate("document.documentElement.outerHTML")  # no model named
    for item, caption, _ in shown:  # the rater reads each caption and clicks a button
      vote = "GOOD" if VOTES[caption][rater - 1] == "G" else "BAD"
      chromium.click(f'input[name="{item}-r{rater}"][value="{vote}"]')
    chromium.click("#download")  # the page's own button
    chromium.wait_for_download()
    ratings.append(downloads / f"ratings_rater_{rater}.csv")
    assert ratings[-1].read_text().splitlines()[0] == "item,rater,rating"
  capsys.readouterr()
  assert human_eval.main(["human_eval", "aggregate", f"--key={study / 'key.json'}", *map(str, ratings)]) == 0
  assert capsys.readouterr().out == TABLE_4


def test_one_model_s_sheet_downloads_every_rater_s_ratings_with_its_one_button(chromium, downloads, tmp_path, capsys):
  """The rating_sheet.html of --mode=eval: three raters on one page, one button."""
  images = [np.full((32, 32, 3), value, np.uint8) for value in (40, 200)]
  page = tmp_path / "rating_sheet.html"
  page.write_text(human_eval.rating_sheet([7, 8], images, ["a dark square", "a light square"]))
  chromium.open(page)
  assert chromium.evaluate("document.querySelectorAll('button').length") == 1
  for image_id, votes in ((7, "GGB"), (8, "BBB")):
    for rater, vote in enumerate(votes, start=1):
      chromium.click(f'input[name="{image_id}-r{rater}"][value="{"GOOD" if vote == "G" else "BAD"}"]')
  chromium.click("#download")
  chromium.wait_for_download()
  capsys.readouterr()
  assert human_eval.main(["human_eval", "aggregate", str(downloads / "ratings.csv")]) == 0
  assert json.loads(capsys.readouterr().out) == {"1+_good": 0.5, "2+_good": 0.5, "3_good": 0.0, "images": 2.0}


def test_the_dataset_page_of_cc3m_shows_its_images_and_captions(cc3m_dir, chromium, tmp_path, capsys):
  page = tmp_path / "cc3m.html"
  assert show.main(["capjax.data.show", "--dataset=cc3m", "--split=train", f"--data_dir={cc3m_dir}",
                    f"--html={page}"]) == 0
  builder = tfds.builder("cc3m", data_dir=cc3m_dir)
  source = builder.as_data_source(split="train", decoders={"image": tfds.decode.SkipDecoding()})
  field = show.caption_field(builder.info.features)
  captions = [c for record in show.records(source, -1) for c in show.captions_of(record, field)]
  chromium.open(page)
  widths = chromium.evaluate("[...document.images].map(i => i.complete ? i.naturalWidth : 0)")
  assert len(widths) == len(source) and all(w > 0 for w in widths), widths  # every image decoded
  text = chromium.evaluate("document.body.innerText")
  assert captions and all(caption in text for caption in captions)
  shot = tmp_path / "page.png"
  chromium.screenshot(shot, 900, 700)
  with Image.open(shot) as image:
    grey = np.asarray(image.convert("L"))
  assert grey.shape == (700, 900) and len(np.unique(grey)) > 16  # a rendered page, not a blank one
  if os.environ.get("CAPJAX_UPDATE_SCREENSHOTS"):
    SCREENSHOT.parent.mkdir(exist_ok=True)
    SCREENSHOT.write_bytes(shot.read_bytes())
