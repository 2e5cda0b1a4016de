"""The `alt_text_captions` TFDS builder: harvested alt-text candidates that img2dataset downloaded, through the
paper's image, text, image-text, hypernym and concept stages (and, when turned on, near-duplicate and evaluation-set
leakage removal before concepts), with a funnel of where every candidate went.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import tensorflow_datasets as tfds

from capjax.image import phash as phash_lib
from capjax.progress import Progress
from tfds_builders import builder_base
from tfds_builders import img2dataset as i2d
from tfds_builders import report as report_lib
from tfds_builders.alt_text_captions import clip_stage as clip_lib
from tfds_builders.alt_text_captions import dedup as dedup_lib
from tfds_builders.alt_text_captions import stages as stages_lib
from tfds_builders.builder_base import LocalCodePath, ManualDataError, PlainOrBeam, at_least_one

_NAME = "alt_text_captions train"  # of the progress lines
_INSTRUCTIONS_POINTER = "see tfds_builders/alt_text_captions/README.md"

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
The manual dir is img2dataset's output folder for a harvested candidates TSV:

  python -m capjax.tools.harvest_alt_text --input='crawl/*.warc.gz' --output=candidates.tsv
  img2dataset --url_list candidates.tsv --input_format tsv --url_col url --caption_col caption \\
      --save_additional_columns '["page_url"]' --output_format webdataset --output_folder DIR \\
      --resize_mode no --disable_all_reencoding True --enable_wandb False

DIR then holds NNNNN.tar + NNNNN.parquet (or NNNNN/ folders with --output_format files). A labels file for
`--set=cross_filter=labels` (CC3M image-labels TSV format) may sit in DIR too.
"""


@dataclasses.dataclass(eq=False)
class AltTextConfig(tfds.core.BuilderConfig):
  settings: stages_lib.Settings = stages_lib.Settings()


def config_from_settings(items: Sequence[str]) -> AltTextConfig:
  """`--set=KEY=VALUE` items → a config. The defaults are config `paper`; other settings get a config of their own
  (`custom_HASH`), so a build with other thresholds never overwrites or reuses the paper's. Raises ValueError."""
  settings = stages_lib.parse_settings(items)
  if settings == stages_lib.Settings():
    return Builder.BUILDER_CONFIGS[0]
  digest = hashlib.sha1(json.dumps(settings.as_dict(), sort_keys=True).encode()).hexdigest()[:8]
  return AltTextConfig(name=f"custom_{digest}", description=f"paper stages with {', '.join(items)}",
                       settings=settings)


class Builder(PlainOrBeam, LocalCodePath, tfds.core.GeneratorBasedBuilder):
  """Conceptual-Captions-style pairs from harvested alt-texts (Sharma et al. 2018, section 3)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "The paper's stages over img2dataset shards of harvested alt-texts, with a funnel."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
  BUILDER_CONFIGS = [AltTextConfig(name="paper", description="The paper's thresholds; cross filter off.")]
  DEFAULT_CONFIG_NAME = "paper"

  def _info(self) -> tfds.core.DatasetInfo:
    features = {
        **i2d.image_caption_features("The hypernymized caption, CC3M form."),
        "alt_text": tfds.features.Text(doc="The alt-text as harvested."),
        "concepts": tfds.features.Sequence(tfds.features.Text(), doc="Concepts hypernymization resolved."),
        "labels": tfds.features.Sequence(tfds.features.Text(), doc="The labeler's labels (none without one)."),
    }
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict(features),
        homepage="https://ai.google.com/research/ConceptualCaptions/",
        metadata=report_lib.ReportMetadata(functools.partial(_assemble, self.builder_config.settings.as_dict()),
                                           _describe),
    )

  def _manual_paths(self, dl_manager) -> tuple[list[str], str, str, str]:
    manual_dir = builder_base.manual_dir(dl_manager, "img2dataset's output for the harvested candidates",
                                         _INSTRUCTIONS_POINTER.removeprefix("see "))
    shards = i2d.list_shards(os.fspath(manual_dir))
    if not shards:
      raise ManualDataError(f"{manual_dir} holds no img2dataset shard (NNNNN.tar or NNNNN/) — run img2dataset with "
                            f"--output_folder={manual_dir} ({_INSTRUCTIONS_POINTER})")
    settings = self.builder_config.settings
    labels = weights = clip = ""
    if settings.cross_filter == "irv2":
      weights = os.fspath(manual_dir / settings.labeler_weights)
      if not os.path.isfile(os.path.join(weights, "metadata.json")):
        raise ManualDataError(f"labeler_weights {weights} holds no converted weights — convert Inception-ResNet-v2 "
                              "with its ImageNet head by `python -m capjax.tools.convert_weights` first")
    if settings.cross_filter == "labels":
      labels = os.fspath(manual_dir / settings.labels_file)
      if not os.path.isfile(labels):
        raise ManualDataError(f"labels_file {labels} does not exist — give a CC3M image-labels TSV "
                              "(--set=labels_file=FILE, relative to the manual dir)")
    if settings.clip_weights:
      clip = os.fspath(manual_dir / settings.clip_weights)
      _check_clip_weights(clip)
    return shards, labels, weights, clip

  def _excluded(self) -> dict[str, phash_lib.HashIndex]:
    """The exclude splits' image hashes (NAME[/CONFIG]:SPLIT → their index), read from the data dir they are built
    in (exclude_data_dir, else this build's); one not built is a ManualDataError (one `error:` line)."""
    from capjax.data import overlap  # noqa: PLC0415 (JAX: only for a build with exclude)
    settings = self.builder_config.settings
    data_dir = settings.exclude_data_dir or os.fspath(self.data_dir_root)
    excluded = {}
    for spec in settings.exclude:
      try:
        hashes = overlap.split_hashes(spec, data_dir)
      except overlap.UnusableDatasetError as e:
        raise ManualDataError(f"exclude={spec} cannot be read: {e}") from e
      excluded[spec] = phash_lib.HashIndex([h.phash for h in hashes], settings.dedup_threshold)
    return excluded

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    shards, labels, weights, clip = self._manual_paths(dl_manager)
    return {"train": self._generate_examples(shards, labels, weights, clip, self._excluded())}

  def _generate_examples(self, shards: list[str], labels: str, weights: str, clip: str,
                         excluded: Mapping[str, phash_lib.HashIndex]):
    """The examples: a Beam PTransform when the build runs on Beam, else a generator. Either writes the funnel
    (the build report) into the dataset's folder once the last example is out (tfds_builders/report.py)."""
    settings = self.builder_config.settings
    if self.uses_beam():
      return _beam_transform(shards, settings, (labels, weights, clip), excluded, os.fspath(self.data_dir))
    return self._plain_examples(shards, stages_lib.Stages(settings, labels, weights, clip), excluded)

  def _plain_examples(self, shards: list[str], stages: stages_lib.Stages,
                      excluded: Mapping[str, phash_lib.HashIndex]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The examples of `_stage_examples`; none at all is a ManualDataError with the funnel (where every candidate
    went), which is printed too, as after a build, instead of TFDS's "No examples were yielded"."""
    report = report_lib.Report()
    settings = self.builder_config.settings

    def nothing_kept() -> str:
      funnel = stages_lib.funnel(report, settings.stages())
      print(stages_lib.format_funnel(funnel), flush=True)
      where = "; ".join(f"{e['stage']} {e['in']:,} → {e['out']:,}" + (
          f" ({', '.join(f'{r} {n}' for r, n in e['reasons'].items())})" if e["reasons"] else "")
          for e in funnel)
      return f"every candidate of the {len(shards)} shard(s) in the manual dir was dropped: {where}"
    cutoff: list[float] = []  # the clip stage's cut-off, once _stage_examples knows it
    yield from at_least_one(self._stage_examples(shards, stages, excluded, report, cutoff), nothing_kept,
                            "check the manual dir's shards, or loosen the --set settings of the stage that dropped "
                            f"them all ({_INSTRUCTIONS_POINTER})")
    stages_lib.write_report(report, self.data_dir, settings, *cutoff)

  def _stage_examples(self, shards: list[str], stages: stages_lib.Stages, excluded: Mapping[str, phash_lib.HashIndex],
                      report: report_lib.Report, cutoff: list[float]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Two passes: stages a-c per shard while counting concepts, each shard's survivors (small records, no images)
    written to a temporary file; then pruning, with each shard read again for its survivors' images. Memory holds
    one shard's survivors, not the build's (a few percent of 5 billion candidates at the paper's scale). Between the
    two, the global steps: with a share clip_threshold, every scored pair's score (8 bytes each) in memory, the
    cut-off computed from them and the survivors below it dropped (`_clip_cut`); with the dedup stage, every
    survivor's hash (a key and 8 bytes each, no image), the dropped ones' concepts taken out of the counts (`_dedup`).
    The clip stage's cut-off goes into `cutoff`, for the report."""
    settings = stages.settings
    counts: collections.Counter = collections.Counter()
    concept_counts: collections.Counter = collections.Counter()
    hashed: list[tuple[phash_lib.Hashed, float | None]] = []  # with dedup=phash: every survivor's, with its score
    share = clip_lib.share(settings)
    pool = clip_lib.Pool() if share else None
    # Shards done of the shards (a shard's candidates are not known before it is read), with candidates/s.
    progress = Progress(f"{_NAME} stages a-c", len(shards), unit="shards", items="candidates",
                        failed="candidates dropped so far")
    with tempfile.TemporaryDirectory(prefix="alt_text_survivors_") as folder:
      survivors = [os.path.join(folder, f"{number:05d}.jsonl") for number in range(len(shards))]
      for shard, path in zip(shards, survivors):
        with open(path, "w", encoding="utf-8") as f:
          for outcome, _ in stages_lib.shard_outcomes(shard, stages, counts):
            progress.update(0, int(outcome.stage is not None), items=1)
            if pool is not None and outcome.clip_score is not None:
              pool.add(outcome.clip_score)
              if outcome.stage == "hypernym":  # counted once the cut-off says which stage dropped it
                pool.hold(outcome.reason, outcome.clip_score)
                continue
            stages_lib.count_outcome(report, outcome.stage, outcome.reason, outcome.clip_score)
            if outcome.stage is None:
              f.write(outcome.to_json() + "\n")
              concept_counts.update(set(outcome.concepts))
              if settings.dedup and outcome.phash is not None:
                hashed.append((outcome.hashed(), outcome.clip_score))
        progress.update(1)
      progress.finish()
      clip_cut = None  # the clip stage's cut-off: a minimum as given, a share's computed from every score
      if settings.clip_weights:
        clip_cut = clip_lib.pool_cutoff(pool.scores, share) if share else settings.clip_cutoff()
        cutoff.append(clip_cut)
      if pool is not None:
        _clip_cut(survivors, pool, clip_cut, concept_counts, report)
      hashed = [h for h, score in hashed if not clip_lib.below(score, clip_cut)]
      dropped = (_dedup(survivors, hashed, settings, excluded, concept_counts, report, clip_cut)
                 if "dedup" in settings.stages() else set())
      progress = Progress(f"{_NAME} concepts", len(shards), unit="shards", items="examples",
                          failed="pruned so far")
      for shard, path in zip(shards, survivors):
        pruned = {}
        for outcome in _read_outcomes(path):
          if outcome.key in dropped or clip_lib.below(outcome.clip_score, clip_cut):
            continue
          reason = stages_lib.concept_reason(outcome.concepts, concept_counts, settings.min_concept_count)
          if reason is not None:
            report.count("concepts", reason=reason)
            progress.update(0, 1)
          else:
            pruned[outcome.key] = outcome
        for example in stages_lib.shard_examples(shard, pruned):
          progress.update(0, items=1)
          yield example
        progress.update(1)
      progress.finish()
    report.counts.update(counts)


def _read_outcomes(path: str) -> Iterator[stages_lib.Outcome]:
  """The survivors `_stage_examples` wrote to one file (this build's own temporary file, one JSON array of an
  Outcome's fields a line), in order."""
  with open(path, encoding="utf-8") as f:
    for line in f:
      yield stages_lib.Outcome.from_json(line)


def _check_clip_weights(path: str) -> None:
  """A ManualDataError unless `path` holds a converted CLIP (checkpoint.load's checks: config, tokenizer files, every
  parameter), before any candidate is read."""
  from capjax.text_models import checkpoint  # noqa: PLC0415 (JAX only for builds with the clip stage)
  try:
    checkpoint.load(path, "clip")
  except checkpoint.WeightsError as error:
    raise ManualDataError(f"clip_weights: {error}") from error


def _clip_cut(survivors: Sequence[str], pool: clip_lib.Pool, cutoff: float, concept_counts: collections.Counter,
              report: report_lib.Report) -> None:
  """A share's global step on the plain path, once `cutoff` is computed from every score: the hypernym repair's held
  rejects and the survivors each counted at the stage clip_stage.cut gives them (a survivor below the cut-off
  dropped by the clip stage, its concepts taken out of `concept_counts`; the later reads skip it by its score: no
  keys are held)."""
  for stage, reason, score in pool.released(cutoff):
    stages_lib.count_outcome(report, stage, reason, score)
  for path in survivors:
    for outcome in _read_outcomes(path):
      stage, reason = clip_lib.cut(outcome.stage, outcome.reason, outcome.clip_score, cutoff)
      if stage is not None:
        report.count(stage, reason=reason)
        concept_counts.subtract(set(outcome.concepts))


def _dedup(survivors: Sequence[str], hashed: Sequence[phash_lib.Hashed], settings: stages_lib.Settings,
           excluded: Mapping[str, phash_lib.HashIndex], concept_counts: collections.Counter,
           report: report_lib.Report, clip_cut: float | None) -> set[str]:
  """The dedup stage on the plain path: the near-duplicates among all survivors' hashes (multi-index hashing, in
  memory; those below the clip cut-off left out by the caller), then each survivor's reason (dedup.dedup_outcome,
  the Beam path's too), the dropped ones' concepts taken out of `concept_counts`, so that concept pruning counts
  only the pairs kept. Returns the dropped keys."""
  near = phash_lib.near_duplicates(hashed, settings.dedup_threshold) if settings.dedup else set()
  dropped = set()
  for path in survivors:
    for outcome in _read_outcomes(path):
      if clip_lib.below(outcome.clip_score, clip_cut):
        continue
      if dedup_lib.dedup_outcome(outcome, outcome.key in near, excluded, report) is not None:
        dropped.add(outcome.key)
        concept_counts.subtract(set(outcome.concepts))
  return dropped


def _beam_transform(shards: list[str], settings: stages_lib.Settings, paths: tuple[str, str, str],
                    excluded: Mapping[str, phash_lib.HashIndex], data_dir: str):
  """The Beam path, one DoFn per stage (stages_beam.py imports apache_beam, so only Beam builds import it); `paths`
  are the labels file, the labeler's and the CLIP's weights."""
  from tfds_builders.alt_text_captions import stages_beam  # noqa: PLC0415
  return stages_beam.StagesPipeline(shards, settings, paths, data_dir, dict(excluded))


def _assemble(settings: dict[str, Any], parts: dict[str, Any]) -> dict[str, Any]:
  """The metadata: the funnel, the shards' counts (with exclude, the candidates dropped per exclude split), the
  settings the build ran with, and with the clip stage the histogram of its scores."""
  return {**parts["train"], "settings": settings}


def _describe(metadata: Mapping[str, Any]) -> str:
  """The funnel table; with the clip stage, the histogram of its scores; with exclude, a line of the candidates
  dropped per exclude split."""
  table = stages_lib.format_funnel(metadata["funnel"])
  if clip_lib.SCORES in metadata:
    table += "\n" + clip_lib.format_histogram(metadata[clip_lib.SCORES], metadata.get(clip_lib.CUTOFF),
                                              metadata["settings"].get("clip_threshold", ""))
  leaks = metadata.get(dedup_lib.EVAL_LEAKS)
  if leaks:
    table += "\neval_leak by exclude split: " + ", ".join(f"{spec} {n}" for spec, n in leaks.items())
  return table
