"""The build report every builder writes: `Report` (per-reason counts of what became no example), `combine` (the
one sum, which is also Beam's combine), and the report step that both the plain and the Beam paths feed.

The report step, on TFDS's public API only: generation writes each part of the report (one per split, or per
name) into the dataset's folder as it finishes (`write_part`: the last line of a plain `_generate_examples`, a
Beam branch's last transform); `ReportMetadata.save_metadata`, which TFDS calls when it writes the dataset's info
after the last split, gathers the parts into `metadata.json` and prints the table; with `manifest`, it also writes
the dataset's `manifest.tsv.gz` there (capjax.data.manifest: each example's key and image sha256, read back from the
shards just written, so both paths write the same). Nothing is kept on the builder.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import tensorflow_datasets as tfds
from etils import epath

PARTS = ".build_report"  # in the dataset's folder while it is built (TFDS's incomplete.* folder); removed after


@dataclasses.dataclass
class Report:
  """Counts by name (rows read, examples written, images left out, ...) and, for some counts, their reasons
  (corrupt_image → not_jpeg: 2, truncated: 1). Reports add up: a shard's, a row's and a split's are one type."""

  counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  reasons: dict[str, collections.Counter] = dataclasses.field(default_factory=dict)

  def count(self, name: str, n: int = 1, reason: str | None = None) -> Report:
    """Adds `n` to `name` (and to its `reason`); returns the report, so that `Report().count(...)` is one."""
    self.counts[name] += n
    if reason is not None:
      self.reasons.setdefault(name, collections.Counter())[reason] += n
    return self

  def merge(self, other: Report) -> Report:
    """Adds `other` into this report; returns it."""
    self.counts.update(other.counts)
    for name, reasons in other.reasons.items():
      self.reasons.setdefault(name, collections.Counter()).update(reasons)
    return self

  def as_dict(self, keys: Sequence[str], breakdowns: Mapping[str, str]) -> dict[str, Any]:
    """The JSON form builds write: every count of `keys` in that order (0 when none), then each count's reasons
    under its breakdown field (`breakdowns`: count → field), sorted by reason."""
    out: dict[str, Any] = {key: int(self.counts.get(key, 0)) for key in keys}
    for name, field in breakdowns.items():
      out[field] = {reason: int(n) for reason, n in sorted(self.reasons.get(name, {}).items())}
    return out


def combine(reports: Iterable[Report]) -> Report:
  """The sum of `reports`: associative and commutative, so Beam's CombineGlobally can run it in any tree."""
  total = Report()
  for report in reports:
    total.merge(report)
  return total


def write_part(data_dir: epath.PathLike, name: str, value: Any) -> None:
  """One part of the report (a split's, as JSON) into the dataset's folder being built, for the report step."""
  folder = epath.Path(data_dir) / PARTS
  folder.mkdir(parents=True, exist_ok=True)
  (folder / f"{name}.json").write_text(json.dumps(value))


class ReportMetadata(tfds.core.MetadataDict):
  """The dataset's metadata (`metadata.json`) with the report step: on save, the parts generation wrote are
  `assemble`d into metadata items (e.g. {"build_report": {split: report}}), the table `describe` gives is printed,
  and the parts are removed. A save with no parts (info written again) saves what the metadata holds. With
  `manifest` (builders of downloaded images: `image`, `url` and `key` fields), the build's manifest is written too,
  where the data dir is local (ArrayRecord is read from local disk only)."""

  def __init__(self, assemble: Callable[[dict[str, Any]], dict[str, Any]],
               describe: Callable[[Mapping[str, Any]], str], *args: Any, manifest: bool = False, **kwargs: Any):
    super().__init__(*args, **kwargs)
    self._assemble, self._describe, self._manifest = assemble, describe, manifest

  def save_metadata(self, data_dir: epath.PathLike) -> None:
    folder = epath.Path(data_dir) / PARTS
    if folder.exists():
      parts = {path.name.removesuffix(".json"): json.loads(path.read_text())
               for path in sorted(folder.iterdir()) if path.name.endswith(".json")}
      self.update(self._assemble(parts))
      folder.rmtree()
      print(self._describe(self), flush=True)
      if self._manifest:
        _write_manifest(data_dir)
    super().save_metadata(data_dir)


def _write_manifest(data_dir: epath.PathLike) -> None:
  """The build's manifest (capjax.data.manifest) into its folder, where that folder is on a local disk."""
  from capjax.data import manifest  # noqa: PLC0415
  if "://" in os.fspath(data_dir):
    print(f"manifest: not written ({os.fspath(data_dir)} is not on a local disk) — run `python -m "
          "capjax.data.manifest write --dataset=NAME --data_dir=DIR` where the dataset is read", flush=True)
  elif written := manifest.write(data_dir):
    print(f"manifest: {written[1]:,} keys with their image sha256 in {manifest.NAME}", flush=True)


def by_split(parts: dict[str, Any]) -> dict[str, Any]:
  """The usual assembly: {"build_report": {split: part}}, splits in name order."""
  return {"build_report": {name: parts[name] for name in sorted(parts)}}
