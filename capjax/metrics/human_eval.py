"""Human evaluation as in the paper: rating sheets (image, caption, GOOD/BAD) and the aggregation of the returned
ratings into the share of images rated GOOD by 1+, 2+ and all raters (its Table 4).

Usage:
  python -m capjax.metrics.human_eval sheets --predictions=NAME=PREDICTIONS.json[,NAME=PREDICTIONS.json ...]
      --images=DATASET[/CONFIG]:SPLIT [--features=irv2] [--data_dir=DIR] --output=DIR [--raters=3] [--num=N]
      [--seed=0]
    The paper's double-blind study. PREDICTIONS.json is what `python -m capjax.main --mode=eval` writes in
    WORKDIR/eval/SPLIT_stepN/: its image ids index SPLIT of DATASET (of its feature variant --features, for models
    that read features, as the paper's do; the pictures come from the source records). Writes
    DIR/rater_K.html for K = 1..raters, each holding every model's caption of the same images (the first --num
    images all models captioned), mixed and shuffled (by --seed, in another order for each rater), with no model
    named, and DIR/key.json, which model wrote each item: keep it from the raters. A caption that several models
    wrote for an image is one item. Each sheet has one button; it downloads that rater's ratings_rater_K.csv.
    NAME is a model, or MODEL/TRAINING (e.g. t2t8x8/cc3m) to fill the table's model and training columns.
  python -m capjax.metrics.human_eval aggregate --key=DIR/key.json RATINGS.csv [RATINGS.csv ...] [--json]
    joins the returned CSVs with the key and prints the paper's Table 4 layout: per model (and training set), the
    share of images whose caption 1+, 2+ and all raters rated GOOD. Every item needs one rating from each rater.
  python -m capjax.metrics.human_eval aggregate RATINGS.csv [RATINGS.csv ...] [--raters=3]
    one model's study, without a key: the 1+/2+/3 GOOD fractions as JSON. Its sheet is the rating_sheet.html that
    `--mode=eval` writes: all raters on one page, whose one button downloads everyone's ratings as ratings.csv.
"""

# Not split: the one-model sheet and the blind study share the page, its download script, the CSV
# reader and the aggregation, and one command serves both; a split would make a cycle between the command and the
# study, or a third module for the shared few dozen lines.

from __future__ import annotations

import base64
import collections
import csv
import dataclasses
import html
import io
import json
import os
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from absl import flags
from PIL import Image

from capjax import cli, files
from capjax.strings import decimal, is_utf8

RATINGS = ("GOOD", "BAD")
KEY_VERSION = 1
# Bounds on the study's counts, for the flags and for a key.json a user may have edited: a study of more raters is
# a typo (10^20 raters once took 8 GB in 2 s), and a sheet of more images than MAX_IMAGES would not open in a browser.
MAX_RATERS, MAX_IMAGES = 100, 100_000

# The page's one button: every checked radio of the page's raters (RATERS) becomes a row `ID,rater,rating` under
# HEADER, saved as FILENAME.
_SCRIPT = """
function download() {
  const rows = [[HEADER, "rater", "rating"]];
  const missing = [];
  for (const item of document.querySelectorAll("[data-image]")) {
    for (const r of RATERS) {
      const checked = item.querySelector(`input[name="${item.dataset.image}-r${r}"]:checked`);
      if (checked) rows.push([item.dataset.image, r, checked.value]); else missing.push(`${item.dataset.image}/r${r}`);
    }
  }
  if (missing.length && !confirm(`${missing.length} ratings missing (first: ${missing[0]}). Download anyway?`)) return;
  const blob = new Blob([rows.map(r => r.join(",")).join("\\n") + "\\n"], {type: "text/csv"});
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = FILENAME; a.click();
}
"""

_STYLE = """<style>body{font-family:sans-serif;max-width:900px;margin:auto} .item{display:flex;gap:16px;margin:12px 0;
border-bottom:1px solid #ddd;padding-bottom:12px} .item img{max-width:256px;align-self:flex-start}
.caption{font-size:18px} .id{color:#888}</style>"""


def _png_data_uri(image: np.ndarray, size: int = 256) -> str:
  buf = io.BytesIO()
  Image.fromarray(np.asarray(image, np.uint8)).resize((size, size), Image.NEAREST).save(buf, format="PNG")
  return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _votes(key: str, raters: Sequence[int], labelled: bool) -> str:
  return "".join(
      "<div>" + (f"Rater {r}: " if labelled else "") + " ".join(
          f'<label><input type="radio" name="{key}-r{r}" value="{v}"> {v}</label>' for v in RATINGS) + "</div>"
      for r in raters)


def _page(title: str, intro: str, items: str, raters: Sequence[int], header: str, filename: str,
          extra_script: str = "") -> str:
  return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
{_STYLE}</head><body><h1>{html.escape(title)}</h1>
<p>{intro}</p>
{items}<button id="download" onclick="download()">Download {html.escape(filename)}</button>
<script>const RATERS = {json.dumps(list(raters))}; const HEADER = {json.dumps(header)};
const FILENAME = {json.dumps(filename)};{_SCRIPT}{extra_script}</script></body></html>
"""


def rating_sheet(image_ids: Sequence[int | str], images: Sequence[np.ndarray], captions: Sequence[str],
                 raters: int = 3, title: str = "Caption rating") -> str:
  """One model's sheet, all raters on one page: a self-contained HTML page whose one button downloads every
  rater's `image_id,rater,rating` rows as ratings.csv."""
  if not len(image_ids) == len(images) == len(captions):
    raise ValueError("image_ids, images and captions must have the same length")
  items = []
  for image_id, image, caption in zip(image_ids, images, captions):
    key = html.escape(str(image_id), quote=True)
    items.append(f'<div class="item" data-image="{key}"><img src="{_png_data_uri(image)}" alt="{key}">'
                 f'<div><p class="caption">{html.escape(caption)}</p><p class="id">image {key}</p>'
                 f'{_votes(key, range(1, raters + 1), labelled=True)}</div></div>')
  intro = ("Is the caption a GOOD description of the image? Each rater answers for every image; then one person "
           "downloads everyone's ratings with the button at the end.")
  return _page(title, intro, "".join(items), range(1, raters + 1), "image_id", "ratings.csv")


@dataclasses.dataclass(frozen=True)
class Item:
  """One caption of one image in the blind study: `models` wrote it (several when they agree)."""
  item: str
  image_id: str
  caption: str
  models: tuple[str, ...]


def blind_items(predictions: Mapping[str, Mapping[str, str]], num: int = 0, seed: int = 0) -> list[Item]:
  """The study's items: every model's caption of the first `num` (0: all) images that every model captioned, one
  item per distinct (image, caption). Item ids are numbered after a seeded shuffle, so they say nothing of the
  model. `predictions` is {model: {image id: caption}}."""
  if not predictions:
    raise ValueError("no models — give --predictions=NAME=FILE,...")
  common = sorted(set.intersection(*(set(p) for p in predictions.values())), key=_natural)
  if not common:
    raise ValueError("the models captioned no image in common — give predictions of the same split")
  images = common[:num] if num else common
  found: dict[tuple[str, str], list[str]] = {}
  for image_id in images:
    for model, captions in predictions.items():
      found.setdefault((image_id, captions[image_id]), []).append(model)
  pairs = sorted(found, key=lambda p: (_natural(p[0]), p[1]))
  random.Random(seed).shuffle(pairs)
  width = len(str(len(pairs)))
  return [Item(f"q{n:0{width}d}", image_id, caption, tuple(found[(image_id, caption)]))
          for n, (image_id, caption) in enumerate(pairs, start=1)]


def split_index(image_id: str) -> int | None:
  """The split index that `image_id` is (predictions.json's ids are), or None: ASCII decimal digits only (str.isdigit
  takes "²", which int() refuses) and at most 18 of them (int64, and no int() of a 5,000-digit string)."""
  return decimal(image_id)


def _natural(image_id: str) -> tuple[int, int | str]:
  """Image ids in numeric order when they are numbers (predictions.json's split indices)."""
  index = split_index(image_id)
  return (1, image_id) if index is None else (0, index)


def rater_order(items: Sequence[Item], rater: int, seed: int = 0) -> list[Item]:
  """Rater `rater`'s order of the items: its own seeded shuffle."""
  order = list(items)
  random.Random(f"{seed}/rater{rater}").shuffle(order)
  return order


def rater_sheet(items: Sequence[Item], pictures: Mapping[str, str], rater: int,
                title: str = "Caption rating") -> str:
  """One rater's page of the blind study: each item's picture and caption with GOOD/BAD, no model named; its
  button downloads `item,rater,rating` rows as ratings_rater_K.csv. `pictures` maps image ids to data URIs,
  each embedded once and set by the page's script (the same image appears once per model)."""
  used = {item.image_id for item in items}
  refs = {image_id: f"p{n}" for n, image_id in enumerate(sorted(used, key=_natural))}
  blocks = []
  for item in items:
    key = html.escape(item.item, quote=True)
    blocks.append(f'<div class="item" data-image="{key}"><img data-picture="{refs[item.image_id]}" alt="">'
                  f'<div><p class="caption">{html.escape(item.caption)}</p><p class="id">item {key}</p>'
                  f'{_votes(key, [rater], labelled=False)}</div></div>')
  table = json.dumps({refs[i]: pictures[i] for i in sorted(used, key=_natural)})
  script = (f"\nconst PICTURES = {table};\nfor (const img of document.querySelectorAll('img[data-picture]')) "
            "img.src = PICTURES[img.dataset.picture];\n")
  intro = (f"Rater {rater}: is the caption a GOOD description of the image? Answer for every item, then download "
           "your ratings with the button at the end and send the file back.")
  return _page(f"{title} — rater {rater}", intro, "".join(blocks), [rater], "item", f"ratings_rater_{rater}.csv",
               script)


def study_key(items: Sequence[Item], raters: int, seed: int, images: str, models: Sequence[str]) -> dict[str, Any]:
  """What the key file holds: which models wrote each item, and how the sheets were made."""
  return {"version": KEY_VERSION, "raters": raters, "seed": seed, "images": images, "models": list(models),
          "items": {i.item: {"image_id": i.image_id, "caption": i.caption, "models": list(i.models)} for i in items}}


def read_ratings(lines: Iterable[str]) -> list[tuple[str, int, str]]:
  """Rows (id, rater, rating) of a ratings CSV with header image_id,rater,rating (one model's sheet) or
  item,rater,rating (a blind study's rater sheet). A malformed row is a ValueError naming its line, as every one is
  here: skipped, an empty id would count as an image of its own, and the fractions would be of other images than
  the sheet's."""
  reader = csv.DictReader(lines)
  fields = set(reader.fieldnames or ())
  column = next((c for c in ("image_id", "item") if {c, "rater", "rating"} <= fields), None)
  if column is None:
    raise ValueError("the first line is not the header image_id,rater,rating (or item,rater,rating) — give a "
                     "ratings CSV that a rating sheet downloads")
  rows = []
  for n, row in enumerate(reader, start=2):
    if row["rater"] is None or row["rating"] is None:
      raise ValueError(f"line {n} has fewer than 3 columns — give {column},rater,rating on every line")
    rating = row["rating"].strip().upper()
    if rating not in RATINGS:
      raise ValueError(f"line {n}: rating {row['rating']!r} is not GOOD or BAD — rate each image GOOD or BAD")
    try:
      rater = int(row["rater"])
    except ValueError:
      raise ValueError(f"line {n}: rater {row['rater']!r} is not a number — number the raters from 1") from None
    image_id = (row[column] or "").strip()
    if not image_id:
      named = "image id" if column == "image_id" else "item"
      raise ValueError(f"line {n}: the {column} is empty — give every rating the {named} of its sheet")
    rows.append((image_id, rater, rating))
  return rows


def _votes_by(rows: Sequence[tuple[str, int, str]], raters: int, what: str, outside: str,
              twice: str) -> dict[str, dict[int, str]]:
  """{image or item: {rater: rating}} from (id, rater, rating) rows; a ValueError for a rater outside 1..`raters`
  (`outside` ends the message: what the range is, what to do) or a second vote of one rater (`twice`: what to do)."""
  votes: dict[str, dict[int, str]] = collections.defaultdict(dict)
  for name, rater, rating in rows:
    if not 1 <= rater <= raters:
      raise ValueError(f"{what} {name}: rater {rater} is outside 1..{raters}{outside}")
    if rater in votes[name]:
      raise ValueError(f"{what} {name}: rater {rater} voted twice — {twice}")
    votes[name][rater] = rating
  return votes


def aggregate(rows: Sequence[tuple[str, int, str]], raters: int = 3) -> dict[str, float]:
  """Fractions of images with at least 1, at least 2, and all 3 GOOD votes (the paper's Table 4 columns).

  Every image must have exactly one rating from each rater: a missing or repeated vote is an error naming it.
  """
  votes = _votes_by(rows, raters, "image", f" — number the raters 1..{raters}, or pass --raters",
                    "keep one rating per rater and image")
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


def read_key(text: str) -> dict[str, Any]:
  """The key file `sheets` wrote, checked, counts bounded (a user may have edited it): ValueError saying what is
  wrong."""
  try:
    key = json.loads(text)
  except (json.JSONDecodeError, RecursionError) as error:
    raise ValueError(f"it is not JSON ({getattr(error, 'msg', 'nested too deep')}) — give the key.json that "
                     "`sheets` wrote") from None
  items = key.get("items") if isinstance(key, dict) else None
  if (not isinstance(key, dict) or key.get("version") != KEY_VERSION or not isinstance(items, dict)
      or not isinstance(key.get("raters"), int) or not isinstance(key.get("models"), list)
      or not all(isinstance(i, dict) and isinstance(i.get("image_id"), str) and isinstance(i.get("models"), list)
                 for i in items.values())):
    raise ValueError("it is not a key of `sheets` (version 1: raters, models, items with image_id and models) — "
                     "give the key.json that `sheets` wrote")
  if isinstance(key["raters"], bool) or not 1 <= key["raters"] <= MAX_RATERS:
    raise ValueError(f"its raters is not a number of raters 1..{MAX_RATERS} — give the key.json that `sheets` "
                     "wrote, as it wrote it")
  if not key["models"] or not all(is_utf8(m) and m for m in key["models"]):
    raise ValueError("its models are not a non-empty list of names — give the key.json that `sheets` wrote, as it "
                     "wrote it")
  return key


def aggregate_study(key: Mapping[str, Any], rows: Sequence[tuple[str, int, str]]) -> list[dict[str, Any]]:
  """The blind study's results, one row a model in the key's order: {"model", "1+_good", ..., "images"}. Every item
  of the key needs exactly one rating from each rater: a missing, repeated or unknown one is an error naming it."""
  items, raters = key["items"], int(key["raters"])
  for item, _, _ in rows:
    if item not in items:
      raise ValueError(f"item {item} is not in the key — give the key.json of the sheets these ratings come from")
  votes = _votes_by(rows, raters, "item", ", the study's raters — give the CSVs of this study's sheets",
                    "give each rater's CSV once")
  missing = {i: sorted(set(range(1, raters + 1)) - set(votes.get(i, {}))) for i in items
             if len(votes.get(i, {})) != raters}
  if missing:
    first = next(iter(missing))
    absent = sorted({r for rs in missing.values() for r in rs if not any(v.get(r) for v in votes.values())})
    hint = f" (no CSV of rater(s) {absent} given)" if absent else ""
    raise ValueError(f"{len(missing)} of {len(items)} items lack ratings, e.g. item {first} from rater(s) "
                     f"{missing[first]}{hint} — give every rater's CSV, each with every item rated")
  results = []
  for model in key["models"]:
    mine = [(items[i]["image_id"], r, v) for i, by in votes.items() if model in items[i]["models"]
            for r, v in by.items()]
    results.append({"model": model, **aggregate(mine, raters)})
  return results


def table(results: Sequence[Mapping[str, Any]]) -> str:
  """The paper's Table 4 layout in Markdown: model (and training set, when every name is MODEL/TRAINING), the
  images rated, and the share of them with 1+, 2+, ... GOOD votes, in percent."""
  shares = [k for k in results[0] if k.endswith("_good")]
  split = all("/" in r["model"] for r in results)
  names = ["model", "training"] if split else ["model"]
  header = [*names, "images", *(k.replace("_good", " GOOD") for k in shares)]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(names) + "---:|" * (1 + len(shares))]
  for r in results:
    cells = r["model"].split("/", 1) if split else [r["model"]]
    cells += [f"{int(r['images'])}", *(f"{100 * r[k]:.1f}%" for k in shares)]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def picture_uri(image: np.ndarray, side: int = 256) -> str:
  """An image as the blind sheets show it: at most `side` pixels a side, its aspect kept (raters judge what a
  photograph shows), JPEG."""
  picture = Image.fromarray(np.asarray(image, np.uint8)).convert("RGB")
  picture.thumbnail((side, side))
  buf = io.BytesIO()
  picture.save(buf, format="JPEG", quality=85)
  return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# Its own flag set: capjax.evaluate imports this module for its rating sheets, and capjax.main must not grow these.
_FLAGS = flags.FlagValues()
_RATERS = flags.DEFINE_integer("raters", 3, "Raters per image: sheets writes one sheet each; aggregate without "
                               "--key needs one GOOD/BAD from each for every image.", lower_bound=1,
                               upper_bound=MAX_RATERS, flag_values=_FLAGS)
_PREDICTIONS = flags.DEFINE_string("predictions", "", "sheets: NAME=PREDICTIONS.json,... (--mode=eval's "
                                   "predictions.json of each model).", flag_values=_FLAGS)
_IMAGES = flags.DEFINE_string("images", "", "sheets: DATASET[/CONFIG]:SPLIT whose pictures the predictions' "
                              "image ids index (e.g. karpathy/flickr30k:test).", flag_values=_FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "sheets: TFDS data dir of --images ('' -> $TFDS_DATA_DIR or "
                                "~/tensorflow_datasets).", flag_values=_FLAGS)
_FEATURES = flags.DEFINE_string("features", "", "sheets: the feature variant the models read (their "
                                "dataset.features, e.g. irv2): image ids index it, pictures come from its source.",
                                flag_values=_FLAGS)
_OUTPUT = flags.DEFINE_string("output", "", "sheets: the folder for rater_K.html and key.json.", flag_values=_FLAGS)
_NUM = flags.DEFINE_integer("num", 0, "sheets: images in the study, the first N all models captioned (0: all).",
                            lower_bound=0, upper_bound=MAX_IMAGES, flag_values=_FLAGS)
_SEED = flags.DEFINE_integer("seed", 0, "sheets: the shuffle's seed.", flag_values=_FLAGS)
_KEY = flags.DEFINE_string("key", "", "aggregate: the key.json of a blind study's sheets.", flag_values=_FLAGS)
_JSON = flags.DEFINE_boolean("json", False, "aggregate --key: print JSON rows instead of the table.",
                             flag_values=_FLAGS)


def _read_predictions(spec: str) -> tuple[dict[str, dict[str, str]], list[str]]:
  """{model: {image id: caption}} from --predictions=NAME=FILE,..., and the files' paths."""
  if not spec.strip():
    cli.fail("sheets needs --predictions — give NAME=FILE,... (each model's predictions.json from --mode=eval)")
  models: dict[str, dict[str, str]] = {}
  paths = []
  for part in spec.split(","):
    name, eq, path = part.partition("=")
    name = name.strip()
    if not eq or not name or not path.strip():
      cli.fail(f"--predictions: {part!r} is not NAME=FILE — e.g. --predictions=t2t/cc3m=workdir/t2t/eval/"
               "test_step1000/predictions.json")
    if name in models:
      cli.fail(f"--predictions: the name {name!r} is given twice — give each model its own name")
    text = files.read_text(path.strip(), "--predictions", "a predictions.json that --mode=eval writes")
    try:
      rows = json.loads(text)
      if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError("it is not a non-empty list of objects")
      captions = {}
      for n, row in enumerate(rows, start=1):
        image_id, caption = row.get("image_id"), row.get("caption")
        # Quoted as JSON (ASCII): a lone surrogate in the message would fail the error line itself.
        if not (is_utf8(image_id) and image_id or isinstance(image_id, int) and not isinstance(image_id, bool)):
          raise ValueError(f"entry {n}: its image_id {json.dumps(image_id)[:40]} is not a number or text")
        if not is_utf8(caption):  # a null caption would be shown to raters as "None"
          raise ValueError(f"entry {n}: its caption {json.dumps(caption)[:40]} is not UTF-8 text")
        captions[str(image_id)] = caption
      if len(captions) != len(rows):
        raise ValueError("an image id appears twice")
    except (json.JSONDecodeError, ValueError, RecursionError) as error:
      cli.fail(f"--predictions: {path} is not a COCO results list of {{image_id, caption}} ({error}) — give the "
               "predictions.json that --mode=eval writes")
    models[name] = captions
    paths.append(path.strip())
  return models, paths


def _pictures(spec: str, data_dir: str, features: str, image_ids: Sequence[str]) -> dict[str, str]:
  """{image id: data URI} of split indices `image_ids` of --images=DATASET[/CONFIG]:SPLIT (of its feature variant
  `features`, whose records' source_index names the picture, when given)."""
  dataset, colon, split = spec.rpartition(":")
  if not colon or not dataset or not split:
    cli.fail(f"--images={spec} is not DATASET[/CONFIG]:SPLIT — give the split the predictions are of, e.g. "
             "--images=karpathy/flickr30k:test")
  cli.quiet_library_logs()
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data import show, sources  # noqa: PLC0415 (TensorFlow: not for --help and flag errors)
  splits = []
  for variant in ("", features) if features else ("",):
    try:
      builder = show.open_builder(dataset, data_dir, features=variant)
    except (sources.DatasetNotBuiltError, ConfigError) as error:
      cli.fail(str(error))
    if split not in builder.info.splits:
      cli.fail(f"--images: {builder.name} has no split {split!r} — use one of {', '.join(builder.info.splits)}")
    splits.append(builder.as_data_source(split=split))
  pixels, indexed = splits[0], splits[-1]
  pictures = {}
  for image_id in image_ids:
    index = split_index(image_id)
    if index is None or index >= len(indexed):
      cli.fail(f"--images: image id {image_id[:40]} is not an index of {spec} ({len(indexed)} examples) — give the "
               "split (and --features) the predictions were made on")
    picture = show.image_of(pixels[int(indexed[index]["source_index"]) if features else index])
    if picture is None:
      cli.fail(f"--images: {dataset} has no pictures (no `image` field) — give the dataset the features were "
               "extracted from, and their variant as --features")
    pictures[image_id] = picture_uri(np.asarray(picture))
  return pictures


def _sheets() -> None:
  predictions, inputs = _read_predictions(_PREDICTIONS.value)
  if not _IMAGES.value:
    cli.fail("sheets needs --images — give DATASET[/CONFIG]:SPLIT, the split the predictions are of")
  if not _OUTPUT.value:
    cli.fail("sheets needs --output — give DIR, the folder for the rater sheets and the key")
  key_path = os.path.join(_OUTPUT.value, "key.json")
  if os.path.exists(key_path):
    cli.fail(f"{key_path} exists: a study's sheets are written once (raters may hold them) — choose another --output")
  try:
    items = blind_items(predictions, _NUM.value, _SEED.value)
  except ValueError as error:
    cli.fail(str(error))
  dropped = len(set.union(*(set(p) for p in predictions.values()))) - len(set.intersection(
      *(set(p) for p in predictions.values())))
  if dropped:
    print(f"note: {dropped} image(s) that only some models captioned are left out", file=sys.stderr)
  # Every output checked before the pictures are read and before any is written: a bad one fails at once, with no
  # sheet out, and none may be an input (a predictions file in --output under a sheet's name, by any link).
  sheets = [os.path.join(_OUTPUT.value, f"rater_{rater}.html") for rater in range(1, _RATERS.value + 1)]
  for path in [*sheets, key_path]:
    if os.path.isdir(path):  # output_file's remedy, a file name inside it, is not one: the command names its files
      cli.fail(f"--output={_OUTPUT.value}: {os.path.basename(path)} in it is a folder — move it away, or choose "
               "another --output")
    files.output_file(path, "--output", {"--predictions": inputs}, os.path.basename(path), make_folder=True)
  from capjax.data import integrity  # noqa: PLC0415
  dataset = _IMAGES.value.rpartition(":")[0].split("/")[0]
  read = [os.path.join(integrity.data_dir(_DATA_DIR.value), name)  # the dataset's folders: the sheets go elsewhere
          for name in (dataset, f"{dataset}_{_FEATURES.value}" if _FEATURES.value else "") if name]
  files.refuse_overlap({"--output": _OUTPUT.value}, {f"--images={dataset}'s folder": read})
  out = cli.writable_dir(_OUTPUT.value, "--output")
  images = sorted({i.image_id for i in items}, key=_natural)
  pictures = _pictures(_IMAGES.value, _DATA_DIR.value, _FEATURES.value, images)
  os.makedirs(out, exist_ok=True)
  for rater, path in enumerate(sheets, start=1):
    with files.writing(path, "w") as f:
      f.write(rater_sheet(rater_order(items, rater, _SEED.value), pictures, rater))
  with files.writing(key_path, "w") as f:
    json.dump(study_key(items, _RATERS.value, _SEED.value, _IMAGES.value, list(predictions)), f, indent=1)
  print(f"wrote {_RATERS.value} rater sheets of {len(items)} items ({len(images)} images × {len(predictions)} "
        f"models; identical captions merged: {len(images) * len(predictions) - len(items)}) to {out}: "
        + ", ".join(f"rater_{r}.html" for r in range(1, _RATERS.value + 1)))
  print(f"key: {key_path} — keep it from the raters")


def _aggregate(paths: Sequence[str]) -> None:
  key = None
  if _KEY.value:
    try:
      key = read_key(files.read_text(_KEY.value, "--key", "the key.json that `sheets` wrote"))
    except ValueError as error:
      cli.fail(f"--key={_KEY.value}: {error}")
    if _FLAGS["raters"].present and _RATERS.value != key["raters"]:
      cli.fail(f"--raters={_RATERS.value} but the key's study has {key['raters']} — drop --raters")
  rows = []
  for path in paths:
    # One reader for every input: a FIFO or device refused, UTF-8 with or without a byte-order mark.
    text = files.read_text(path, what="the ratings CSV a rating sheet downloads")
    try:
      rows += read_ratings(io.StringIO(text, newline=""))
    except ValueError as error:
      cli.fail(f"{path}: {error}")
  if key is None:
    print(json.dumps(aggregate(rows, _RATERS.value)))
    return
  results = aggregate_study(key, rows)
  print(json.dumps(results) if _JSON.value else table(results))


def main(argv: Sequence[str]) -> int:
  args = cli.parse(_FLAGS, argv, __doc__, positional=True)
  usage = "expected `sheets --predictions=... --images=... --output=DIR` or `aggregate [--key=KEY] RATINGS.csv ...`"
  try:
    if args == ["sheets"]:
      _sheets()
    elif len(args) >= 2 and args[0] == "aggregate":
      _aggregate(args[1:])
    else:
      cli.fail(f"{usage} — see --help")
  except OSError as error:
    cli.fail(f"cannot read {error.filename}: {error.strerror} — check the path and its permissions")
  except ValueError as error:
    cli.fail(str(error))
  return 0


if __name__ == "__main__":
  cli.run(main)
