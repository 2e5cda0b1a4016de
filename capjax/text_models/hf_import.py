"""Hugging Face state dicts (tensor name -> numpy array, as read from model.safetensors) -> capjax parameters.

Every capjax parameter must come from exactly one tensor of the shape the checkpoint's config.json implies, and
every tensor must be used (or be a known buffer or head that capjax does not run): a config.json that does not
match its weights is a `CheckpointError` naming the tensor, both shapes and the config fields involved.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import ml_dtypes
import numpy as np
from flax import traverse_util

from capjax.text_models import bert as bert_lib
from capjax.text_models import checkpoint
from capjax.text_models import clip as clip_lib
from capjax.text_models import gpt2 as gpt2_lib

Path = tuple[str, ...]

# Tensors a checkpoint may hold that capjax does not use: position-id and causal-mask buffers, BERT's pre-training
# heads (masked LM, next sentence).
BERT_IGNORED = r"(bert\.)?embeddings\.position_ids|cls\..*"
GPT2_IGNORED = r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias"
CLIP_IGNORED = r"(text|vision)_model\.embeddings\.position_ids"


class CheckpointError(ValueError):
  """A checkpoint whose tensors are not what its config.json describes."""


@dataclasses.dataclass(frozen=True)
class Rule:
  """Where one capjax parameter comes from: the source tensor's name and the layout change."""
  source: str
  source_shape: Callable[[tuple[int, ...]], tuple[int, ...]]  # capjax shape -> the shape the tensor must have
  convert: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]


def same(name: str) -> Rule:
  return Rule(name, lambda shape: shape, lambda a, shape: a)


def linear(name: str) -> Rule:
  """torch.nn.Linear keeps (out, in); a Flax kernel is (in, out), its `out` split into (heads, head_dim) for the
  query, key and value projections."""
  def source_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[1] * shape[2], shape[0]) if len(shape) == 3 else tuple(reversed(shape))
  return Rule(name, source_shape, lambda a, shape: a.T.reshape(shape))


def linear_from_heads(name: str) -> Rule:
  """The attention output projection: torch's (embed, heads*head_dim) -> capjax's (heads, head_dim, embed)."""
  return Rule(name, lambda shape: (shape[2], shape[0] * shape[1]), lambda a, shape: a.T.reshape(shape))


def flat_as(name: str) -> Rule:
  """A tensor whose capjax shape only splits a dimension into (heads, head_dim): a bias, a Conv1D kernel."""
  return Rule(name, lambda shape: (shape[0] * shape[1], *shape[2:]) if len(shape) >= 2 else shape,
              lambda a, shape: a.reshape(shape))


def norm(prefix: str, names: Mapping[str, np.ndarray]) -> dict[str, Rule]:
  """LayerNorm: `weight`/`bias`, or `gamma`/`beta` in checkpoints converted from TensorFlow."""
  scale = f"{prefix}.gamma" if f"{prefix}.gamma" in names and f"{prefix}.weight" not in names else f"{prefix}.weight"
  beta = f"{prefix}.beta" if f"{prefix}.beta" in names and f"{prefix}.bias" not in names else f"{prefix}.bias"
  return {"scale": same(scale), "bias": same(beta)}


def _prefix(names: Mapping[str, np.ndarray], candidate: str, probe: str) -> str:
  return candidate if any(n.startswith(candidate + probe) for n in names) else ""


def bert_rules(config: bert_lib.BertConfig, tensors: Mapping[str, np.ndarray]) -> dict[Path, Rule]:
  """BertModel's names, with or without the `bert.` prefix of BertFor* checkpoints."""
  p = _prefix(tensors, "bert.", "embeddings.")
  rules: dict[Path, Rule] = {}
  for ours, theirs in (("word_embeddings", "word_embeddings"), ("position_embeddings", "position_embeddings"),
                       ("token_type_embeddings", "token_type_embeddings")):
    rules[(ours, "embedding")] = same(f"{p}embeddings.{theirs}.weight")
  rules.update({("embeddings_norm", k): r for k, r in norm(f"{p}embeddings.LayerNorm", tensors).items()})
  for i in range(config.num_hidden_layers):
    src, dst = f"{p}encoder.layer.{i}.", f"layer_{i}"
    for q in ("query", "key", "value"):
      rules[(dst, "attention", q, "kernel")] = linear(f"{src}attention.self.{q}.weight")
      rules[(dst, "attention", q, "bias")] = flat_as(f"{src}attention.self.{q}.bias")
    rules[(dst, "attention", "out_kernel")] = linear_from_heads(f"{src}attention.output.dense.weight")
    rules[(dst, "attention", "out_bias")] = same(f"{src}attention.output.dense.bias")
    rules.update({(dst, "attention_norm", k): r for k, r in norm(f"{src}attention.output.LayerNorm", tensors).items()})
    rules[(dst, "intermediate", "kernel")] = linear(f"{src}intermediate.dense.weight")
    rules[(dst, "intermediate", "bias")] = same(f"{src}intermediate.dense.bias")
    rules[(dst, "output", "kernel")] = linear(f"{src}output.dense.weight")
    rules[(dst, "output", "bias")] = same(f"{src}output.dense.bias")
    rules.update({(dst, "output_norm", k): r for k, r in norm(f"{src}output.LayerNorm", tensors).items()})
  if config.pooler:
    rules[("pooler", "kernel")] = linear(f"{p}pooler.dense.weight")
    rules[("pooler", "bias")] = same(f"{p}pooler.dense.bias")
  return rules


def gpt2_rules(config: gpt2_lib.GPT2Config, tensors: Mapping[str, np.ndarray]) -> dict[Path, Rule]:
  """GPT2Model/GPT2LMHeadModel names; Conv1D kernels are already (in, out), c_attn holds q, k and v side by side."""
  p = _prefix(tensors, "transformer.", "wte.")
  rules: dict[Path, Rule] = {("wte", "embedding"): same(f"{p}wte.weight"), ("wpe", "embedding"): same(f"{p}wpe.weight")}
  rules.update({("ln_f", k): r for k, r in norm(f"{p}ln_f", tensors).items()})
  width = config.n_embd
  for i in range(config.n_layer):
    src, dst = f"{p}h.{i}.", f"h_{i}"
    for j, q in enumerate(("query", "key", "value")):
      rules[(dst, "attn", q, "kernel")] = Rule(
          f"{src}attn.c_attn.weight", lambda shape: (shape[0], 3 * shape[1] * shape[2]),
          lambda a, shape, j=j: a[:, j * width:(j + 1) * width].reshape(shape))
      rules[(dst, "attn", q, "bias")] = Rule(
          f"{src}attn.c_attn.bias", lambda shape: (3 * shape[0] * shape[1],),
          lambda a, shape, j=j: a[j * width:(j + 1) * width].reshape(shape))
    rules[(dst, "attn", "out_kernel")] = flat_as(f"{src}attn.c_proj.weight")
    rules[(dst, "attn", "out_bias")] = same(f"{src}attn.c_proj.bias")
    for n in ("ln_1", "ln_2"):
      rules.update({(dst, n, k): r for k, r in norm(f"{src}{n}", tensors).items()})
    for n in ("c_fc", "c_proj"):
      rules[(dst, n, "kernel")] = same(f"{src}mlp.{n}.weight")
      rules[(dst, n, "bias")] = same(f"{src}mlp.{n}.bias")
  return rules


def clip_rules(config: clip_lib.CLIPConfig, tensors: Mapping[str, np.ndarray]) -> dict[Path, Rule]:
  """CLIPModel's names: both towers' pre-norm layers, the patch convolution (OIHW), the two projections (no bias)."""
  rules: dict[Path, Rule] = {}
  for tower, tower_config in (("text_model", config.text), ("vision_model", config.vision)):
    for i in range(tower_config.num_hidden_layers):
      src, dst = f"{tower}.encoder.layers.{i}.", (tower, f"layers_{i}")
      for q, theirs in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
        rules[(*dst, "self_attn", q, "kernel")] = linear(f"{src}self_attn.{theirs}.weight")
        rules[(*dst, "self_attn", q, "bias")] = flat_as(f"{src}self_attn.{theirs}.bias")
      rules[(*dst, "self_attn", "out_kernel")] = linear_from_heads(f"{src}self_attn.out_proj.weight")
      rules[(*dst, "self_attn", "out_bias")] = same(f"{src}self_attn.out_proj.bias")
      for n in ("layer_norm1", "layer_norm2"):
        rules.update({(*dst, n, k): r for k, r in norm(f"{src}{n}", tensors).items()})
      for n in ("fc1", "fc2"):
        rules[(*dst, n, "kernel")] = linear(f"{src}mlp.{n}.weight")
        rules[(*dst, n, "bias")] = same(f"{src}mlp.{n}.bias")
    rules[(tower, "position_embedding", "embedding")] = same(f"{tower}.embeddings.position_embedding.weight")
  rules[("text_model", "token_embedding", "embedding")] = same("text_model.embeddings.token_embedding.weight")
  rules[("vision_model", "patch_embedding")] = Rule(  # torch's (out, in, height, width) -> (height, width, in, out)
      "vision_model.embeddings.patch_embedding.weight", lambda shape: (shape[3], shape[2], shape[0], shape[1]),
      lambda a, shape: a.transpose(2, 3, 1, 0))
  rules[("vision_model", "class_embedding")] = same("vision_model.embeddings.class_embedding")
  for ours, theirs in ((("text_model", "final_layer_norm"), "text_model.final_layer_norm"),
                       (("vision_model", "pre_layernorm"), "vision_model.pre_layrnorm"),  # Hugging Face's spelling
                       (("vision_model", "post_layernorm"), "vision_model.post_layernorm")):
    rules.update({(*ours, k): r for k, r in norm(theirs, tensors).items()})
  rules[("text_projection", "kernel")] = linear("text_projection.weight")
  rules[("visual_projection", "kernel")] = linear("visual_projection.weight")
  rules[("logit_scale",)] = same("logit_scale")
  return rules


def _config_summary(config: Any) -> str:
  if isinstance(config, clip_lib.CLIPConfig):
    return (f"projection_dim={config.projection_dim}, text_config: {_config_summary(config.text)}, "
            f"vision_config: {_config_summary(config.vision)}")
  shown = [f"{k}={v}" for k, v in dataclasses.asdict(config).items()
           if k not in ("dropout_rate", "attention_dropout_rate", "layer_norm_eps", "layer_norm_epsilon",
                        "do_lower_case", "pad_token_id")]
  return ", ".join(shown)


def assemble(rules: Mapping[Path, Rule], expected: Mapping[Path, Any], tensors: Mapping[str, np.ndarray],
             ignored: str, config: Any) -> dict[str, Any]:
  """Nested float32 params from `tensors` by `rules`, checked against the module's `expected` shapes."""
  where = f"(config.json: {_config_summary(config)})"
  used: set[str] = set()
  flat = {}
  for path, leaf in expected.items():
    rule = rules[path]
    shape = tuple(leaf.shape)
    if rule.source not in tensors:
      raise CheckpointError(f"missing tensor {rule.source!r}, needed for {'/'.join(path)} {where}")
    array = np.asarray(tensors[rule.source])
    if tuple(array.shape) != rule.source_shape(shape):
      raise CheckpointError(f"tensor {rule.source!r} has shape {tuple(array.shape)} but config.json implies "
                            f"{rule.source_shape(shape)} {where}")
    if not (np.issubdtype(array.dtype, np.floating) or array.dtype == ml_dtypes.bfloat16):
      raise CheckpointError(f"tensor {rule.source!r} has dtype {array.dtype}; weights must be floating point")
    flat[path] = np.asarray(rule.convert(array, shape), np.float32)
    used.add(rule.source)
  extra = sorted(n for n in tensors if n not in used and not re.fullmatch(ignored, n))
  if extra:
    raise CheckpointError(f"unexpected tensor {extra[0]!r} ({len(extra)} unused in all) {where}")
  return traverse_util.unflatten_dict(flat)


def _expected(abstract: Any) -> dict[Path, Any]:
  return traverse_util.flatten_dict(nn.meta.unbox(abstract))


def bert_params(tensors: Mapping[str, np.ndarray], config: bert_lib.BertConfig) -> dict[str, Any]:
  """BertModel (or BertFor*'s `bert.`) tensors -> `Bert` params; pre-training heads are dropped."""
  return assemble(bert_rules(config, tensors), _expected(bert_lib.abstract_params(config)), tensors, BERT_IGNORED,
                  config)


def has_bert_pooler(tensors: Mapping[str, np.ndarray]) -> bool:
  return any(re.fullmatch(r"(bert\.)?pooler\.dense\.weight", n) for n in tensors)


def gpt2_params(tensors: Mapping[str, np.ndarray], config: gpt2_lib.GPT2Config) -> dict[str, Any]:
  """GPT-2 tensors -> `GPT2` params. An `lm_head.weight` must equal `wte` (GPT-2 ties them; capjax always does)."""
  tensors = dict(tensors)
  head = tensors.pop("lm_head.weight", None)
  params = assemble(gpt2_rules(config, tensors), _expected(gpt2_lib.abstract_params(config)), tensors, GPT2_IGNORED,
                    config)
  if head is not None and not np.array_equal(np.asarray(head, np.float32), params["wte"]["embedding"]):
    raise CheckpointError("lm_head.weight differs from wte.weight: capjax's GPT-2 ties the output embedding to the "
                          "input one, as GPT-2 does")
  return params


def clip_params(tensors: Mapping[str, np.ndarray], config: clip_lib.CLIPConfig) -> dict[str, Any]:
  """CLIPModel tensors -> `CLIP` params; a file with neither tower's tensors is named as not CLIP's."""
  if not any(name.startswith(("text_model.", "vision_model.")) for name in tensors):
    shown = ", ".join(repr(name) for name in sorted(tensors)[:3])
    raise CheckpointError(f"model.safetensors holds no CLIPModel tensor (text_model.*, vision_model.*; it has "
                          f"{shown}{', ...' if len(tensors) > 3 else ''}): these are not CLIP weights")
  return assemble(clip_rules(config, tensors), _expected(clip_lib.abstract_params(config)), tensors, CLIP_IGNORED,
                  config)


def check_model_type(kind: str, directory: pathlib.Path, raw: Mapping[str, Any]) -> None:
  """config.json's model_type, where it has one, is `kind`'s: another model's directory is named as such."""
  if raw.get("model_type", kind) != kind:
    raise CheckpointError(f"{directory / 'config.json'} has model_type {raw.get('model_type')!r}, not {kind!r}")


def check_files(kind: str, directory: pathlib.Path) -> None:
  """A Hugging Face checkpoint directory holds model.safetensors, config.json and the tokenizer's files; another
  model's directory (config.json's model_type) is refused as such before any missing file is named."""
  if (directory / "config.json").is_file():
    check_model_type(kind, directory, checkpoint.read_json(directory / "config.json"))
  for name in ("model.safetensors", "config.json", *checkpoint.TOKENIZER_FILES[kind]):
    if not (directory / name).is_file():
      raise CheckpointError(f"{directory / name} is missing (a {kind} checkpoint directory holds model.safetensors, "
                            f"config.json and {' and '.join(checkpoint.TOKENIZER_FILES[kind])})")


def convert(kind: str, directory: pathlib.Path, tensors: Mapping[str, np.ndarray]
            ) -> tuple[bert_lib.BertConfig | gpt2_lib.GPT2Config, dict[str, Any]]:
  """(config, params) of the Hugging Face checkpoint in `directory`, whose model.safetensors holds `tensors`.

  BERT's config also records whether the checkpoint has a pooler and its tokenizer_config.json's do_lower_case
  (Hugging Face's default, true, when that file or field is absent), CLIP's the image normalization of its
  preprocessor_config.json (OpenAI's when absent): the converted directory is then complete."""
  raw = checkpoint.read_json(directory / "config.json")
  check_model_type(kind, directory, raw)
  if kind == "gpt2":
    config = checkpoint.parse_config(kind, raw)
    return config, gpt2_params(tensors, config)
  if kind == "clip":
    normalization = {}
    if (directory / "preprocessor_config.json").is_file():
      processor = checkpoint.read_json(directory / "preprocessor_config.json")
      normalization = {k: processor[k] for k in ("image_mean", "image_std") if k in processor}
    config = checkpoint.parse_config(kind, {**raw, **normalization})
    return config, clip_params(tensors, config)
  lower = True
  if (directory / "tokenizer_config.json").is_file():
    lower = checkpoint.read_json(directory / "tokenizer_config.json").get("do_lower_case", True)
  config = checkpoint.parse_config(kind, {**raw, "pooler": has_bert_pooler(tensors), "do_lower_case": lower})
  return config, bert_params(tensors, config)
