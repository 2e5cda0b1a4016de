r"""The paper's RNN baseline: 1-layer 512-d LSTM encoder over the visual tokens, 1-layer LSTM decoder started
from its final state, no attention, tied embeddings. Everything else (data, Adagrad 0.01, batch 25, beam 4,
variants `8x8` / `1x1` / `shapes` / `debug`) is as in configs/t2t.py.
"""

import importlib.util
import pathlib

import ml_collections

_spec = importlib.util.spec_from_file_location("capjax_config_t2t", pathlib.Path(__file__).with_name("t2t.py"))
_t2t = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_t2t)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = _t2t.get_config(arg)
  variants = set((arg or "").split(","))
  c.model.name = "rnn"
  for transformer_only in ("num_heads", "mlp_dim", "encoder_layers", "decoder_layers"):
    del c.model[transformer_only]
  if "shapes" in variants:
    c.model.d_model = 256
  if "debug" in variants:
    c.model.d_model = 32
  return c
