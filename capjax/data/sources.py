"""Where records come from: the TFDS builders capjax knows, building embedded datasets on first use, the
ArrayRecord `data_source` of a split (pixels or a feature variant), and the error that says how to build what is
missing, or how to build again what is damaged (`capjax.data.integrity`, checked before TFDS reads a dataset). Also
the one resolution of a config into what the model reads from each record (`input_spec`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import logging

from capjax import cli, distributed
from capjax.config_util import ConfigError
from capjax.data import integrity, stylized
from capjax.data.registry import KNOWN_BUILDERS
from capjax.features import variant_name
from capjax.strings import as_str, decimal
from capjax.tokens import FACTUAL, style_tag

class DatasetNotBuiltError(RuntimeError):
  """The dataset (or its feature variant) is not in the data dir, or is there damaged (`capjax.data.integrity`);
  the message gives the commands that make it."""


def _check_whole(folders: list[str], rebuild: str) -> None:
  """DatasetNotBuiltError for the first of `folders` (built datasets) that is damaged, before TFDS reads it
  (a truncated dataset_info.json would be its traceback, a truncated shard a wrong result or a crash mid-run)."""
  for folder in folders:
    if os.path.isdir(folder):
      try:
        integrity.check(folder, rebuild)
      except integrity.DamagedDatasetError as e:
        raise DatasetNotBuiltError(str(e)) from e


@dataclasses.dataclass(frozen=True)
class InputSpec:
  """What the model reads from each record, resolved once from the config."""

  key: str                # the record field: "image" (pixels) or the feature variant's "grid" | "pooled"
  shape: tuple[int, ...]  # of one example
  dtype: str              # what the model is built for: uint8 pixels, float32 features

  def zeros(self, batch: int) -> np.ndarray:
    """A batch of blank inputs, for initialising and tracing the model."""
    return np.zeros((batch, *self.shape), self.dtype)


def input_spec(config: ml_collections.ConfigDict) -> InputSpec:
  """Pixels for the pixel encoders ('conv', 'irv2'), a feature variant's `feature_key` for the 'features'
  encoder; a config that mixes them is an error before any work starts."""
  d, encoder = config.dataset, config.model.encoder.name
  if (encoder == "features") != bool(d.get("features")):
    raise ConfigError(
        f"model.encoder.name={encoder!r} does not fit dataset.features={d.get('features')!r} — the 'features' "
        "encoder reads pre-extracted features (set --config.dataset.features=irv2, written by `python -m "
        "capjax.tools.extract_tfds_features`), the pixel encoders ('conv', 'irv2') need dataset.features=''")
  if encoder != "features":
    return InputSpec("image", (d.image_size, d.image_size, 3), "uint8")
  if d.feature_key not in ("grid", "pooled"):
    raise ConfigError(f"dataset.feature_key={d.feature_key!r} is neither 'grid' nor 'pooled' — use 'grid' "
                      "(h x w x 1536) or 'pooled' (1536)")
  shape = tuple(d.feature_shape) if d.feature_key == "grid" else tuple(d.feature_shape[-1:])
  return InputSpec(d.feature_key, shape, "float32")


def replaced(config: ml_collections.ConfigDict, **changes) -> ml_collections.ConfigDict:
  """A copy of a dataset config with `changes`: the one way to read a dataset as another config would."""
  copy = ml_collections.ConfigDict(dict(config))
  copy.update(changes)
  return copy


def default_data_dir(config: ml_collections.ConfigDict | dict[str, Any]) -> str:
  return integrity.data_dir(config["data_dir"])


def _with_config(name: str, config: ml_collections.ConfigDict) -> str:
  """`name/builder_config`, or `name` when the config names no builder config."""
  return integrity.join_dataset(name, config.get("builder_config", ""))


def _builder(config: ml_collections.ConfigDict):
  """The TFDS builder for `config` (dataset.name, data_dir, builder_config, features)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415 (it loads TensorFlow: only when a dataset is opened)
  data_dir = default_data_dir(config)
  if os.path.exists(data_dir) and not os.path.isdir(data_dir):
    raise ConfigError(f"dataset.data_dir={data_dir} is a file, not a directory — set --config.dataset.data_dir to "
                      "the TFDS data dir the dataset is (or is to be) built in")
  for field in ("name", "builder_config", "features"):
    value = config.get(field, "")
    if (field == "name" or value) and (wrong := integrity.name_problem(value)):
      raise ConfigError(f"dataset.{field}={value!r} {wrong}, and it names a folder in the data dir — set "
                        f"--config.dataset.{field} to a plain name (datasets capjax builds: "
                        f"{', '.join(sorted(KNOWN_BUILDERS))})")
  if config.get("features"):
    return _variant_builder(config)
  name = config.name
  module, how = KNOWN_BUILDERS.get(
      name, (None, f"`python -m capjax.data.build --dataset={name} --data_dir={default_data_dir(config)}`"))
  if module is not None:
    try:
      importlib.import_module(module)
    except ModuleNotFoundError as e:
      if e.name and module.startswith(e.name):
        raise DatasetNotBuiltError(
            f"dataset {name!r} is not built in {default_data_dir(config)} and its builder ({module}) is not "
            f"part of this checkout yet — to build it: {how}") from e
      raise
  folder = integrity.registered_folder(name, config.get("builder_config", ""), data_dir)
  if folder is not None:
    manual = bool(getattr(tfds.builder_cls(name), "MANUAL_DOWNLOAD_INSTRUCTIONS", None))
    _check_whole([folder], integrity.rebuild_command(_with_config(name, config), data_dir, manual))
  try:
    return tfds.builder(_with_config(name, config), data_dir=default_data_dir(config)), how
  except tfds.core.registered.DatasetNotFoundError as e:
    raise DatasetNotBuiltError(
        f"dataset {name!r} is not built in {default_data_dir(config)}, and TFDS has no builder of that name — "
        f"check dataset.name (capjax builds {', '.join(sorted(KNOWN_BUILDERS))})") from e
  except ValueError as e:  # TFDS: "BuilderConfig X not found"
    configs = [c.name for c in tfds.builder_cls(name).BUILDER_CONFIGS]
    if config.get("builder_config") not in configs:
      raise ConfigError(f"dataset.builder_config={config.builder_config!r} is not a config of {name} — choose one "
                        f"of {', '.join(configs)}") from e
    raise


def _variant_builder(config: ml_collections.ConfigDict):
  """The feature variant written by capjax.tools.extract_tfds_features (read from its files: no builder code)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  source = _with_config(config.name, config)
  name = _with_config(variant_name(config.name, config.features), config)
  _, build = KNOWN_BUILDERS.get(
      config.name, (None, f"`python -m capjax.data.build --dataset={source} --data_dir={default_data_dir(config)}`"))
  how = (f"(1) build {source} if it is not built: {build}; (2) convert Inception-ResNet-v2 weights "
         f"(`python -m capjax.tools.convert_weights --format=keras|timm --input=FILE --output=WEIGHTS_DIR`); "
         f"(3) run `python -m capjax.tools.extract_tfds_features "
         f"--dataset={source} --weights=WEIGHTS_DIR --variant={config.features} "
         f"--data_dir={default_data_dir(config)}`")
  variant = variant_name(config.name, config.features)
  _check_whole(integrity.version_folders(default_data_dir(config), variant, config.get("builder_config", "")),
               f"remove {os.path.join(default_data_dir(config), variant)} and write it again: {how}")
  try:
    return tfds.builder(name, data_dir=default_data_dir(config)), how
  except tfds.core.registered.DatasetNotFoundError as e:
    raise DatasetNotBuiltError(
        f"the feature variant {name!r} is not in {default_data_dir(config)} — to write it: {how}") from e


def builder_config(config: ml_collections.ConfigDict):
  """The TFDS builder config of `config`'s dataset (its sizes, for an embedded dataset), without building or reading
  the dataset: a command checks its flags against it before any work."""
  return _builder(config)[0].builder_config


def prepare(config: ml_collections.ConfigDict):
  """The dataset's builder, after building it if it is embedded (no download) and missing; otherwise it
  checks that the dataset exists."""
  builder, how = _builder(config)
  info_path = os.path.join(builder.data_dir, "dataset_info.json")
  if os.path.exists(info_path):
    fmt = builder.info.file_format
    if fmt is not None and "array_record" not in str(fmt).lower():
      raise DatasetNotBuiltError(
          f"dataset {builder.name} in {builder.data_dir} was built as {fmt}, and tfds.data_source reads only "
          f"ArrayRecord — rebuild it with --file_format=array_record")
    return builder
  if not config.get("auto_build", False) or config.get("features"):
    raise DatasetNotBuiltError(f"dataset {builder.name!r} is not built in {builder.data_dir} — to build it: {how}")
  unwritable = cli.unwritable_reason(default_data_dir(config))  # checked before the build, not by its traceback
  if unwritable:
    raise DatasetNotBuiltError(
        f"dataset {builder.name!r} is not built in {builder.data_dir}, and cannot be built there: "
        f"dataset.data_dir={default_data_dir(config)} {unwritable} — set --config.dataset.data_dir to a directory "
        "you can write to")
  if jax.process_index() == 0:
    logging.info("Building %s into %s (first use).", builder.name, builder.data_dir)
    builder.download_and_prepare(file_format="array_record")
  distributed.sync("capjax_dataset_built")
  return builder


def reference_text(text: str) -> str:
  """A caption in the vocabulary's form, as CC3M releases its captions: Penn Treebank tokens joined by spaces
  ("parked." reads as the words "parked" and ".")."""
  from capjax.text import annotate  # noqa: PLC0415
  return " ".join(annotate.caption_tokens(text))


@dataclasses.dataclass(frozen=True)
class RecordView:
  """A source's records, each in another form: `change(record, index)`, a module-level function or a
  functools.partial of one (a view pickles, for grain's workers). The one way a split's records are shown
  otherwise: `captions` from another field, a style's captions, an augmented record's, a start token."""

  source: Any
  change: Callable[[dict[str, Any], int], dict[str, Any]]

  def __len__(self) -> int:
    return len(self.source)

  def __getitem__(self, index: int) -> dict[str, Any]:
    return self.change(self.source[index], int(index))

  def __getitems__(self, indices) -> list[dict[str, Any]]:
    records = (self.source.__getitems__(indices) if hasattr(self.source, "__getitems__")
               else [self.source[i] for i in indices])
    return [self.change(r, int(i)) for i, r in zip(indices, records)]


def _field_captions(field: str, record: dict[str, Any], index: int) -> dict[str, Any]:
  del index
  value = record[field]
  texts = value if isinstance(value, (list, tuple, np.ndarray)) else [value]
  return {**record, "captions": [reference_text(as_str(t)) for t in texts]}


def caption_field_view(source, field: str) -> RecordView:
  """A split's records with `captions`, the references the trainer and the scorers read, taken from another text
  field (`dataset.caption_field`: one caption, or a sequence of them) in the vocabulary's form."""
  return RecordView(source, functools.partial(_field_captions, field))


_NOT_CAPTIONS = ("url", "key", "flags", "file_name", "domain")  # text fields of the builders here that hold no caption


def _text_fields(features) -> list[str]:
  """The fields `caption_field` may name: text, or sequences of text, that hold captions."""
  import tensorflow_datasets as tfds  # noqa: PLC0415

  def is_text(feature) -> bool:
    inner = feature.feature if isinstance(feature, tfds.features.Sequence) else feature
    return isinstance(inner, tfds.features.Text)
  return sorted(name for name, feature in features.items() if is_text(feature) and name not in _NOT_CAPTIONS)


def _style_captions(style: str, where: str, record: dict[str, Any], index: int) -> dict[str, Any]:
  captions = stylized.captions(record, style)
  if not captions:
    found = sorted(stylized.styles(record))
    raise ConfigError(f"record {index} of {where} has no {style} caption (it has: {', '.join(found) or 'none'}) — "
                      "set --config.dataset.style to a style every record has")
  return {**record, "captions": captions}


def style_view(source, style: str, where: str) -> RecordView:
  """A stylized split's records with `captions` = their stylized captions of one style (`capjax.data.stylized`:
  stylized_scenes, flickrstyle10k and senticap records), so that a captioner trains on and is scored against that
  style only."""
  return RecordView(source, functools.partial(_style_captions, style, where))


@dataclasses.dataclass(frozen=True)
class ConcatSource:
  """The records of several sources one after another (a training split and an augmented dataset), each record
  holding only `image` and `captions`, the fields a captioner trains on, so that sources with other fields mix."""

  parts: tuple[Any, ...]

  def __post_init__(self):
    object.__setattr__(self, "_starts", np.cumsum([0] + [len(p) for p in self.parts]))

  def __len__(self) -> int:
    return int(self._starts[-1])

  def __getitem__(self, index: int) -> dict[str, Any]:
    index = int(index)
    if not 0 <= index < len(self):
      raise IndexError(f"index {index} out of range for {len(self)} records")
    part = int(np.searchsorted(self._starts, index, side="right")) - 1
    record = self.parts[part][index - int(self._starts[part])]
    return {key: record[key] for key in ("image", "captions", "start") if key in record}


def _with_start(start: str, record: dict[str, Any], index: int) -> dict[str, Any]:
  del index
  return {**record, "start": start}


def start_view(source, start: str) -> RecordView:
  """A source's records with `start`, the decoder start token of their captions: a style tag
  (`capjax.tokens.style_tag`) in a style-conditioned captioner's training records."""
  return RecordView(source, functools.partial(_with_start, start))


def _augmented_record(record: dict[str, Any], index: int) -> dict[str, Any]:
  del index
  return {"image": record["image"], "captions": [as_str(record["caption"])]}


def augmented_source(config: ml_collections.ConfigDict):
  """The `train` split of the augmented dataset `config.augmented` in `config.augmented_data_dir` (default: the
  dataset's data dir), read from its files (it has no builder code): its newest version."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  data_dir = os.path.expanduser(config.get("augmented_data_dir", "") or default_data_dir(config))
  root = os.path.join(data_dir, config.augmented)
  versions = sorted((d for d in (os.listdir(root) if os.path.isdir(root) else [])
                     if os.path.exists(os.path.join(root, d, "dataset_info.json"))),
                    key=lambda v: tuple(decimal(x) or 0 for x in v.split(".")))
  if not versions:
    raise DatasetNotBuiltError(
        f"dataset.augmented={config.augmented!r} is not in {data_dir} — write it with `python -m capjax.erg.augment "
        f"--stylized={config.name} --factual={config.name} --style={config.get('style') or 'STYLE'} "
        f"--output_dataset={config.augmented} --output_data_dir={data_dir} --generator=DIR --style_model=DIR`, or "
        "set --config.dataset.augmented_data_dir to where it is")
  _check_whole([os.path.join(root, versions[-1])], f"remove {root} and write it again with `python -m "
               f"capjax.erg.augment ... --output_dataset={config.augmented} --output_data_dir={data_dir}`")
  builder = tfds.builder_from_directory(os.path.join(root, versions[-1]))
  features = builder.info.features
  if "image" not in features or "caption" not in features:
    raise ConfigError(f"dataset.augmented={config.augmented!r} has no `image` and `caption` fields — give a dataset "
                      "written by `python -m capjax.erg.augment` from a factual dataset with images")
  style = as_str(builder.info.metadata.get("settings", {}).get("style", "")) if builder.info.metadata else ""
  if config.get("style") and style and style != config.style:
    raise ConfigError(f"dataset.augmented={config.augmented!r} holds {style} captions, not {config.style} ones — "
                      f"augment with --style={config.style}, or set --config.dataset.style={style}")
  if builder.info.splits["train"].num_examples == 0:
    raise ConfigError(f"dataset.augmented={config.augmented!r} holds no records (every generated caption was "
                      "filtered out: see its funnel.html) — augment more factual examples, or train without it")
  # One generated `caption` per record (`python -m capjax.erg.augment`), as the record's one reference.
  return RecordView(builder.as_data_source(split="train"), _augmented_record)


def train_source(config: ml_collections.ConfigDict):
  """The training records: `config.train_split`'s, followed by the augmented dataset's when `config.augmented`
  names one (ERG: a stylized split grown with generated pairs).

  With `config.factual_split` as well (a style-conditioned captioner, as multi-style captioners train), the
  factual captions of that split follow: each record then carries its captions' start token in `start`, the tag
  of `config.style` for the stylized and augmented records and the factual tag for these.
  """
  parts = [data_source(config, config.train_split)]
  if config.get("augmented"):
    parts.append(augmented_source(config))
  factual = config.get("factual_split", "")
  if not factual:
    return parts[0] if len(parts) == 1 else ConcatSource(tuple(parts))
  if not config.get("style"):
    raise ConfigError(f"dataset.factual_split={factual!r} conditions a stylized captioner on its style — set "
                      "--config.dataset.style too, or set dataset.factual_split=''")
  plain = replaced(config, style="")  # the factual records' own `captions`
  tagged = [start_view(p, style_tag(config.style)) for p in parts]
  return ConcatSource((*tagged, start_view(data_source(plain, factual), style_tag(FACTUAL))))


def data_source(config: ml_collections.ConfigDict, split: str):
  """The ArrayRecord random-access source of `split` (building embedded datasets on first use). `split` may be a
  TFDS slice ("train[:10000]", "train[10000:]"): a held-out part of a dataset released as one split; a slice that
  selects no record or reaches past the split (a dataset smaller than the config expects) is a ConfigError. With
  `caption_field` set, the records' `captions` come from that field (`caption_field_view`); with `style` set, they
  are the records' stylized captions of that style (`style_view`)."""
  builder = prepare(config)
  # "train+restval": TFDS reads several splits as one (Karpathy's COCO trains on both); each must be there
  bases = [part.split("[", 1)[0] for part in split.split("+")]
  for base in bases:
    if base not in builder.info.splits:
      part = "" if base == split else f" ({base!r})"
      raise ConfigError(f"split {split!r}{part} is not in {builder.name} — choose one of {sorted(builder.info.splits)}")
  base = bases[0] if len(bases) == 1 else split
  size = sum(builder.info.splits[b].num_examples for b in bases)
  if not size:
    raise ConfigError(f"split {split!r} of {builder.name} in {builder.data_dir} holds no example — choose another "
                      f"split (it has {sorted(builder.info.splits)}), or build the dataset from more data")
  k = max(1, size // 10)
  within = (f"set --config.dataset.train_split, eval_split and test_split to slices within it, e.g. {base}[{k}:] "
            f"and {base}[:{k}]")
  try:
    selected = builder.info.splits[split].num_examples
  except ValueError as e:  # TFDS: "Requested slice [10000:512] incompatible with 512 examples"
    # e.g. the cc12m variant's held-out first 10,000 examples, of a smaller dataset
    raise ConfigError(f"split {split!r} does not fit {builder.name}'s {base} split of {size:,} examples "
                      f"({str(e).strip().splitlines()[0]}) — {within}") from None
  if not selected:  # "validation[:0]": TFDS would fail on it with "Paths sequence can not be empty"
    raise ConfigError(f"split {split!r} of {builder.name} holds no examples (its {base} split has {size:,}) — "
                      f"{within}")
  source = builder.as_data_source(split=split)
  field = config.get("caption_field", "")
  style = config.get("style", "")
  if style:
    if field:
      raise ConfigError(f"dataset.style={style!r} and dataset.caption_field={field!r} both choose the captions — "
                        "set one of them to ''")
    if "stylized" not in builder.info.features:
      raise ConfigError(f"dataset.style={style!r}: {builder.name} has no `stylized` captions — use a stylized "
                        "dataset (stylized_scenes, flickrstyle10k, senticap) or set --config.dataset.style=''")
    return style_view(source, style, f"{builder.name}:{split}")
  texts = _text_fields(builder.info.features)
  if field:
    if field not in texts:
      raise ConfigError(f"dataset.caption_field={field!r}: {builder.name} has no such text field — use one of "
                        f"{', '.join(texts)}")
    return caption_field_view(source, field)
  if "captions" not in builder.info.features:
    raise ConfigError(f"{builder.name} has no `captions` field — choose the captions to train on with "
                      f"--config.dataset.caption_field, one of {', '.join(texts)}")
  return source


def pixel_source(config: ml_collections.ConfigDict, split: str):
  """The pixels behind a feature variant's split (records' `source_index` index it), or None when that
  dataset is not built here."""
  try:
    return data_source(replaced(config, features="", auto_build=False), split)
  except (DatasetNotBuiltError, ValueError) as e:
    logging.warning("no pictures for the gallery: %s", e)
    return None
