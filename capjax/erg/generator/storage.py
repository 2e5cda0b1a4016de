"""A generator's directory: `generator.json` (GPT-2 config, vocabulary, layout), the BPE files when it has them,
`variables/` (its parameters), written and read through `capjax.model_io`."""

from __future__ import annotations

import json
import pathlib

import flax.linen as nn
from capjax import model_io
from capjax.erg.generator.model import Generator, GeneratorError
from capjax.erg.generator.vocab import BPE_FILES, BPEVocab, Vocab, WordVocab
from capjax.text_models import gpt2 as gpt2_lib
from capjax.text_models import tokenizers

GENERATOR_FILE = "generator.json"
VARIABLES_DIR = "variables"
TRAIN_HINT = "train one with `python -m capjax.erg.generate --train --output=DIR`"


def save(generator: Generator, directory: str | pathlib.Path) -> pathlib.Path:
  """`generator.json` (GPT-2 config, vocabulary, layout), the BPE files when it has them, `variables/` (orbax)."""
  meta = {"gpt2": generator.config.to_dict(), "vocab": generator.vocab.to_json(),
          "prompt_length": generator.prompt_length, "caption_length": generator.caption_length}
  copies = ({name: generator.vocab.directory / name for name in BPE_FILES} if isinstance(generator.vocab, BPEVocab)
            else {})
  text = json.dumps(meta, indent=2) + "\n"
  return model_io.save(directory, {VARIABLES_DIR: generator.params}, {GENERATOR_FILE: text}, copies)


def load(directory: str | pathlib.Path) -> Generator:
  """The generator saved in `directory`; a GeneratorError when it is not one."""
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
  try:
    params = model_io.restore(directory / VARIABLES_DIR, nn.meta.unbox(gpt2_lib.abstract_params(config)))
  except model_io.ShapeError as error:
    raise GeneratorError(f"{directory / VARIABLES_DIR} holds a parameter of shape {error.got} where the config needs "
                         f"{error.want} — {TRAIN_HINT}") from error
  except model_io.RestoreError as error:
    raise GeneratorError(f"{directory / VARIABLES_DIR} does not hold this generator's parameters "
                         f"({type(error.cause).__name__}) — {TRAIN_HINT}") from error
  return Generator(config, params, vocab, prompt_length, caption_length)
