"""Helpers several test modules share: random Inception-ResNet-v2 weights without XLA; optional extras."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, NoReturn

import flax.linen as nn
import jax
import numpy as np
import pytest

from capjax.models import inception_resnet_v2 as irv2

IRV2_NUM_CLASSES = 1000
# XLA_FLAGS for a subprocess whose compiles matter and whose speed does not: LLVM's optimisation level 0 compiles
# about 2-3x faster (measured: accelerator_check --small 116 -> 58 CPU s, the multihost init ~3x), and small test
# models run about as fast. Runs a test compares with each other all use it, so they still agree bit for bit.
FAST_COMPILE = "--xla_backend_optimization_level=0"


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


def random_like(abstract: Any, rng: np.random.Generator) -> Any:
  """Numpy draws of every leaf's shape: normals scaled by 1/sqrt(fan-in), batch-norm variances in [0.5, 2]
  (XLA's init of a whole Inception-ResNet-v2 takes about a minute to compile on a 2-core CPU)."""
  def draw(path: tuple, leaf: jax.ShapeDtypeStruct) -> np.ndarray:
    if getattr(path[-1], "key", None) == "var":
      return rng.uniform(0.5, 2.0, leaf.shape).astype(leaf.dtype)
    fan_in = int(np.prod(leaf.shape[:-1])) if len(leaf.shape) > 1 else 25
    return rng.normal(0, 1 / np.sqrt(fan_in), leaf.shape).astype(leaf.dtype)
  return jax.tree_util.tree_map_with_path(draw, abstract)


def random_irv2_variables(num_classes: int | None = IRV2_NUM_CLASSES, seed: int = 0) -> dict:
  """Random weights and batch-norm statistics of the released layout, as convert_weights would give them."""
  abstract = nn.meta.unbox(irv2.abstract_variables(irv2.InceptionResNetV2(num_classes=num_classes)))
  return random_like(abstract, np.random.default_rng(seed))
