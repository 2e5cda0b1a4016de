"""A generator's directory: `generator.json` (GPT-2 config, vocabulary, layout), the BPE files when it has them,
`variables/` (its parameters, orbax)."""

from __future__ import annotations

import json
import pathlib
import shutil

import flax.linen as nn
import jax
import numpy as np

from capjax.erg.generator.model import Generator, GeneratorError
from capjax.erg.generator.vocab import BPE_FILES, BPEVocab, Vocab, WordVocab
from capjax.text_models import gpt2 as gpt2_lib
from capjax.text_models import tokenizers

GENERATOR_FILE = "generator.json"
VARIABLES_DIR = "variables"
TRAIN_HINT = "train one with `python -m capjax.erg.generate --train --output=DIR`"


def save(generator: Generator, directory: str | pathlib.Path) -> pathlib.Path:
  """`generator.json` (GPT-2 config, vocabulary, layout), the BPE files when it has them, `variables/` (orbax)."""
  import orbax.checkpoint as ocp  # noqa: PLC0415 (only saving and loading need orbax)
  directory = pathlib.Path(directory).resolve()
  directory.mkdir(parents=True, exist_ok=True)
  if isinstance(generator.vocab, BPEVocab):
    for name in BPE_FILES:
      shutil.copyfile(generator.vocab.directory / name, directory / name)
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(directory / VARIABLES_DIR, jax.tree.map(np.asarray, generator.params), force=True)
  meta = {"gpt2": generator.config.to_dict(), "vocab": generator.vocab.to_json(),
          "prompt_length": generator.prompt_length, "caption_length": generator.caption_length}
  (directory / GENERATOR_FILE).write_text(json.dumps(meta, indent=2) + "\n")
  return directory


def load(directory: str | pathlib.Path) -> Generator:
  """The generator saved in `directory`; a GeneratorError when it is not one."""
  import orbax.checkpoint as ocp  # noqa: PLC0415
  directory = pathlib.Path(directory).resolve()
  try:
    meta = json.loads((directory / GENERATOR_FILE).read_text(encoding="utf-8"))
    config = gpt2_lib.GPT2Config.from_dict(meta["gpt2"])
    vocab: Vocab = BPEVocab(directory) if meta["vocab"]["kind"] == "bpe" else WordVocab(meta["vocab"]["words"])
    prompt_length, caption_length = int(meta["prompt_length"]), int(meta["caption_length"])
  except FileNotFoundError as error:
    raise GeneratorError(f"{directory} is not a generator checkpoint ({error.filename} is missing) — "
                         f"{TRAIN_HINT}") from error
  except (ValueError, KeyError, TypeError, tokenizers.TokenizerError) as error:
    raise GeneratorError(f"{directory / GENERATOR_FILE} is not a readable generator description ({error}) — "
                         f"{TRAIN_HINT}") from error
  if vocab.size != config.vocab_size or prompt_length + caption_length > config.n_positions:
    raise GeneratorError(f"{directory / GENERATOR_FILE} does not agree with itself (vocabulary {vocab.size} vs "
                         f"{config.vocab_size} rows, or {prompt_length}+{caption_length} positions > "
                         f"{config.n_positions}) — {TRAIN_HINT}")
  target = jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), nn.meta.unbox(gpt2_lib.abstract_params(config)))
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      params = checkpointer.restore(directory / VARIABLES_DIR, target)
  except Exception as error:  # orbax raises many types for a missing or foreign checkpoint
    raise GeneratorError(f"{directory / VARIABLES_DIR} does not hold this generator's parameters "
                         f"({type(error).__name__}) — {TRAIN_HINT}") from error
  for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(target)):
    if np.shape(got) != want.shape:
      raise GeneratorError(f"{directory / VARIABLES_DIR} holds a parameter of shape {np.shape(got)} where the "
                           f"config needs {want.shape} — {TRAIN_HINT}")
  return Generator(config, jax.tree.map(np.asarray, params), vocab, prompt_length, caption_length)
