r"""ERG's augmentation job: stylized captions for a factual dataset, filtered, written as a TFDS dataset.

usage: python -m capjax.erg.augment --stylized=stylized_scenes/tiny --factual=stylized_scenes/tiny --style=romantic \
           --output_dataset=NAME --generator=DIR --style_model=DIR [--lm=LM.json] [--mode=i2i|i2t|t2i|t2t] \
           [--data_dir=DIR] [--output_data_dir=DIR] [--stylized_split=train] [--factual_split=factual] \
           [--examples_per_shard=1024] [--retriever_steps=200] [--text_encoder=BERT_DIR] \
           [--retriever=DIR | --save_retriever=DIR] [--min_content=1.0]

For each factual example (image and first caption) the retriever finds the most similar stylized scene of --style
(the query and bank sides by --mode, as in the paper's Table 1); the scene's style phrase (the planted phrase that
stylized_scenes records carry, or the one the style-phrase extractor finds with --style_model) and the factual
caption prompt the generator (`[CLS] phrase [SEP] caption`); the generated caption then passes the three quality
filters (`capjax.erg.filters`), and with --min_content the content filter. The nearest scene prompts the generator
even at or below the similarity threshold, so that every factual example is one generated caption of the funnel and
its reject is counted by reason. The kept pairs go to the TFDS dataset NAME (version 1.0.0, split `train`,
ArrayRecord) in --output_data_dir (default --data_dir), one record each:
  image            the factual image (absent when the factual dataset has none: then only t2t is possible)
  caption          the generated stylized caption
  factual_caption  the caption it was generated from
  style            --style
  scene_id         the retrieved stylized scene's `id` (its index in --stylized_split without one)
  similarity       the retrieval cosine similarity
  perplexity       the caption's trigram perplexity under the style's language model
  source_index     the factual example's index in --factual_split.
The funnel (generated -> after each filter -> kept, and rejects by reason) is printed, stored in the dataset's
metadata (`builder.info.metadata["funnel"]`, metadata.json) and drawn in funnel.html beside it.

The pieces: --generator from `python -m capjax.erg.generate --train --output=DIR`, --style_model from
`python -m capjax.text_models.style_classifier --output=DIR`, --lm from `python -m capjax.metrics.stylized_lm`
(default: a trigram LM trained here on the stylized set's captions of --style). The retriever's dual encoder is
trained here (`capjax.erg.dual_encoder`, --retriever_steps) on the factual (image, caption) pairs, or on the
stylized set's when the factual dataset has no images. Its text tower is a small Transformer over the captions'
words, or with --text_encoder=DIR a converted BERT-family encoder (all-MiniLM-L6-v2: `convert_weights
--format=hf_bert`), kept locked while the image tower and the projections learn. --save_retriever=DIR keeps it in
DIR, and --retriever=DIR loads such a directory instead of training one (for another style, another factual shard
of the same corpus, or a rerun: training is most of a small job's time).

The factual split is cut into shards of --examples_per_shard consecutive examples; a shard is written to a temporary
file and renamed when complete, so a killed job, run again with the same arguments, resumes at the first missing
shard (and a run with other arguments over a partial output is an error, not a mixed dataset).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from capjax.data import shards
from capjax.erg import filters, retrieve

MANIFEST = "augmentation.json"
SHARD_INFO_DIR = "shard_info"  # one JSON per finished shard: its record count and its filter counts
FUNNEL_HTML = "funnel.html"
VERSION = "1.0.0"
SPLIT = "train"
DEFAULT_EXAMPLES_PER_SHARD = 1024
MODES = tuple(retrieve.MODES)


class AugmentError(ValueError):
  """Input the job cannot use; the message says what is wrong and what to do."""


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
class Scene:
  """One stylized caption of --style in the bank."""
  scene_id: int
  index: int      # the record's index in the stylized split (its image)
  content: str    # the caption without its style phrase (the bank's text side)
  phrase: str


def _text(value: Any) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _fingerprint(*paths: pathlib.Path) -> str:
  digest = hashlib.sha256()
  for path in paths:
    digest.update(path.read_bytes())
  return digest.hexdigest()


def open_dataset(spec: str, split: str, data_dir: str, flag: str):
  """(builder, data source) of `name[/config]`'s `split`, building an embedded dataset on first use."""
  import ml_collections  # noqa: PLC0415
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data import sources  # noqa: PLC0415
  name, _, config = spec.partition("/")
  dataset = ml_collections.ConfigDict({"name": name, "builder_config": config, "data_dir": data_dir, "features": "",
                                       "auto_build": True})
  try:
    builder = sources.prepare(dataset)
  except (ConfigError, sources.DatasetNotBuiltError) as error:
    raise AugmentError(f"{flag}={spec}: {error}") from error
  if split.split("[", 1)[0] not in builder.info.splits:
    raise AugmentError(f"{flag}={spec} has no split {split!r} — choose one of {sorted(builder.info.splits)}")
  try:
    examples = builder.info.splits[split].num_examples
  except ValueError as error:  # a slice beyond the split: "Requested slice [:4000] incompatible with 128 examples."
    raise AugmentError(f"{flag}={spec}: split {split!r} does not fit ({error}) — choose a slice within the split's "
                       f"{builder.info.splits[split.split('[', 1)[0]].num_examples:,} examples") from error
  if examples == 0:  # TFDS opens no data source over zero records
    return builder, []
  return builder, builder.as_data_source(split=split)


def stylized_bank(source, style: str, extract: Callable[[list[str]], list[tuple[str, str]]] | None,
                  where: str) -> list[Scene]:
  """The stylized captions of `style` in `source` (records with a `stylized` sequence of style, caption and, when
  known, the planted phrase and its span); a caption without a planted phrase gets the extractor's."""
  if len(source) == 0:
    raise AugmentError(f"the stylized set {where} is empty — give a stylized split with records")
  scenes, unplanted, styles = [], [], set()
  for index in range(len(source)):
    record = source[index]
    entries = record.get("stylized")
    if entries is None:
      raise AugmentError(f"the stylized set {where} has no `stylized` field — give a dataset whose records carry "
                         "stylized captions (style, caption), such as stylized_scenes")
    scene_id = int(record.get("id", index))
    for j, entry_style in enumerate(entries["style"]):
      entry_style = _text(entry_style)
      styles.add(entry_style)
      if entry_style != style:
        continue
      caption = _text(entries["caption"][j])
      phrases = entries.get("phrase")
      phrase = _text(phrases[j]) if phrases is not None and len(phrases) > j else ""
      if phrase and "phrase_start" in entries:
        words = caption.split()
        start, end = int(entries["phrase_start"][j]), int(entries["phrase_end"][j])
        scenes.append(Scene(scene_id, index, " ".join(words[:start] + words[end:]), phrase))
      else:
        unplanted.append((len(scenes), caption))
        scenes.append(Scene(scene_id, index, caption, ""))
  if not scenes:
    found = ", ".join(sorted(styles)) or "none"
    raise AugmentError(f"the stylized set {where} has no {style!r} captions (styles found: {found}) — choose "
                       "--style among them")
  if unplanted:
    if extract is None:
      raise AugmentError(f"the stylized set {where} records no planted style phrases — give --style_model so that "
                         "the extractor finds them")
    for (at, _), (phrase, content) in zip(unplanted, extract([c for _, c in unplanted])):
      scenes[at] = dataclasses.replace(scenes[at], phrase=phrase, content=content)
  return scenes


def _images(source, indices: Sequence[int]) -> np.ndarray:
  return np.stack([np.asarray(source[int(i)]["image"]) for i in indices])


def _first_caption(record: dict[str, Any]) -> str:
  captions = record.get("captions")
  if captions is None or len(captions) == 0:
    return ""
  return _text(captions[0])


def load_retriever(directory: str, modes_images: dict[str, Any]):
  """The dual encoder saved in `directory`; an AugmentError when it is not one, or when it reads images of another
  shape than a dataset whose images the mode embeds (`modes_images`: flag -> that dataset's image feature)."""
  from capjax.erg import dual_encoder  # noqa: PLC0415
  try:
    encoder = dual_encoder.load(directory)
  except dual_encoder.RetrieverError as error:
    raise AugmentError(f"--retriever={directory}: {error}") from error
  for flag, feature in modes_images.items():
    if tuple(feature.shape) != encoder.image_shape or np.dtype(feature.np_dtype).name != encoder.image_dtype:
      raise AugmentError(f"--retriever={directory} reads images of shape {encoder.image_shape} "
                         f"({encoder.image_dtype}), but {flag} images are {tuple(feature.shape)} "
                         f"({np.dtype(feature.np_dtype).name}) — give a retriever trained on such images, or drop "
                         "--retriever to train one here")
  return encoder


def text_encoder_model(directory: str):
  """The dual encoder with the converted BERT-family checkpoint in `directory` as its text tower."""
  from capjax.erg import dual_encoder  # noqa: PLC0415
  from capjax.text_models import checkpoint  # noqa: PLC0415
  try:
    return dual_encoder.bert_model(directory)
  except checkpoint.WeightsError as error:
    raise AugmentError(f"--text_encoder={directory}: {error}") from error


def train_retriever(source, has_images: bool, steps: int, num_pairs: int, seed: int, where: str, pretrained=None):
  """The dual encoder, trained on up to `num_pairs` (image, captions) records of `source` (with the text tower of
  `pretrained`, a `dual_encoder.bert_model`, when given)."""
  from capjax.erg import dual_encoder  # noqa: PLC0415
  if not has_images:
    raise AugmentError(f"neither dataset has images to train the retriever's dual encoder on ({where}) — give a "
                       "factual or stylized dataset with an `image` field")
  count = min(num_pairs, len(source))
  records = [source[i] for i in range(count)]
  captions = [[_text(c) for c in r["captions"]] for r in records]
  keep = [i for i, c in enumerate(captions) if c]
  if len(keep) < 2:
    raise AugmentError(f"fewer than two captioned images in {where} to train the retriever on — give a dataset "
                       "with image captions")
  images = np.stack([np.asarray(records[i]["image"]) for i in keep])
  encoder, _ = dual_encoder.train(images, [captions[i] for i in keep], steps=steps, batch_size=min(64, len(keep)),
                                  seed=seed, pretrained=pretrained)
  return encoder


def _check_manifest(out_dir: pathlib.Path, settings: Settings, write: bool) -> None:
  wanted = dataclasses.asdict(settings)
  if details := shards.manifest_mismatch(out_dir / MANIFEST, wanted):
    raise AugmentError(f"{out_dir} holds a partial augmentation with other settings ({details}) — run again with "
                       f"the same arguments to resume it, or delete {out_dir} (or pick another --output_dataset)")
  if write:
    shards.write_manifest(out_dir / MANIFEST, wanted)


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


def augment_dataset(*, stylized: str, factual: str, style: str, output_dataset: str, generator_dir: str,
                    style_model_dir: str, lm_path: str = "", mode: str = "t2t", data_dir: str,
                    output_data_dir: str = "", stylized_split: str = "train", factual_split: str = "factual",
                    examples_per_shard: int = DEFAULT_EXAMPLES_PER_SHARD, retriever_steps: int = 200,
                    retriever_pairs: int = 1024, retriever_dir: str = "", save_retriever: str = "",
                    text_encoder: str = "",
                    beam_size: int = 1, batch_size: int = 256,
                    max_perplexity: float = filters.MAX_PERPLEXITY, min_similarity: float = filters.MIN_SIMILARITY,
                    min_content: float = filters.MIN_CONTENT, seed: int = 0,
                    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
                    ) -> tuple[pathlib.Path, filters.Counts]:
  """Writes the augmented dataset and returns its directory and the filters' counts; an AugmentError for bad
  input (before any output is written)."""
  from capjax.erg import dual_encoder, generate  # noqa: PLC0415
  from capjax.metrics import stylized_lm  # noqa: PLC0415
  from capjax.text_models import style_classifier as sc  # noqa: PLC0415
  from capjax.text_models import style_phrases  # noqa: PLC0415

  if mode not in MODES:
    raise AugmentError(f"--mode={mode} is unknown — choose one of {', '.join(MODES)}")
  if not re.fullmatch(r"[a-z][a-z0-9_]*", output_dataset or ""):
    raise AugmentError(f"--output_dataset={output_dataset!r} is not a TFDS name — use lower-case letters, digits "
                       "and underscores, starting with a letter")
  if examples_per_shard < 1:
    raise AugmentError(f"--examples_per_shard={examples_per_shard} — give at least 1")
  stylized_builder, stylized_source = open_dataset(stylized, stylized_split, data_dir, "--stylized")
  factual_builder, factual_source = open_dataset(factual, factual_split, data_dir, "--factual")
  factual_images = "image" in factual_builder.info.features
  stylized_images = "image" in stylized_builder.info.features
  query_side, bank_side = retrieve.MODES[mode]
  if query_side == "image" and not factual_images:
    raise AugmentError(f"--factual={factual} has no images, so --mode={mode} (image queries) is impossible — use "
                       "--mode=t2t")
  if bank_side == "image" and not stylized_images:
    raise AugmentError(f"--stylized={stylized} has no images, so --mode={mode} (an image bank) is impossible — use "
                       f"--mode={query_side[0]}2t")

  if retriever_dir and save_retriever:
    raise AugmentError("--retriever and --save_retriever do not go together — give --retriever=DIR to use a saved "
                       "retriever, or --save_retriever=DIR to train one here and keep it")
  if retriever_dir and text_encoder:
    raise AugmentError("--retriever and --text_encoder do not go together — a saved retriever has its text tower; "
                       "give --text_encoder only when the job trains the retriever")
  pretrained = text_encoder_model(text_encoder) if text_encoder else None
  encoder = None  # the saved retriever, checked before the bigger models load
  if retriever_dir:
    image_flags = {"--factual": factual_builder.info.features["image"]} if query_side == "image" else {}
    if bank_side == "image":
      image_flags["--stylized"] = stylized_builder.info.features["image"]
    encoder = load_retriever(retriever_dir, image_flags)

  generator_path, style_path = pathlib.Path(generator_dir or ""), pathlib.Path(style_model_dir or "")
  if not generator_dir:
    raise AugmentError(f"--generator is required — {generate.TRAIN_HINT}")
  if not style_model_dir:
    raise AugmentError("--style_model is required — train one with `python -m capjax.text_models.style_classifier "
                       "--output=DIR`")
  try:
    generator = generate.load(generator_path)
  except generate.GeneratorError as error:
    raise AugmentError(f"--generator={generator_dir}: {error}") from error
  try:
    classifier = sc.StyleClassifier.load(style_path)
  except sc.StyleModelError as error:
    raise AugmentError(f"--style_model={style_model_dir}: {error}") from error
  if style not in classifier.labels:
    raise AugmentError(f"--style={style} is not a label of --style_model ({', '.join(classifier.labels)}) — train "
                       "the classifier on that style or choose one of its labels")

  def extract(captions: list[str]) -> list[tuple[str, str]]:
    found = style_phrases.Extractor(classifier).extract(captions, [style] * len(captions))
    return [(e.style_phrase, e.content) for e in found]

  bank = stylized_bank(stylized_source, style, extract, f"{stylized}:{stylized_split}")
  if lm_path:
    try:
      lm = stylized_lm.StyleLanguageModel.load(lm_path, "--lm")
    except (OSError, ValueError) as error:
      raise AugmentError(f"--lm={lm_path}: {error}") from error
  else:
    lm = stylized_lm.StyleLanguageModel.train(
        [_text(c) for i in range(len(stylized_source)) for s, c in zip(stylized_source[i]["stylized"]["style"],
                                                                      stylized_source[i]["stylized"]["caption"])
         if _text(s) == style], style)

  out_dir = pathlib.Path(output_data_dir or data_dir).expanduser().resolve() / output_dataset / VERSION
  settings = Settings(
      stylized=f"{stylized_builder.name}/{stylized}/{stylized_builder.version}:{stylized_split}",
      factual=f"{factual_builder.name}/{factual}/{factual_builder.version}:{factual_split}", style=style, mode=mode,
      generator=_fingerprint(generator_path / generate.GENERATOR_FILE),
      style_model=_fingerprint(*sorted(p for p in style_path.glob("*.json"))),
      lm=_fingerprint(pathlib.Path(lm_path)) if lm_path else "",
      retriever=dual_encoder.params_digest(encoder.params) if encoder is not None else "",
      text_encoder=_fingerprint(*(pathlib.Path(text_encoder) / name for name in ("config.json", "metadata.json")
                                  if (pathlib.Path(text_encoder) / name).is_file())) if text_encoder else "",
      examples_per_shard=examples_per_shard, retriever_steps=0 if encoder is not None else retriever_steps,
      beam_size=beam_size, max_perplexity=float(max_perplexity),
      min_similarity=float(min_similarity), min_content=float(min_content), seed=seed)
  _check_manifest(out_dir, settings, write=False)

  # The retriever: loaded, or trained on the factual pairs (the stylized set's when the factual set has no images).
  if encoder is None:
    train_source, train_where = ((factual_source, f"--factual={factual}") if factual_images
                                 else (stylized_source, f"--stylized={stylized}"))
    encoder = train_retriever(train_source, factual_images or stylized_images, retriever_steps, retriever_pairs,
                              seed, train_where, pretrained)
    if save_retriever:
      dual_encoder.save(encoder, save_retriever, {"dataset": train_where.split("=", 1)[1], "split": (
          factual_split if factual_images else stylized_split), "steps": retriever_steps, "pairs": retriever_pairs,
          "seed": seed})
      log(f"saved the retriever to {save_retriever}")
  bank_items = (_images(stylized_source, [s.index for s in bank]) if bank_side == "image"
                else [s.content for s in bank])
  retriever = retrieve.Retriever(encoder, **{f"bank_{bank_side}s": bank_items})

  from tensorflow_datasets.core import naming  # noqa: PLC0415
  _check_manifest(out_dir, settings, write=True)
  features = output_features(factual_builder.info.features["image"] if factual_images else None)
  template = naming.ShardedFileTemplate(data_dir=out_dir, dataset_name=output_dataset, split=SPLIT,
                                        filetype_suffix="array_record", template=naming.DEFAULT_FILENAME_TEMPLATE)
  ranges = shards.shard_ranges(len(factual_source), examples_per_shard)
  paths = [pathlib.Path(os.fspath(p)) for p in template.sharded_filepaths(len(ranges))]
  info_dir = out_dir / SHARD_INFO_DIR
  info_dir.mkdir(parents=True, exist_ok=True)
  done = sum(p.exists() for p in paths)
  if done:
    log(f"resuming: {done} of {len(paths)} shards already written")
  for i, (start, stop) in enumerate(ranges):
    if paths[i].exists():
      continue
    records = [factual_source[j] for j in range(start, stop)]
    kept_records, counts = [], filters.Counts()
    if records:
      texts = [_first_caption(r) for r in records]
      if not all(texts):
        bad = start + texts.index("")
        raise AugmentError(f"--factual={factual} example {bad} has no caption — give a factual dataset with "
                           "`captions`")
      queries = np.stack([np.asarray(r["image"]) for r in records]) if query_side == "image" else texts
      found = retriever.retrieve(mode, queries, k=1, threshold=-math.inf)
      scenes = [bank[int(j)] for j in found.ids[:, 0]]
      similarities = found.scores[:, 0].astype(np.float32)
      try:
        captions = generator.generate([generate.Pair(s.phrase, t) for s, t in zip(scenes, texts)], beam_size,
                                      batch_size)
      except generate.GeneratorError as error:
        raise AugmentError(f"shard {i} (factual examples {start}..{stop - 1}): {error}") from error
      perplexities = np.asarray([lm.perplexity([c]).value if c.strip() else math.inf for c in captions], np.float32)
      predicted = classifier.predict([c if c.strip() else "." for c in captions])
      contents = [filters.content_kept(t, c) for t, c in zip(texts, captions)]
      verdicts = filters.apply(predicted, style, perplexities, similarities, max_perplexity, min_similarity,
                               contents, min_content)
      counts = verdicts.counts()
      for row in np.flatnonzero(verdicts.kept):
        record = {"caption": captions[row], "factual_caption": texts[row], "style": style,
                  "scene_id": scenes[row].scene_id, "similarity": similarities[row],
                  "perplexity": perplexities[row], "source_index": start + int(row)}
        if factual_images:
          record["image"] = np.asarray(records[row]["image"])
        kept_records.append(features.serialize_example(record))
    with shards.ShardWriter(paths[i], info_dir / f"{SPLIT}-{i:05d}.json") as writer:
      for serialized in kept_records:
        writer.write(serialized)
      writer.info = {"num_examples": len(kept_records), "counts": counts.to_json()}
    log(f"shard {i + 1}/{len(ranges)}: kept {counts.kept} of {counts.generated}")

  total = filters.Counts()
  shard_infos = [json.loads((info_dir / f"{SPLIT}-{i:05d}.json").read_text()) for i in range(len(ranges))]
  for info in shard_infos:
    total += filters.Counts.from_json(info["counts"])
  if total.generated and total.rejected["similarity"] == total.generated:
    log(f"warning: no factual example retrieved a {style} scene above similarity {min_similarity} — nothing passes "
        "the similarity filter; try another --mode or a factual set closer to the stylized one")
  _write_metadata(out_dir, output_dataset, features, template, [s["num_examples"] for s in shard_infos], paths,
                  total, settings)
  (out_dir / FUNNEL_HTML).write_text(filters.funnel_html(total, f"{output_dataset}: {style} augmentation funnel"),
                                     encoding="utf-8")
  return out_dir, total


def _write_metadata(out_dir, name, features, template, shard_lengths, paths, counts, settings) -> None:
  """dataset_info.json, features.json and metadata.json (the funnel), so `tfds.builder_from_directory` reads it."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  from tensorflow_datasets.core import dataset_info as dataset_info_lib  # noqa: PLC0415
  identity = dataset_info_lib.DatasetIdentity(name=name, version=tfds.core.Version(VERSION),
                                              data_dir=os.fspath(out_dir), module_name="")
  info = tfds.core.DatasetInfo(
      builder=identity, features=features, disable_shuffling=True,
      description=(f"ERG stylized captions ({settings.style}) for {settings.factual}, retrieved ({settings.mode}) "
                   f"from {settings.stylized}, generated and filtered, written by capjax.erg.augment."),
      metadata=tfds.core.MetadataDict(funnel=counts.to_json(), settings=dataclasses.asdict(settings)))
  info.set_file_format("array_record")
  info.set_splits(tfds.core.SplitDict([tfds.core.SplitInfo(
      name=SPLIT, shard_lengths=list(shard_lengths), num_bytes=sum(p.stat().st_size for p in paths),
      filename_template=template)]))
  info.write_to_directory(out_dir)


# ----------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------
def _flags():
  from absl import flags  # noqa: PLC0415
  values = flags.FlagValues()
  flags.DEFINE_string("stylized", None, "the stylized TFDS dataset, name[/config] (e.g. stylized_scenes/tiny)",
                      flag_values=values)
  flags.DEFINE_string("factual", None, "the factual TFDS dataset, name[/config]", flag_values=values)
  flags.DEFINE_string("style", None, "the target style (e.g. romantic)", flag_values=values)
  flags.DEFINE_string("output_dataset", None, "the TFDS name of the dataset to write", flag_values=values)
  flags.DEFINE_string("generator", None, "a directory from `python -m capjax.erg.generate --train`",
                      flag_values=values)
  flags.DEFINE_string("style_model", None, "a directory from `python -m capjax.text_models.style_classifier`",
                      flag_values=values)
  flags.DEFINE_string("lm", "", "a style LM file from `python -m capjax.metrics.stylized_lm` (default: trained here "
                      "on the stylized captions of --style)", flag_values=values)
  flags.DEFINE_enum("mode", "i2i", list(MODES), "query side 2 bank side (image or text), the paper's Table 1",
                    flag_values=values)
  flags.DEFINE_string("data_dir", "", "TFDS data dir of the inputs ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets)",
                      flag_values=values)
  flags.DEFINE_string("output_data_dir", "", "where the output dataset goes ('' -> --data_dir)", flag_values=values)
  flags.DEFINE_string("stylized_split", "train", "the stylized split (a TFDS slice is fine)", flag_values=values)
  flags.DEFINE_string("factual_split", "factual", "the factual split (a TFDS slice is fine)", flag_values=values)
  flags.DEFINE_integer("examples_per_shard", DEFAULT_EXAMPLES_PER_SHARD, "factual examples per output shard",
                       lower_bound=1, flag_values=values)
  flags.DEFINE_integer("retriever_steps", 200, "training steps of the retriever's dual encoder", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_integer("retriever_pairs", 1024, "(image, captions) records the retriever trains on", lower_bound=2,
                       flag_values=values)
  flags.DEFINE_string("retriever", "", "a directory from --save_retriever: use its dual encoder instead of training "
                      "one (--retriever_steps, --retriever_pairs and --seed then do not apply)", flag_values=values)
  flags.DEFINE_string("save_retriever", "", "keep the dual encoder trained here in this directory (for --retriever)",
                      flag_values=values)
  flags.DEFINE_string("text_encoder", "", "a converted BERT-family checkpoint (e.g. all-MiniLM-L6-v2) as the "
                      "retriever's locked text tower (default: a small Transformer trained here)", flag_values=values)
  flags.DEFINE_integer("beam_size", 1, "the generator's beam (1: greedy)", lower_bound=1, flag_values=values)
  flags.DEFINE_float("max_perplexity", filters.MAX_PERPLEXITY, "the perplexity filter, more than 0 (the paper's 80)",
                     flag_values=values)
  flags.DEFINE_float("min_similarity", filters.MIN_SIMILARITY, "the similarity filter, a cosine in [-1, 1] "
                     "(the paper's 0.6)",
                     flag_values=values)
  flags.DEFINE_float("min_content", filters.MIN_CONTENT, "the content filter: the share of the factual caption's "
                     "words a generated caption must keep in order, in [0, 1] (1.0: all; 0: off, the paper's)",
                     flag_values=values)
  flags.DEFINE_integer("seed", 0, "seed of the retriever's training", flag_values=values)
  return values


def check_filter_flags(values) -> None:
  """The filters' thresholds, before any work: out of range, no pair passes and the dataset written is empty.
  (`values`: parsed flags with max_perplexity, min_similarity and min_content; erg.demo has the last alone.)"""
  from capjax import cli  # noqa: PLC0415
  if "max_perplexity" in values:
    cli.check_number("--max_perplexity", values["max_perplexity"].value, 0, low_open=True,
                     hint=f" (the paper's {filters.MAX_PERPLEXITY:g})")
  if "min_similarity" in values:
    cli.check_number("--min_similarity", values["min_similarity"].value, -1, 1,
                     hint=f", a cosine similarity (the paper's {filters.MIN_SIMILARITY:g})")
  cli.check_number("--min_content", values["min_content"].value, 0, 1,
                   hint=", a share of the factual caption's words (0: off)")


def main(argv: Sequence[str]) -> None:
  from capjax import cli  # noqa: PLC0415
  values = _flags()
  cli.parse(values, argv, __doc__)
  missing = [f"--{name}" for name in ("stylized", "factual", "style", "output_dataset") if not values[name].value]
  if missing:
    cli.fail(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required — see --help")
  check_filter_flags(values)
  if values["lm"].value:  # read after the models load: a FIFO or a folder is refused now, not minutes later
    from capjax import files  # noqa: PLC0415
    files.input_file(values["lm"].value, "--lm", "a style LM file from `python -m capjax.metrics.stylized_lm`")
  data_dir = os.path.expanduser(values["data_dir"].value or os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))
  output_data_dir = values["output_data_dir"].value or data_dir
  cli.writable_dir(output_data_dir, "--output_data_dir")
  if values["save_retriever"].value:
    cli.writable_dir(values["save_retriever"].value, "--save_retriever")
  try:
    out_dir, counts = augment_dataset(
        stylized=values["stylized"].value, factual=values["factual"].value, style=values["style"].value,
        output_dataset=values["output_dataset"].value, generator_dir=values["generator"].value,
        style_model_dir=values["style_model"].value, lm_path=values["lm"].value, mode=values["mode"].value,
        data_dir=data_dir, output_data_dir=output_data_dir, stylized_split=values["stylized_split"].value,
        factual_split=values["factual_split"].value, examples_per_shard=values["examples_per_shard"].value,
        retriever_steps=values["retriever_steps"].value, retriever_pairs=values["retriever_pairs"].value,
        retriever_dir=values["retriever"].value, save_retriever=values["save_retriever"].value,
        text_encoder=values["text_encoder"].value,
        beam_size=values["beam_size"].value, max_perplexity=values["max_perplexity"].value,
        min_similarity=values["min_similarity"].value, min_content=values["min_content"].value,
        seed=values["seed"].value)
  except AugmentError as error:
    cli.fail(str(error))
  print("\n".join(counts.lines()))
  print(out_dir)


if __name__ == "__main__":
  from capjax import cli
  cli.run(main)
