"""Helpers several test modules share: random Inception-ResNet-v2 weights without XLA; optional extras; a free
loopback port; an export's SavedModel run in a process that imports TensorFlow alone."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

import pytest

from capjax.models import inception_resnet_v2 as irv2

IRV2_NUM_CLASSES = 1000
# XLA_FLAGS for a subprocess whose compiles matter and whose speed does not: LLVM's optimisation level 0 compiles
# about 2-3x faster (measured: accelerator_check --small 116 -> 58 CPU s, the multihost init ~3x), and small test
# models run about as fast. Runs a test compares with each other all use it, so they still agree bit for bit.
FAST_COMPILE = "--xla_backend_optimization_level=0"


def free_port() -> int:
  """A loopback port free now, for a jax.distributed coordinator or a server under test."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def slow_fixture(function):
  """Tags a fixture function (put it under `@pytest.fixture`) as slow: conftest.py marks `slow` every test that
  uses it, directly or through another fixture."""
  function.capjax_slow = True
  return function


def extra_missing(message: str) -> NoReturn:
  """Skips a test whose optional extra is absent, saying how to install it; under CI, where `make test` installs
  every extra the tests use, the absence is a broken set-up and fails the test instead."""
  if os.environ.get("CI"):
    pytest.fail(message)
  pytest.skip(message)


def import_extra(module: str, install: str) -> ModuleType:
  """`module`, or `extra_missing` with the `install` hint."""
  try:
    return importlib.import_module(module)
  except ImportError:
    extra_missing(f"{module} is not installed: {install}")


random_like = irv2.random_like  # the library's, which `convert_weights --format=random` writes


def random_irv2_variables(num_classes: int | None = IRV2_NUM_CLASSES, seed: int = 0) -> dict:
  """Random weights and batch-norm statistics of the released layout, as convert_weights would give them."""
  return irv2.random_variables(num_classes, seed)


def beam_config(folder: pathlib.Path, data_dir: str, beam_size: int = 3) -> pathlib.Path:
  """A user's `--config` file in `folder`: the tiny `:shapes,debug` run on `data_dir`, decoded with beam search of
  `beam_size` (what the export and serving tests export)."""
  repo = pathlib.Path(__file__).resolve().parents[1]
  path = folder / "beam.py"
  path.write_text(
      "from capjax import config_util\n\n\ndef get_config(arg=None):\n"
      f"  c = config_util.load('{repo / 'configs/t2t.py'}:shapes,debug')\n"
      f"  c.dataset.update(builder_config='tiny', data_dir='{data_dir}')\n"
      f"  c.decode.update(method='beam', beam_size={beam_size}, alpha=0.6)\n  return c\n")
  return path


# Run in a fresh interpreter outside the repository, with JAX, Flax and capjax made unimportable: TensorFlow 2.21
# imports jax when it can (tensorflow/lite/python/util.py tries `from jax import jit`), and a server has TF alone.
TF_ONLY = r"""
import importlib.abc, json, sys
class NoJax(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("jax", "jaxlib", "flax", "capjax"):
      raise ImportError(f"{name} is not installed on a TensorFlow server")
sys.meta_path.insert(0, NoJax())
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
serve = model.signatures["serving_default"]
alone, paths = sys.argv[2] == "alone", sys.argv[3:]
out = serve(images=tf.constant([open(p, "rb").read() for p in paths]))
one = serve(images=tf.constant([open(paths[0], "rb").read()])) if alone else None
assert "jax" not in sys.modules and "capjax" not in sys.modules, sorted(m for m in sys.modules if "jax" in m)
print(json.dumps({"captions": [[c.decode() for c in row] for row in out["captions"].numpy()],
                  "scores": out["scores"].numpy().tolist(), "dtypes": [out["captions"].dtype.name,
                  out["scores"].dtype.name],
                  "first_alone": [c.decode() for c in one["captions"].numpy()[0]] if alone else None}))
"""


def tf_only(saved_model: str | os.PathLike[str], paths: Sequence[str | os.PathLike[str]], alone: bool = True) -> dict:
  """What the SavedModel's `serving_default` gives for the encoded files `paths` in a process that imports TensorFlow
  alone (TF_ONLY): {"captions": [batch][k] strings, "scores": [batch][k], "dtypes", "first_alone": the first file's
  captions in a batch of one (with `alone`; TensorFlow compiles the decode again for it, seconds for a large model)}."""
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
  proc = subprocess.run([sys.executable, "-c", TF_ONLY, str(saved_model), "alone" if alone else "batch",
                         *map(str, paths)], capture_output=True, text=True, timeout=600, cwd="/",
                        env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])
