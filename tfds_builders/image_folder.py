"""Images read by file name from the folder of a released image set (Flickr30K's `flickr30k-images/`, COCO's
`val2014/`): the JPEG bytes as released, or the reason there are none, for the builders' reports; and the manual
dir, the seeded hold-out and the report table that the flickrstyle10k and senticap builders share.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from capjax import files
from capjax.image import io as image_io
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib

# A released image name: no folder part, no leading dot, nothing a path could be built from but the name itself.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
MISSING, UNSAFE = "missing_image", "unsafe_name"


def read_jpeg(folder: str, name: str) -> tuple[bytes | None, str | None]:
  """(the file's bytes, None) for a whole JPEG named `name` in `folder`; otherwise (None, why): unsafe_name (a
  name with a folder part, a `..` or a leading dot: never opened), missing_image (no such file, or a link), or
  one of `img2dataset.verify_image`'s reasons (not_jpeg, truncated, undecodable, too_many_pixels, mode_cmyk)."""
  if not _SAFE_NAME.match(name) or ".." in name:
    return None, UNSAFE
  path = os.path.join(folder, name)
  if os.path.islink(path) or not os.path.isfile(path):
    return None, MISSING
  if os.path.getsize(path) > i2d.MAX_MEMBER_BYTES:
    return None, "too_large"
  data = files.read_regular(path)
  try:
    i2d.verify_image(data)
  except image_io.ImageError as error:
    return None, error.reason
  return data, None


def held_out(num_items: int, count: int, seed: int = 0) -> frozenset[int]:
  """`count` of the positions 0..num_items-1, drawn by a seeded permutation: the same set on every build."""
  order = np.random.default_rng(seed).permutation(num_items)
  return frozenset(int(i) for i in order[:count])


BREAKDOWNS = {"corrupt_image": "corrupt_reasons"}


def count_image_failure(report: report_lib.Report, reason: str) -> None:
  """missing_image and unsafe_name are counts of their own; every other reason is a corrupt_image, by reason."""
  if reason in (MISSING, UNSAFE):
    report.count(reason)
  else:
    report.count("corrupt_image", reason=reason)


def finish_report(report: report_lib.Report, keys: Sequence[str]) -> dict[str, Any]:
  """A split's report as builds write it: `keys` in order, then corrupt_reasons."""
  return report.as_dict(keys, BREAKDOWNS)


def format_report(reports: Mapping[str, Mapping[str, Any]], title: str, keys: Sequence[str]) -> str:
  return i2d.format_report(reports, title, tuple(keys), {"corrupt_image": "corrupt_reasons"})
