"""stylized_scenes: style phrases planted in synthetic scenes' canonical captions, deterministic from the seed,
with the planted phrase and its span recorded; the `tiny` build read back with tfds.data_source.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow_datasets as tfds

import tfds_builders.stylized_scenes  # noqa: F401  (registers the builder)
from capjax import scenes
from capjax.data import sources
from capjax.scenes import grammar, stylized
from tfds_builders.stylized_scenes import stylized_scenes_dataset_builder as builder_module

SIZES = {"train": 64, "validation": 16, "test": 16, "factual": 128}


def test_phrases_use_no_scene_word_and_the_styles_share_none():
  words = {style: {w for phrase in phrases for w in phrase.split()} for style, phrases in stylized.PHRASES.items()}
  assert not (words["romantic"] | words["humorous"]) & set(grammar.VOCABULARY)
  assert not words["romantic"] & words["humorous"]
  assert {style: len(set(phrases)) for style, phrases in stylized.PHRASES.items()} == {"romantic": 12, "humorous": 12}
  assert all(2 <= len(p.split()) <= 4 for phrases in stylized.PHRASES.values() for p in phrases)


@pytest.mark.parametrize("factual,placement,caption,span", [
    ("a small red circle to the left of a large blue square", "after_subject",
     "a small red circle in love to the left of a large blue square", (4, 6)),
    ("a small red circle to the left of a large blue square", "end",
     "a small red circle to the left of a large blue square in love", (12, 14)),
    ("two small red circles and a large green square", "after_subject",
     "two small red circles in love and a large green square", (4, 6)),
    ("a large orange diamond", "after_subject", "a large orange diamond in love", (4, 6)),
])
def test_graft_plants_the_phrase_after_the_first_noun_phrase_or_at_the_end(factual, placement, caption, span):
  grafted = stylized.graft(factual, "in love", "romantic", placement)
  assert grafted == stylized.StylizedCaption("romantic", caption, "in love", *span, factual)


def test_the_first_examples_of_seed_0_exactly():
  factual = {index: scenes.make_example(0, 0, index).captions[0] for index in (0, 2)}
  got = [(c.style, c.caption, c.phrase, c.start, c.end)
         for index in (0, 2) for c in stylized.stylized_captions(0, 0, index, factual[index])]
  assert got == [
      ("romantic", "a large red circle waiting for true love , a small yellow triangle and a large green square",
       "waiting for true love", 4, 8),
      ("humorous", "a large red circle , a small yellow triangle and a large green square hiding from homework",
       "hiding from homework", 14, 17),
      ("romantic", "a large blue triangle to the left of a large yellow square on honeymoon", "on honeymoon", 12, 14),
      ("humorous", "a large blue triangle to the left of a large yellow square juggling pizzas", "juggling pizzas",
       12, 14),
  ]


def test_captions_are_deterministic_and_every_span_is_its_phrase():
  config = builder_module.StylizedScenesConfig(name="t", num_train=200, num_validation=0, num_test=0, num_factual=0)
  first = list(builder_module.generate_split(config, "train"))
  again = list(builder_module.generate_split(config, "train"))
  phrases, places = collections.Counter(), collections.Counter()
  for (index, record), (_, repeat) in zip(first, again):
    assert record["stylized"]["caption"] == repeat["stylized"]["caption"] and record["image"] == repeat["image"]
    s = record["stylized"]
    assert s["style"] == ["romantic", "humorous"]
    for caption, phrase, start, end in zip(s["caption"], s["phrase"], s["phrase_start"], s["phrase_end"]):
      words = caption.split()
      assert words[start:end] == phrase.split()
      assert " ".join(words[:start] + words[end:]) == record["captions"][0]
      phrases[phrase] += 1
      places[end == len(words)] += 1
  assert len(phrases) == 24 and places[True] > places[False] > 0  # both places (one-object scenes are "end" twice)


def test_the_scenes_are_synthetic_scenes_own_and_the_factual_split_has_no_stylized_captions():
  config = builder_module.Builder.BUILDER_CONFIGS[1]
  (_, train3), = [(i, r) for i, r in builder_module.generate_split(config, "train") if i == 3]
  example = scenes.make_example(0, 0, 3)
  assert train3["image"] == example.png and train3["captions"] == example.captions
  _, factual0 = next(builder_module.generate_split(config, "factual"))
  assert factual0["captions"] == scenes.make_example(0, 3, 0).captions
  assert factual0["stylized"]["caption"] == [] and len(factual0["stylized"]["phrase_start"]) == 0


@pytest.fixture(scope="module")
def data_dir(stylized_tiny_data_dir):
  """The session's `tiny` build (tests/trained_models.py, shared with test_erg_augment)."""
  return stylized_tiny_data_dir


def test_the_tiny_build_reads_back_with_data_source(data_dir):
  read = {split: tfds.data_source("stylized_scenes/tiny", split=split, data_dir=data_dir) for split in SIZES}
  assert {split: len(source) for split, source in read.items()} == SIZES
  record = read["train"][0]
  assert record["stylized"]["phrase"] == [b"waiting for true love", b"hiding from homework"]
  assert list(record["stylized"]["phrase_start"]) == [4, 14] and list(record["stylized"]["phrase_end"]) == [8, 17]
  assert record["image"].shape == (64, 64, 3) and record["image"].dtype == np.uint8
  assert read["factual"][5]["stylized"]["style"] == [] and len(read["factual"][5]["captions"]) == 4


def test_capjax_knows_the_builder_and_builds_it_on_first_use(tmp_path):
  assert sources.KNOWN_BUILDERS["stylized_scenes"][0] == "tfds_builders.stylized_scenes"
  import ml_collections

  config = ml_collections.ConfigDict({"name": "stylized_scenes", "builder_config": "tiny", "data_dir": str(tmp_path),
                                      "auto_build": True, "features": ""})
  assert len(sources.data_source(config, "validation")) == 16


def test_a_style_conditioned_training_source_tags_each_record_with_its_start_token(data_dir):
  """dataset.factual_split: the style's captions, then the factual split's, each record with the tag its captions
  start from; the training batches start each caption with that tag's id, and decoding starts from the style's."""
  import ml_collections

  from capjax import train
  from capjax.config_util import ConfigError
  from capjax.data import pipeline
  config = ml_collections.ConfigDict({
      "seed": 0, "max_caption_tokens": 24, "batch_size": 200, "vocab": {"min_count": 1},
      "augment": {"crop": False, "crop_min_scale": 0.5, "color": False}, "input": {"num_threads": 1, "prefetch": 1},
      "dataset": {"name": "stylized_scenes", "builder_config": "tiny", "data_dir": str(data_dir), "auto_build": False,
                  "features": "", "image_size": 64, "train_split": "train", "style": "romantic", "augmented": "",
                  "factual_split": "factual[:100]"}})
  source = sources.train_source(config.dataset)
  assert len(source) == 64 + 100
  train_record, factual_record = source[0], source[64 + 5]
  assert train_record["start"] == "<ROMANTIC>" and factual_record["start"] == "<FACTUAL>"
  stylized_0 = tfds.data_source("stylized_scenes/tiny", split="train", data_dir=data_dir)[0]["stylized"]
  assert train_record["captions"] == [stylized_0["caption"][0].decode()]  # the romantic one
  factual_5 = tfds.data_source("stylized_scenes/tiny", split="factual", data_dir=data_dir)[5]
  assert factual_record["captions"] == factual_5["captions"] and len(factual_record["captions"]) == 4

  from capjax.data.vocab import build_vocabulary
  vocab = build_vocabulary(pipeline.split_captions(source), 1, train.start_tokens(config))
  assert vocab.words[4:6] == ("<ROMANTIC>", "<FACTUAL>") and train.decode_start(config, vocab) == 4
  batch = next(pipeline.train_iterator(config, source, vocab, "image"))
  starts = batch["inputs"][:, 0]
  assert set(starts.tolist()) == {4, 5} and 0 < (starts == 4).sum() < 200  # both kinds of record, by their tags
  romantic_words = {vocab.id_of(w) for phrase in stylized.PHRASES["romantic"] for w in phrase.split()}
  for inputs, targets in zip(batch["inputs"], batch["targets"]):  # only the romantic captions hold a phrase word
    assert bool(romantic_words & set(targets.tolist())) == (inputs[0] == 4)

  config.dataset.style = ""
  with pytest.raises(ConfigError, match=r"dataset.factual_split='factual\[:100\]' conditions a stylized captioner"):
    sources.train_source(config.dataset)
  with pytest.raises(ConfigError, match="the vocabulary has no <ROMANTIC>"):
    config.dataset.style = "romantic"
    train.decode_start(config, build_vocabulary(["a b"], 1))
