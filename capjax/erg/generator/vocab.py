"""The generator's two vocabularies: `WordVocab` (a model trained from scratch: `capjax.tokens.SPECIALS`, `[CLS]`,
`[SEP]`, the training words) and `BPEVocab` (imported GPT-2 weights: GPT-2's byte-level BPE plus four added ids;
`token_map` swaps `capjax.decode`'s PAD/BOS/EOS ids with the model's)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from capjax import tokens
from capjax.text_models import tokenizers

CLS, SEP = "[CLS]", "[SEP]"
BPE_FILES = ("vocab.json", "merges.txt")


class WordVocab:
  """Whitespace words: `capjax.tokens.SPECIALS` (ids 0-3), `[CLS]`, `[SEP]`, then `words` in the given order."""

  kind = "word"

  def __init__(self, words: Sequence[str]):
    self.words = list(tokens.SPECIALS) + [CLS, SEP] + [w for w in words if w not in tokens.SPECIALS + (CLS, SEP)]
    self.index = {w: i for i, w in enumerate(self.words)}
    # What text can spell: a caption holding "[SEP]" or "<EOS>" gets <UNK> there, never the special id.
    self.text_index = {w: i for w, i in self.index.items() if w not in tokens.SPECIALS + (CLS, SEP)}
    self.pad_id, self.bos_id, self.eos_id = tokens.PAD_ID, tokens.BOS_ID, tokens.EOS_ID
    self.cls_id, self.sep_id = self.index[CLS], self.index[SEP]
    self.size = len(self.words)
    self.token_map: np.ndarray | None = None  # decode ids are model ids

  @classmethod
  def from_texts(cls, texts: Iterable[str]) -> WordVocab:
    return cls(sorted({w for text in texts for w in text.split()}))

  def encode(self, text: str) -> list[int]:
    return [self.text_index.get(w, tokens.UNK_ID) for w in text.split()]

  def decode(self, ids: Sequence[int]) -> str:
    return " ".join(self.words[int(i)] for i in ids)

  def to_json(self) -> dict[str, Any]:
    return {"kind": self.kind, "words": self.words[len(tokens.SPECIALS) + 2:]}


class BPEVocab:
  """GPT-2's byte-level BPE plus added `[CLS]`, `[SEP]`, `<BOS>`, `<PAD>` ids after its vocabulary."""

  kind = "bpe"

  def __init__(self, directory: str | pathlib.Path):
    self.directory = pathlib.Path(directory)
    self.bpe = tokenizers.ByteLevelBPE(*(self.directory / name for name in BPE_FILES))
    base = len(self.bpe.vocab)
    self.cls_id, self.sep_id, self.bos_id, self.pad_id = base, base + 1, base + 2, base + 3
    self.eos_id = self.bpe.vocab["<|endoftext|>"]
    self.size = base + 4
    # decode's PAD/BOS/EOS (0, 1, 2) swapped with this model's ids: its own inverse.
    self.token_map = np.arange(self.size, dtype=np.int32)
    for decode_id, model_id in ((tokens.PAD_ID, self.pad_id), (tokens.BOS_ID, self.bos_id),
                                (tokens.EOS_ID, self.eos_id)):
      self.token_map[[decode_id, model_id]] = self.token_map[[model_id, decode_id]]

  def encode(self, text: str) -> list[int]:
    return self.bpe.encode(" " + text.strip())

  def decode(self, ids: Sequence[int]) -> str:
    return self.bpe.decode([int(i) for i in ids if int(i) < len(self.bpe.vocab)]).strip()

  def to_json(self) -> dict[str, Any]:
    return {"kind": self.kind}


Vocab = WordVocab | BPEVocab
