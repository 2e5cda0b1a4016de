"""Specification of capjax.metrics.ngrams, the n-gram counts BLEU and CIDEr-D share (their parity with
pycocoevalcap is in test_metrics_scorers.py)."""

from capjax.metrics.ngrams import count_ngrams


def test_counted_ngrams_spell_back_with_their_counts():
  counts = count_ngrams(["a b a b", "", "b a"], n=2)
  rows = sorted(zip(counts.texts(counts.gram), counts.caption.tolist(), counts.count.tolist()))
  assert rows == [("a", 0, 2), ("a", 2, 1), ("a b", 0, 2), ("b", 0, 2), ("b", 2, 1), ("b a", 0, 1), ("b a", 2, 1)]
  assert counts.lengths.tolist() == [4, 0, 2]


def test_a_caption_holding_the_separator_is_still_one_word_there():
  # Captions are joined by "\x00" for one fast split; a caption that holds it is split on its own instead.
  counts = count_ngrams(["a\x00b a", "a"], n=1)
  rows = sorted(zip(counts.texts(counts.gram), counts.caption.tolist(), counts.count.tolist()))
  assert rows == [("a", 0, 1), ("a", 1, 1), ("a\x00b", 0, 1)]
  assert counts.lengths.tolist() == [2, 1]
