"""The special tokens every caption vocabulary starts with, and their ids: what decoding, training and the
vocabulary agree on, kept below all three so that decoding needs nothing from the data package.
"""

from __future__ import annotations

PAD, BOS, EOS, UNK = "<PAD>", "<BOS>", "<EOS>", "<UNK>"
SPECIALS: tuple[str, ...] = (PAD, BOS, EOS, UNK)  # the first four words of every vocabulary, in id order
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(len(SPECIALS))
