"""Human evaluation as in the paper: a rating sheet (image, caption, GOOD/BAD from each of three raters) and
the aggregation of returned ratings into the fractions of images with 1+, 2+ and 3 GOOD votes.

Usage: python -m capjax.metrics.human_eval aggregate RATINGS.csv [RATINGS.csv ...] [--raters=3]
  prints the 1+/2+/3 GOOD fractions of the rated images as JSON. The rating sheets (rating_sheet.html) come
  from `python -m capjax.main --mode=eval`; each rater's button downloads a RATINGS.csv.
"""

from __future__ import annotations

import base64
import collections
import csv
import html
import io
import json
from collections.abc import Iterable, Sequence

import numpy as np
from absl import flags
from PIL import Image

from capjax import cli, files

RATINGS = ("GOOD", "BAD")

_SCRIPT = """
function download() {
  const rows = [["image_id", "rater", "rating"]];
  const missing = [];
  for (const item of document.querySelectorAll("[data-image]")) {
    for (let r = 1; r <= RATERS; r++) {
      const checked = item.querySelector(`input[name="${item.dataset.image}-r${r}"]:checked`);
      if (checked) rows.push([item.dataset.image, r, checked.value]); else missing.push(`${item.dataset.image}/r${r}`);
    }
  }
  if (missing.length && !confirm(`${missing.length} ratings missing (first: ${missing[0]}). Download anyway?`)) return;
  const blob = new Blob([rows.map(r => r.join(",")).join("\\n") + "\\n"], {type: "text/csv"});
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = "ratings.csv"; a.click();
}
"""


def _png_data_uri(image: np.ndarray, size: int = 256) -> str:
  buf = io.BytesIO()
  Image.fromarray(np.asarray(image, np.uint8)).resize((size, size), Image.NEAREST).save(buf, format="PNG")
  return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def rating_sheet(image_ids: Sequence[int | str], images: Sequence[np.ndarray], captions: Sequence[str],
                 raters: int = 3, title: str = "Caption rating") -> str:
  """A self-contained HTML page; its button downloads `image_id,rater,rating` rows as ratings.csv."""
  if not len(image_ids) == len(images) == len(captions):
    raise ValueError("image_ids, images and captions must have the same length")
  items = []
  for image_id, image, caption in zip(image_ids, images, captions):
    key = html.escape(str(image_id), quote=True)
    votes = "".join(
        f'<div>Rater {r}: ' + " ".join(
            f'<label><input type="radio" name="{key}-r{r}" value="{v}"> {v}</label>' for v in RATINGS) + "</div>"
        for r in range(1, raters + 1))
    items.append(f'<div class="item" data-image="{key}"><img src="{_png_data_uri(image)}" alt="{key}">'
                 f'<div><p class="caption">{html.escape(caption)}</p><p class="id">image {key}</p>{votes}</div></div>')
  return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:900px;margin:auto}} .item{{display:flex;gap:16px;margin:12px 0;
border-bottom:1px solid #ddd;padding-bottom:12px}} .caption{{font-size:18px}} .id{{color:#888}}</style>
</head><body><h1>{html.escape(title)}</h1>
<p>Is the caption a GOOD description of the image? Each rater answers for every image, then downloads the CSV.</p>
{''.join(items)}<button onclick="download()">Download ratings.csv</button>
<script>const RATERS = {raters};{_SCRIPT}</script></body></html>
"""


def read_ratings(lines: Iterable[str]) -> list[tuple[str, int, str]]:
  """Rows (image_id, rater, rating) of a ratings CSV with header image_id,rater,rating. A malformed row is a
  ValueError naming its line, as every one is here: skipped, an empty image id would count as an image of its own,
  and the fractions would be of other images than the sheet's."""
  reader = csv.DictReader(lines)
  if reader.fieldnames is None or not {"image_id", "rater", "rating"} <= set(reader.fieldnames):
    raise ValueError("the first line is not the header image_id,rater,rating — give a ratings.csv that a rating "
                     "sheet downloads")
  rows = []
  for n, row in enumerate(reader, start=2):
    if row["rater"] is None or row["rating"] is None:
      raise ValueError(f"line {n} has fewer than 3 columns — give image_id,rater,rating on every line")
    rating = row["rating"].strip().upper()
    if rating not in RATINGS:
      raise ValueError(f"line {n}: rating {row['rating']!r} is not GOOD or BAD — rate each image GOOD or BAD")
    try:
      rater = int(row["rater"])
    except ValueError:
      raise ValueError(f"line {n}: rater {row['rater']!r} is not a number — number the raters from 1") from None
    image_id = (row["image_id"] or "").strip()
    if not image_id:
      raise ValueError(f"line {n}: the image_id is empty — give every rating the image id of its sheet")
    rows.append((image_id, rater, rating))
  return rows


def aggregate(rows: Sequence[tuple[str, int, str]], raters: int = 3) -> dict[str, float]:
  """Fractions of images with at least 1, at least 2, and all 3 GOOD votes (the paper's Table 5 columns).

  Every image must have exactly one rating from each rater: a missing or repeated vote is an error naming it.
  """
  votes: dict[str, dict[int, str]] = collections.defaultdict(dict)
  for image_id, rater, rating in rows:
    if not 1 <= rater <= raters:
      raise ValueError(f"image {image_id}: rater {rater} is outside 1..{raters} — number the raters 1..{raters}, "
                       "or pass --raters")
    if rater in votes[image_id]:
      raise ValueError(f"image {image_id}: rater {rater} voted twice — keep one rating per rater and image")
    votes[image_id][rater] = rating
  incomplete = {i: sorted(set(range(1, raters + 1)) - set(v)) for i, v in votes.items() if len(v) != raters}
  if incomplete:
    first = sorted(incomplete)[0]
    raise ValueError(f"{len(incomplete)} image(s) lack ratings, e.g. image {first} from rater(s) {incomplete[first]} "
                     "— collect the missing ratings, or leave those images out")
  if not votes:
    raise ValueError("no ratings in the files — give the CSVs the raters downloaded")
  good = np.asarray([sum(r == "GOOD" for r in v.values()) for v in votes.values()])
  result = {f"{k}+_good" if k < raters else f"{k}_good": float(np.mean(good >= k)) for k in range(1, raters + 1)}
  result["images"] = float(len(votes))
  return result


# Its own flag set: capjax.evaluate imports this module for its rating sheets, and capjax.main must not grow a
# --raters flag.
_FLAGS = flags.FlagValues()
_RATERS = flags.DEFINE_integer("raters", 3, "Raters per image; every image needs one GOOD/BAD from each.",
                               lower_bound=1, flag_values=_FLAGS)


def main(argv: Sequence[str]) -> int:
  args = cli.parse(_FLAGS, argv, __doc__, positional=True)
  if len(args) < 2 or args[0] != "aggregate":
    cli.fail("expected `aggregate RATINGS.csv [RATINGS.csv ...]` — see --help")
  rows = []
  try:
    for path in args[1:]:
      # One reader for every input: a FIFO or device refused, UTF-8 with or without a byte-order mark.
      text = files.read_text(path, what="the ratings CSV a rating sheet downloads")
      try:
        rows += read_ratings(io.StringIO(text, newline=""))
      except ValueError as error:
        cli.fail(f"{path}: {error}")
    print(json.dumps(aggregate(rows, _RATERS.value)))
  except OSError as error:
    cli.fail(f"cannot read {error.filename}: {error.strerror} — check the path and its permissions")
  except ValueError as error:
    cli.fail(str(error))
  return 0


if __name__ == "__main__":
  cli.run(main)
