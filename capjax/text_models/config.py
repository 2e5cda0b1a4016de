"""Reading Hugging Face config.json fields with one clear error per bad field (`ConfigError` names it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capjax.config_util import ConfigError  # the one ConfigError: a config.json's field, named in the message
from capjax.text_models.attention import ACTIVATIONS


def integer(config: Mapping[str, Any], field: str, default: int | None = None, minimum: int = 1) -> int:
  value = config.get(field, default)
  if type(value) is not int or value < minimum:
    raise ConfigError(f"config.json field {field!r} must be an integer >= {minimum}, got {value!r}")
  return value


def number(config: Mapping[str, Any], field: str, default: float) -> float:
  value = config.get(field, default)
  if type(value) not in (int, float) or not value >= 0:
    raise ConfigError(f"config.json field {field!r} must be a number >= 0, got {value!r}")
  return float(value)


def activation(config: Mapping[str, Any], field: str, default: str) -> str:
  value = config.get(field, default)
  if value not in ACTIVATIONS:
    raise ConfigError(f"config.json field {field!r} is {value!r}; supported: {sorted(ACTIVATIONS)}")
  return value
