"""Prints the parameter counts of configured models, measured from their shapes and by the analytic formula.

`python -m capjax.tools.param_count --config=configs/t2t.py:8x8 --config=configs/rnn.py:1x1 [--vocab_size=N]`
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Sequence

import jax
import numpy as np

from capjax import models
from capjax.models import rnn, t2t


def load_config(spec: str):
  """`path.py[:arg]` -> the ConfigDict its get_config(arg) returns."""
  path, _, arg = spec.partition(":")
  module_spec = importlib.util.spec_from_file_location(f"config_{os.path.basename(path)[:-3]}", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(arg or None)


def counts(config, vocab_size: int) -> dict[str, int]:
  """{'measured', 'analytic', 'image_encoder'}: parameters outside the image encoder, and its own."""
  model = models.build(config, vocab_size)
  images = np.zeros((1, *config.dataset.feature_shape), np.float32) if config.model.encoder.name == "features" \
      else np.zeros((1, config.dataset.image_size, config.dataset.image_size, 3), np.uint8)
  tokens = np.zeros((1, config.max_caption_tokens + 1), np.int32)
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), images, tokens))["params"]
  sizes = {k: sum(int(np.prod(x.shape)) for x in jax.tree.leaves(v)) for k, v in shapes.items()}
  encoder = sizes.pop("image_encoder", 0)
  feature_dim = {"features": config.dataset.feature_shape[-1], "irv2": 1536}.get(
      config.model.encoder.name, config.model.encoder.get("out_features"))
  if config.model.name == "t2t":
    analytic = t2t.count_params(model.config, feature_dim)
  else:
    analytic = rnn.count_params(model.config.vocab_size, model.config.d_model, feature_dim)
  return {"measured": sum(sizes.values()), "analytic": analytic, "image_encoder": encoder}


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", action="append", required=True, help="config file[:variants]; repeatable")
  parser.add_argument("--vocab_size", type=int, default=10_000, help="caption vocabulary incl. specials")
  args = parser.parse_args(argv)
  print(f"{'config':<28} {'params (measured)':>18} {'analytic':>12} {'image encoder':>14}")
  ok = True
  for spec in args.config:
    c = counts(load_config(spec), args.vocab_size)
    ok &= c["measured"] == c["analytic"]
    print(f"{spec:<28} {c['measured']:>18,} {c['analytic']:>12,} {c['image_encoder']:>14,}")
  return 0 if ok else 1


if __name__ == "__main__":
  raise SystemExit(main())
