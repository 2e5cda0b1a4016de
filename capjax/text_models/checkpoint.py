"""A converted text-model directory: `config.json` (Hugging Face field names plus capjax's `pooler` and
`do_lower_case` for BERT, `image_mean` and `image_std` for CLIP), the tokenizer files, `metadata.json` (source
checksum) and the parameters as an orbax checkpoint in `variables/`. Written by
`python -m capjax.tools.convert_weights --format=hf_bert|hf_gpt2|hf_clip`.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import pathlib
import stat
from collections.abc import Mapping
from typing import Any

import flax.linen as nn

from capjax import files, model_io
from capjax.model_io import WeightsError
from capjax.text_models import bert as bert_lib
from capjax.text_models import clip as clip_lib
from capjax.text_models import gpt2 as gpt2_lib
from capjax.text_models.config import ConfigError

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
VARIABLES_DIR = "variables"
TOKENIZER_FILES = {"bert": ("vocab.txt",), "gpt2": ("vocab.json", "merges.txt"), "clip": ("vocab.json", "merges.txt")}
CONVERT = ("convert it with `python -m capjax.tools.convert_weights --format=hf_bert|hf_gpt2|hf_clip --input=HF_DIR "
           "--output=DIR`")
Config = bert_lib.BertConfig | gpt2_lib.GPT2Config | clip_lib.CLIPConfig
# Each kind's config class, module and abstract parameters.
KINDS: dict[str, tuple[Any, Any, Any]] = {
    "bert": (bert_lib.BertConfig, bert_lib.Bert, bert_lib.abstract_params),
    "gpt2": (gpt2_lib.GPT2Config, gpt2_lib.GPT2, gpt2_lib.abstract_params),
    "clip": (clip_lib.CLIPConfig, clip_lib.CLIP, clip_lib.abstract_params),
}


@dataclasses.dataclass(frozen=True)
class TextModel:
  kind: str                                       # "bert", "gpt2" or "clip"
  config: Config
  params: dict[str, Any]
  directory: pathlib.Path

  def module(self) -> nn.Module:
    return KINDS[self.kind][1](self.config)


def parse_config(kind: str, config: Mapping[str, Any]) -> Config:
  return KINDS[kind][0].from_dict(config)


def abstract_params(config: Config) -> Any:
  return next(params for cls, _, params in KINDS.values() if isinstance(config, cls))(config)


def save(directory: str | pathlib.Path, kind: str, config: Config,
         params: Mapping[str, Any], metadata: Mapping[str, Any], tokenizer_dir: str | pathlib.Path, *,
         more_trees: Mapping[str, Any] | None = None, more_texts: Mapping[str, str] | None = None) -> pathlib.Path:
  """Writes the converted model; the tokenizer files are copied from `tokenizer_dir`. `more_trees` and
  `more_texts` (a fine-tuned model's head and its description) are saved with it, their texts last."""
  texts = {CONFIG_FILE: json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n",
           METADATA_FILE: json.dumps(dict(metadata), indent=2, sort_keys=True) + "\n", **(more_texts or {})}
  copies = {name: pathlib.Path(tokenizer_dir) / name for name in TOKENIZER_FILES[kind]}
  return model_io.save(directory, {VARIABLES_DIR: dict(params), **(more_trees or {})}, texts, copies)


def read_json(path: pathlib.Path) -> dict[str, Any]:
  """A JSON object from `path`, or a WeightsError that names the file (a FIFO or a device is refused before it is
  opened: reading one would block or never end)."""
  try:
    mode = path.stat().st_mode
    text = path.read_text(encoding="utf-8") if stat.S_ISREG(mode) else None
    value = json.loads(text) if text is not None else None
  except FileNotFoundError as error:
    raise WeightsError(f"{path} is missing") from error
  except (ValueError, OSError) as error:  # not UTF-8, not JSON, unreadable
    raise WeightsError(f"{path} is not readable JSON ({error})") from error
  if text is None:
    raise WeightsError(f"{path} is {files.kind(mode)}, not a regular file")
  if not isinstance(value, dict):
    raise WeightsError(f"{path} must hold a JSON object")
  return value


def load(directory: str | pathlib.Path, kind: str | None = None) -> TextModel:
  """The converted model in `directory`; `kind` ("bert"/"gpt2"/"clip"), if given, is required. Every failure is a
  WeightsError whose message says what is wrong and how to convert again."""
  try:  # a link that leads back to itself: Python 3.11's resolve raises RuntimeError, later ones do not resolve it
    os.stat(directory)
  except OSError as error:
    if error.errno == errno.ELOOP:
      raise WeightsError(f"{directory} is a symlink loop (a link that leads back to itself) — give the converted "
                         "folder itself") from None
  directory = pathlib.Path(directory).resolve()
  try:
    if directory.exists() and not directory.is_dir():
      raise WeightsError(f"{directory} is not a folder (a conversion writes one)")
    raw = read_json(directory / CONFIG_FILE)
    found = raw.get("model_type")
    if found not in TOKENIZER_FILES:
      raise WeightsError(f"{directory / CONFIG_FILE} has model_type {found!r}, not 'bert', 'gpt2' or 'clip'")
    if kind is not None and found != kind:
      raise WeightsError(f"{directory} holds a {found} model, not a {kind} one")
    config = parse_config(found, raw)
    for name in TOKENIZER_FILES[found]:
      if not (directory / name).is_file():
        raise WeightsError(f"{directory / name} is missing")
  except (WeightsError, ConfigError) as error:
    raise WeightsError(f"{error} — {CONVERT}") from error
  try:
    params = model_io.restore(directory / VARIABLES_DIR, nn.meta.unbox(abstract_params(config)))
  except model_io.RestoreError as error:  # a missing, cut or foreign checkpoint
    cause = error.cause
    raise WeightsError(f"{directory / VARIABLES_DIR} does not hold the parameters {directory / CONFIG_FILE} describes "
                       f"({type(cause).__name__}: {' '.join(str(cause).split())[:200]}) — {CONVERT}") from error
  except model_io.ShapeError as error:
    raise WeightsError(f"{directory / VARIABLES_DIR} does not hold the parameters {directory / CONFIG_FILE} "
                       f"describes ({'/'.join(error.keys)} has shape {error.got}, the config needs "
                       f"{error.want if error.want is not None else 'no such parameter'}) — {CONVERT}") from error
  return TextModel(found, config, params, directory)
