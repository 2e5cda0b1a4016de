"""A BERT-family encoder (BERT, MiniLM, ...) in Flax, laid out like Hugging Face's `BertModel`.

Besides the last hidden states it gives the pooled [CLS] output (tanh(dense(h[CLS])), BERT's pooler, the input of
a classification head) and, on request, every layer's attention weights per head: the style-phrase extractor ranks
words by the [CLS] row of those weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from capjax.text_models import attention as attn
from capjax.text_models.config import ConfigError, activation, integer, number

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """The fields of a Hugging Face BERT config.json that the network depends on (defaults are BertConfig's)."""

  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  dropout_rate: float = 0.1            # hidden_dropout_prob
  attention_dropout_rate: float = 0.1  # attention_probs_dropout_prob
  pad_token_id: int = 0
  pooler: bool = True          # whether the checkpoint has BERT's pooler (BertModel does; a masked-LM head does not)
  do_lower_case: bool = True   # the tokenizer's setting (tokenizer_config.json), kept beside the network's

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_dict(cls, config: Mapping[str, Any]) -> BertConfig:
    """Reads and checks a Hugging Face config.json (plus capjax's `pooler` and `do_lower_case`)."""
    if config.get("position_embedding_type", "absolute") != "absolute":
      raise ConfigError(f"config.json position_embedding_type is {config['position_embedding_type']!r}; only "
                        "'absolute' (BERT's learned positions) is supported")
    hidden, heads = integer(config, "hidden_size", 768), integer(config, "num_attention_heads", 12)
    if hidden % heads:
      raise ConfigError(f"config.json hidden_size={hidden} is not divisible by num_attention_heads={heads}")
    for flag in ("pooler", "do_lower_case"):
      if type(config.get(flag, True)) is not bool:
        raise ConfigError(f"config.json field {flag!r} must be true or false, got {config[flag]!r}")
    return cls(
        vocab_size=integer(config, "vocab_size"), hidden_size=hidden,
        num_hidden_layers=integer(config, "num_hidden_layers", 12), num_attention_heads=heads,
        intermediate_size=integer(config, "intermediate_size", 3072),
        hidden_act=activation(config, "hidden_act", "gelu"),
        max_position_embeddings=integer(config, "max_position_embeddings", 512),
        type_vocab_size=integer(config, "type_vocab_size", 2), layer_norm_eps=number(config, "layer_norm_eps", 1e-12),
        dropout_rate=number(config, "hidden_dropout_prob", 0.1),
        attention_dropout_rate=number(config, "attention_probs_dropout_prob", 0.1),
        pad_token_id=integer(config, "pad_token_id", 0, 0),
        pooler=config.get("pooler", True), do_lower_case=config.get("do_lower_case", True))

  def to_dict(self) -> dict[str, Any]:
    """A config.json that `from_dict` reads back (Hugging Face's field names; dropout as hidden_dropout_prob)."""
    fields = dataclasses.asdict(self)
    fields["hidden_dropout_prob"] = fields.pop("dropout_rate")
    fields["attention_probs_dropout_prob"] = fields.pop("attention_dropout_rate")
    return {"model_type": "bert", **fields}


@flax.struct.dataclass
class BertOutput:
  last_hidden_state: Array   # (B, T, hidden)
  pooled: Array | None       # (B, hidden): tanh(dense(h[CLS])); None when the checkpoint has no pooler
  attentions: Array | None   # (layers, B, heads, T, T) when asked for: attentions[l, b, h, 0] is [CLS]'s row


class BertLayer(nn.Module):
  config: BertConfig
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: Array, bias: Array, deterministic: bool) -> tuple[Array, Array]:
    c = self.config
    drop = nn.Dropout(c.dropout_rate)
    h, weights, _ = attn.SelfAttention(c.num_attention_heads, c.head_dim, c.attention_dropout_rate, self.dtype,
                                       name="attention")(x, bias, deterministic)
    x = attn.layer_norm("attention_norm", c.layer_norm_eps, self.dtype)(x + drop(h, deterministic=deterministic))
    h = attn.dense(c.intermediate_size, ("embed", "mlp"), "intermediate", self.dtype)(x)
    h = attn.dense(c.hidden_size, ("mlp", "embed"), "output", self.dtype)(attn.ACTIVATIONS[c.hidden_act](h))
    x = attn.layer_norm("output_norm", c.layer_norm_eps, self.dtype)(x + drop(h, deterministic=deterministic))
    return x, weights


class Bert(nn.Module):
  """BertModel: embeddings (word + position + token type, layer norm), post-norm layers, the optional pooler."""

  config: BertConfig
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, input_ids: Array, attention_mask: Array | None = None, token_type_ids: Array | None = None,
               deterministic: bool = True, return_attentions: bool = False) -> BertOutput:
    """input_ids (B, T) with T <= max_position_embeddings; attention_mask (B, T), 1 on tokens, 0 on padding."""
    c = self.config
    _, length = input_ids.shape
    if length > c.max_position_embeddings:
      raise ValueError(f"{length} tokens exceed max_position_embeddings={c.max_position_embeddings}: truncate first")
    if attention_mask is None:
      attention_mask = jnp.ones_like(input_ids)
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    x = (attn.embedding(c.vocab_size, c.hidden_size, ("vocab", "embed"), "word_embeddings")(input_ids)
         + attn.embedding(c.max_position_embeddings, c.hidden_size, ("length", "embed"),
                          "position_embeddings")(jnp.arange(length))[None]
         + attn.embedding(c.type_vocab_size, c.hidden_size, (None, "embed"), "token_type_embeddings")(token_type_ids))
    x = attn.layer_norm("embeddings_norm", c.layer_norm_eps, self.dtype)(x.astype(self.dtype))
    x = nn.Dropout(c.dropout_rate)(x, deterministic=deterministic)
    bias = attn.padding_bias(attention_mask)
    attentions = []
    for i in range(c.num_hidden_layers):
      x, weights = BertLayer(c, self.dtype, name=f"layer_{i}")(x, bias, deterministic)
      attentions.append(weights)
    pooled = None
    if c.pooler:
      pooled = jnp.tanh(attn.dense(c.hidden_size, ("embed", None), "pooler", self.dtype)(x[:, 0]))
    return BertOutput(x, pooled, jnp.stack(attentions) if return_attentions else None)


def mean_pool(hidden: Array, attention_mask: Array) -> Array:
  """sentence-transformers' mean pooling: the average of the hidden states where attention_mask is 1."""
  mask = attention_mask[..., None].astype(hidden.dtype)
  return (hidden * mask).sum(axis=-2) / jnp.maximum(mask.sum(axis=-2), 1e-9)


def abstract_params(config: BertConfig) -> Any:
  """Shapes and logical axes of every parameter, without allocating them."""
  ids = jax.ShapeDtypeStruct((1, 2), jnp.int32)
  return jax.eval_shape(Bert(config).init, jax.random.key(0), ids)["params"]
