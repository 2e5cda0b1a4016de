"""CLIP in Flax, laid out like Hugging Face's `CLIPModel`: a causal text transformer pooled at its end token, a
vision transformer over image patches pooled at its class token, each projected (no bias) into the shared space
where `capjax.text_models.clip_score` compares them by cosine similarity.

Both towers are pre-norm transformers whose attention is `capjax.text_models.attention.SelfAttention` (so
`capjax.models.layers.MultiHeadAttention`, as BERT's and GPT-2's); the activation is CLIP's quick GELU. Images come
in NHWC (batch, height, width, channels), already resized, cropped and normalized (`clip_score.preprocess`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from capjax.models.layers import logical
from capjax.text_models import attention as attn
from capjax.text_models.config import ConfigError, activation, integer, number

Array = jax.Array

# The normalization of OpenAI's CLIP images (Hugging Face's OPENAI_CLIP_MEAN / OPENAI_CLIP_STD), used when the
# checkpoint has no preprocessor_config.json.
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
LEGACY_EOS = 2  # an old config's eos_token_id: the end token is then the highest id of each row (Hugging Face's rule)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TowerConfig:
  """The fields both towers' configs have (defaults: CLIPTextConfig's; the vision tower's differ in width)."""

  hidden_size: int = 512
  intermediate_size: int = 2048
  num_hidden_layers: int = 12
  num_attention_heads: int = 8
  hidden_act: str = "quick_gelu"
  layer_norm_eps: float = 1e-5

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_dict(cls, config: Mapping[str, Any]) -> TowerConfig:
    """Reads and checks a text_config or vision_config dict; an error names which."""
    where, defaults = ("text_config" if cls is CLIPTextConfig else "vision_config"), cls()
    try:
      fields = {f.name: (activation(config, f.name, "quick_gelu") if f.name == "hidden_act"
                         else number(config, f.name, f.default) if f.name == "layer_norm_eps"
                         else integer(config, f.name, f.default, 0 if f.name == "eos_token_id" else 1))
                for f in dataclasses.fields(defaults)}
    except ConfigError as error:
      raise ConfigError(f"{where}: {error}") from error
    if fields["hidden_size"] % fields["num_attention_heads"]:
      raise ConfigError(f"{where}: config.json hidden_size={fields['hidden_size']} is not divisible by "
                        f"num_attention_heads={fields['num_attention_heads']}")
    if fields.get("image_size", 0) % fields.get("patch_size", 1):
      raise ConfigError(f"{where}: config.json image_size={fields['image_size']} is not a multiple of "
                        f"patch_size={fields['patch_size']}")
    return cls(**fields)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CLIPTextConfig(TowerConfig):
  """A Hugging Face CLIPTextConfig's fields that the network depends on (defaults are CLIPTextConfig's)."""

  vocab_size: int = 49408
  max_position_embeddings: int = 77
  eos_token_id: int = 49407


@dataclasses.dataclass(frozen=True, kw_only=True)
class CLIPVisionConfig(TowerConfig):
  """A Hugging Face CLIPVisionConfig's fields that the network depends on (defaults are CLIPVisionConfig's)."""

  hidden_size: int = 768
  intermediate_size: int = 3072
  num_attention_heads: int = 12
  image_size: int = 224
  patch_size: int = 32
  num_channels: int = 3

  @property
  def num_patches(self) -> int:
    return (self.image_size // self.patch_size) ** 2


@dataclasses.dataclass(frozen=True)
class CLIPConfig:
  """A Hugging Face CLIPConfig (model_type "clip"), plus the image normalization of its preprocessor_config.json."""

  text: CLIPTextConfig = CLIPTextConfig()
  vision: CLIPVisionConfig = CLIPVisionConfig()
  projection_dim: int = 512
  image_mean: tuple[float, ...] = OPENAI_MEAN
  image_std: tuple[float, ...] = OPENAI_STD

  @classmethod
  def from_dict(cls, config: Mapping[str, Any]) -> CLIPConfig:
    """Reads and checks a Hugging Face CLIP config.json (plus capjax's `image_mean` and `image_std`)."""
    sub = {}
    for field in ("text_config", "vision_config"):
      value = config.get(field) or config.get(f"{field}_dict") or {}  # configs before transformers 4.24: *_dict
      if not isinstance(value, dict):
        raise ConfigError(f"config.json field {field!r} must be an object, got {value!r}")
      sub[field] = value
    vision = CLIPVisionConfig.from_dict(sub["vision_config"])
    normalization = {}
    for field, default in (("image_mean", OPENAI_MEAN), ("image_std", OPENAI_STD)):
      value = config.get(field, default)
      if (not isinstance(value, (list, tuple)) or len(value) != vision.num_channels
          or not all(type(v) in (int, float) and v == v for v in value)
          or field == "image_std" and not all(v > 0 for v in value)):
        raise ConfigError(f"config.json field {field!r} must be {vision.num_channels} numbers"
                          f"{' > 0' if field == 'image_std' else ''}, got {value!r}")
      normalization[field] = tuple(float(v) for v in value)
    return cls(CLIPTextConfig.from_dict(sub["text_config"]), vision,
               integer(config, "projection_dim", 512), **normalization)

  def to_dict(self) -> dict[str, Any]:
    """A config.json that `from_dict` (and Hugging Face's CLIPConfig) reads back."""
    return {"model_type": "clip", "projection_dim": self.projection_dim, "text_config": dataclasses.asdict(self.text),
            "vision_config": dataclasses.asdict(self.vision), "image_mean": list(self.image_mean),
            "image_std": list(self.image_std)}


class EncoderLayer(nn.Module):
  """A pre-norm block: x + attention(norm(x)), then x + MLP(norm(x))."""

  config: CLIPTextConfig | CLIPVisionConfig
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array, bias: Array | None) -> Array:
    c = self.config
    h = attn.layer_norm("layer_norm1", c.layer_norm_eps, self.dtype)(x)
    h, _, _ = attn.SelfAttention(c.num_attention_heads, c.head_dim, 0.0, self.dtype, name="self_attn")(h, bias, True)
    x = x + h
    h = attn.layer_norm("layer_norm2", c.layer_norm_eps, self.dtype)(x)
    h = attn.dense(c.intermediate_size, ("embed", "mlp"), "fc1", self.dtype)(h)
    return x + attn.dense(c.hidden_size, ("mlp", "embed"), "fc2", self.dtype)(attn.ACTIVATIONS[c.hidden_act](h))


class TextTower(nn.Module):
  """CLIPTextTransformer: token + position embeddings, causal pre-norm layers, a final norm, the end token's state."""

  config: CLIPTextConfig
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, input_ids: Array, attention_mask: Array | None = None) -> tuple[Array, Array]:
    """input_ids (B, T), each row holding its end token; attention_mask (B, T) 1 on tokens, 0 on padding ->
    (last hidden states (B, T, hidden), pooled (B, hidden): the state at each row's first end token)."""
    c = self.config
    batch, length = input_ids.shape
    if length > c.max_position_embeddings:
      raise ValueError(f"{length} tokens exceed max_position_embeddings={c.max_position_embeddings}: truncate first")
    x = (attn.embedding(c.vocab_size, c.hidden_size, ("vocab", "embed"), "token_embedding")(input_ids)
         + attn.embedding(c.max_position_embeddings, c.hidden_size, ("length", "embed"),
                          "position_embedding")(jnp.arange(length))[None]).astype(self.dtype)
    positions = jnp.arange(length)
    bias = jnp.where(positions[None, :] <= positions[:, None], 0.0, attn.MASKED)[None, None]
    if attention_mask is not None:
      bias = bias + attn.padding_bias(attention_mask)
    for i in range(c.num_hidden_layers):
      x = EncoderLayer(c, self.dtype, name=f"layers_{i}")(x, bias)
    x = attn.layer_norm("final_layer_norm", c.layer_norm_eps, self.dtype)(x)
    ends = input_ids if c.eos_token_id == LEGACY_EOS else (input_ids == c.eos_token_id).astype(jnp.int32)
    return x, x[jnp.arange(batch), jnp.argmax(ends, axis=-1)]


class VisionTower(nn.Module):
  """CLIPVisionTransformer: patch embeddings (a strided convolution without bias, here one matrix product per patch)
  after a class token, position embeddings, a norm, pre-norm layers, the class token's state normalized."""

  config: CLIPVisionConfig
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, pixels: Array) -> tuple[Array, Array]:
    """pixels (B, image_size, image_size, channels), normalized -> (last hidden states (B, 1 + patches, hidden),
    pooled (B, hidden))."""
    c = self.config
    batch, height, width, channels = pixels.shape
    if (height, width, channels) != (c.image_size, c.image_size, c.num_channels):
      raise ValueError(f"images of shape {(height, width, channels)}; the model takes "
                       f"{(c.image_size, c.image_size, c.num_channels)}: resize and crop first")
    p, side = c.patch_size, c.image_size // c.patch_size
    patches = pixels.reshape(batch, side, p, side, p, channels).transpose(0, 1, 3, 2, 4, 5)
    patches = patches.reshape(batch, side * side, p, p, channels).astype(self.dtype)
    kernel = self.param("patch_embedding", logical(nn.initializers.normal(0.02), (None, None, None, "embed")),
                        (p, p, channels, c.hidden_size))
    x = jnp.einsum("bnijc,ijce->bne", patches, kernel.astype(self.dtype))
    cls = self.param("class_embedding", logical(nn.initializers.normal(0.02), ("embed",)), (c.hidden_size,))
    x = jnp.concatenate([jnp.broadcast_to(cls.astype(self.dtype), (batch, 1, c.hidden_size)), x], axis=1)
    x = x + attn.embedding(c.num_patches + 1, c.hidden_size, ("length", "embed"),
                           "position_embedding")(jnp.arange(c.num_patches + 1))[None].astype(self.dtype)
    x = attn.layer_norm("pre_layernorm", c.layer_norm_eps, self.dtype)(x)
    for i in range(c.num_hidden_layers):
      x = EncoderLayer(c, self.dtype, name=f"layers_{i}")(x, None)
    return x, attn.layer_norm("post_layernorm", c.layer_norm_eps, self.dtype)(x[:, 0])


@flax.struct.dataclass
class CLIPOutput:
  text_embeds: Array       # (texts, projection_dim), L2-normalized
  image_embeds: Array      # (images, projection_dim), L2-normalized
  logits_per_image: Array  # (images, texts): exp(logit_scale) * cosine similarity


def normalize(embeddings: Array) -> Array:
  """Rows divided by their L2 norm (as CLIPModel normalizes before comparing)."""
  return embeddings / jnp.linalg.norm(embeddings, axis=-1, keepdims=True)


class CLIP(nn.Module):
  """CLIPModel: both towers, their projections into the shared space and the learned logit scale."""

  config: CLIPConfig
  dtype: Any = jnp.float32

  def setup(self):
    c = self.config

    def projection(name: str) -> nn.Dense:
      return nn.Dense(c.projection_dim, use_bias=False, dtype=self.dtype, name=name,
                      kernel_init=logical(nn.initializers.normal(stddev=0.02), ("embed", None)))

    self.text_model = TextTower(c.text, self.dtype)
    self.vision_model = VisionTower(c.vision, self.dtype)
    self.text_projection, self.visual_projection = projection("text_projection"), projection("visual_projection")
    self.logit_scale = self.param("logit_scale", logical(nn.initializers.constant(2.6592), ()), ())

  def embed_text(self, input_ids: Array, attention_mask: Array | None = None) -> Array:
    """(texts, projection_dim), not normalized (CLIPModel.get_text_features)."""
    return self.text_projection(self.text_model(input_ids, attention_mask)[1])

  def embed_image(self, pixels: Array) -> Array:
    """(images, projection_dim), not normalized (CLIPModel.get_image_features)."""
    return self.visual_projection(self.vision_model(pixels)[1])

  def __call__(self, input_ids: Array, attention_mask: Array | None, pixels: Array) -> CLIPOutput:
    text = normalize(self.embed_text(input_ids, attention_mask).astype(jnp.float32))
    image = normalize(self.embed_image(pixels).astype(jnp.float32))
    return CLIPOutput(text, image, jnp.exp(self.logit_scale) * image @ text.T)


def abstract_params(config: CLIPConfig) -> Any:
  """Shapes and logical axes of every parameter, without allocating them."""
  v = config.vision
  ids = jax.ShapeDtypeStruct((1, 2), jnp.int32)
  pixels = jax.ShapeDtypeStruct((1, v.image_size, v.image_size, v.num_channels), jnp.float32)
  return jax.eval_shape(CLIP(config).init, jax.random.key(0), ids, None, pixels)["params"]
