"""The alt_text_captions stages in the paper's order (image, text, cross, hypernym, concepts), each one function
giving a reason code that the plain path and the Beam DoFns (stages_beam.py) both call, plus the settings `--set`
may change and the funnel that counts every candidate. Two stages beyond the paper, off by default: clip (the CLIP
score after the cross filter, clip_stage.py) and dedup (before concepts: near-duplicates within the build and
near-copies of evaluation images, dedup.py).

Builders and Beam workers import this module by its package name (see tfds_builders/img2dataset/).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from capjax.config_util import check_number
from capjax.image import filters as image_filters
from capjax.image import phash as phash_lib
from capjax.text.config import FilterConfig, HypernymConfig, PipelineConfig
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.alt_text_captions import clip_stage as clip_lib
from tfds_builders.alt_text_captions import cross as cross_lib
from tfds_builders.alt_text_captions import dedup as dedup_lib

STAGE_NAMES = ("image", "text", "cross", "clip", "hypernym", "dedup", "concepts")
FIRST_STAGES = STAGE_NAMES[:3]  # per candidate, before the CLIP score (which scores batches) and the repair
# The paper's figure for each stage (Sharma et al. 2018, section 3), printed beside the build's own.
PAPER_FIGURES = {
    "image": "> 65% discarded",
    "text": "~3% of the rest survive",
    "cross": "~60% removed",
    "clip": "not in the paper",
    "hypernym": "~20% removed",
    "dedup": "not in the paper",
    "concepts": "~55% removed",
}
CROSS_FILTERS = ("irv2", "labels", "none")
# The stages beyond the paper, and the settings that belong to each: a stage that is off is not in the funnel, and
# its settings at their defaults are not in the metadata (nor in a custom config's name), as before it existed.
OPTIONAL_STAGES = {"clip": ("clip_weights", "clip_threshold"),
                   "dedup": ("dedup", "dedup_threshold", "exclude", "exclude_data_dir")}


# ------------------------------------------------------------------------------------------------ settings


@dataclasses.dataclass(frozen=True)
class Settings:
  """What `--set=KEY=VALUE` may change; recorded in the dataset's metadata."""

  min_side: int = 400  # both original sides must exceed this
  max_aspect_ratio: float = 2.0  # larger side / smaller side
  max_pixels: int = image_filters.ImageFilterConfig.max_pixels  # header size above this: decompression bomb
  unsafe_scorer: str = ""  # package.module:function (JPEG bytes → score in [0, 1]); '' for none
  unsafe_threshold: float = 0.5
  cross_filter: str = "none"  # irv2 (labeler_weights) | labels (a CC3M image-labels TSV in labels_file) | none
  labels_file: str = ""  # relative to the manual dir, or absolute
  labeler_weights: str = ""  # Inception-ResNet-v2 with its ImageNet head, from capjax.tools.convert_weights
  labeler_top_k: int = 5  # ImageNet classes per image, most likely first
  labeler_threshold: float = 0.1  # a class's softmax probability must reach this
  labeler_min_depth: int = 6  # hypernyms nearer WordNet's root ("object", "whole", "organism") are not labels
  min_concept_count: int = 100  # pairs with a concept seen in this many pairs or fewer are dropped
  clip_weights: str = ""  # a CLIP from `convert_weights --format=hf_clip` (relative to the manual dir, or absolute)
  clip_threshold: str = ""  # datacomp_b32 (default) | laion | a cosine in [-1, 1] | datacomp_l14_top30 | top=F
  dedup: str = ""  # '' (off) | phash: of near-duplicates within the build, the best-ranked kept (dedup.py)
  dedup_threshold: int = 10  # pHashes within this Hamming distance (of 64 bits) are near-duplicates
  exclude: tuple[str, ...] = ()  # NAME[/CONFIG]:SPLIT of built datasets: their near-copies dropped (eval_leak)
  exclude_data_dir: str = ""  # where the exclude datasets are built ('' for the build's own data dir)
  text: tuple[tuple[str, Any], ...] = ()  # ("filters.max_chars", 1000), ("hypernyms.min_tokens", 3), ...

  def image_config(self) -> image_filters.ImageFilterConfig:
    return image_filters.ImageFilterConfig(self.min_side, self.max_aspect_ratio, self.max_pixels,
                                           self.unsafe_threshold)

  def pipeline_config(self) -> PipelineConfig:
    groups: dict[str, dict[str, Any]] = {"filters": {}, "hypernyms": {}}
    for key, value in self.text:
      group, _, field = key.partition(".")
      groups[group][field] = value
    return PipelineConfig(FilterConfig(**groups["filters"]), HypernymConfig(**groups["hypernyms"]),
                          self.min_concept_count)

  def stages(self) -> tuple[str, ...]:
    """The stages this build runs, in order: the paper's, and the optional ones turned on."""
    on = {"clip": bool(self.clip_weights), "dedup": bool(self.dedup or self.exclude)}
    return tuple(stage for stage in STAGE_NAMES if on.get(stage, True))

  def clip_cutoff(self) -> float:
    """The minimum CLIP score the clip stage keeps as it scores (-inf for a share: clip_stage.stage_cutoff)."""
    return clip_lib.stage_cutoff(self.clip_threshold or clip_lib.DEFAULT_THRESHOLD)

  def as_dict(self) -> dict[str, Any]:
    """The settings as metadata records them (and as custom configs are named by): an optional stage's only when
    it runs, so that a build without it is recorded and named as before the stage existed."""
    off = {name for stage, names in OPTIONAL_STAGES.items() if stage not in self.stages() for name in names}
    d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "text" and f.name not in off}
    d.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.text})
    return d


def _text_fields() -> dict[str, Any]:
  """`filters.FIELD` and `hypernyms.FIELD` of capjax.text's configs, with their defaults."""
  fields = {}
  for prefix, cls in (("filters", FilterConfig), ("hypernyms", HypernymConfig)):
    for f in dataclasses.fields(cls):
      fields[f"{prefix}.{f.name}"] = f.default
  return fields


def valid_keys() -> list[str]:
  return [f.name for f in dataclasses.fields(Settings) if f.name != "text"] + list(_text_fields())


# --set's numbers are finite and at least 0 (a NaN passes every comparison of its stage: max_aspect_ratio=nan keeps
# every image; a negative size or count keeps everything), these at least 1, these and filters.*_ratio at most 1.
_AT_LEAST_ONE = ("max_aspect_ratio", "labeler_top_k")
_AT_MOST_ONE = ("unsafe_threshold", "labeler_threshold", "filters.max_abs_sentiment")


def _convert(key: str, text: str, default: Any) -> Any:
  if isinstance(default, bool):
    if text.lower() not in ("true", "false", "1", "0"):
      raise ValueError(f"--set={key}={text} is not a boolean — give true or false")
    return text.lower() in ("true", "1")
  if isinstance(default, tuple):
    return tuple(w.strip() for w in text.split(",") if w.strip())
  if default is None:
    return text or None
  try:
    value = type(default)(text)
  except ValueError as e:
    raise ValueError(f"--set={key}={text} is not a {type(default).__name__} — give one") from e
  if isinstance(value, (int, float)) and key != "dedup_threshold":  # a Hamming distance: dedup.check_settings
    share = key in _AT_MOST_ONE or (key.startswith("filters.") and key.endswith("_ratio"))
    check_number(f"--set={key}", value, 1 if key in _AT_LEAST_ONE else 0, 1 if share else None)
  return value


def parse_settings(items: Sequence[str]) -> Settings:
  """`KEY=VALUE` strings → Settings. Raises ValueError naming the valid keys for an unknown one."""
  base = {f.name: f.default for f in dataclasses.fields(Settings) if f.name != "text"}
  text_defaults = _text_fields()
  values: dict[str, Any] = {}
  text: dict[str, Any] = {}
  for item in items:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep:
      raise ValueError(f"--set={item} has no '=' — write --set=KEY=VALUE")
    if key in base:
      values[key] = _convert(key, value, base[key])
    elif key in text_defaults:
      text[key] = _convert(key, value, text_defaults[key])
    else:
      raise ValueError(f"unknown setting {key!r} — valid keys are {', '.join(valid_keys())}")
  settings = Settings(**values, text=tuple(sorted(text.items())))
  if settings.cross_filter not in CROSS_FILTERS:
    raise ValueError(f"cross_filter={settings.cross_filter} is not a cross filter — choose one of "
                     f"{', '.join(CROSS_FILTERS)}")
  if settings.cross_filter == "irv2" and not settings.labeler_weights:
    raise ValueError("cross_filter=irv2 needs a labeler — add --set=labeler_weights=DIR (converted by "
                     "capjax.tools.convert_weights)")
  if settings.cross_filter == "labels" and not settings.labels_file:
    raise ValueError("cross_filter=labels needs labels — add --set=labels_file=FILE (a CC3M image-labels TSV)")
  if settings.clip_threshold and not settings.clip_weights:
    raise ValueError(f"clip_threshold={settings.clip_threshold} needs a CLIP model — add --set=clip_weights=DIR "
                     "(converted by `python -m capjax.tools.convert_weights --format=hf_clip`)")
  if settings.clip_weights:
    settings = dataclasses.replace(settings, clip_threshold=settings.clip_threshold or clip_lib.DEFAULT_THRESHOLD)
    settings.clip_cutoff()  # a ValueError for a bad one, before anything is built
  dedup_lib.check_settings(settings)
  return settings


# ------------------------------------------------------------------------------------------------ funnel


# The build's Report: "candidates" read; each stage's rejects counted under the stage's name, by reason; the
# CLIP scores of the pairs the clip stage scored, by bin (clip_stage.SCORES); and the shard-side counts of
# i2d.shard_candidates (shards, unsafe_member, ...) under their own names.
CANDIDATES = "candidates"


def count_outcome(report: report_lib.Report, stage: str | None, reason: str | None,
                  clip_score: float | None = None) -> None:
  """One candidate read: kept (stage None) or dropped by `stage` for `reason`; its CLIP score if it had one."""
  report.count(CANDIDATES)
  if stage is not None:
    report.count(stage, reason=reason)
  if clip_score is not None:
    clip_lib.count_score(report, clip_score)


def write_report(report: report_lib.Report, data_dir: str, settings: Settings, clip_cut: float | None = None) -> None:
  """Both paths' last step, the build report's part into the dataset's folder (tfds_builders/report.py): the funnel
  of the stages run, the shards' counts, with the clip stage the histogram of its scores and the cut-off applied,
  and with exclude the candidates dropped per evaluation split matched; `clip_cut`, the clip stage's cut-off."""
  part = {"funnel": funnel(report, settings.stages()), "shards": shard_counts(report)}
  if settings.clip_weights:
    part[clip_lib.SCORES], part[clip_lib.CUTOFF] = clip_lib.histogram(report), clip_lib.recorded(clip_cut)
  if settings.exclude:
    part[dedup_lib.EVAL_LEAKS] = dedup_lib.leak_counts(report, settings.exclude)
  report_lib.write_part(data_dir, "train", part)


def funnel(report: report_lib.Report, stages: Sequence[str] = Settings().stages()) -> list[dict[str, Any]]:
  """Per stage of `stages` (`Settings.stages`: an off stage is not listed), in order, how many candidates came in,
  went out, and the reasons of those dropped."""
  remaining, out = report.counts[CANDIDATES], []
  for stage in stages:
    reasons = {reason: int(n) for reason, n in sorted(report.reasons.get(stage, {}).items())}
    dropped = sum(reasons.values())
    out.append({"stage": stage, "in": int(remaining), "out": int(remaining - dropped), "reasons": reasons})
    remaining -= dropped
  return out


def shard_counts(report: report_lib.Report) -> dict[str, int]:
  """The shard-side counts of the report, by name."""
  return {k: int(n) for k, n in sorted(report.counts.items())
          if k not in (CANDIDATES, clip_lib.SCORES, dedup_lib.EVAL_LEAKS) and k not in STAGE_NAMES}


def format_funnel(funnel: Sequence[Mapping[str, Any]]) -> str:
  """The funnel as a table, with the paper's figure beside each stage."""
  lines = [f"{'stage':<10}{'in':>10}{'out':>10}{'dropped':>9}   {'paper':<26}reasons"]
  for entry in funnel:
    dropped = entry["in"] - entry["out"]
    share = f"{dropped / entry['in']:.0%}" if entry["in"] else "–"
    reasons = ", ".join(f"{r} {n}" for r, n in entry["reasons"].items())
    lines.append(f"{entry['stage']:<10}{entry['in']:>10,}{entry['out']:>10,}{share:>9}   "
                 f"{PAPER_FIGURES[entry['stage']]:<26}{reasons}".rstrip())
  return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ stages


@dataclasses.dataclass(frozen=True)
class Outcome:
  """Where one candidate went: the stage and reason that dropped it, or its example fields (image aside)."""
  key: str
  stage: str | None
  reason: str | None
  caption: str = ""
  alt_text: str = ""
  url: str = ""
  concepts: tuple[str, ...] = ()
  labels: tuple[str, ...] = ()
  clip_score: float | None = None  # with the clip stage, the pair's score (for the report's histogram)
  phash: int | None = None  # with the dedup stage on: the image's 64-bit pHash (None: its bytes did not hash)
  pixels: int = 0  # and its pixels (the rank among near-duplicates: more first)

  def hashed(self) -> phash_lib.Hashed:
    return phash_lib.Hashed(self.key, self.phash, self.pixels)

  def to_json(self) -> str:
    """One JSON array of the fields (the plain path's survivors files)."""
    return json.dumps(dataclasses.astuple(self))

  @classmethod
  def from_json(cls, line: str) -> Outcome:
    return cls(*(tuple(value) if isinstance(value, list) else value for value in json.loads(line)))


@dataclasses.dataclass
class Item:
  """One candidate between stages: what it was downloaded as, plus what the stages so far found. Picklable (Beam
  may move it between workers); the NLTK annotation is left out of the pickle and redone from `text` if needed."""
  candidate: i2d.Candidate
  text: str = ""  # the normalized, boilerplate-stripped alt-text the text stage annotated
  labels: tuple[str, ...] = ()  # the labeler's labels (cross stage)
  clip_score: float | None = None  # the image's CLIP score with the alt-text (clip stage)
  shard: str = ""  # the shard it was read from (the Beam path reads its image again there)
  annotation: Any = dataclasses.field(default=None, repr=False, compare=False)

  def __getstate__(self) -> dict[str, Any]:
    # The annotation holds the Annotator (NLTK resources): a worker re-annotates `text` with its own.
    return {**self.__dict__, "annotation": None}


class Stages:
  """The per-candidate stages as one method each (`stage(name)`), in the paper's order, holding what they load: the
  unsafe scorer, NLTK resources and caches (capjax.text), the labels file or the IRv2 labeler, the CLIP scorer.
  Build one per process; the plain path calls `outcomes`, the Beam path one stage per DoFn (stages_beam.py)."""

  def __init__(self, settings: Settings, labels_path: str = "", weights_path: str = "", clip_path: str = ""):
    self.settings = settings
    self.image_config = settings.image_config()
    self._labels_path, self._weights_path, self._clip_path = labels_path, weights_path, clip_path

  # Loaded on first use, so a worker running only the image stage never loads NLTK or the labeler.
  @functools.cached_property
  def scorer(self):
    return image_filters.load_scorer(self.settings.unsafe_scorer)

  @functools.cached_property
  def text(self):
    from capjax.text.pipeline import TextPipeline  # noqa: PLC0415
    return TextPipeline(self.settings.pipeline_config())

  @functools.cached_property
  def labels(self) -> dict[str, tuple[str, ...]] | None:
    return cross_lib.read_labels_file(self._labels_path) if self.settings.cross_filter == "labels" else None

  @functools.cached_property
  def labeler(self):
    if self.settings.cross_filter != "irv2":
      return None
    from capjax.features import Irv2Labeler  # noqa: PLC0415
    return Irv2Labeler(self._weights_path, self.settings.labeler_top_k, self.settings.labeler_threshold,
                       self.settings.labeler_min_depth)

  @functools.cached_property
  def clip(self):
    """The CLIP scorer (clip_score.Scorer), or None without the clip stage."""
    if not self.settings.clip_weights:
      return None
    return clip_lib.load_scorer(self._clip_path)

  def load(self, stage: str) -> None:
    """Loads what `stage` needs now (a DoFn's setup), not inside its first work item."""
    if stage == "image":
      _ = self.scorer
    elif stage == "clip":
      _ = self.clip
    else:
      _ = self.text
      if stage == "cross":
        _ = self.labels, self.labeler

  def stage(self, name: str) -> Callable[[Item], tuple[str | None, Any]]:
    """The function of stage `name` (image, text, cross, hypernym; clip as `clip_stage`, a batch at a time): the
    plain path and the Beam DoFns call this."""
    return getattr(self, f"{name}_stage")

  def caption_forms(self, alt_text: str) -> set[str]:
    """The forms of an alt-text's tokens, as the cross stage matches them against labels."""
    from capjax.text.annotate import normalize_text  # noqa: PLC0415
    from capjax.text.boilerplate import strip_boilerplate  # noqa: PLC0415
    return cross_lib.annotation_forms(self.text.annotator.annotate(strip_boilerplate(normalize_text(alt_text))))

  def _annotation(self, item: Item):
    return item.annotation if item.annotation is not None else self.text.annotator.annotate(item.text)

  def image_stage(self, item: Item) -> tuple[str | None, Item]:
    """a. JPEG by magic number, original sides > min_side, aspect ratio, no bomb, decodable, safe."""
    reason, _ = image_filters.image_filter(item.candidate.image, item.candidate.meta, self.image_config, self.scorer)
    return reason, item

  def text_stage(self, item: Item) -> tuple[str | None, Item]:
    """b. capjax.text's filters (its hypernymization waits for the hypernym stage, after the cross filter)."""
    dropped, annotation = self.text.filter(item.candidate.key, item.candidate.caption)
    if dropped is not None:
      return dropped.reason, item
    return None, dataclasses.replace(item, text=annotation.text, annotation=annotation)

  def cross_stage(self, item: Item) -> tuple[str | None, Item]:
    """c. The image's labels against the caption's tokens; passes everything with cross_filter=none."""
    if self.labels is None and self.labeler is None:
      return None, item
    c = item.candidate
    labels = self.labels.get(c.url, ()) if self.labels is not None else self.labeler.labels(c.image)
    annotation = self._annotation(item)
    reason = cross_lib.cross_filter(labels, cross_lib.annotation_forms(annotation), self.text.annotator)
    return reason, dataclasses.replace(item, labels=tuple(labels), annotation=annotation)

  def clip_stage(self, items: Sequence[Item]) -> list[tuple[str | None, Item]]:
    """Beyond the paper: the CLIP score of each image with its alt-text as harvested (DataComp scores the raw
    alt-text), below a minimum clip_threshold a reject (a share decides nothing here: the builder cuts once all are
    scored). A batch of items at a time (clip_stage.BATCH make one call); each item comes back with its score."""
    scored = clip_lib.score(self.clip, [i.candidate.image for i in items], [i.candidate.caption for i in items],
                            self.settings.clip_cutoff(), self.settings.max_pixels)
    return [(reason, dataclasses.replace(item, clip_score=score)) for item, (reason, score) in zip(items, scored)]

  def hypernym_stage(self, item: Item) -> tuple[str | None, Outcome]:
    """The repair step: hypernymization, whose rejects the paper counts after the cross filter. With the dedup
    stage on, a kept outcome carries its image's pHash and pixels, made here while the bytes are at hand."""
    c = item.candidate
    record = self.text.hypernymize(c.key, c.caption, self._annotation(item))
    if record.reason is not None:
      return record.reason, Outcome(c.key, "hypernym", record.reason, clip_score=item.clip_score)
    value, pixels = (phash_lib.phash(c.image) if "dedup" in self.settings.stages() else None) or (None, 0)
    return None, Outcome(c.key, None, None, record.caption, c.caption, c.url, record.concepts, item.labels,
                         item.clip_score, phash=value, pixels=pixels)

  def outcomes(self, candidates: Iterable[i2d.Candidate]) -> Iterator[tuple[i2d.Candidate, Outcome]]:
    """Stages a to c, the CLIP score if on and the hypernym repair, for each candidate: the plain path. The clip
    stage scores clip_stage.BATCH survivors of a-c at a time, so its outcomes may come after later candidates'."""
    waiting: list[Item] = []
    for candidate in candidates:
      item = Item(candidate)
      for stage in FIRST_STAGES:
        reason, item = self.stage(stage)(item)
        if reason is not None:
          yield candidate, Outcome(candidate.key, stage, reason)
          break
      else:
        waiting.append(item)
      if len(waiting) == (clip_lib.BATCH if self.settings.clip_weights else 1):
        yield from self._repaired(waiting)
        waiting = []
    yield from self._repaired(waiting)

  def __call__(self, candidate: i2d.Candidate) -> Outcome:
    """Every per-candidate stage for one candidate (the clip stage on a batch of one)."""
    return next(self.outcomes([candidate]))[1]

  def _repaired(self, items: Sequence[Item]) -> Iterator[tuple[i2d.Candidate, Outcome]]:
    """Survivors of a-c through the clip stage (when on) and the hypernym repair."""
    scored = self.clip_stage(items) if self.settings.clip_weights else [(None, item) for item in items]
    for reason, item in scored:
      yield item.candidate, (self.hypernym_stage(item)[1] if reason is None else
                             Outcome(item.candidate.key, "clip", reason, clip_score=item.clip_score))


def example(outcome: Outcome, image: bytes) -> dict[str, Any]:
  return {"image": image, "caption": outcome.caption, "captions": [outcome.caption], "alt_text": outcome.alt_text,
          "url": outcome.url, "key": outcome.key, "concepts": list(outcome.concepts), "labels": list(outcome.labels)}


def shard_outcomes(shard: str, stages: Stages, counts: collections.Counter) -> Iterator[tuple[Outcome, bytes | None]]:
  """Every candidate of one shard through stages a-c, with its image bytes when it survived."""
  for candidate, outcome in stages.outcomes(i2d.shard_candidates(shard, counts)):
    yield outcome, candidate.image if outcome.stage is None else None


def shard_examples(shard: str, kept: Mapping[str, Outcome]) -> Iterator[tuple[str, dict[str, Any]]]:
  """The examples of one shard's kept outcomes (key → Outcome), in stream order: the shard read again for their
  images, so that no image bytes wait for concept pruning (both paths' second pass)."""
  kept = dict(kept)
  if not kept:
    return
  for candidate in i2d.shard_candidates(shard, collections.Counter()):
    outcome = kept.pop(candidate.key, None)
    if outcome is None:
      continue
    yield outcome.key, example(outcome, candidate.image)
    if not kept:
      return


def concept_reason(concepts: Iterable[str], counts: Mapping[str, int], min_count: int) -> str | None:
  from capjax.text import concepts as concepts_lib  # noqa: PLC0415
  reason = concepts_lib.prune(concepts, counts, min_count)
  return None if reason is None else str(reason)
