"""What ERG's augmentation job (`capjax.erg.augment`) reads: its two datasets, the bank of stylized scenes of one
style, the retriever's dual encoder (loaded, or trained on the factual pairs), the generator, the style classifier
and the style's language model. Every input it cannot use is an `AugmentError` whose message says what is wrong
and what to do."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from capjax.data import stylized
from capjax.data.captions import captions_of


class AugmentError(ValueError):
  """Input the job cannot use; the message says what is wrong and what to do."""


@dataclasses.dataclass(frozen=True)
class Scene:
  """One stylized caption of --style in the bank."""
  scene_id: int
  index: int      # the record's index in the stylized split (its image)
  content: str    # the caption without its style phrase (the bank's text side)
  phrase: str


def open_dataset(spec: str, split: str, data_dir: str, flag: str):
  """(builder, data source) of `name[/config]`'s `split`, building an embedded dataset on first use."""
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data import show, sources  # noqa: PLC0415
  try:
    builder = show.open_builder(spec, data_dir, auto_build=True)
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
    entries = stylized.entries(record)
    if entries is None:
      raise AugmentError(f"the stylized set {where} has no `stylized` field — give a dataset whose records carry "
                         "stylized captions (style, caption), such as stylized_scenes")
    scene_id = int(record.get("id", index))
    for entry in entries:
      styles.add(entry.style)
      if entry.style != style:
        continue
      if entry.content is not None:
        scenes.append(Scene(scene_id, index, entry.content, entry.phrase))
      else:
        unplanted.append((len(scenes), entry.caption))
        scenes.append(Scene(scene_id, index, entry.caption, ""))
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


def images(source, indices: Sequence[int]) -> np.ndarray:
  return np.stack([np.asarray(source[int(i)]["image"]) for i in indices])


def first_caption(record: dict[str, Any]) -> str:
  """A factual record's first reference caption, or "" when it has none."""
  return next(iter(captions_of(record)), "") if "captions" in record else ""


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
  captions = [captions_of(r) for r in records]
  keep = [i for i, c in enumerate(captions) if c]
  if len(keep) < 2:
    raise AugmentError(f"fewer than two captioned images in {where} to train the retriever on — give a dataset "
                       "with image captions")
  images = np.stack([np.asarray(records[i]["image"]) for i in keep])
  encoder, _ = dual_encoder.train(images, [captions[i] for i in keep], steps=steps, batch_size=min(64, len(keep)),
                                  seed=seed, pretrained=pretrained)
  return encoder


def require_models(generator_dir: str, style_model_dir: str) -> None:
  """An AugmentError when the flags that name the models are missing: checked before any dataset is opened (or
  built), so that a missing flag costs nothing."""
  from capjax.erg.generator import storage  # noqa: PLC0415
  if not generator_dir:
    raise AugmentError(f"--generator is required — {storage.TRAIN_HINT}")
  if not style_model_dir:
    raise AugmentError("--style_model is required — train one with `python -m capjax.text_models.style_classifier "
                       "--output=DIR`")


def load_models(generator_dir: str, style_model_dir: str, style: str):
  """(generator, style classifier), after the flags that name them; an AugmentError for a directory that is not
  one, or a classifier without --style among its labels."""
  from capjax.erg.generator import model, storage  # noqa: PLC0415
  from capjax.text_models import style_model as sc  # noqa: PLC0415
  require_models(generator_dir, style_model_dir)
  try:
    generator = storage.load(pathlib.Path(generator_dir))
  except model.GeneratorError as error:
    raise AugmentError(f"--generator={generator_dir}: {error}") from error
  try:
    classifier = sc.StyleClassifier.load(pathlib.Path(style_model_dir))
  except sc.StyleModelError as error:
    raise AugmentError(f"--style_model={style_model_dir}: {error}") from error
  if style not in classifier.labels:
    raise AugmentError(f"--style={style} is not a label of --style_model ({', '.join(classifier.labels)}) — train "
                       "the classifier on that style or choose one of its labels")
  return generator, classifier


def language_model(lm_path: str, stylized_source, style: str):
  """--lm, or a trigram LM trained on the stylized set's captions of --style."""
  from capjax.metrics import stylized_lm  # noqa: PLC0415
  if lm_path:
    try:
      return stylized_lm.StyleLanguageModel.load(lm_path, "--lm")
    except (OSError, ValueError) as error:
      raise AugmentError(f"--lm={lm_path}: {error}") from error
  return stylized_lm.StyleLanguageModel.train(
      [c for i in range(len(stylized_source)) for c in stylized.captions(stylized_source[i], style)], style)
