"""A split folder's examples in each of its layouts, read one image at a time: by the metadata index's names
(`metadata_examples`), each image with the `.txt` beside it (`txt_examples`, img2dataset's `files` output), or
img2dataset's webdataset tars (`tar_examples`, through `tfds_builders.img2dataset`'s shard reader). Every image,
row or member that becomes no example is counted in the split's `Report` by reason; a name that leaves the split
folder, by its text or through a link, is counted and never opened.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from typing import Any

from PIL import Image

from capjax.image import io as image_io
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.caption_folder import metadata

# A split's counts, in the report's order. images = examples + missing_image + corrupt_image: the images the build
# went to read, once their names were safe and their text found. Rows (metadata), names and members that never got
# that far have counts of their own.
REPORT_KEYS = ("rows", "malformed_row", "no_text", "unsafe_name", "unsafe_member", "truncated_shard",
               "duplicate_image", "images", "missing_image", "corrupt_image", "examples", "captions",
               "unreferenced_file", "re_encoded")
BREAKDOWNS = {"corrupt_image": "corrupt_reasons", "re_encoded": "re_encoded_from"}
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")
MAX_TEXT_BYTES = 64 << 10  # a caption file over this is no text (CC3M's captions run to a few hundred characters)
LAYOUTS = ("metadata.jsonl", "metadata.csv", "tars", "files")


def stored_image(data: bytes) -> tuple[bytes, str | None]:
  """The bytes an example stores, and what was re-encoded (None: nothing). A whole RGB or grey JPEG is stored as
  read. A PNG, a WebP or a JPEG in another mode (CMYK) is decoded by capjax.image.io's loader (EXIF orientation,
  transparency over white, 16 bits to 8) and stored as a lossless 8-bit RGB PNG, because TFDS's decoders (PIL on the
  grain path, tf.image.decode_image) would give the trainer 4 channels, palette indices or 16-bit values, or (TF) no
  WebP at all; the second value says which it was ("png", "webp", "jpeg_cmyk"). Raises ImageError: not_image,
  truncated, undecodable, too_many_pixels (from the header, before any pixel is decoded)."""
  found = image_io.sniff_format(data)
  if found == "jpeg":
    header = image_io.verify_jpeg(data)
    if header.mode in ("RGB", "L"):
      return data, None
    source = f"jpeg_{header.mode.lower()}"
  elif found in ("png", "webp"):
    source = found
  else:
    raise image_io.ImageError("not_image", f"the bytes are {found or 'no known image format'}, not JPEG, PNG or WebP")
  pixels = image_io.load_rgb(data)
  buffer = io.BytesIO()
  Image.fromarray(pixels).save(buffer, "PNG")
  return buffer.getvalue(), source


def _read_regular(path: str) -> bytes | str:
  """The bytes of the regular file at `path`, or why not: missing_image (none, a folder, a FIFO or a device: never
  read, which would hang) or too_large (over img2dataset's MAX_MEMBER_BYTES)."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
  except OSError:
    return "missing_image"
  with os.fdopen(fd, "rb") as f:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
      return "missing_image"
    if st.st_size > i2d.MAX_MEMBER_BYTES:
      return "too_large"
    return f.read()


def _example(root: str, name: str, captions: list[str], report: report_lib.Report) -> dict[str, Any] | None:
  """The example of the image `name` (safe by its text) with `captions`, or None, counted: a link that leaves
  `root` is unsafe_name and never opened; then images, and missing_image, corrupt_image or an example."""
  if not metadata.inside(root, name):
    report.count("unsafe_name")
    return None
  report.count("images")
  data = _read_regular(os.path.join(root, name))
  if data == "missing_image":
    report.count("missing_image")
    return None
  if isinstance(data, str):
    report.count("corrupt_image", reason=data)
    return None
  return _checked(name, data, captions, report)


def _checked(name: str, data: bytes, captions: list[str], report: report_lib.Report) -> dict[str, Any] | None:
  try:
    stored, source = stored_image(data)
  except image_io.ImageError as error:
    report.count("corrupt_image", reason=error.reason)
    return None
  if source:
    report.count("re_encoded", reason=source)
  report.count("examples").count("captions", len(captions))
  return {"image": stored, "file_name": name, "captions": list(captions)}


def walk_images(root: str) -> Iterator[str]:
  """The image files under `root` (by extension; links too, judged where they are opened), as names relative to it
  with `/`, in sorted order; hidden folders (`.cache/`) are skipped and links to folders never followed. Only one
  folder's names are held at a time."""
  for folder, dirs, names in os.walk(root, followlinks=False):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(names):
      if name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith("."):
        yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def metadata_examples(root: str, index: metadata.Index, report: report_lib.Report) -> Iterator[tuple[str, dict]]:
  """Each file the index names with text, in the metadata's order, with all its captions; then the image files no
  row names, counted as unreferenced_file (their names only: none is read)."""
  for name, captions in index.captions.items():
    if captions and (example := _example(root, name, captions, report)) is not None:
      yield name, example
  for name in walk_images(root):
    if name not in index.captions:
      report.count("unreferenced_file")


def _text_caption(data: bytes) -> str:
  """A caption file's text, stripped of surrounding white space (img2dataset writes none; editors add a final
  newline); '' when it is not UTF-8."""
  try:
    return data.decode("utf-8-sig").strip()
  except UnicodeDecodeError:
    return ""


def txt_examples(root: str, report: report_lib.Report) -> Iterator[tuple[str, dict]]:
  """Each image file under `root` with the caption of the `.txt` of the same name beside it (`KEY.jpg` and
  `KEY.txt`, img2dataset's files output); an image without one, or with an empty one, is no_text and not read."""
  for name in walk_images(root):
    text_name = os.path.splitext(name)[0] + ".txt"
    if not metadata.inside(root, name):
      report.count("unsafe_name")
      continue
    data = _read_regular(os.path.join(root, text_name)) if metadata.inside(root, text_name) else ""
    caption = _text_caption(data) if isinstance(data, bytes) and len(data) <= MAX_TEXT_BYTES else ""
    if not caption:
      report.count("no_text")
      continue
    if (example := _example(root, name, [caption], report)) is not None:
      yield name, example


def _sample_caption(sample: i2d.Sample) -> str:
  """A tar sample's caption: its `.txt`, else its `.json`'s caption (or text)."""
  if sample.text is not None and len(sample.text) <= MAX_TEXT_BYTES:
    return _text_caption(sample.text)
  meta = sample.meta or {}
  value = next((meta[c] for c in ("caption", "text") if isinstance(meta.get(c), str)), "")
  return value.strip()


def tar_shards(root: str) -> list[str]:
  """img2dataset's webdataset tars directly in the split folder (`NNNNN.tar`; links are not followed), sorted."""
  return [shard for shard in i2d.list_shards(root) if shard.endswith(".tar")]


def tar_examples(shards: list[str], report: report_lib.Report) -> Iterator[tuple[str, dict]]:
  """Each image member with a caption, as img2dataset's shard reader streams it (members never extracted; links,
  names that could escape and members over MAX_MEMBER_BYTES never read: unsafe_member, a too_large image); its
  file name is `SHARD.tar/KEY`. A key seen again in the same tar is a duplicate_image."""
  for shard in shards:
    seen: set[str] = set()
    for sample in i2d.shard_samples(shard, report.counts, with_text=True):
      if sample.key in seen:
        report.count("duplicate_image")
        continue
      seen.add(sample.key)
      caption = _sample_caption(sample)
      if not caption:
        report.count("no_text")
        continue
      report.count("images")
      name = f"{os.path.basename(shard)}/{sample.key}"
      if sample.truncated or sample.too_large:
        report.count("corrupt_image", reason="truncated" if sample.truncated else "too_large")
      elif sample.image is None:
        report.count("missing_image")  # a caption without an image member
      elif (example := _checked(name, sample.image, [caption], report)) is not None:
        yield name, example


def split_report(report: report_lib.Report, layout: str) -> dict[str, Any]:
  """A split's report as the build writes it: its layout, then every count in REPORT_KEYS' order and the
  breakdowns."""
  return {"layout": layout, **report.as_dict(REPORT_KEYS, BREAKDOWNS)}
