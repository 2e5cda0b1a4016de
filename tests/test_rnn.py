"""What only the LSTM baseline does: its memory is the encoder LSTM's final carry, which is also its decoding
cache, and the 8x8 and 1x1 variants share every parameter. What every captioner does (cached decoding, tied
embeddings, parameter counts) is in test_captioner_contract.py."""

import flax.linen as nn
import jax
import numpy as np

from capjax.models import encoders, rnn

VOCAB = 19


def _model(grid: str = "8x8") -> rnn.RNN:
  cfg = rnn.RNNConfig(vocab_size=VOCAB, d_model=24, max_len=8, dropout_rate=0.0, grid=grid)
  return rnn.RNN(cfg, encoders.ConvGridEncoder(widths=(8, 16, 16), out_features=12))


def _init(model, seed=0):
  images = np.random.default_rng(seed).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
  tokens = np.random.default_rng(seed + 1).integers(0, VOCAB, (3, 8)).astype(np.int32)
  return nn.unbox(model.init(jax.random.key(seed), images, tokens)["params"]), images, tokens


def test_memory_is_the_encoder_carry_and_the_cache_is_the_memory():
  model = _model()
  params, images, _ = _init(model)
  memory = model.apply({"params": params}, images, method=model.encode)
  c, h = memory
  assert c.shape == h.shape == (3, 24)
  cache = model.apply({"params": params}, memory, method=model.init_cache)
  assert cache is memory


def test_8x8_and_1x1_share_every_parameter():
  shapes = [jax.tree.map(np.shape, _init(_model(grid))[0]) for grid in ("8x8", "1x1")]
  assert shapes[0] == shapes[1]
