"""`model.dtype=bfloat16`: layers compute in bfloat16 while parameters, optimizer state and the loss stay float32,
and a short `:shapes` run's loss curve (20 steps, batch 8) follows float32's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from capjax import config_util, sharding
from capjax.data import pipeline, sources
from capjax.data.vocab import build_vocabulary
from capjax.train import make_setup

pytestmark = pytest.mark.slow  # the module fixture trains two :shapes runs (conftest.py: the slow rule)

STEPS = 20
# bfloat16 keeps 8 bits of mantissa (relative rounding 2^-9 ≈ 0.2%) on every activation, while the residual stream,
# logits and loss stay float32: over these 20 Adam steps the losses differ by at most 0.09% (measured on a 2-core
# CPU). 1% leaves room for other machines' summation orders, while a bfloat16 mistake (a bfloat16 residual stream,
# softmax over the vocabulary or loss) moves the curve by more.
RELATIVE_TOLERANCE = 0.01


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  config = config_util.load("configs/t2t.py:shapes")
  config.dataset.update(builder_config="tiny", data_dir=str(tmp_path_factory.mktemp("tfds")))
  config.batch_size = 8
  source = sources.data_source(config.dataset, config.dataset.train_split)
  vocab = build_vocabulary(pipeline.split_captions(source), config.vocab.min_count)
  iterator = pipeline.train_iterator(config, source, vocab, sources.input_spec(config).key)
  batches = [next(iterator) for _ in range(STEPS)]
  mesh = sharding.make_mesh(config, jax.devices()[:1])

  def train(dtype: str):
    config.model.dtype = dtype
    setup = make_setup(config, len(vocab), mesh)
    state = setup.init(jax.random.key(0))
    losses = []
    for batch in batches:
      state, metrics = setup.train_step(state, sharding.host_to_global(batch, mesh))
      losses.append(float(metrics["loss"]))
    hlo = setup.train_step.lower(state, sharding.host_to_global(batches[0], mesh)).as_text()
    return np.array(losses), state, hlo

  return train("float32"), train("bfloat16")


def test_bfloat16_loss_curve_follows_float32(run):
  (f32, _, _), (bf16, _, _) = run
  assert f32[-1] < 0.7 * f32[0]  # the curve is a learning curve, not noise around the start
  np.testing.assert_allclose(bf16, f32, rtol=RELATIVE_TOLERANCE)
  assert not np.array_equal(bf16, f32)  # bfloat16 was really used


def test_bfloat16_computes_in_bfloat16_but_keeps_float32_state(run):
  _, (_, state, hlo) = run
  assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {jnp.dtype("float32")}
  assert {leaf.dtype for leaf in jax.tree.leaves(state.opt_state) if hasattr(leaf, "dtype")} <= {
      jnp.dtype("float32"), jnp.dtype("int32")}
  assert "bf16" in hlo
