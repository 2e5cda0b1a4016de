"""The paper's vocabulary: words seen >= 4 times in training captions, 15-token captions, BOS/EOS/PAD."""

import numpy as np
import pytest

from capjax.data.vocab import Vocabulary, build_vocabulary
from capjax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def _captions(tsv):
  with open(tsv, encoding="utf-8") as f:
    return [line.split("\t")[0] for line in f]


def test_cc3m_validation_vocabulary_size(cc3m_validation_tsv):
  # ../shared/README.md: 10,898 unique tokens, 3,916 of them with frequency >= 4.
  vocab = build_vocabulary(_captions(cc3m_validation_tsv), min_count=4)
  assert len(vocab) == 3916 + 4
  assert vocab.words[:4] == ("<PAD>", "<BOS>", "<EOS>", "<UNK>")
  assert len(build_vocabulary(_captions(cc3m_validation_tsv), min_count=1)) == 10898 + 4


def test_rare_words_become_unk_and_order_is_by_frequency():
  vocab = build_vocabulary(["a dog", "a dog", "a cat", "a dog", "zebra"], min_count=2)
  assert vocab.words[4:] == ("a", "dog")
  assert vocab.ids("a zebra dog") == [4, UNK_ID, 5]


def test_encode_truncates_to_max_tokens_and_frames_with_bos_eos():
  vocab = Vocabulary(("<PAD>", "<BOS>", "<EOS>", "<UNK>", "a", "b"))
  inputs, targets = vocab.encode("a b a b a", max_tokens=3)
  np.testing.assert_array_equal(inputs, [BOS_ID, 4, 5, 4])
  np.testing.assert_array_equal(targets, [4, 5, 4, EOS_ID])
  inputs, targets = vocab.encode("b", max_tokens=3)
  np.testing.assert_array_equal(inputs, [BOS_ID, 5, PAD_ID, PAD_ID])
  np.testing.assert_array_equal(targets, [5, EOS_ID, PAD_ID, PAD_ID])


def test_start_tokens_follow_the_specials_and_start_the_inputs():
  """A style-conditioned captioner's tags (capjax.tokens.style_tag) are words of their own, ids 4 and 5 here, and
  take BOS's place in front of a caption. Captions are lowercased, so no caption word is ever a tag."""
  vocab = build_vocabulary(["a dog", "a cat", "<ROMANTIC>"], min_count=1, starts=("<ROMANTIC>", "<FACTUAL>"))
  assert vocab.words == ("<PAD>", "<BOS>", "<EOS>", "<UNK>", "<ROMANTIC>", "<FACTUAL>", "a", "<romantic>", "cat",
                         "dog")
  assert vocab.id_of("<FACTUAL>") == 5
  with pytest.raises(KeyError, match="'<HUMOROUS>' is not in the vocabulary"):
    vocab.id_of("<HUMOROUS>")
  inputs, targets = vocab.encode("a dog", max_tokens=3, start=vocab.id_of("<ROMANTIC>"))
  np.testing.assert_array_equal(inputs, [4, 6, 9, PAD_ID])
  np.testing.assert_array_equal(targets, [6, 9, EOS_ID, PAD_ID])
  assert vocab.decode([4, 6, 5, 9, 7, EOS_ID, 8]) == "a dog <romantic>"  # a tag is no word of a caption


def test_decode_stops_at_eos_and_skips_pad_and_bos():
  vocab = Vocabulary(("<PAD>", "<BOS>", "<EOS>", "<UNK>", "a", "b"))
  assert vocab.decode([BOS_ID, 4, 5, EOS_ID, 4, 4]) == "a b"
  assert vocab.decode([4, PAD_ID, 3]) == "a <UNK>"


def test_save_load_roundtrip(tmp_path):
  vocab = build_vocabulary(["x y z"] * 4, min_count=4)
  vocab.save(str(tmp_path))
  assert Vocabulary.load(str(tmp_path)) == vocab


def test_a_vocabulary_must_start_with_the_special_tokens():
  with pytest.raises(ValueError, match="starts with"):
    Vocabulary(("a", "b"))
