"""What only the T2T captioner does: 1x1/8x8 visual tokens with tensor2tensor's sinusoidal positions. What
every captioner does (cached decoding, tied embeddings, logical axes) is in test_captioner_contract.py."""

import jax
import numpy as np
import pytest

from capjax.models import encoders
from capjax.models.layers import sinusoidal_positions
from capjax.models.t2t import T2T, T2TConfig

VOCAB = 23


def _model(grid: str = "8x8") -> T2T:
  cfg = T2TConfig(vocab_size=VOCAB, d_model=32, num_heads=4, mlp_dim=64, encoder_layers=2, decoder_layers=2,
                  max_len=8, dropout_rate=0.0, grid=grid)
  return T2T(cfg, encoders.ConvGridEncoder(widths=(8, 16, 16), out_features=24))


def _init(model: T2T, seed: int = 0):
  images = np.random.default_rng(seed).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
  tokens = np.random.default_rng(seed + 1).integers(0, VOCAB, (3, 8)).astype(np.int32)
  variables = model.init(jax.random.key(seed), images, tokens)
  return variables, images, tokens


@pytest.mark.parametrize("grid,tokens", [("8x8", 64), ("1x1", 1)])
def test_visual_tokens_grid(grid, tokens):
  model = _model(grid)
  variables, images, _ = _init(model)
  memory = model.apply(variables, images, method=model.encode)
  assert memory.shape == (3, tokens, 32)


def test_sinusoidal_positions_match_tensor2tensor_formula():
  pos = sinusoidal_positions(64, 8)
  # channel 0: sin(p), channel 4: cos(p) (timescale 1); channel 3: sin(p / 1e4).
  np.testing.assert_allclose(pos[:, 0], np.sin(np.arange(64)), atol=1e-6)
  np.testing.assert_allclose(pos[:, 4], np.cos(np.arange(64)), atol=1e-6)
  np.testing.assert_allclose(pos[:, 3], np.sin(np.arange(64) / 1e4), atol=1e-6)
