"""The hostile cases' session fixtures, which conftest.py registers: built once per pytest session, whichever
case files run (a module-scoped fixture imported into each case file would be built once per file). Heavy imports
stay inside them: conftest must not import jax before it sets XLA_FLAGS.

The pytest that test_hostile_every_command.py starts for the file-mode cases takes the data dir and the assets its
parent built (SHARED names the variables that pass them), rather than building them again.
"""

from __future__ import annotations

import os
import pathlib

import pytest

SHARED = {"hostile_assets": "CAPJAX_TEST_HOSTILE_ASSETS", "hostile_data_dir": "CAPJAX_TEST_HOSTILE_DATA_DIR"}


@pytest.fixture(scope="session")
def hostile_assets(tmp_path_factory) -> pathlib.Path:
  """{a}: weight files and folders that take a library to write (`inputs.build_assets`), checked unchanged by every
  case that names them."""
  if os.environ.get(SHARED["hostile_assets"]):
    return pathlib.Path(os.environ[SHARED["hostile_assets"]])
  from hostile.inputs import build_assets
  root = tmp_path_factory.mktemp("hostile_assets")
  build_assets(root)
  return root


@pytest.fixture(scope="session")
def hostile_data_dir(tmp_path_factory) -> pathlib.Path:
  """{d}: synthetic_scenes/tiny built as `python -m capjax.data.build` builds it (about 2 s)."""
  if os.environ.get(SHARED["hostile_data_dir"]):
    return pathlib.Path(os.environ[SHARED["hostile_data_dir"]])
  from capjax.data import build
  directory = tmp_path_factory.mktemp("hostile_tfds")
  build.main(["capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={directory}"])
  return directory


@pytest.fixture(scope="session")
def hostile_commands() -> list[str]:
  """Every command, and TensorFlow, imported before the first case, so that import-time chatter on stderr
  (TensorFlow's oneDNN notice) is not taken for a case's output."""
  import tensorflow_datasets  # noqa: F401

  from hostile import harness
  found = harness.commands()
  for command in found:
    harness.command_module(command)
  return found
