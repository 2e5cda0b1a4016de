r"""The paper's RNN baseline: 1-layer 512-d LSTM encoder over the visual tokens, 1-layer LSTM decoder started
from its final state, no attention, tied embeddings. Everything else (data, Adagrad 0.01, batch 25, beam 4,
variants `8x8` / `1x1` / `shapes` / `stylized` / `debug` / `scst`) is as in configs/t2t.py.
"""

import pathlib

import ml_collections

from capjax import config_util

_T2T = pathlib.Path(__file__).with_name("t2t.py")  # beside this file, wherever the command runs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = config_util.load(f"{_T2T}:{arg or ''}")
  variants = set((arg or "").split(","))
  c.model.name = "rnn"
  for transformer_only in ("num_heads", "mlp_dim", "encoder_layers", "decoder_layers"):
    del c.model[transformer_only]
  if variants & {"shapes", "stylized"}:
    c.model.d_model = 256
  if "debug" in variants:
    c.model.d_model = 32
  return c
