"""The retriever's dual encoder with a pretrained BERT-family text tower (a tiny random checkpoint written by
`transformers`, and the real all-MiniLM-L6-v2 of the minilm extra): the tower computes what the converted model
computes, locked weights stay exactly as loaded, and a mismatched tower is refused."""

import pathlib

import helpers
import jax
import numpy as np
import pytest

from capjax.erg import dual_encoder as de
from capjax.text_models import checkpoint, embed, minilm
from capjax.tools import convert_weights as cw

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "text_models"
CAPTIONS = [["a red circle above a blue square", "the red circle"], ["two green triangles"],
            ["a yellow square beside a circle"], ["the blue triangle is small", "a small blue triangle"]]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> pathlib.Path:
  output = tmp_path_factory.mktemp("tiny_bert")
  cw.convert_hf("hf_bert", FIXTURES / "bert", output)
  return output


def _images(n: int) -> np.ndarray:
  return np.random.default_rng(0).integers(0, 256, (n, 16, 16, 3), dtype=np.uint8)


def _tower_outputs(encoder: de.TrainedEncoder, texts: list[str]) -> np.ndarray:
  ids, mask = encoder.tokenizer(texts)
  return np.asarray(encoder.model.apply({"params": encoder.params}, ids, mask,
                                        method=lambda model, i, m: model.text_tower(i, m)))


def _train(directory, steps: int, lock_text: bool = True) -> de.TrainedEncoder:
  pretrained = de.bert_model(directory, width=16, embed_dim=16, conv_widths=(8, 16))
  encoder, losses = de.train(_images(len(CAPTIONS)), CAPTIONS, pretrained=pretrained, steps=steps, batch_size=4,
                             lock_text=lock_text)
  assert len(losses) == steps and np.isfinite(losses).all()
  return encoder


def _assert_tower_is_the_checkpoint(encoder: de.TrainedEncoder, directory: pathlib.Path, texts: list[str]) -> None:
  """The locked tower's weights are the checkpoint's, bit for bit, and its pooled outputs are what
  `capjax.text_models.embed` computes from the same checkpoint; the embedding is their projection, normalized."""
  loaded = checkpoint.load(directory, "bert")
  locked = encoder.params["text_tower"]["bert"]
  assert jax.tree.structure(locked) == jax.tree.structure(loaded.params)
  for a, b in zip(jax.tree.leaves(locked), jax.tree.leaves(loaded.params), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  pooled = _tower_outputs(encoder, texts)
  reference, _ = embed.Embedder(loaded).embed(texts)
  np.testing.assert_allclose(pooled, reference, rtol=1e-4, atol=1e-5)
  projection = encoder.params["text_proj"]
  projected = pooled @ np.asarray(projection["kernel"]) + np.asarray(projection["bias"])
  expected = projected / np.linalg.norm(projected, axis=-1, keepdims=True)
  np.testing.assert_allclose(encoder.embed_texts(texts), expected, rtol=1e-4, atol=1e-5)


def test_locked_tower_keeps_the_checkpoint_and_computes_what_it_computes(tiny_bert):
  encoder = _train(tiny_bert, steps=3)
  _assert_tower_is_the_checkpoint(encoder, tiny_bert, [c for cs in CAPTIONS for c in cs])


def test_unlocked_tower_is_fine_tuned(tiny_bert):
  encoder = _train(tiny_bert, steps=2, lock_text=False)  # step 0 is the warm-up's learning rate 0
  loaded = checkpoint.load(tiny_bert, "bert").params
  changed = [not np.array_equal(np.asarray(a), np.asarray(b))
             for a, b in zip(jax.tree.leaves(encoder.params["text_tower"]["bert"]), jax.tree.leaves(loaded),
                             strict=True)]
  assert any(changed)


def test_tokenizer_has_one_width_and_keeps_sep_when_cut(tiny_bert):
  tokenizer = de.bert_model(tiny_bert, max_len=8).tokenizer
  ids, mask = tokenizer(["a", "a red circle above a blue square beside the green triangle"])
  assert ids.shape == mask.shape == (2, 8) and mask.dtype == bool
  assert mask[0].tolist() == [True] * 3 + [False] * 5 and mask[1].all()
  sep = tokenizer.wordpiece.sep_id
  assert ids[0, 2] == sep and ids[1, -1] == sep and ids[0, 0] == ids[1, 0] == tokenizer.wordpiece.cls_id


def test_mismatched_text_parameters_are_refused(tiny_bert):
  pretrained = de.bert_model(tiny_bert, width=16, embed_dim=16, conv_widths=(8, 16))
  bad = jax.tree.map(lambda a: np.zeros((*np.shape(a), 1), np.float32), pretrained.text_params)
  with pytest.raises(ValueError, match=r"^the pretrained text parameters do not match the text tower — build both "
                                       r"with bert_model$"):
    de.train(_images(len(CAPTIONS)), CAPTIONS, steps=1, batch_size=4,
             pretrained=de.PretrainedText(pretrained.model, pretrained.tokenizer, bad))


def test_a_gpt2_checkpoint_is_not_a_text_tower(tmp_path):
  cw.convert_hf("hf_gpt2", FIXTURES / "gpt2", tmp_path / "gpt2")
  with pytest.raises(checkpoint.WeightsError, match=r"holds a gpt2 model, not a bert one"):
    de.bert_model(tmp_path / "gpt2")


@pytest.mark.slow  # trains (conftest.py: the slow rule)
def test_minilm_as_the_locked_text_tower(tmp_path):
  try:
    source = minilm.model_dir()
  except minilm.MissingError as error:
    helpers.extra_missing(str(error))
  cw.convert_hf("hf_bert", source, tmp_path / "minilm")
  encoder = _train(tmp_path / "minilm", steps=1)
  _assert_tower_is_the_checkpoint(encoder, tmp_path / "minilm", ["A Red Circle above a blue square.",
                                                                 "two green triangles"])
  assert encoder.params["text_proj"]["kernel"].shape == (384, 16)
