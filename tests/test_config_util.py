"""config_util.load: the one way to load `configs/x.py:args`, from any working directory."""

import pathlib

import pytest

from capjax import config_util

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_variants_and_values_reach_get_config():
  c = config_util.load("configs/t2t.py:shapes,steps=7")
  assert (c.dataset.name, c.num_train_steps, c.model.d_model) == ("synthetic_scenes", 7, 128)
  assert config_util.load("configs/t2t.py").dataset.feature_key == "grid"  # no arg: get_config(None)


def test_rnn_loads_t2t_beside_it_from_another_working_directory(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  c = config_util.load(REPO / "configs" / "rnn.py")
  assert (c.model.name, c.model.d_model, c.dataset.feature_key) == ("rnn", 512, "grid")
  assert "num_heads" not in c.model
  c = config_util.load(f"{REPO / 'configs' / 'rnn.py'}:1x1,debug")
  assert (c.model.d_model, c.dataset.feature_key, c.num_train_steps) == (32, "pooled", 20)


def test_each_load_is_a_fresh_config():
  a = config_util.load("configs/t2t.py:shapes")
  a.batch_size = 3
  assert config_util.load("configs/t2t.py:shapes").batch_size == 64


def test_a_missing_file_or_an_unknown_variant_is_an_error():
  with pytest.raises(FileNotFoundError, match="config file 'configs/nothing.py' not found"):
    config_util.load("configs/nothing.py:shapes")
  with pytest.raises(ValueError, match="unknown config variant 'shape'"):
    config_util.load("configs/t2t.py:shape")


def test_a_file_that_is_not_python_is_named_as_such(tmp_path):
  data = tmp_path / "settings.json"
  data.write_text("{}")
  with pytest.raises(FileNotFoundError, match=r"settings.json' is not a config file \(a \.py file\)"):
    config_util.load(data)
