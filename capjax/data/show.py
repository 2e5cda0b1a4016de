"""What a built dataset holds: its build report, examples per split and caption statistics, a self-contained HTML
page (and a PNG contact sheet beside it) of its first examples, and its references as COCO JSON for capjax.metrics.

  python -m capjax.data.show --dataset=NAME[/CONFIG] --split=SPLIT [--data_dir=DIR] [--html=FILE.html]
      [--refs=REFS.json] [--num=N]

--html writes FILE (the first N examples of SPLIT, default 100: their images inline, every caption, and every other
text or number field, as stylized and recaptioned sets have) and FILE with .png, a grid of their images. --refs
writes every caption of every example of SPLIT as COCO caption annotations, image ids from the `image_id` field or
the example's index: `python -m capjax.metrics REFS.json PREDS.json` scores predictions against them. TFDS's
`as_dataframe` and `show_examples` do not read ArrayRecord, which capjax builds; this does.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import ml_collections
import numpy as np
from absl import flags

from capjax import cli, files
from capjax.config_util import ConfigError
from capjax.data import integrity
from capjax.data.captions import captions_of
from capjax.strings import as_str
from capjax.text import stats

FLAGS = flags.FlagValues()
_DATASET = flags.DEFINE_string("dataset", None, "A built dataset, NAME or NAME/CONFIG (e.g. synthetic_scenes/tiny).",
                               flag_values=FLAGS)
_SPLIT = flags.DEFINE_string("split", None, "The split to show (e.g. validation).", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets).",
                                flag_values=FLAGS)
_HTML = flags.DEFINE_string("html", "", "Write a page of the first --num examples here (and FILE.png, a contact "
                            "sheet of their images).", flag_values=FLAGS)
_REFS = flags.DEFINE_string("refs", "", "Write every caption of the split here as COCO caption annotations.",
                            flag_values=FLAGS)
_NUM = flags.DEFINE_integer("num", 100, "Examples on the --html page (at most the split's size).", lower_bound=1,
                            flag_values=FLAGS)
flags.mark_flags_as_required(["dataset", "split"], flag_values=FLAGS)

THUMBNAIL = 256  # the longest side of an image on the page, in pixels
CELL = 96        # a contact sheet's cell, in pixels
COLUMNS = 10     # a contact sheet's columns (fewer when there are fewer images)
_IMAGE_FIELDS = ("image",)
_SHOWN_VALUES = 64  # an array field with more values (a feature grid) is summarised by its shape, not printed


def open_builder(dataset: str, data_dir: str, features: str = "", auto_build: bool = False):
  """The builder of the built `dataset` (NAME or NAME/CONFIG; its feature variant `features`) in `data_dir`, checked
  whole (`capjax.data.sources.prepare`; with `auto_build`, an embedded dataset is built first): DatasetNotBuiltError
  or ConfigError otherwise. A name of the form `NAME_VARIANT` that only exists as files (a feature variant) is read
  from its files."""
  from capjax.data import sources  # noqa: PLC0415 (JAX and TensorFlow: not for --help and flag errors)
  name, config = integrity.split_dataset(dataset)
  spec = ml_collections.ConfigDict({"name": name, "builder_config": config, "data_dir": data_dir,
                                    "features": features, "auto_build": auto_build})
  return sources.prepare(spec)


def split_counts(builder) -> dict[str, int]:
  """Examples per split, in the builder's order."""
  return {name: int(info.num_examples) for name, info in builder.info.splits.items()}


def build_report(builder) -> dict[str, Any]:
  """What the builder stored about its build (`info.metadata`: a build report, a funnel, the settings); {} if none."""
  metadata = builder.info.metadata
  return {key: metadata[key] for key in metadata} if metadata else {}


def caption_field(features) -> str:
  """The field with the references: `captions`, else `caption`; '' when the dataset has neither."""
  return next((name for name in ("captions", "caption") if name in features), "")


def plain(value: Any) -> Any:
  """A decoded record's value as JSON: bytes as text, arrays as lists (or, past `_SHOWN_VALUES` values, their
  shape), numpy scalars as numbers."""
  if isinstance(value, Mapping):
    return {key: plain(v) for key, v in value.items()}
  if isinstance(value, (bytes, np.bytes_)):
    return as_str(value)
  if isinstance(value, np.ndarray):
    if value.size > _SHOWN_VALUES:
      return f"<array {'x'.join(map(str, value.shape))} {value.dtype}>"
    return [plain(v) for v in value]
  if isinstance(value, (list, tuple)):
    return [plain(v) for v in value]
  if isinstance(value, np.generic):
    return value.item()
  return value


def records(source, count: int) -> Iterator[dict[str, Any]]:
  """The first `count` records of a data source (all of them with `count` -1)."""
  for index in range(len(source) if count < 0 else min(count, len(source))):
    yield source[index]


def image_of(record: Mapping[str, Any]) -> Any:
  """The record's picture as a PIL image, or None when it has none."""
  from PIL import Image  # noqa: PLC0415
  value = record.get("image")
  if not isinstance(value, np.ndarray) or value.ndim != 3:
    return None
  return Image.fromarray(value[..., :3] if value.shape[-1] >= 3 else value[..., 0], "RGB" if value.shape[-1] >= 3
                         else "L").convert("RGB")


def data_uri(image, side: int = THUMBNAIL) -> str:
  """`image` shrunk to at most `side` pixels a side, as a data: URI (JPEG)."""
  small = image.copy()
  small.thumbnail((side, side))
  buffer = io.BytesIO()
  small.save(buffer, format="JPEG", quality=85)
  return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def contact_sheet(images: Sequence[Any], cell: int = CELL, columns: int = COLUMNS):
  """The images in a grid of `cell`-pixel squares, `columns` wide (fewer for fewer images), on white."""
  from PIL import Image  # noqa: PLC0415
  columns = max(1, min(columns, len(images)))
  rows = max(1, math.ceil(len(images) / columns))
  sheet = Image.new("RGB", (columns * cell, rows * cell), "white")
  for index, image in enumerate(images):
    small = image.copy()
    small.thumbnail((cell, cell))
    x, y = (index % columns) * cell, (index // columns) * cell
    sheet.paste(small, (x + (cell - small.width) // 2, y + (cell - small.height) // 2))
  return sheet


def page(title: str, examples: Sequence[Mapping[str, Any]], field: str) -> str:
  """A self-contained HTML page: per example, its image inline, its captions, and its other fields; every text from
  the data escaped."""
  e = html.escape
  parts = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8">', f"<title>{e(title)}</title>",
           "<style>body{font-family:sans-serif;margin:1em}.ex{display:flex;gap:1em;border-bottom:1px solid #ccc;"
           "padding:.5em 0}.ex img{max-width:256px;align-self:flex-start}pre{white-space:pre-wrap;margin:0;"
           "font-size:.85em;color:#444}</style></head><body>", f"<h1>{e(title)}</h1>"]
  for index, record in enumerate(examples):
    image = image_of(record)
    parts.append(f'<div class="ex" id="example-{index}">')
    if image is not None:
      parts.append(f'<img src="{data_uri(image)}" alt="example {index}">')
    parts.append(f"<div><h3>example {index}</h3>")
    if field:
      parts.append("<ol>" + "".join(f"<li>{e(c)}</li>" for c in captions_of(record, field)) + "</ol>")
    extra = {key: plain(value) for key, value in record.items() if key not in (*_IMAGE_FIELDS, field)}
    for key, value in sorted(extra.items()):
      shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
      parts.append(f"<p><b>{e(key)}</b></p><pre>{e(shown)}</pre>")
    parts.append("</div></div>")
  parts.append("</body></html>")
  return "\n".join(parts)


def coco_references(source, field: str) -> dict[str, list[dict[str, Any]]]:
  """Every caption of every record of `source` as COCO caption annotations: {"images": [{"id"}], "annotations":
  [{"image_id", "id", "caption"}]}; ids from the records' `image_id`, else their index."""
  images, annotations = [], []
  for index, record in enumerate(records(source, -1)):
    image_id = plain(record["image_id"]) if "image_id" in record else index
    images.append({"id": image_id})
    for caption in captions_of(record, field):
      annotations.append({"image_id": image_id, "id": len(annotations), "caption": caption})
  return {"images": images, "annotations": annotations}


def _text_source(builder, split: str):
  """The split's records with no image decoded (references and ids only)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  skip = {k: tfds.decode.SkipDecoding() for k, f in builder.info.features.items()
          if isinstance(f, tfds.features.Image)}
  return builder.as_data_source(split=split, decoders=skip or None)


def _outputs(builder) -> tuple[str, str, str]:
  """--html, its contact sheet and --refs, checked before any work (none of them a file of the dataset)."""
  inputs = {"--data_dir": [os.fspath(builder.data_dir)]}  # the dataset's folder, and so every file of it
  page_path = sheet = refs = ""
  if _HTML.value:
    page_path = files.output_file(_HTML.value, "--html", inputs, example="show.html")
    sheet = os.path.splitext(page_path)[0] + ".png"
    if files.same_file(sheet, page_path):
      cli.fail(f"--html={page_path} would be overwritten by its own contact sheet — give the page a name ending "
               "in .html")
    files.output_file(sheet, "--html", inputs, example="show.html")
  if _REFS.value:
    refs = files.output_file(_REFS.value, "--refs", {**inputs, "--html": [p for p in (page_path, sheet) if p]},
                             example="refs.json")
  return page_path, sheet, refs


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  cli.quiet_library_logs()
  from capjax.data import sources  # noqa: PLC0415
  data_dir = integrity.data_dir(_DATA_DIR.value)
  dataset, split = _DATASET.value, _SPLIT.value
  if wrong := integrity.dataset_problem(dataset):
    cli.fail(f"--dataset={dataset}: {wrong}")
  if os.path.exists(data_dir) and not os.path.isdir(data_dir):
    cli.fail(f"--data_dir={data_dir} is a file, not a directory — give the TFDS data dir the dataset is built in")
  try:
    builder = open_builder(dataset, data_dir)
  except (sources.DatasetNotBuiltError, ConfigError) as e:
    cli.fail(str(e))
  counts = split_counts(builder)
  if split not in counts:
    cli.fail(f"{dataset} has no split {split!r} — use one of {', '.join(counts)}")
  page_path, sheet, refs = _outputs(builder)
  field = caption_field(builder.info.features)
  if refs and not field:
    cli.fail(f"{dataset} has no `captions` or `caption` field, so no references — drop --refs")

  print(f"{dataset} {builder.version} in {builder.data_dir}")
  for name, n in counts.items():
    print(f"  {name}: {n:,} examples")
  report = build_report(builder)
  for key, value in report.items():  # "build report: {...}", "funnel: [...]", "settings: {...}"
    print(f"{key.replace('_', ' ')}: {json.dumps(plain(value), indent=2, ensure_ascii=False, default=str)}")
  if not report:
    print("build report: none stored (this builder records none)")
  if field:
    try:
      captions = stats.read_dataset_captions(dataset, split, data_dir, field)
      print(f"captions of {split} ({field}): {json.dumps(stats.caption_stats(captions))}")
    except stats.UsageError as e:
      cli.fail(str(e))

  if page_path:
    examples = list(records(builder.as_data_source(split=split), _NUM.value))
    with files.writing(page_path, "w", flag="--html") as f:
      f.write(page(f"{dataset} {split}: {len(examples)} of {counts[split]:,} examples", examples, field))
    images = [image for image in map(image_of, examples) if image is not None]
    with files.writing(sheet, "wb", flag="--html") as f:
      contact_sheet(images).save(f, format="PNG")
    print(f"wrote {page_path} ({len(examples)} examples) and {sheet} ({len(images)} images)")
  if refs:
    references = coco_references(_text_source(builder, split), field)
    with files.writing(refs, "w", flag="--refs") as f:
      json.dump(references, f, ensure_ascii=False)
    print(f"wrote {refs} ({len(references['images']):,} images, {len(references['annotations']):,} captions)")
  sys.stdout.flush()
  return 0


if __name__ == "__main__":
  cli.run(main)
