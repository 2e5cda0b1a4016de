"""ERG's augmentation job, the library behind `python -m capjax.erg.augment` (its usage and outputs are that
command's docstring): `resolve` (the inputs, models and settings of a job's `Options`: one `Job`), `augment_shard`
(retrieve, generate and filter one shard of factual examples) and `write` (each missing shard through the shard
writer of `capjax.data.shards`, then the dataset's metadata and funnel). What it reads comes from
`capjax.erg.augment_inputs`."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import pathlib
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from capjax.data import shards
from capjax.erg import filters, retrieve, settings
from capjax.erg.settings import DEFAULT_EXAMPLES_PER_SHARD
from capjax.erg.augment_inputs import AugmentError, Scene

MANIFEST = "augmentation.json"
SHARD_INFO_DIR = shards.INFO_DIR  # one JSON per finished shard: its record count and its filter counts
FUNNEL_HTML = "funnel.html"
VERSION = "1.0.0"
SPLIT = "train"
MODES = tuple(settings.MODES)


@dataclasses.dataclass(frozen=True)
class Options:
  """What a job is asked to do: the command's flags (`main`), or a caller's choices (`capjax.erg.demo`)."""
  stylized: str
  factual: str
  style: str
  output_dataset: str
  generator_dir: str
  style_model_dir: str
  data_dir: str
  lm_path: str = ""
  mode: str = "t2t"
  output_data_dir: str = ""  # "" -> data_dir
  stylized_split: str = "train"
  factual_split: str = "factual"
  examples_per_shard: int = DEFAULT_EXAMPLES_PER_SHARD
  retriever_steps: int = 200
  retriever_pairs: int = 1024
  retriever_dir: str = ""
  save_retriever: str = ""
  text_encoder: str = ""
  beam_size: int = 1
  batch_size: int = 256
  max_perplexity: float = filters.MAX_PERPLEXITY
  min_similarity: float = filters.MIN_SIMILARITY
  min_content: float = filters.MIN_CONTENT
  seed: int = 0


@dataclasses.dataclass(frozen=True)
class Settings:
  """Everything the written records depend on; a resumed job must match the one that started."""
  stylized: str
  factual: str
  style: str
  mode: str
  generator: str      # sha256 of the generator's description and parameters' metadata
  style_model: str    # sha256 of the classifier's description
  lm: str             # sha256 of the LM file, or "" for the LM trained on the stylized captions
  retriever: str      # the --retriever's parameter checksum, or "" for the one trained here (retriever_steps, seed)
  text_encoder: str   # sha256 of the --text_encoder's config and metadata, or "" for the default text tower
  examples_per_shard: int
  retriever_steps: int
  beam_size: int
  max_perplexity: float
  min_similarity: float
  min_content: float
  seed: int


@dataclasses.dataclass(frozen=True)
class Job:
  """A job resolved: its inputs open, its models loaded or trained, its settings checked against the output's."""
  options: Options
  settings: Settings
  out_dir: pathlib.Path
  factual_source: Any
  factual_images: bool  # the factual records have images: the output's records too
  bank: list[Scene]
  retriever: retrieve.Retriever
  generator: Any        # capjax.erg.generator.model's Generator
  classifier: Any       # capjax.text_models.style_classifier's StyleClassifier
  lm: Any               # capjax.metrics.stylized_lm's StyleLanguageModel
  features: Any         # the output's tfds FeaturesDict


def _fingerprint(*paths: pathlib.Path) -> str:
  digest = hashlib.sha256()
  for path in paths:
    digest.update(path.read_bytes())
  return digest.hexdigest()


def _check_options(o: Options) -> None:
  if o.mode not in MODES:
    raise AugmentError(f"--mode={o.mode} is unknown — choose one of {', '.join(MODES)}")
  if not re.fullmatch(r"[a-z][a-z0-9_]*", o.output_dataset or ""):
    raise AugmentError(f"--output_dataset={o.output_dataset!r} is not a TFDS name — use lower-case letters, digits "
                       "and underscores, starting with a letter")
  if o.examples_per_shard < 1:
    raise AugmentError(f"--examples_per_shard={o.examples_per_shard} — give at least 1")


def resolve(o: Options, log: Callable[[str], None]) -> Job:
  """The job's inputs, models and settings; an AugmentError for bad input (before any output is written)."""
  from capjax.erg import augment_inputs as inputs  # noqa: PLC0415
  from capjax.erg import dual_encoder  # noqa: PLC0415
  from capjax.erg.generator import storage  # noqa: PLC0415
  from capjax.text_models import style_phrases  # noqa: PLC0415

  _check_options(o)
  inputs.require_models(o.generator_dir, o.style_model_dir)
  stylized_builder, stylized_source = inputs.open_dataset(o.stylized, o.stylized_split, o.data_dir, "--stylized")
  factual_builder, factual_source = inputs.open_dataset(o.factual, o.factual_split, o.data_dir, "--factual")
  factual_images = "image" in factual_builder.info.features
  stylized_images = "image" in stylized_builder.info.features
  query_side, bank_side = retrieve.MODES[o.mode]
  if query_side == "image" and not factual_images:
    raise AugmentError(f"--factual={o.factual} has no images, so --mode={o.mode} (image queries) is impossible — "
                       "use --mode=t2t")
  if bank_side == "image" and not stylized_images:
    raise AugmentError(f"--stylized={o.stylized} has no images, so --mode={o.mode} (an image bank) is impossible "
                       f"— use --mode={query_side[0]}2t")

  if o.retriever_dir and o.save_retriever:
    raise AugmentError("--retriever and --save_retriever do not go together — give --retriever=DIR to use a saved "
                       "retriever, or --save_retriever=DIR to train one here and keep it")
  if o.retriever_dir and o.text_encoder:
    raise AugmentError("--retriever and --text_encoder do not go together — a saved retriever has its text tower; "
                       "give --text_encoder only when the job trains the retriever")
  pretrained = inputs.text_encoder_model(o.text_encoder) if o.text_encoder else None
  encoder = None  # the saved retriever, checked before the bigger models load
  if o.retriever_dir:
    image_flags = {"--factual": factual_builder.info.features["image"]} if query_side == "image" else {}
    if bank_side == "image":
      image_flags["--stylized"] = stylized_builder.info.features["image"]
    encoder = inputs.load_retriever(o.retriever_dir, image_flags)
  generator, classifier = inputs.load_models(o.generator_dir, o.style_model_dir, o.style)

  def extract(captions: list[str]) -> list[tuple[str, str]]:
    found = style_phrases.Extractor(classifier).extract(captions, [o.style] * len(captions))
    return [(e.style_phrase, e.content) for e in found]

  bank = inputs.stylized_bank(stylized_source, o.style, extract, f"{o.stylized}:{o.stylized_split}")
  lm = inputs.language_model(o.lm_path, stylized_source, o.style)

  out_dir = pathlib.Path(o.output_data_dir or o.data_dir).expanduser().resolve() / o.output_dataset / VERSION
  text_files = [pathlib.Path(o.text_encoder) / name for name in ("config.json", "metadata.json")]
  settings = Settings(
      stylized=f"{stylized_builder.name}/{o.stylized}/{stylized_builder.version}:{o.stylized_split}",
      factual=f"{factual_builder.name}/{o.factual}/{factual_builder.version}:{o.factual_split}", style=o.style,
      mode=o.mode, generator=_fingerprint(pathlib.Path(o.generator_dir) / storage.GENERATOR_FILE),
      style_model=_fingerprint(*sorted(p for p in pathlib.Path(o.style_model_dir).glob("*.json"))),
      lm=_fingerprint(pathlib.Path(o.lm_path)) if o.lm_path else "",
      retriever=dual_encoder.params_digest(encoder.params) if encoder is not None else "",
      text_encoder=_fingerprint(*(p for p in text_files if p.is_file())) if o.text_encoder else "",
      examples_per_shard=o.examples_per_shard, retriever_steps=0 if encoder is not None else o.retriever_steps,
      beam_size=o.beam_size, max_perplexity=float(o.max_perplexity),
      min_similarity=float(o.min_similarity), min_content=float(o.min_content), seed=o.seed)
  _check_manifest(out_dir, settings, write=False)

  # The retriever: loaded, or trained on the factual pairs (the stylized set's when the factual set has no images).
  if encoder is None:
    train_source, train_where = ((factual_source, f"--factual={o.factual}") if factual_images
                                 else (stylized_source, f"--stylized={o.stylized}"))
    encoder = inputs.train_retriever(train_source, factual_images or stylized_images, o.retriever_steps,
                                     o.retriever_pairs, o.seed, train_where, pretrained)
    if o.save_retriever:
      dual_encoder.save(encoder, o.save_retriever, {"dataset": train_where.split("=", 1)[1], "split": (
          o.factual_split if factual_images else o.stylized_split), "steps": o.retriever_steps,
          "pairs": o.retriever_pairs, "seed": o.seed})
      log(f"saved the retriever to {o.save_retriever}")
  bank_items = (inputs.images(stylized_source, [s.index for s in bank]) if bank_side == "image"
                else [s.content for s in bank])
  retriever = retrieve.Retriever(encoder, **{f"bank_{bank_side}s": bank_items})
  features = output_features(factual_builder.info.features["image"] if factual_images else None)
  return Job(o, settings, out_dir, factual_source, factual_images, bank, retriever, generator, classifier, lm,
             features)


def augment_shard(job: Job, shard: int, start: int, stop: int) -> tuple[list[bytes], filters.Counts]:
  """Factual examples [start, stop): retrieved, generated, filtered; the kept pairs serialized, and the counts."""
  from capjax.erg import augment_inputs as inputs  # noqa: PLC0415
  from capjax.erg.generator import model  # noqa: PLC0415
  o = job.options
  records = [job.factual_source[j] for j in range(start, stop)]
  if not records:
    return [], filters.Counts()
  texts = [inputs.first_caption(r) for r in records]
  if not all(texts):
    bad = start + texts.index("")
    raise AugmentError(f"--factual={o.factual} example {bad} has no caption — give a factual dataset with "
                       "`captions`")
  query_side = retrieve.MODES[o.mode][0]
  queries = np.stack([np.asarray(r["image"]) for r in records]) if query_side == "image" else texts
  found = job.retriever.retrieve(o.mode, queries, k=1, threshold=-math.inf)
  scenes = [job.bank[int(j)] for j in found.ids[:, 0]]
  similarities = found.scores[:, 0].astype(np.float32)
  try:
    captions = job.generator.generate([model.Pair(s.phrase, t) for s, t in zip(scenes, texts)], o.beam_size,
                                      o.batch_size)
  except model.GeneratorError as error:
    raise AugmentError(f"shard {shard} (factual examples {start}..{stop - 1}): {error}") from error
  perplexities = np.asarray([job.lm.perplexity([c]).value if c.strip() else math.inf for c in captions], np.float32)
  predicted = job.classifier.predict([c if c.strip() else "." for c in captions])
  contents = [filters.content_kept(t, c) for t, c in zip(texts, captions)]
  verdicts = filters.apply(predicted, o.style, perplexities, similarities, o.max_perplexity, o.min_similarity,
                           contents, o.min_content)
  kept = []
  for row in np.flatnonzero(verdicts.kept):
    record = {"caption": captions[row], "factual_caption": texts[row], "style": o.style,
              "scene_id": scenes[row].scene_id, "similarity": similarities[row],
              "perplexity": perplexities[row], "source_index": start + int(row)}
    if job.factual_images:
      record["image"] = np.asarray(records[row]["image"])
    kept.append(job.features.serialize_example(record))
  return kept, verdicts.counts()


def write(job: Job, log: Callable[[str], None]) -> filters.Counts:
  """Each missing shard through `augment_shard` into the shard writer (`capjax.data.shards`), then the dataset's
  metadata and funnel; the summed counts."""
  o, out_dir = job.options, job.out_dir
  _check_manifest(out_dir, job.settings, write=True)
  split = shards.SplitShards(out_dir, o.output_dataset, SPLIT,
                             shards.shard_ranges(len(job.factual_source), o.examples_per_shard))
  missing = split.missing()
  if done := len(split.ranges) - len(missing):
    log(f"resuming: {done} of {len(split.ranges)} shards already written")
  for i in missing:
    kept, counts = augment_shard(job, i, *split.ranges[i])
    with split.writer(i) as writer:
      for serialized in kept:
        writer.write(serialized)
      writer.info = {"num_examples": len(kept), "counts": counts.to_json()}
    log(f"shard {i + 1}/{len(split.ranges)}: kept {counts.kept} of {counts.generated}")

  total = filters.Counts()
  shard_infos = split.infos()
  for info in shard_infos:
    total += filters.Counts.from_json(info["counts"])
  if total.generated and total.rejected["similarity"] == total.generated:
    log(f"warning: no factual example retrieved a {o.style} scene above similarity {o.min_similarity} — nothing "
        "passes the similarity filter; try another --mode or a factual set closer to the stylized one")
  _write_metadata(out_dir, o.output_dataset, job.features, [s["num_examples"] for s in shard_infos], total,
                  job.settings)
  (out_dir / FUNNEL_HTML).write_text(filters.funnel_html(total, f"{o.output_dataset}: {o.style} augmentation funnel"),
                                     encoding="utf-8")
  return total


def augment_dataset(options: Options, log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
                    ) -> tuple[pathlib.Path, filters.Counts]:
  """Writes the augmented dataset (resolve, then `write`) and returns its directory and the filters' counts; an
  AugmentError for bad input (before any output is written)."""
  job = resolve(options, log)
  return job.out_dir, write(job, log)


def _check_manifest(out_dir: pathlib.Path, settings: Settings, write: bool) -> None:
  shards.check_manifest(out_dir / MANIFEST, dataclasses.asdict(settings), lambda details: AugmentError(
      f"{out_dir} holds a partial augmentation with other settings ({details}) — run again with the same arguments to "
      f"resume it, or delete {out_dir} (or pick another --output_dataset)"), write)


def output_features(image_feature):
  import tensorflow_datasets as tfds  # noqa: PLC0415
  features = {
      "caption": tfds.features.Text(doc="The generated stylized caption."),
      "factual_caption": tfds.features.Text(doc="The factual caption it was generated from."),
      "style": tfds.features.Text(),
      "scene_id": tfds.features.Scalar(np.int64, doc="The retrieved stylized scene's id."),
      "similarity": tfds.features.Scalar(np.float32, doc="Retrieval cosine similarity."),
      "perplexity": tfds.features.Scalar(np.float32, doc="Trigram perplexity under the style's LM."),
      "source_index": tfds.features.Scalar(np.int64, doc="Index of the factual example in its split."),
  }
  if image_feature is not None:
    features["image"] = tfds.features.Image(shape=image_feature.shape, encoding_format="png")
  return tfds.features.FeaturesDict(features)


def _write_metadata(out_dir, name, features, shard_lengths, counts, settings) -> None:
  """dataset_info.json, features.json and metadata.json (the funnel), so `tfds.builder_from_directory` reads it."""
  shards.write_info(out_dir, name, VERSION, features, {SPLIT: list(shard_lengths)},
                    description=(f"ERG stylized captions ({settings.style}) for {settings.factual}, retrieved "
                                 f"({settings.mode}) from {settings.stylized}, generated and filtered, written by "
                                 "capjax.erg.augment."),
                    metadata={"funnel": counts.to_json(), "settings": dataclasses.asdict(settings)})
