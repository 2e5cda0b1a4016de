"""capjax.data.stylized: the one reader of a record's stylized captions, as TFDS hands them back (bytes) or as a
builder yields them (str)."""

from __future__ import annotations

import numpy as np

from capjax.data import stylized

RECORD = {"stylized": {
    "style": [b"romantic", b"humorous", b"romantic"],
    "caption": [b"a red circle waiting for true love", b"a red circle hiding from homework", b"a circle in love"],
    "phrase": [b"waiting for true love", b"hiding from homework"],  # the third has no planted phrase
    "phrase_start": np.asarray([3, 3, 0], np.int32), "phrase_end": np.asarray([7, 6, 0], np.int32)}}


def test_entries_decode_each_caption_and_cut_the_planted_phrase_out_of_its_content():
  assert stylized.entries(RECORD) == [
      stylized.StylizedCaption("romantic", "a red circle waiting for true love", "waiting for true love",
                               "a red circle"),
      stylized.StylizedCaption("humorous", "a red circle hiding from homework", "hiding from homework",
                               "a red circle"),
      stylized.StylizedCaption("romantic", "a circle in love")]
  # Without spans (flickrstyle10k, senticap): no content; without the field: None, and no captions.
  plain = {"stylized": {"style": ["romantic"], "caption": ["a dog in love"]}}
  assert stylized.entries(plain) == [stylized.StylizedCaption("romantic", "a dog in love")]
  assert stylized.entries({"captions": [b"a dog"]}) is None
  assert stylized.captions({"captions": [b"a dog"]}, "romantic") == []


def test_captions_and_styles_of_a_record():
  assert stylized.captions(RECORD, "romantic") == ["a red circle waiting for true love", "a circle in love"]
  assert stylized.captions(RECORD, "sad") == []
  assert stylized.styles(RECORD) == {"romantic", "humorous"}
