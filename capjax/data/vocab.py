"""The paper's word-level caption vocabulary: training-caption words seen at least `min_count` times.

Rarer words map to <UNK>; captions are truncated to `max_tokens` words and framed by BOS/EOS, padded with PAD.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Iterable, Sequence

import numpy as np

from capjax.tokens import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK, UNK_ID, is_style_tag
VOCAB_FILENAME = "vocab.txt"


def tokenize(caption: str) -> list[str]:
  """Captions are stored lowercased and tokenized (the released CC3M form): split on white space."""
  return caption.lower().split()


@dataclasses.dataclass(frozen=True)
class Vocabulary:
  """Word list whose first four entries are PAD, BOS, EOS, UNK."""

  words: tuple[str, ...]

  def __post_init__(self):
    if tuple(self.words[:4]) != SPECIALS:
      raise ValueError(f"a vocabulary starts with {SPECIALS}, got {self.words[:4]}")
    object.__setattr__(self, "_ids", {w: i for i, w in enumerate(self.words)})
    # What `decode` leaves out besides EOS: PAD, BOS and the style tags, inputs that are never a caption's words.
    object.__setattr__(self, "_not_words", {PAD_ID, BOS_ID} | {i for i, w in enumerate(self.words) if is_style_tag(w)})

  def __len__(self) -> int:
    return len(self.words)

  def ids(self, caption: str) -> list[int]:
    return [self._ids.get(w, UNK_ID) for w in tokenize(caption)]  # type: ignore[attr-defined]

  def id_of(self, word: str) -> int:
    """The id of `word`, which must be in the vocabulary (a start token: no <UNK> stands in for it)."""
    if word not in self._ids:  # type: ignore[attr-defined]
      raise KeyError(f"{word!r} is not in the vocabulary")
    return self._ids[word]  # type: ignore[attr-defined]

  def encode(self, caption: str, max_tokens: int, start: int = BOS_ID) -> tuple[np.ndarray, np.ndarray]:
    """Decoder inputs [start w1..wn] and targets [w1..wn EOS], n <= max_tokens, padded to max_tokens + 1; `start`
    is BOS, or a style tag's id in a style-conditioned captioner."""
    ids = self.ids(caption)[:max_tokens]
    inputs = np.full(max_tokens + 1, PAD_ID, np.int32)
    targets = np.full(max_tokens + 1, PAD_ID, np.int32)
    inputs[0] = start
    inputs[1:len(ids) + 1] = ids
    targets[:len(ids)] = ids
    targets[len(ids)] = EOS_ID
    return inputs, targets

  def decode(self, ids: Sequence[int]) -> str:
    """Words up to the first EOS; PAD, BOS and style tags are dropped."""
    words = []
    for i in ids:
      i = int(i)
      if i == EOS_ID:
        break
      if i in self._not_words:  # type: ignore[attr-defined]
        continue
      words.append(self.words[i] if 0 <= i < len(self.words) else UNK)
    return " ".join(words)

  def save(self, directory: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, VOCAB_FILENAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.write("\n".join(self.words) + "\n")
    os.replace(tmp, path)
    return path

  @classmethod
  def load(cls, directory: str) -> Vocabulary:
    """The vocabulary saved in `directory`; ValueError naming the file when it is damaged (emptied, cut short
    before its specials, not UTF-8)."""
    path = os.path.join(directory, VOCAB_FILENAME)
    try:
      with open(path, encoding="utf-8") as f:
        return cls(tuple(line.rstrip("\n") for line in f if line.rstrip("\n")))
    except (UnicodeDecodeError, ValueError) as error:
      raise ValueError(f"{path} is damaged ({' '.join(str(error).split())[:200]})") from error


def build_vocabulary(captions: Iterable[str], min_count: int = 4, starts: Sequence[str] = ()) -> Vocabulary:
  """Words seen at least `min_count` times, most frequent first (ties alphabetical, so it is deterministic), after
  the specials and the start tokens `starts` (style tags: inputs only, never in a caption)."""
  counts = collections.Counter(w for c in captions for w in tokenize(c))
  kept = sorted((w for w, n in counts.items() if n >= min_count and w not in SPECIALS),
                key=lambda w: (-counts[w], w))
  return Vocabulary(SPECIALS + tuple(starts) + tuple(kept))
