"""Specification of CLIP in capjax.text_models: the Flax CLIP embeds images and texts as Hugging Face's CLIPModel
does on the same checkpoint, its image preprocessing is CLIPImageProcessor's, its tokenizer gives CLIPTokenizer's
ids, and the CLIP score applies the published cut-offs as DataComp does.

tests/fixtures/text_models/clip holds a tiny random-weight CLIPModel written by `transformers`, clip_outputs.npz its
outputs and clip_tokens.json the reference tokenizer's ids; make_fixtures.py there made them (it needs torch and
transformers; these tests do not).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import flax.linen as nn
import jax
import numpy as np
import pytest

from capjax import sharding
from capjax.image import io as image_io
from capjax.text_models import checkpoint, clip, clip_score, hf_import, tokenizers
from capjax.tools import convert_weights as cw

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "text_models"
TOLERANCE = 1e-4
SENTENCES = ["a dog running in the park", "Two children laughing on the beach at sunset!", "the cat"]  # the fixture's


@pytest.fixture(autouse=True)
def float32_matmuls():
  """Full float32 matmuls: on GPUs and TPUs JAX's default precision (TF32, bfloat16 passes) is far from 1e-4."""
  with jax.default_matmul_precision("float32"):
    yield


@pytest.fixture(scope="module")
def outputs() -> dict[str, np.ndarray]:
  with np.load(FIXTURES / "clip_outputs.npz") as data:
    return dict(data)


@pytest.fixture(scope="module")
def scorer(clip_weights) -> clip_score.Scorer:
  """The fixture through `convert_weights` (conftest's clip_weights), as a user's checkpoint would go."""
  return clip_score.Scorer.load(clip_weights, batch_size=2)


def test_clip_embeds_as_transformers_does(scorer, outputs):
  module, variables = scorer.model.module(), {"params": scorer.model.params}

  def run(m: clip.CLIP, ids, mask, pixels):  # one compile for all of it: eager Flax takes 20 s here
    return m(ids, mask, pixels), m.embed_text(ids, mask), m.embed_image(pixels), m.text_model(ids, mask)[0]

  inputs = (outputs["clip_input_ids"], outputs["clip_attention_mask"], outputs["clip_pixel_values"])
  out, text_features, image_features, hidden = jax.jit(lambda *a: module.apply(variables, *a, method=run))(*inputs)
  assert hidden.shape == (*outputs["clip_input_ids"].shape, 32)
  for ours, theirs in ((out.text_embeds, "clip_text_embeds"), (out.image_embeds, "clip_image_embeds"),
                       (text_features, "clip_text_features"), (image_features, "clip_image_features"),
                       (out.logits_per_image, "clip_logits_per_image")):
    scale = 100 if theirs == "clip_logits_per_image" else 1  # exp(logit_scale) is about 1 here; 100 when trained
    assert ours.shape == outputs[theirs].shape
    assert np.abs(np.asarray(ours) - outputs[theirs]).max() <= TOLERANCE * scale, theirs


def test_scorer_goes_from_uint8_images_and_captions_to_transformers_embeddings(scorer, outputs):
  """The whole path: CLIPImageProcessor's preprocessing, CLIPTokenizer's ids with their padding, both towers."""
  images = [outputs["clip_images_0"], outputs["clip_images_1"]]  # 40x50 and 37x64: resized, then cropped
  pixels = np.stack([clip_score.preprocess(image, scorer.config) for image in images])
  assert pixels.dtype == np.float32 and np.abs(pixels - outputs["clip_pixel_values"]).max() <= 1e-6
  image_embeds = scorer.embed_images(images)
  assert np.abs(image_embeds - outputs["clip_image_embeds"]).max() <= TOLERANCE
  ids, mask, _ = tokenizers.pad([scorer.tokenizer.encode(s) for s in SENTENCES], 24, scorer.tokenizer.eos_id)
  width = outputs["clip_input_ids"].shape[1]
  np.testing.assert_array_equal(ids[:, :width], outputs["clip_input_ids"])
  np.testing.assert_array_equal(mask[:, :width], outputs["clip_attention_mask"])
  text_embeds, cut = scorer.embed_texts(SENTENCES)  # 3 captions in batches of 2: one padded batch
  assert cut == [] and np.abs(text_embeds - outputs["clip_text_embeds"]).max() <= TOLERANCE
  scores = scorer.score(images, SENTENCES[:2])
  expected = np.sum(outputs["clip_image_embeds"] * outputs["clip_text_embeds"][:2], axis=1)
  assert scores.shape == (2,) and np.abs(scores - expected).max() <= TOLERANCE
  with pytest.raises(ValueError, match="2 images but 3 captions"):
    scorer.score(images, SENTENCES)
  with pytest.raises(ValueError, match=r"an image to score is an \(h, w, 3\) uint8 RGB array, got float32 \(4, 4, 3\)"):
    scorer.embed_images([np.zeros((4, 4, 3), np.float32)])
  with pytest.raises(image_io.ImageError):
    scorer.embed_images([b"not an image"])


def test_a_caption_over_the_context_is_cut_keeping_its_end_token(scorer):
  long_caption = " ".join(["dog"] * 40)  # 40 words + the two special tokens > 24 positions
  embeds, cut = scorer.embed_texts(["a dog", long_caption])
  ids = scorer.tokenizer.encode(long_caption)[:23] + [scorer.tokenizer.eos_id]
  alone, _ = scorer.embed_texts([scorer.tokenizer.decode(ids[1:-1])])
  assert cut == [1] and np.abs(embeds[1] - alone[0]).max() <= 1e-6


def test_fixed_length_embeds_a_caption_the_same_in_any_batch(clip_weights, scorer):
  """Captions padded to the full context (the clip stage's Scorer): a caption's embedding does not depend, to the
  last bit, on the other captions of its batch, which a share cut-off over a build's two paths needs (padded to the
  batch's longest, the first two differ in their last bits here). The padding is masked: the same embeddings."""
  captions = ["A dog runs along the beach.", "Two children play football in the park.", "A red car is parked on the "
              "street.", "Zxqwv Blorftson attends the party at the club.", "Harrison Ford attends the premiere."]
  fixed = clip_score.Scorer.load(clip_weights, batch_size=2, fixed_length=True)
  together, _ = fixed.embed_texts(captions)
  np.testing.assert_array_equal(together, np.concatenate([fixed.embed_texts([c])[0] for c in captions]))
  assert np.abs(together - scorer.embed_texts(captions)[0]).max() <= 1e-6


def test_tokenizer_gives_the_reference_ids():
  reference = json.loads((FIXTURES / "clip_tokens.json").read_text(encoding="utf-8"))
  tokenizer = tokenizers.CLIPTokenizer(FIXTURES / "clip" / "vocab.json", FIXTURES / "clip" / "merges.txt")
  assert [tokenizer.encode(s) for s in reference["sentences"]] == reference["clip_tiny"]
  assert tokenizer.decode(tokenizer.tokenize("A Dog, 2 CATS!")) == "a dog , 2 cats !"
  with pytest.raises(tokenizers.TokenizerError, match="has no <|startoftext|> token: it is not a CLIP vocabulary"):
    tokenizers.CLIPTokenizer(FIXTURES / "gpt2" / "vocab.json", FIXTURES / "gpt2" / "merges.txt")


def test_legacy_end_token_id_pools_at_the_highest_id(scorer, outputs):
  """Old CLIP configs say eos_token_id=2: Hugging Face then pools at each row's highest id, <|endoftext|> in
  CLIP's vocabulary (the fixture's too)."""
  config = scorer.config
  legacy = dataclasses.replace(config, text=dataclasses.replace(config.text, eos_token_id=clip.LEGACY_EOS))
  ids, mask = outputs["clip_input_ids"], outputs["clip_attention_mask"]
  ours = jax.jit(lambda *a: clip.CLIP(legacy).apply({"params": scorer.model.params}, *a, method="embed_text"))(
      ids, mask)
  np.testing.assert_allclose(clip.normalize(ours), outputs["clip_text_embeds"], atol=TOLERANCE)


def test_every_parameter_has_logical_axes_that_sharding_maps(scorer):
  known = set.intersection(*({name for name, _ in table} for table in sharding.RULES.values()))
  abstract = checkpoint.abstract_params(scorer.config)
  specs = jax.tree.leaves(nn.get_partition_spec(abstract), is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
  values = jax.tree.leaves(abstract, is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert len(specs) == len(values) == 4 * 16 + 4 + 7 + 2 + 1  # 4 layers; text, vision, projections, scale
  assert all(isinstance(v, nn.Partitioned) for v in values)
  assert {name for spec in specs for name in spec if name is not None} <= known


def test_clip_initialises_and_runs_jitted_inside_a_mesh(scorer, outputs):
  """As BERT and GPT-2 (tests/test_text_models.py): on the 8 fake CPU devices (data=2 x fsdp=2 x model=2, the
  fsdp_tp table) CLIP's initialisation traces, and the converted checkpoint, placed so, embeds as transformers."""
  module, config = scorer.model.module(), scorer.config
  mesh = sharding.mesh_of({"data": 2, "fsdp": 2, "model": 2, "rules": "fsdp_tp"})
  rules = sharding.RULES["fsdp_tp"]
  shardings = sharding.logical_to_shardings(mesh, checkpoint.abstract_params(config), rules)
  inputs = (outputs["clip_input_ids"], outputs["clip_attention_mask"], outputs["clip_pixel_values"])

  def init(key):
    with sharding.axis_rules(mesh, rules):
      return nn.unbox(module.init(key, *inputs)["params"])

  def run(params):
    with sharding.axis_rules(mesh, rules):
      return module.apply({"params": params}, *inputs)

  fresh = jax.jit(init, out_shardings=shardings).lower(jax.random.key(0)).out_info  # traced, not compiled
  assert jax.tree.map(lambda x: x.shape, fresh) == jax.tree.map(np.shape, scorer.model.params)
  placed = jax.device_put(scorer.model.params, shardings)
  fc1 = placed["vision_model"]["layers_0"]["fc1"]["kernel"]
  assert fc1.sharding.spec == jax.sharding.PartitionSpec(("data", "fsdp"), "model")
  out = jax.jit(run)(placed)
  assert np.abs(np.asarray(out.text_embeds) - outputs["clip_text_embeds"]).max() <= TOLERANCE
  assert np.abs(np.asarray(out.image_embeds) - outputs["clip_image_embeds"]).max() <= TOLERANCE


def test_converted_directory_keeps_the_config_and_the_checkpoint_s_normalization(clip_weights, tmp_path):
  saved = json.loads((clip_weights / "config.json").read_text())
  assert saved["model_type"] == "clip" and saved["projection_dim"] == 16
  assert saved["text_config"]["eos_token_id"] == 813 and saved["vision_config"]["patch_size"] == 8
  assert saved["image_mean"] == list(clip.OPENAI_MEAN)  # the fixture has no preprocessor_config.json
  source = tmp_path / "hf"
  source.mkdir()
  for name in ("model.safetensors", "config.json", "vocab.json", "merges.txt"):
    (source / name).write_bytes((FIXTURES / "clip" / name).read_bytes())
  (source / "preprocessor_config.json").write_text(json.dumps({"image_mean": [0.5] * 3, "image_std": [0.5] * 3}))
  metadata = cw.convert_hf("hf_clip", source, tmp_path / "out")
  assert metadata["format"] == "hf-clip-safetensors" and metadata["num_params"] == 68_929
  model = checkpoint.load(tmp_path / "out", "clip")
  assert model.config.image_mean == model.config.image_std == (0.5, 0.5, 0.5)
  old_style = {k: v for k, v in saved.items() if k not in ("text_config", "vision_config")}  # transformers < 4.24
  old_style |= {"text_config": None, "text_config_dict": saved["text_config"],
                "vision_config_dict": saved["vision_config"]}
  assert clip.CLIPConfig.from_dict(old_style) == checkpoint.load(clip_weights, "clip").config
  (source / "preprocessor_config.json").write_text(json.dumps({"image_std": [0.5, 0.0, 0.5]}))
  with pytest.raises(cw.ConversionError, match=r"'image_std' must be 3 numbers > 0, got \[0.5, 0.0, 0.5\]"):
    cw.convert_hf("hf_clip", source, tmp_path / "out2")


def test_a_converted_bert_is_not_a_clip_scorer(tmp_path):
  cw.convert_hf("hf_bert", FIXTURES / "bert", tmp_path / "bert")
  with pytest.raises(checkpoint.WeightsError, match="holds a bert model, not a clip one"):
    clip_score.Scorer.load(tmp_path / "bert")
  with pytest.raises(hf_import.CheckpointError, match="model_type 'bert', not 'clip'"):
    hf_import.check_files("clip", FIXTURES / "bert")


def test_thresholds_keep_as_datacomp_and_laion_do():
  scores = np.array([0.31, 0.25, 0.2499, 0.28, 0.1, 0.27, 0.29, 0.33, 0.05, 0.26])
  assert clip_score.keep(scores, clip_score.THRESHOLDS["datacomp_b32"]).tolist() == [
      True, True, False, True, False, True, True, True, False, True]
  assert clip_score.keep(scores, clip_score.THRESHOLDS["laion"]).tolist() == [
      True, False, False, True, False, False, True, True, False, False]
  # DataComp's top 30% of 10: the score at index int(10 * 0.3) = 3 of the pool sorted high to low (0.28) is the
  # minimum, so 4 are kept, one more than 30%, as DataComp's get_threshold keeps.
  top = clip_score.THRESHOLDS["datacomp_l14_top30"]
  assert clip_score.cutoff(scores, top) == 0.28
  assert clip_score.keep(scores, top).tolist() == [True, False, False, True, False, False, True, True, False, False]
  assert clip_score.keep(np.array([0.2, 0.2, 0.2]), top).tolist() == [True, True, True]  # ties at the cut all kept
  assert clip_score.keep(np.array([]), top).tolist() == []
  assert clip_score.parse_threshold("min=0.3") == clip_score.Threshold("min=0.3", minimum=0.3)
  assert clip_score.parse_threshold("top=1").top_fraction == 1.0
  assert clip_score.keep(scores, clip_score.parse_threshold("top=1")).all()
  for bad in ("min=1.5", "top=0", "top=1.2", "min=nan", "laion2b", "min=", "0.3"):
    with pytest.raises(ValueError, match=rf"CLIP threshold '{bad}' is not one of datacomp_b32, laion, "
                       r"datacomp_l14_top30, min=X with X a cosine in \[-1, 1\], or top=F with F a fraction in "):
      clip_score.parse_threshold(bad)


def test_pair_scores_are_cosines_of_unnormalized_embeddings():
  image = np.array([[3.0, 4.0], [1.0, 0.0]])
  text = np.array([[6.0, 8.0], [0.0, 2.0]])
  np.testing.assert_allclose(clip_score.pair_scores(image, text), [1.0, 0.0], atol=1e-12)
