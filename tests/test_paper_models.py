"""The paper's four captioners (T2T and RNN, 8x8 and 1x1) from the real config files memorise one batch; at paper
size they train sharded over a (data=4, model=2) mesh; the 'irv2' encoder holds a fine-tunable IRv2."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from capjax import config_util, models, sharding
from capjax.tokens import BOS_ID, EOS_ID, PAD_ID
from capjax.models import inception_resnet_v2 as irv2
from capjax.train import make_setup
from helpers import random_like

pytestmark = pytest.mark.slow  # trains the paper's captioners (conftest.py: the slow rule)

PAPER_MODELS = ["configs/t2t.py:8x8", "configs/t2t.py:1x1", "configs/rnn.py:8x8", "configs/rnn.py:1x1"]
VOCAB = 50     # words incl. the 4 specials; padded to 64 embedding rows, split in two by the model axis
BATCH = 8
MAX_STEPS = 150
OVERFIT_LOSS = 0.05
SHARDED_MODELS = PAPER_MODELS  # each at the paper's widths and depths, one step on a (data=4, model=2) mesh


def _config(spec: str) -> ml_collections.ConfigDict:
  """The config file's model on pre-extracted features, trained with constant-rate Adam 3e-3, batch 8."""
  c = config_util.load(spec)
  assert c.model.encoder.name == "features" and tuple(c.dataset.feature_shape) == (8, 8, 1536)
  c.batch_size = BATCH
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 3e-3
  c.optimizer.warmup_steps = 0
  c.optimizer.schedule = "constant"
  return c


def _shrink(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Narrower and shallower for CI time; the architecture (grid, tied embeddings, layer types, 8 heads, the
  1536-d feature projection) is unchanged. Label smoothing and dropout are off: they keep the loss of a
  memorised batch above zero, and are training regularisers, not part of the architecture."""
  c.model.d_model = 64
  if c.model.name == "t2t":
    c.model.mlp_dim = 128
    c.model.encoder_layers = 2
    c.model.decoder_layers = 2
  c.model.dropout_rate = 0.0
  c.label_smoothing = 0.0
  return c


def _batch(seed: int = 0) -> dict[str, np.ndarray]:
  """Random (B, 8, 8, 1536) features and random captions of 5-15 words: BOS w1..wn -> w1..wn EOS, PAD after."""
  rng = np.random.default_rng(seed)
  features = rng.normal(size=(BATCH, 8, 8, 1536)).astype(np.float32)
  inputs = np.full((BATCH, 16), PAD_ID, np.int32)
  targets = np.full((BATCH, 16), PAD_ID, np.int32)
  for i, n in enumerate(rng.integers(5, 16, BATCH)):
    words = rng.integers(EOS_ID + 2, VOCAB, n)  # ids past the specials (UNK included as a word)
    inputs[i, 0], inputs[i, 1:n + 1] = BOS_ID, words
    targets[i, :n], targets[i, n] = words, EOS_ID
  return {"image": features, "inputs": inputs, "targets": targets}


def _random_state(setup):
  """A train state of random parameters (numpy draws, helpers.random_like) and their fresh optimizer state, placed
  as `setup` shards it. For the tests of the train step alone: XLA's init of a paper-size captioner compiles for
  longer than its train step (T2T 8x8: about 10 s on 2 cores; an LSTM's sharded orthogonal init, ~50 s), IRv2's
  for about a minute."""
  abstract = jax.eval_shape(setup.init, jax.random.key(0))
  params = random_like(abstract.params, np.random.default_rng(0))
  return jax.device_put(
      abstract.replace(step=np.zeros((), np.int32), params=params, opt_state=setup.tx.init(params)),
      setup.state_shardings)


@pytest.fixture(autouse=True)
def _free_compiled_programs():
  """Paper-size and IRv2 programs are large, and no two tests here compile the same one: jax's caches would keep
  each until the session ends (measured: the module's peak 8.5 -> 8.1 GB)."""
  yield
  jax.clear_caches()


@pytest.mark.parametrize("spec", PAPER_MODELS)
def test_memorises_one_batch(spec):
  config = _shrink(_config(spec))
  mesh = sharding.make_mesh(config, jax.devices()[:1])
  setup = make_setup(config, VOCAB, mesh)
  state = setup.init(jax.random.key(0))
  batch = sharding.host_to_global(_batch(), mesh)
  losses = []
  while len(losses) < MAX_STEPS and (not losses or losses[-1] >= OVERFIT_LOSS):
    state, metrics = setup.train_step(state, batch)
    losses.append(float(metrics["loss"]))
  assert losses[0] > 3.0, losses[0]  # starts near chance, ln(50) = 3.9
  assert losses[-1] < OVERFIT_LOSS, f"{spec}: loss {losses[-1]:.4f} after {len(losses)} steps"


@pytest.mark.parametrize("spec", SHARDED_MODELS)
def test_paper_size_train_step_is_sharded_over_data_and_model(spec):
  config = _config(spec)  # the paper's widths and depths
  config.mesh.data, config.mesh.model = 4, 2
  mesh = sharding.make_mesh(config)
  assert dict(mesh.shape) == {"data": 4, "fsdp": 1, "model": 2}
  setup = make_setup(config, VOCAB, mesh)
  state = _random_state(setup)  # the train step is what is tested (test_memorises_one_batch runs the init)
  embedding = state.params["embed"]["embedding"]
  assert embedding.shape == (64, 512) and embedding.sharding.spec == P("model", None)
  assert {s.data.shape for s in embedding.addressable_shards} == {(32, 512)}
  batch = sharding.host_to_global(_batch(), mesh)
  assert {s.data.shape[0] for s in batch["image"].addressable_shards} == {2}
  state, metrics = setup.train_step(state, batch)
  assert np.isfinite(float(metrics["loss"])) and np.isfinite(float(metrics["grad_norm"]))
  assert int(state.step) == 1


def test_irv2_encoder_holds_inception_resnet_v2_for_fine_tuning_on_pixels():
  """`model.encoder.name = 'irv2'`: the captioner's params hold a headless Inception-ResNet-v2 (weights and its
  frozen batch-norm statistics) and its memory is read from the network's grid. Shapes only: no compilation."""
  config = _config("configs/t2t.py:1x1")
  config.model.encoder.name = "irv2"
  model = models.build(config, VOCAB)
  images = jax.ShapeDtypeStruct((2, 75, 75, 3), jnp.uint8)  # the smallest input IRv2 takes
  tokens = jax.ShapeDtypeStruct((2, 16), jnp.int32)
  variables = nn.unbox(jax.eval_shape(model.init, jax.random.key(0), images, tokens))
  held = variables["params"]["image_encoder"]["irv2"]
  released = nn.unbox(irv2.abstract_variables(irv2.InceptionResNetV2(num_classes=None), image_size=75))
  assert jax.tree.map(lambda x: x.shape, held) == jax.tree.map(lambda x: x.shape, dict(released))
  assert set(held) == {"params", "batch_stats"}
  logits = jax.eval_shape(model.apply, variables, images, tokens)
  assert logits.shape == (2, 16, 64)
  memory = jax.eval_shape(functools.partial(model.apply, method=model.encode), variables, images)
  assert memory.shape == (2, 1, 512)  # one pooled visual token of d_model


def test_pixels_fine_tune_inception_resnet_v2_in_the_sharded_train_step():
  """`model.encoder.name = 'irv2'` trains end to end on uint8 pixels over a (data=2, model=4) mesh: the loss
  falls over three steps on one batch, IRv2's weights move, and its batch-norm statistics stay frozen."""
  config = _shrink(_config("configs/t2t.py:1x1"))
  config.model.encoder.name, config.dataset.features = "irv2", ""
  config.dataset.image_size = 75  # the smallest input IRv2 takes: a 1x1 grid, the fastest compile
  # Each fake device holds its own copy of what it replicates: IRv2 with Adam over data=4 took 6.9 GB, 5.2 here.
  config.mesh.data, config.mesh.model = 2, 4
  config.optimizer.learning_rate = 1e-3
  mesh = sharding.make_mesh(config)
  setup = make_setup(config, VOCAB, mesh)
  state = _random_state(setup)
  irv2_before = jax.device_get(state.params["image_encoder"]["irv2"])
  batch = _batch()
  batch["image"] = np.random.default_rng(1).integers(0, 256, (BATCH, 75, 75, 3), dtype=np.uint8)
  batch = sharding.host_to_global(batch, mesh)
  assert batch["image"].sharding.spec == P(("data", "fsdp"))
  losses = []
  for _ in range(3):
    state, metrics = setup.train_step(state, batch)
    losses.append(float(metrics["loss"]))
  assert losses[2] < losses[0], losses
  irv2_after = jax.device_get(state.params["image_encoder"]["irv2"])
  moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), irv2_before["params"], irv2_after["params"])
  assert all(jax.tree.leaves(moved))
  jax.tree.map(np.testing.assert_array_equal, irv2_before["batch_stats"], irv2_after["batch_stats"])
