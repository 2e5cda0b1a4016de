"""The special tokens every caption vocabulary starts with, their ids, and the style tags that a style-conditioned
captioner starts from: what decoding, training and the vocabulary agree on, kept below all three so that decoding
needs nothing from the data package.
"""

from __future__ import annotations

PAD, BOS, EOS, UNK = "<PAD>", "<BOS>", "<EOS>", "<UNK>"
SPECIALS: tuple[str, ...] = (PAD, BOS, EOS, UNK)  # the first four words of every vocabulary, in id order
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(len(SPECIALS))

# Token ids are int32 (the decoder's inputs, the vocabulary's ids): an embedding table, padding rows included, has
# at most this many rows.
MAX_VOCAB_SIZE = 2**31 - 1

FACTUAL = "factual"  # the style of plain captions, in a captioner conditioned on styles


def style_tag(style: str) -> str:
  """The decoder's start token for captions of `style` in a style-conditioned captioner (`dataset.factual_split`):
  it takes BOS's place, as a target-language tag does in multilingual translation, and no caption word can equal
  it (captions are lowercased and `<...>` words are never kept)."""
  return f"<{style.upper()}>"


def is_style_tag(word: str) -> bool:
  """Whether `word` is a start token of `style_tag` (never a caption word: those are lowercase)."""
  return len(word) > 2 and word[0] == "<" and word[-1] == ">" and word.isupper() and word not in SPECIALS
