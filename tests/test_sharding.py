"""Sharded training on 8 fake CPU devices: parameters placed as the logical-axis rules say, and the same
losses as on one device."""

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from capjax import config_util, sharding
from capjax.train import make_setup


VOCAB = 37  # deliberately not a multiple of the model axis: the table is padded


def _config(data: int, model: int):
  c = config_util.load("configs/t2t.py:shapes,debug")
  c.mesh.data, c.mesh.model = data, model
  c.batch_size = 16
  c.optimizer.warmup_steps = 0
  return c


def _batches(n: int, batch: int = 16):
  rng = np.random.default_rng(0)
  return [{"image": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
           "inputs": rng.integers(4, VOCAB, (batch, 16)).astype(np.int32),
           "targets": rng.integers(2, VOCAB, (batch, 16)).astype(np.int32)} for _ in range(n)]


# LLVM's optimisation level 0 for the programs compiled here (the same HLO, the same partitioning): about half the
# CPU time of a compile (tests/test_sharding_rules.py measured 12.4 -> 6.4 CPU s for an init and a train step).
FAST_COMPILE = {"xla_backend_optimization_level": 0}


def _init(setup):
  """The state of the setup's own jitted init."""
  return setup.init.lower(jax.random.key(0)).compile(FAST_COMPILE)(jax.random.key(0))


def _losses(config, devices, batches):
  mesh = sharding.make_mesh(config, devices)
  setup = make_setup(config, VOCAB, mesh)
  state = _init(setup)
  batches = [sharding.host_to_global(b, mesh) for b in batches]
  train_step = setup.train_step.lower(state, batches[0]).compile(FAST_COMPILE)
  losses = []
  for b in batches:
    state, m = train_step(state, b)
    losses.append(float(m["loss"]))
  return state, np.asarray(losses)


def test_needs_eight_fake_devices():
  assert jax.device_count() == 8, "tests/conftest.py must set XLA_FLAGS before jax starts"


def test_parameters_are_sharded_as_the_rules_say():
  config = _config(4, 2)
  mesh = sharding.make_mesh(config)
  assert dict(mesh.shape) == {"data": 4, "fsdp": 1, "model": 2}
  setup = make_setup(config, VOCAB, mesh)
  state = _init(setup)
  p = state.params
  spec = lambda x: x.sharding.spec  # noqa: E731
  assert spec(p["embed"]["embedding"]) == P("model", None)             # (vocab, embed)
  assert p["embed"]["embedding"].shape[0] == 64                         # 37 padded to vocab_multiple
  assert spec(p["decoder_0"]["mlp"]["wi"]["kernel"]) == P(None, "model")  # (embed, mlp)
  assert spec(p["decoder_0"]["mlp"]["wo"]["kernel"]) == P("model", None)  # (mlp, embed)
  assert spec(p["encoder_0"]["attn"]["query"]["kernel"]) == P(None, "model", None)  # (embed, heads, kv)
  assert spec(p["encoder_0"]["attn"]["out_kernel"]) == P("model", None, None)       # (heads, kv, embed)
  assert spec(p["image_encoder"]["conv_0"]["kernel"]) == P(None, None, None, "model")
  assert spec(p["decoder_norm"]["scale"]) == P(None)
  # Each device holds half of a model-sharded kernel.
  wi = p["decoder_0"]["mlp"]["wi"]["kernel"]
  assert {s.data.shape for s in wi.addressable_shards} == {(wi.shape[0], wi.shape[1] // 2)}
  # Optimizer state follows its parameter.
  leaves = [x for x in jax.tree.leaves(state.opt_state) if getattr(x, "shape", None) == wi.shape]
  assert leaves and all(x.sharding.spec == P(None, "model") for x in leaves)


def test_data_parallel_batches_are_split_over_the_data_axis():
  mesh = sharding.make_mesh(_config(4, 2))
  batch = sharding.host_to_global(_batches(1)[0], mesh)
  assert batch["image"].sharding.spec == P(("data", "fsdp"))
  assert {s.data.shape[0] for s in batch["image"].addressable_shards} == {4}


@pytest.mark.slow  # trains (conftest.py: the slow rule)
def test_sharded_losses_match_single_device():
  batches = _batches(4)
  _, single = _losses(_config(1, 1), jax.devices()[:1], batches)
  _, sharded = _losses(_config(4, 2), jax.devices(), batches)
  assert single[0] != single[-1]  # it trains
  np.testing.assert_allclose(sharded, single, atol=1e-5, rtol=0)


def test_mesh_that_does_not_fit_the_devices_is_a_clear_error():
  with pytest.raises(ValueError, match="needs 6 devices"):
    sharding.make_mesh(_config(3, 2))


def test_label_smoothing_ignores_the_padding_rows_of_the_embedding():
  config = _config(1, 1)
  config.label_smoothing = 0.1
  _, [loss] = _losses(config, jax.devices()[:1], _batches(1))  # 37 words in a 64-row table
  # Near-uniform predictions at initialisation: about ln(37) nats, not ~1e9 from the masked rows.
  assert 2.5 < loss < 5.0


@pytest.mark.slow  # trains (conftest.py: the slow rule)
def test_accumulated_micro_batches_give_the_whole_batch_update_on_a_mesh():
  # optimizer.accumulate_steps=4: the 16 examples in four micro-batches of 4 (each spread over the 4 data shards), the
  # gradients summed over all the batch's tokens before one update: the same states as the whole batch. The paper's
  # Adagrad, whose update is smooth in the gradient: Adam's first steps are about lr * sign(g), so a rounding-sized
  # gradient near 0 moves its parameter by a whole step one way or the other.
  whole, accumulated = _config(4, 2), _config(4, 2)
  for c in (whole, accumulated):
    c.model.dropout_rate = 0.0  # each micro-batch draws its own dropout masks
    c.optimizer.name, c.optimizer.learning_rate, c.optimizer.schedule = "adagrad", 0.01, "constant"
  accumulated.optimizer.accumulate_steps = 4
  batches = _batches(2)
  for b in batches:  # captions of 1 to 16 words: micro-batches of unequal token counts (a mean of means would differ)
    b["targets"][np.arange(16)[None, :] > np.arange(16)[:, None]] = 0  # PAD
  state_whole, losses_whole = _losses(whole, None, batches)
  state_acc, losses_acc = _losses(accumulated, None, batches)
  np.testing.assert_allclose(losses_acc, losses_whole, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(state_acc.params), jax.tree.leaves(state_whole.params), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
  accumulated.optimizer.accumulate_steps = 3
  with pytest.raises(config_util.ConfigError, match="accumulate_steps=3 does not divide batch_size=16"):
    config_util.validate(accumulated)
