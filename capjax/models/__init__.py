"""Flax captioning models; `build(config, vocab_size)` is the one place a model is chosen from a config."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from capjax import tokens
from capjax.config_util import ConfigError
from capjax.models import encoders, inception_resnet_v2
from capjax.models.rnn import RNN, RNNConfig
from capjax.models.t2t import T2T, T2TConfig

MODELS = ("t2t", "rnn")
ENCODERS = ("conv", "features", "irv2")


class IRv2Grid(nn.Module):
  """Inception-ResNet-v2 without its head, fine-tuned with the captioner: pixels -> its (B, h, w, 1536) grid.

  Batch norm runs on its stored statistics (frozen, as when fine-tuning with small batches); they live beside
  the weights in this module's params, since the train step carries params only, and get no gradient.
  """

  @nn.compact
  def __call__(self, images: jax.Array, train: bool = False) -> jax.Array:
    del train  # frozen batch norm, no dropout
    net = inception_resnet_v2.InceptionResNetV2(num_classes=None)
    x = encoders.to_unit_range(images)
    variables = self.param("irv2", lambda rng: net.init(rng, jnp.zeros((1, *x.shape[1:]), jnp.float32)))
    stats = jax.lax.stop_gradient(variables["batch_stats"])
    return net.apply({"params": variables["params"], "batch_stats": stats}, x)["grid"]


DTYPES = ("float32", "bfloat16")


def build_encoder(config: ml_collections.ConfigDict, dtype: jnp.dtype = jnp.float32) -> nn.Module:
  name = config.name
  if name == "conv":
    return encoders.ConvGridEncoder(widths=tuple(config.widths), out_features=config.out_features, dtype=dtype)
  if name == "features":
    return encoders.FeatureGrid()
  if name == "irv2":
    return IRv2Grid()
  raise ValueError(f"model.encoder.name={name!r} is not one of {ENCODERS}")


def build(config: ml_collections.ConfigDict, vocab_size: int) -> nn.Module:
  """The captioner described by `config.model` over a vocabulary of `vocab_size` ids.

  The embedding table is padded to a multiple of `model.vocab_multiple` rows so that tensor parallelism can
  split it; the padding rows' logits are masked, so they are never predicted.
  """
  m = config.model
  rows = -(-vocab_size // m.vocab_multiple) * m.vocab_multiple
  if not 0 < rows <= tokens.MAX_VOCAB_SIZE:  # int32 ids; beyond, jax fails on an overflow deep in a trace
    raise ConfigError(f"a vocabulary of {vocab_size:,} words (padded to {rows:,} rows) does not fit int32 token "
                      f"ids — use at most {tokens.MAX_VOCAB_SIZE - m.vocab_multiple + 1:,} words")
  name = m.get("dtype", "float32")
  if name not in DTYPES:
    raise ValueError(f"model.dtype={name!r} is not one of {DTYPES}")
  dtype = jnp.dtype(name)
  if m.name == "t2t":
    t2t = T2TConfig(
        vocab_size=rows, num_words=vocab_size, d_model=m.d_model, num_heads=m.num_heads, mlp_dim=m.mlp_dim,
        encoder_layers=m.encoder_layers, decoder_layers=m.decoder_layers,
        max_len=config.max_caption_tokens + 1, dropout_rate=m.dropout_rate, grid=m.grid, dtype=dtype)
    return T2T(t2t, build_encoder(m.encoder, dtype))
  if m.name == "rnn":
    rnn = RNNConfig(vocab_size=rows, num_words=vocab_size, d_model=m.d_model,
                    max_len=config.max_caption_tokens + 1, dropout_rate=m.dropout_rate, grid=m.grid, dtype=dtype)
    return RNN(rnn, build_encoder(m.encoder, dtype))
  raise ValueError(f"model.name={m.name!r} is not one of {MODELS}")
