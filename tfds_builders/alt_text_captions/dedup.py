"""The dedup stage of alt_text_captions (beyond the paper, off by default; between the hypernym repair and concept
pruning): its settings' checks, and its decision per kept candidate, near-duplicates within the build and near-copies
of evaluation images (eval_leak), which the plain path and the Beam DoFn (stages_beam.py) both call. The pHash and
the near-duplicate search are capjax.image.phash's.

Imported by package name (see stages.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from capjax.data import integrity
from capjax.image import phash as phash_lib
from tfds_builders import report as report_lib

METHODS = ("phash",)
# Candidates dropped as eval_leak, counted by the evaluation split they have a near-copy in (one candidate may be
# counted under several): reasons of this count of the build's Report, not a stage.
EVAL_LEAKS = "eval_leaks"


def check_settings(settings: Any) -> None:
  """The stage's settings (stages.Settings: dedup, dedup_threshold, exclude): its method, its threshold, and each
  exclude split's form (whether it is built is the builder's check, which knows the data dir). Raises ValueError."""
  if settings.dedup and settings.dedup not in METHODS:
    raise ValueError(f"dedup={settings.dedup} is no near-duplicate method — choose one of {', '.join(METHODS)} "
                     "(or leave dedup out)")
  if wrong := phash_lib.check_threshold(settings.dedup_threshold):
    raise ValueError(f"dedup_threshold={wrong}")
  if "dedup" not in settings.stages():
    defaults = type(settings)()
    for name in ("dedup_threshold", "exclude_data_dir"):
      if getattr(settings, name) != getattr(defaults, name):
        raise ValueError(f"{name}={getattr(settings, name)} does nothing with the dedup stage off — add "
                         "--set=dedup=phash or --set=exclude=NAME[/CONFIG]:SPLIT")
  for spec in settings.exclude:
    dataset, _, split = spec.partition(":")
    if not split or (wrong := integrity.dataset_problem(dataset)):
      raise ValueError(f"exclude={spec} is no built dataset's split — give NAME[/CONFIG]:SPLIT, e.g. "
                       f"karpathy/coco:test{f' ({wrong})' if split else ''}")


def eval_leaks(value: int | None, excluded: Mapping[str, phash_lib.HashIndex]) -> tuple[str, ...]:
  """The exclude splits (NAME[/CONFIG]:SPLIT → the index of their images' hashes) holding an image within the
  threshold of the hash `value`."""
  if value is None:
    return ()
  return tuple(spec for spec, index in excluded.items() if index.near(value))


def dedup_reason(value: int | None, near_duplicate: bool, leaks: Sequence[str]) -> str | None:
  """e. Of the candidates the hypernym repair kept, with their pHash `value`: unhashable (their bytes gave none),
  eval_leak (a near-copy of an image of an exclude split: `eval_leaks`), near_duplicate (another candidate the
  repair kept, within the threshold, ranks higher: more pixels, then the smaller key; capjax.image.phash's
  `outranked`), in that order of precedence; None to keep it. The rule reads no order, so both paths drop the same
  keys, and no two candidates it keeps are near-duplicates (no connected components needed)."""
  if value is None:
    return "unhashable"
  if leaks:
    return "eval_leak"
  return "near_duplicate" if near_duplicate else None


def dedup_outcome(outcome: Any, near_duplicate: bool, excluded: Mapping[str, phash_lib.HashIndex],
                  report: report_lib.Report) -> str | None:
  """The stage for one kept stages.Outcome, counted in `report` (the stage's reason, and each exclude split it
  leaks into): its `dedup_reason`, None when kept. Both paths call this."""
  leaks = eval_leaks(outcome.phash, excluded)
  for spec in leaks:
    report.count(EVAL_LEAKS, reason=spec)
  reason = dedup_reason(outcome.phash, near_duplicate, leaks)
  if reason is not None:
    report.count("dedup", reason=reason)
  return reason


def leak_counts(report: report_lib.Report, exclude: Iterable[str]) -> dict[str, int]:
  """Candidates with a near-copy in each exclude split (0 for none), for the build report."""
  leaks = report.reasons.get(EVAL_LEAKS, {})
  return {spec: int(leaks.get(spec, 0)) for spec in exclude}
