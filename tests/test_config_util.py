"""config_util.load: the one way to load `configs/x.py:args`, from any working directory; validate and check_number:
a config's values, and every number of a command, checked before any work."""

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


@pytest.mark.parametrize("value, low, high, options, message", [
    (float("nan"), 0, None, {}, "--x=nan is not a finite number — set --x to at least 0"),
    (float("inf"), None, None, {}, "--x=inf is not a finite number — set --x to a number"),
    (-float("inf"), -1, 1, {}, "--x=-inf is not a finite number — set --x in [-1, 1]"),
    (0.0, 0, None, {"low_open": True}, "--x=0.0 is impossible — set --x to more than 0"),
    (2, 0, 1, {}, "--x=2 is impossible — set --x in [0, 1]"),
    (1.0, 0, 1, {"high_open": True}, "--x=1.0 is impossible — set --x in [0, 1)"),
    (True, 0, 1, {}, "--x=True is not a number — set --x to a number"),
])
def test_check_number_refuses_nan_infinities_and_values_out_of_range(value, low, high, options, message):
  with pytest.raises(config_util.ConfigError) as error:
    config_util.check_number("--x", value, low, high, **options)
  assert str(error.value) == message


def test_check_number_accepts_the_ends_of_a_closed_range():
  for value in (-1, 0.0, 1):
    config_util.check_number("--x", value, -1, 1)


def _shapes(**fields):
  config = config_util.load("configs/t2t.py:shapes,debug")
  for path, value in fields.items():
    parent, _, key = path.rpartition("__")
    (config[parent] if parent else config)[key] = value
  return config


@pytest.mark.parametrize("fields, message", [
    ({"optimizer__learning_rate": float("nan")},
     "--config.optimizer.learning_rate=nan is not a finite number — set --config.optimizer.learning_rate to more "
     "than 0"),
    ({"optimizer__learning_rate": float("inf")}, "optimizer.learning_rate=inf is not a finite number"),
    ({"model__dropout_rate": float("nan")}, "model.dropout_rate=nan is not a finite number — set "
                                            "--config.model.dropout_rate in [0, 1)"),
    ({"optimizer__learning_rate": 0.0}, "--config.optimizer.learning_rate=0.0 is impossible — set "
                                        "--config.optimizer.learning_rate to more than 0"),
    ({"label_smoothing": 1.0}, "--config.label_smoothing=1.0 is impossible — set --config.label_smoothing in [0, 1)"),
    ({"optimizer__b2": 1.0}, "--config.optimizer.b2=1.0 is impossible — set --config.optimizer.b2 in [0, 1)"),
    ({"optimizer__grad_clip_norm": -1.0}, "--config.optimizer.grad_clip_norm=-1.0 is impossible"),
    ({"augment__crop_min_scale": 0.0}, "--config.augment.crop_min_scale=0.0 is impossible — set "
                                       "--config.augment.crop_min_scale to more than 0"),
    ({"augment__crop_min_scale": 1.5}, "--config.augment.crop_min_scale=1.5 is impossible — set "
                                       "--config.augment.crop_min_scale to at most 1"),
    ({"eval__num_examples": 0}, "--config.eval.num_examples=0 is impossible"),
    ({"decode__method": "sample"}, "--config.decode.method='sample' is not a search evaluation decodes with — set "
                                   "it to greedy or beam"),
    ({"dataset__name": ""}, "dataset.name is empty — set --config.dataset.name to a dataset"),
    ({"dataset__name": "  "}, "dataset.name is empty"),
])
def test_validate_refuses_each_impossible_value(fields, message):
  with pytest.raises(config_util.ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
    config_util.validate(_shapes(**fields))


def test_the_caption_length_is_checked_against_the_runs_memory_by_a_stated_estimate():
  config = _shapes(max_caption_tokens=100_000, batch_size=16)
  # One layer's decoder self-attention scores for one batch: batch x heads x (tokens + 1)^2 x 4 bytes.
  assert config_util.attention_bytes(config) == 16 * config.model.num_heads * 100_001**2 * 4
  with pytest.raises(config_util.ConfigError) as error:
    config_util.validate(config, memory=128 << 30)
  assert str(error.value).startswith(f"max_caption_tokens=100000 needs more memory than the run has: one layer's "
                                     f"attention scores for one batch alone take "
                                     f"{16 * 2 * 100_001**2 * 4 / 2**30:,.0f} GiB")
  config_util.validate(config, memory=config_util.attention_bytes(config))  # fits exactly: allowed
  for spec in ("configs/t2t.py", "configs/t2t.py:shapes", "configs/t2t.py:stylized", "configs/rnn.py"):
    config_util.validate(config_util.load(spec), memory=1 << 30)  # every shipped config fits in 1 GiB
  assert config_util.attention_bytes(config_util.load("configs/rnn.py")) is None  # no attention heads


def test_the_memory_of_several_processes_adds_up():
  """A length whose estimate is 1.5 times this machine's memory: refused in one process, allowed in two."""
  config = _shapes()
  per_token_squared = config.batch_size * config.model.num_heads * 4
  config.max_caption_tokens = int((1.5 * config_util.machine_memory() / per_token_squared) ** 0.5)
  with pytest.raises(config_util.ConfigError, match=r"1 process\(es\) have"):
    config_util.validate(config)
  config_util.validate(config, processes=2)
