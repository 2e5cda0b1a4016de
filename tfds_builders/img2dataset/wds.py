"""Webdataset mirrors of img2dataset downloads (pixparse's `cc3m-wds` and `cc12m-wds`: `NAME-SPLIT-NNNN.tar` shards
whose members are `KEY.jpg`, `KEY.txt`, the caption, and `KEY.json`), read as streams of checked images
(`shard_images`): what cc12m_llavanext joins to its jsonl, and what cc3m's `wds` config keeps as they are, one
example per good image with a caption (`mirror_events`, its plain path `plain_mirror` and its Beam path
`beam_mirror_transform`: one work item per shard, nothing grouped). Links, names that could escape and members over
MAX_MEMBER_BYTES are never read (`shards.shard_samples`), and count as `unsafe_member` or a `too_large` image.

Imported by package name only (Beam workers unpickle these functions by module path; see the package's docstring).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds

from capjax.image import io as image_io
from tfds_builders import report as report_lib
from tfds_builders.img2dataset.shards import Where, list_shards, shard_samples, verify_image

# A mirror's counts: samples = examples + corrupt_image + no_caption; then what was never read, and the shards.
MIRROR_KEYS = ("samples", "examples", "corrupt_image", "no_caption", "unsafe_member", "shards", "truncated_shard")
MIRROR_BREAKDOWNS = {"corrupt_image": "corrupt_reasons"}
MAX_CAPTION_CHARS = 10_000  # a caption over this is a corrupt sample (CC3M's run to a few hundred characters)


def mirror_shards(folder: str, name: str, split: str) -> list[str]:
  """The mirror's tars `NAME-SPLIT-NNNN.tar` in `folder` (symlinks are not followed), sorted."""
  pattern = re.compile(rf"{re.escape(name)}-{re.escape(split)}-\d+\.tar")
  return [s for s in list_shards(folder) if pattern.fullmatch(os.path.basename(s))]


@dataclasses.dataclass(frozen=True)
class Image:
  """One image member of a shard, checked: its JPEG bytes and size, or why it cannot be an example."""

  key: str
  url: str | None  # from KEY.json; None without one
  order: tuple[str, int]  # (shard name, sample number): of a key's images, the first good one in this order wins
  data: bytes | None = None
  width: int = 0
  height: int = 0
  reason: str = ""  # truncated, too_large, not_jpeg, undecodable, too_many_pixels, mode_cmyk; "" when good
  text: bytes | None = None  # KEY.txt, read only when asked (`with_text`)
  where: Where | None = None  # of a light image: where its bytes lie in the tar, for a second read (`read_images`)


def shard_images(shard: str, counts: collections.Counter, with_text: bool = False,
                 light: bool = False) -> Iterator[Image]:
  """Every image of one tar, read as a stream (never extracted, links never followed, members over
  MAX_MEMBER_BYTES never read), each decoded whole once to check it; shard-side counts into `counts`. With `light`
  a good image keeps its size and where its bytes lie, not the bytes (a Beam path's first pass)."""
  counts["shards"] += 1
  name = os.path.basename(shard)
  for number, sample in enumerate(shard_samples(shard, counts, with_text=with_text)):
    url = (sample.meta or {}).get("url")
    url = url if isinstance(url, str) else None
    if sample.truncated or sample.too_large:
      yield Image(sample.key, url, (name, number), reason="truncated" if sample.truncated else "too_large",
                  text=sample.text)
      continue
    if sample.image is None:
      continue  # a KEY.json or KEY.txt without an image: nothing to join
    try:
      header = verify_image(sample.image)
    except image_io.ImageError as e:
      yield Image(sample.key, url, (name, number), reason=e.reason, text=sample.text)
      continue
    if light:
      yield Image(sample.key, url, (name, number), None, header.width, header.height, text=sample.text,
                  where=Where.of(number, sample))
    else:
      yield Image(sample.key, url, (name, number), sample.image, header.width, header.height, text=sample.text)


def _caption(text: bytes | None) -> str:
  """The sample's caption, stripped; '' when there is none, it is not UTF-8, or it is over MAX_CAPTION_CHARS."""
  try:
    caption = (text or b"").decode("utf-8").strip()
  except UnicodeDecodeError:
    return ""
  return "" if len(caption) > MAX_CAPTION_CHARS else caption


def mirror_events(shard: str) -> Iterator[tuple[str, Any]]:
  """One shard of a mirror: ("example", (key, example)) per good image with a caption, then ("counts", Report)."""
  counts: collections.Counter = collections.Counter()
  report = report_lib.Report(counts)
  for image in shard_images(shard, counts, with_text=True):
    counts["samples"] += 1
    if image.reason:
      report.count("corrupt_image", reason=image.reason)
      continue
    caption = _caption(image.text)
    if not caption:
      counts["no_caption"] += 1
      continue
    counts["examples"] += 1
    yield "example", (f"{image.order[0]}/{image.order[1]:07d}", {
        "image": image.data,  # the bytes as stored: Image(encoding_format="jpeg") keeps them unchanged
        "caption": caption,
        "captions": [caption],
        "url": image.url or "",
        "key": image.key,
        "width": image.width,
        "height": image.height,
    })
  yield "counts", report


def mirror_report(report: report_lib.Report) -> dict[str, Any]:
  return report.as_dict(MIRROR_KEYS, MIRROR_BREAKDOWNS)


def plain_mirror(shards: Iterable[str], report: report_lib.Report) -> Iterator[tuple[str, dict[str, Any]]]:
  """The plain path of one split: its shards one at a time; every count into `report`."""
  for shard in shards:
    for kind, value in mirror_events(shard):
      if kind == "counts":
        report.merge(value)
      else:
        yield value


def _write_split_report(report: report_lib.Report, data_dir: str, split: str) -> None:
  report_lib.write_part(data_dir, split, mirror_report(report))


def _beam_mirror(pipeline_input, shards: list[str], data_dir: str, split: str):
  beam = tfds.core.lazy_imports.apache_beam
  events = (pipeline_input
            | "Shards" >> beam.Create(shards)
            | "OneShardPerWorker" >> beam.Reshuffle()
            | "ReadShard" >> beam.FlatMap(mirror_events))
  _ = (events
       | "ShardCounts" >> beam.Filter(lambda e: e[0] == "counts")
       | "Reports" >> beam.Map(lambda e: e[1])
       | "SumReports" >> beam.CombineGlobally(report_lib.combine)
       | "WriteReport" >> beam.Map(_write_split_report, data_dir=data_dir, split=split))
  return events | "Examples" >> beam.Filter(lambda e: e[0] == "example") | "KeyExample" >> beam.Map(lambda e: e[1])


def beam_mirror_transform(shards: list[str], data_dir: str, split: str):
  """The Beam path of one split of a mirror, as the PTransform `_generate_examples` returns: one work item per
  shard and no grouping (a sample carries its caption); its report part is written into `data_dir`."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.ptransform_fn(_beam_mirror)(shards, data_dir, split)
