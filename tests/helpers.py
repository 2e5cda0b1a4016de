"""Helpers several test modules share: random Inception-ResNet-v2 weights without XLA; optional extras."""

from __future__ import annotations

import importlib
import os
import pathlib
import socket
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
