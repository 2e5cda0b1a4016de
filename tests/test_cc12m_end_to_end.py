"""cc12m_llavanext end to end: a generated manual dir → the builder (`clean`) → `configs/t2t.py:cc12m,debug` on
pixels trains two steps on each caption field (`dataset.caption_field`) and scores the held-out slice; the
vocabulary is the chosen field's words, in the Penn Treebank tokens the trainer reads, and no caption is cut.
"""

from __future__ import annotations

import os
import re

import pytest
import tensorflow_datasets as tfds

from capjax import config_util
from tfds_builders.cc12m_llavanext import join
from tfds_builders.cc12m_llavanext import make_dummy_data as dummy

pytestmark = pytest.mark.slow  # builds and trains end to end (conftest.py: the slow rule)

NUM_ROWS, HELD_OUT = 24, 8  # whole batches of 8 (the tests' 8 CPU devices)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("cc12m_e2e")
  dummy.write_clean(root / "manual", NUM_ROWS)
  tfds.builder("cc12m_llavanext/clean", data_dir=root / "tfds").download_and_prepare(
      file_format="array_record", download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(root / "manual")))
  return root / "tfds"


def _config(field: str, data_dir) -> config_util.ml_collections.ConfigDict:
  """The cc12m config at debug widths, shrunk to pixels: 32x32 images, the conv encoder, greedy decoding."""
  c = config_util.load(f"configs/t2t.py:cc12m,debug,field={field},steps=2,batch=8")
  c.dataset.data_dir = os.fspath(data_dir)
  c.dataset.features = ""
  c.dataset.image_size = 32
  c.dataset.train_split = f"train[{HELD_OUT}:]"
  c.dataset.eval_split = c.dataset.test_split = f"train[:{HELD_OUT}]"
  c.model.encoder.name = "conv"
  c.vocab.min_count = 1
  c.decode.method = "greedy"
  c.eval.batch_size, c.eval.num_examples, c.eval.gallery_size, c.eval.rating_sheet_size = 8, HELD_OUT, 2, 2
  c.eval_every, c.checkpoint_every, c.log_every = 2, 2, 1
  c.async_checkpointing = False
  c.debug_nans = False
  return c


def _expected_words(field: str, data_dir) -> set[str]:
  """The lowercased words and punctuation of the field's training captions, read from the rows written (these
  simple captions tokenize to words, commas and periods)."""
  source = tfds.data_source("cc12m_llavanext/clean", split=f"train[{HELD_OUT}:]", data_dir=data_dir,
                            decoders={"image": tfds.decode.SkipDecoding()})
  keys = {source[i]["key"].decode() for i in range(len(source))}
  rows = {r["key"]: r for r in dummy.clean_rows(NUM_ROWS)}
  column = "caption" if field == "alt_text" else field
  return {w for key in keys for w in re.findall(r"\w+|[.,]", rows[key][column].lower())}


@pytest.mark.parametrize("field", join.CAPTION_FIELDS)
def test_cc12m_config_sets_each_fields_caption_length(field):
  config = config_util.load(f"configs/t2t.py:cc12m,field={field}")
  assert (config.dataset.name, config.dataset.builder_config, config.dataset.caption_field) == (
      "cc12m_llavanext", "clean", field)
  assert config.max_caption_tokens == {"caption_llava_short": 32, "caption_llava": 160, "alt_text": 48}[field]
  assert (config.dataset.train_split, config.dataset.eval_split) == ("train[10000:]", "train[:10000]")


# One model shape for the three fields, so that it compiles once (most of the time here): the embedding's 64 rows
# (vocab_multiple) hold each field's vocabulary, and 48 tokens hold every caption of the data written here whole.
VOCAB_ROWS, MAX_TOKENS = 64, 48


@pytest.fixture(scope="module")
def setup(data_dir):
  from capjax import sharding, train  # after conftest's XLA_FLAGS
  config = _config("caption_llava_short", data_dir)
  config.max_caption_tokens = MAX_TOKENS
  return train.make_setup(config, VOCAB_ROWS, sharding.make_mesh(config))


@pytest.mark.parametrize("field", join.CAPTION_FIELDS)
def test_debug_model_trains_on_each_caption_field(field, data_dir, setup, tmp_path):
  """train_and_evaluate's steps (its input pipeline, vocabulary, model, train step and evaluation), without its
  checkpoints and output files, which tests/test_main.py covers."""
  import jax
  import numpy as np

  from capjax import evaluate, sharding, train
  from capjax.data import pipeline, sources
  from capjax.tokens import PAD_ID
  config = _config(field, data_dir)
  config.max_caption_tokens = MAX_TOKENS
  inputs = sources.input_spec(config)
  train_source = sources.data_source(config.dataset, config.dataset.train_split)
  vocab = train.load_or_build_vocab(config, os.fspath(tmp_path), train_source)
  words = set(vocab.words[4:])
  assert words == _expected_words(field, data_dir) and len(vocab) <= VOCAB_ROWS
  assert ("photo" in words, "fence" in words, "." in words) == {
      "caption_llava_short": (False, False, True), "caption_llava": (False, True, True),
      "alt_text": (True, False, False)}[field]

  state = setup.init(jax.random.key(config.seed))
  before = jax.device_get(state.params)
  batches = pipeline.train_iterator(config, train_source, vocab, inputs.key)
  lengths = {len(sources.reference_text(r[field if field != "alt_text" else "caption"]).split()) + 1
             for r in dummy.clean_rows(NUM_ROWS)}
  for _ in range(2):
    batch = next(batches)
    assert batch["image"].shape == (8, 32, 32, 3)
    assert set((batch["targets"] != PAD_ID).sum(1).tolist()) <= lengths  # whole captions and their EOS: none cut
    state, metrics = setup.train_step(state, sharding.host_to_global(batch, setup.mesh))
    assert np.isfinite(float(metrics["loss"]))
  assert int(state.step) == 2
  assert not all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(state.params)))

  held_out = sources.data_source(config.dataset, config.dataset.eval_split)
  result = evaluate.evaluate_split(setup, state.params, held_out, vocab, config, num_examples=HELD_OUT)
  assert len(result.predictions) == HELD_OUT and "cider_d" in result.metrics
  assert all(set(p.split()) <= words | {"<UNK>"} for p in result.predictions)
  assert result.references == [[sources.reference_text(held_out.source[i][field].decode())] for i in result.indices]


def test_caption_field_must_name_a_caption_field(data_dir):
  from capjax.data import sources
  config = _config("alt_text", data_dir)
  fields = "alt_text, caption_llava, caption_llava_short"
  for field, message in (("", f"cc12m_llavanext has no `captions` field — choose the captions to train on with "
                              f"--config.dataset.caption_field, one of {fields}"),
                         ("url", f"dataset.caption_field='url': cc12m_llavanext has no such text field — use one of "
                                 f"{fields}")):
    config.dataset.caption_field = field
    with pytest.raises(config_util.ConfigError) as error:
      sources.data_source(config.dataset, "train")
    assert str(error.value) == message


def test_the_configs_held_out_10000_on_a_smaller_dataset_is_one_error_naming_the_split_sizes(data_dir):
  """`train[10000:]` and `train[:10000]` (the paper's held-out examples) of a dataset of fewer examples: a
  ConfigError (one `error:` line) that says what fits, not TFDS's ValueError traceback."""
  from capjax.data import sources
  config = _config("caption_llava_short", data_dir)
  defaults = config_util.load("configs/t2t.py:cc12m").dataset
  size = tfds.builder("cc12m_llavanext/clean", data_dir=data_dir).info.splits["train"].num_examples
  for split, requested in ((defaults.train_split, f"[10000:{size}]"), (defaults.eval_split, "[:10000]")):
    with pytest.raises(config_util.ConfigError) as error:
      sources.data_source(config.dataset, split)
    assert str(error.value) == (
        f"split {split!r} does not fit cc12m_llavanext's train split of {size} examples (Requested slice {requested} "
        f"incompatible with {size} examples.) — set --config.dataset.train_split, eval_split and test_split to "
        f"slices within it, e.g. train[{max(1, size // 10)}:] and train[:{max(1, size // 10)}]")
