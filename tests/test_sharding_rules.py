"""The rules tables (dp, fsdp, tp, fsdp_tp) on 8 fake CPU devices: parameters and optimizer state placed as each
table says, the losses of one device, the promised per-device bytes, activation constraints that reach the
compiled program, mesh settings that fail in one line, and the sharding report."""

import math
import os
import pathlib
import subprocess
import sys

import flax.linen as nn
import helpers
import jax
import ml_collections
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from capjax import config_util, sharding
from capjax.config_util import ConfigError
from capjax.data import sources
from capjax.models import inception_resnet_v2 as irv2
from capjax.tools import sharding_report
from capjax.train import make_setup, state_init_fn

REPO = pathlib.Path(__file__).resolve().parent.parent
VOCAB = 37
STEPS = 5
DF = ("data", "fsdp")
# Each table on a mesh of all 8 devices that uses it fully.
MESHES = {"dp": {"data": 8}, "fsdp": {"data": 4, "fsdp": 2}, "tp": {"data": 4, "model": 2},
          "fsdp_tp": {"data": 2, "fsdp": 2, "model": 2}}


def _config(rules: str = "tp", **sizes):
  """The debug T2T (d=32, 2 heads, mlp 64, 64 vocabulary rows) on a small 4x4x24 feature grid: compiles fast."""
  c = config_util.load("configs/t2t.py:debug")
  c.dataset.feature_shape = (4, 4, 24)
  c.mesh.update({"data": 1, "fsdp": 1, "model": 1, **sizes, "rules": rules})
  c.batch_size = 16
  c.optimizer.learning_rate = 0.05  # the paper's Adagrad: its accumulators must follow the parameters
  c.optimizer.warmup_steps = 0
  return c


def _batches():
  rng = np.random.default_rng(0)
  return [{"image": rng.normal(size=(16, 4, 4, 24)).astype(np.float32),
           "inputs": rng.integers(4, VOCAB, (16, 16)).astype(np.int32),
           "targets": rng.integers(2, VOCAB, (16, 16)).astype(np.int32)} for _ in range(STEPS)]


# LLVM's optimisation level 0 for the programs compiled here (the same HLO, the same partitioning): half the CPU
# time of a table's init and train step (measured: 12.4 -> 6.4 CPU s), the losses unchanged to 1e-6.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


def _train(config, devices):
  """(initial state, losses of STEPS steps), through the setup's own jitted init and train step."""
  setup = make_setup(config, VOCAB, sharding.make_mesh(config, devices))
  state = setup.init.lower(jax.random.key(0)).compile(FAST_COMPILE)(jax.random.key(0))
  initial = jax.tree.map(lambda x: x.sharding, state)
  per_device = sum(x.addressable_shards[0].data.nbytes for x in jax.tree.leaves((state.params, state.opt_state)))
  total = sum(x.nbytes for x in jax.tree.leaves((state.params, state.opt_state)))
  batches = [sharding.host_to_global(batch, setup.mesh) for batch in _batches()]
  train_step = setup.train_step.lower(state, batches[0]).compile(FAST_COMPILE)
  losses = []
  for batch in batches:
    state, m = train_step(state, batch)
    losses.append(float(m["loss"]))
  return {"shardings": initial, "per_device": per_device, "total": total, "losses": np.asarray(losses)}


@pytest.fixture(scope="module")
@helpers.slow_fixture  # trains
def single():
  return _train(_config(), jax.devices()[:1])


@pytest.fixture(scope="module", params=list(MESHES))
@helpers.slow_fixture  # trains, on each mesh
def run(request):
  return request.param, _train(_config(request.param, **MESHES[request.param]), jax.devices())


# ---------------------------------------------------------------------------------------------- the tables


def test_every_table_maps_every_logical_axis_once():
  for name, table in sharding.RULES.items():
    names = [logical for logical, _ in table]
    assert sorted(names) == sorted(sharding.LOGICAL_AXES), name
    assert names[0] == "batch", name  # first: an activation's other names never take the batch's axes


def test_the_default_table_is_the_old_one():
  """`tp` is the table capjax had before there were others (batch on data, which its fsdp axis of 1 joins)."""
  old = {"batch": "data", "vocab": "model", "mlp": "model", "heads": "model", "conv_out": "model",
         "classes": "model"}
  tp = dict(sharding.TP)
  assert sharding.DEFAULT_RULES == "tp" and tp["batch"] == DF
  assert {k: tp[k] for k in old if k != "batch"} == {k: v for k, v in old.items() if k != "batch"}
  assert all(tp[k] is None for k in ("kv", "embed", "length", "grid", "conv_h", "conv_w", "conv_in", "features",
                                     "height", "width", "channels"))


def _recorded_names(monkeypatch):
  """Every logical name the T2T, the LSTM and IRv2 give a parameter or an activation constraint."""
  seen = set()
  original = nn.with_logical_constraint

  def record(x, axes, *args, **kwargs):
    seen.update(a for a in axes if a is not None)
    return original(x, axes, *args, **kwargs)

  monkeypatch.setattr(nn, "with_logical_constraint", record)
  for spec in ("configs/t2t.py:shapes,debug", "configs/rnn.py:shapes,debug"):
    config = config_util.load(spec)
    model, _, init_fn = state_init_fn(config, VOCAB, sources.input_spec(config))
    abstract = jax.eval_shape(init_fn, jax.random.key(0))
    for axes in jax.tree.leaves(sharding.logical_axes(abstract.params), is_leaf=lambda x: isinstance(x, tuple)):
      seen.update(axes)
    params = nn.unbox(abstract.params)
    images, tokens = sources.input_spec(config).zeros(2), np.zeros((2, 16), np.int32)

    def decode(p, images, tokens, model=model):  # teacher forcing and one cached step
      memory = model.apply({"params": p}, images, method=model.encode)
      cache = model.apply({"params": p}, memory, method=model.init_cache)
      step = model.apply({"params": p}, cache, tokens[:, 0], np.int32(0), method=model.decode_step)
      return model.apply({"params": p}, images, tokens, train=True, rngs={"dropout": jax.random.key(0)}), step

    jax.eval_shape(decode, params, images, tokens)
  variables = irv2.abstract_variables(irv2.InceptionResNetV2(num_classes=10), image_size=irv2.MIN_IMAGE_SIZE)
  for axes in jax.tree.leaves(sharding.logical_axes(variables), is_leaf=lambda x: isinstance(x, tuple)):
    seen.update(axes)
  return seen


def test_every_name_the_models_use_is_in_every_table(monkeypatch):
  seen = _recorded_names(monkeypatch)
  assert {"batch", "length", "embed", "heads", "kv", "mlp", "vocab", "lstm_in", "lstm_gates", "conv_out",
          "classes", "height", "width", "channels"} <= seen  # parameters and activations of all three
  assert seen <= set(sharding.LOGICAL_AXES)


def test_the_lstm_kernels_have_axes_of_their_own():
  config = config_util.load("configs/rnn.py:shapes,debug")
  _, _, init_fn = state_init_fn(config, VOCAB, sources.input_spec(config))
  axes = sharding.logical_axes(jax.eval_shape(init_fn, jax.random.key(0)).params)
  assert axes["encoder_cell"]["ii"]["kernel"] == ("lstm_in", "lstm_gates")
  assert axes["decoder_cell"]["hf"]["kernel"] == ("lstm_in", "lstm_gates")
  assert axes["decoder_cell"]["hf"]["bias"] == ("lstm_gates",)
  specs = {name: sharding.mesh_specs(jax.eval_shape(init_fn, jax.random.key(0)).params, sharding.RULES[name],
                                     sharding.axis_sizes({**MESHES[name], "rules": name}, 8))
           for name in MESHES}
  assert [specs[n]["encoder_cell"]["ii"]["kernel"] for n in MESHES] == [
      P(None, None), P(DF, None), P(None, "model"), P(DF, "model")]


# ------------------------------------------------------------------------ placement, losses and bytes on 8


def _expected(names: tuple[str, ...], shape: tuple[int, ...], table, sizes) -> P:
  """The table read by hand: in the table's order each name takes its mesh axes if no earlier name took them,
  cut to those that divide the dimension."""
  out = [None] * len(names)
  taken: set[str] = set()
  for logical, mesh_axes in table:
    if logical in names and mesh_axes is not None:
      axes = (mesh_axes,) if isinstance(mesh_axes, str) else mesh_axes
      if taken.isdisjoint(axes):
        taken.update(axes)
        dim = names.index(logical)
        while axes and shape[dim] % math.prod(sizes[a] for a in axes):
          axes = axes[:-1]
        out[dim] = None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
  return P(*out)


SPOT_CHECKS = {  # by hand, for the T2T of _config (24 feature channels)
    "dp": {("embed", "embedding"): P(None, None), ("decoder_0", "mlp", "wi", "kernel"): P(None, None)},
    "fsdp": {("embed", "embedding"): P(None, DF), ("decoder_0", "mlp", "wi", "kernel"): P(DF, None),
             ("encoder_0", "attn", "query", "kernel"): P(DF, None, None), ("visual_proj", "kernel"): P(None, DF),
             ("decoder_norm", "scale"): P(DF)},
    "tp": {("embed", "embedding"): P("model", None), ("decoder_0", "mlp", "wo", "kernel"): P("model", None),
           ("encoder_0", "attn", "out_kernel"): P("model", None, None), ("decoder_norm", "scale"): P(None),
           ("visual_proj", "kernel"): P(None, None)},
    "fsdp_tp": {("embed", "embedding"): P("model", DF), ("decoder_0", "mlp", "wi", "kernel"): P(DF, "model"),
                ("encoder_0", "attn", "query", "kernel"): P(DF, "model", None),
                ("encoder_0", "attn", "query", "bias"): P("model", None)},
}
IRV2_CHECKS = {  # its first convolution (3x3, 3 RGB channels -> 32) and a 10-class head, on the same meshes
    "dp": (P(None, None, None, None), P(None, None)),
    "fsdp": (P(None, None, None, DF), P(DF, None)),
    "tp": (P(None, None, None, "model"), P("model", None)),  # conv_out comes first in the table, so classes wait
    "fsdp_tp": (P(None, None, None, "model"), P("model", None)),  # 3 channels do not split 4 ways: they stay whole
}


def test_inception_resnet_v2_is_placed_as_each_table_says():
  variables = irv2.abstract_variables(irv2.InceptionResNetV2(num_classes=10), image_size=irv2.MIN_IMAGE_SIZE)
  for name, (conv, head) in IRV2_CHECKS.items():
    specs = sharding.mesh_specs(variables, sharding.RULES[name],
                                sharding.axis_sizes({**MESHES[name], "rules": name}, 8))["params"]
    assert specs["Conv2d_1a_3x3"]["conv"]["kernel"] == conv, name
    assert specs["Logits"]["kernel"] == head, name


def test_parameters_and_optimizer_state_are_placed_as_the_table_says(run):
  name, result = run
  config = _config(name, **MESHES[name])
  _, _, init_fn = state_init_fn(config, VOCAB, sources.input_spec(config))
  abstract = jax.eval_shape(init_fn, jax.random.key(0))
  sizes = sharding.axis_sizes(config.mesh, 8)
  params = result["shardings"].params
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  names = jax.tree.leaves(sharding.logical_axes(abstract.params), is_leaf=lambda x: isinstance(x, tuple))
  shapes = jax.tree.leaves(nn.unbox(abstract.params))
  for (path, s), axes, x in zip(flat, names, shapes, strict=True):
    assert s.spec == _expected(axes, x.shape, sharding.RULES[name], sizes), (name, path)
  for path, spec in SPOT_CHECKS[name].items():
    node = params
    for key in path:
      node = node[key]
    assert node.spec == spec, (name, path)
  # Adagrad's accumulators sit where their parameters do.
  accumulators = result["shardings"].opt_state[0].sum_of_squares
  assert jax.tree.leaves(accumulators) == jax.tree.leaves(params)
  assert all(isinstance(s, NamedSharding) and s.spec == P() for s in jax.tree.leaves(result["shardings"].opt_state[1]))


def test_five_steps_give_the_single_device_losses(run, single):
  name, result = run
  assert single["losses"][0] != single["losses"][-1]  # it trains
  np.testing.assert_allclose(result["losses"], single["losses"], atol=1e-5, rtol=0, err_msg=name)


def test_per_device_state_shrinks_as_promised(run, single):
  name, result = run
  assert result["total"] == single["total"] == single["per_device"]
  fraction = result["per_device"] / result["total"]
  # dp replicates; tp halves the wide kernels (not the norms, the conv encoder's input side, the projection);
  # fsdp and fsdp_tp split (almost) everything 8 ways.
  bounds = {"dp": (1.0, 1.0), "tp": (0.5, 0.75), "fsdp": (1 / 8, 1 / 6), "fsdp_tp": (1 / 8, 1 / 6)}
  low, high = bounds[name]
  assert low <= fraction <= high, (name, fraction)


# -------------------------------------------------------------------------------- activation constraints


def test_an_activation_constraint_reaches_the_compiled_program():
  """Replicated parameters, a replicated batch and a replicated result: nothing but the model's `batch`
  constraints splits the batch, so the compiled program's per-device (2, 64, 32) encoder stream (16 examples over
  data=8, 64 visual tokens, d=32; no parameter has that shape) is theirs. Traced without the rules, the same
  function has no constraint at all."""
  config = config_util.load("configs/t2t.py:shapes,debug")  # the conv encoder: 8x8 grid = 64 visual tokens
  config.mesh.update(data=8, rules="dp")
  mesh = sharding.make_mesh(config)
  model, _, init_fn = state_init_fn(config, VOCAB, sources.input_spec(config))
  params = nn.unbox(jax.eval_shape(init_fn, jax.random.key(0)).params)  # lowered and compiled, never run
  batch = {"image": np.zeros((16, 64, 64, 3), np.uint8), "inputs": np.zeros((16, 16), np.int32)}

  def forward(params, images, tokens, rules):
    if rules is None:
      return model.apply({"params": params}, images, tokens)
    with sharding.axis_rules(mesh, rules):
      return model.apply({"params": params}, images, tokens)

  lowered = {}
  for label, rules in (("rules", sharding.DP), ("none", None)):
    fn = jax.jit(lambda p, i, t, rules=rules: forward(p, i, t, rules),
                 in_shardings=sharding.replicated(mesh), out_shardings=sharding.replicated(mesh))
    lowered[label] = fn.lower(params, batch["image"], batch["inputs"])
  assert '[{"data", "fsdp"}, {}, {}]' in lowered["rules"].as_text()
  assert "sharding_constraint" not in lowered["none"].as_text()
  compiled = lowered["rules"].compile(FAST_COMPILE).as_text()
  assert "f32[2,64,32]" in compiled and "f32[16,64,32]" not in compiled


def test_the_train_step_carries_the_models_constraints():
  config = _config("tp", data=4, model=2)
  setup = make_setup(config, VOCAB, sharding.make_mesh(config))
  state = jax.eval_shape(setup.init, jax.random.key(0))
  batch = sharding.host_to_global(_batches()[0], setup.mesh)
  text = setup.train_step.lower(state, batch).as_text()
  assert '[{"data", "fsdp"}, {}, {"model"}]' in text  # the MLP's hidden (batch, length, mlp) activations


# ------------------------------------------------------------------------------------------- mesh settings


def test_a_minus_one_takes_the_devices_left():
  config = _config("fsdp_tp", data=-1, fsdp=2, model=2)
  assert dict(sharding.make_mesh(config).shape) == {"data": 2, "fsdp": 2, "model": 2}


def test_multi_slice_shapes_multiply_and_are_checked():
  ici, dcn = sharding.mesh_shape({"data": -1, "fsdp": 4, "dcn_data": -1, "rules": "fsdp"}, 32, num_slices=2)
  assert ici == {"data": 4, "fsdp": 4, "model": 1} and dcn == {"data": 2, "fsdp": 1, "model": 1}
  assert sharding.axis_sizes({"data": 2, "model": 4, "dcn_data": 2, "rules": "tp"}, 16, num_slices=2) == {
      "data": 4, "fsdp": 1, "model": 4}
  per_slice = r"mesh \(in each of 2 slices\) data=3 x fsdp=1 x model=2 needs 6 devices but 8"
  with pytest.raises(ConfigError, match=per_slice):
    sharding.mesh_shape({"data": 3, "model": 2, "dcn_data": 2, "rules": "tp"}, 16, num_slices=2)
  with pytest.raises(ConfigError, match="DCN mesh data=2 x fsdp=1 x model=1 needs 2 slices but 1 are available"):
    sharding.make_mesh(_config("tp", data=4, dcn_data=2))


@pytest.mark.parametrize("fields, message", [
    ({"rules": "zero3"}, "mesh.rules='zero3' is not a rules table — choose one of dp, fsdp, tp, fsdp_tp"),
    ({"rules": "tp", "data": 4, "fsdp": 2}, "mesh.fsdp=2 but rules 'tp' shard nothing over 'fsdp'"),
    ({"rules": "fsdp", "data": 4, "model": 2}, "mesh.model=2 but rules 'fsdp' shard nothing over 'model'"),
    ({"rules": "tp", "data": 3, "model": 2}, "needs 6 devices but 8 are available"),
])
def test_bad_mesh_settings_are_one_config_error(fields, message):
  with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
    sharding.make_mesh(_config(**fields))


@pytest.mark.parametrize("fields, message", [
    ({"data": -1, "model": -1}, "mesh.data and mesh.model are all -1"),
    ({"fsdp": 0}, "mesh.fsdp=0 is impossible"),
    ({"model": 1.5}, "mesh.model=1.5 is impossible"),
    ({"dcn_data": -1, "dcn_fsdp": -1}, "mesh.dcn_data and mesh.dcn_fsdp are all -1"),
])
def test_config_validation_and_the_mesh_reject_impossible_mesh_sizes_alike(fields, message):
  """One check (`config_util.mesh_sizes`): before any work, and when a mesh is made of fields not validated."""
  config = _config()
  config.mesh = ml_collections.ConfigDict({**config.mesh.to_dict(), **fields})  # any type, as a config file may
  with pytest.raises(ConfigError, match=message):
    config_util.validate(config)
  with pytest.raises(ConfigError, match=message):
    sharding.mesh_shape(config.mesh, 8)


# ------------------------------------------------------------------------------------------ sharding report


def test_the_reports_names_are_the_sharding_modules():
  # the report names the rules and axes without importing capjax.sharding (jax), so that --help answers fast
  assert sharding_report.RULE_NAMES == tuple(sharding.RULES)
  assert sharding_report.MESH_AXES == sharding.MESH_AXES


def test_the_report_of_a_small_lstm_by_hand(capsys):
  """configs/rnn.py:debug (d=32, 1536-d features, 37 words in 64 rows) on tp over data=2 x model=2, float32:
  embedding 64x32x4 / 2 = 4,096 B; the projection 1536x32 and its bias stay whole (196,608 + 128 B); the 16 LSTM
  kernels 32x32x4 / 2 = 2,048 B and 8 biases 64 B each. Parameters: 4,096 + 196,736 + 32,768 + 512 = 234,112 of
  271,488 B; Adagrad holds as much plus its 4-byte step count. Activations at batch 16 split 2 ways: the
  encoder's 64 visual tokens 8x64x32x4 = 65,536, the decoder's 16 inputs 16,384, logits (vocabulary on model)
  8x16x32x4 = 16,384: 98,304 B."""
  code = sharding_report.main(["sharding_report", "--config=configs/rnn.py:debug", "--mesh=data=2,model=2",
                               "--rules=tp", "--vocab_size=37"])
  out = capsys.readouterr().out.splitlines()
  assert code == 0
  assert out[0] == ("config configs/rnn.py:debug  model rnn  vocabulary 37  mesh data=2 fsdp=1 model=2 (4 devices)  "
                    "rules tp  batch 16")
  rows = {line.split()[0]: line.split() for line in out if line.startswith(("embed/", "visual_proj/", "encoder_"))}
  assert rows["embed/embedding"][1:] == ["(64,", "32)", "(vocab,", "embed)", "P('model',", "None)", "4,096"]
  assert rows["visual_proj/kernel"][-1] == "196,608" and rows["visual_proj/bias"][-1] == "128"
  assert rows["encoder_cell/ii/kernel"][-3:] == ["P(None,", "'model')", "2,048"]
  totals = {line[:44].strip(): line[44:].split() for line in out if line.startswith("  ") and "," in line[44:60]}
  assert totals["parameters"] == ["234,112", "(0.22", "MiB)", "271,488", "0.8623"]
  assert totals["optimizer state"] == ["234,116", "(0.22", "MiB)", "271,492", "0.8623"]
  activations = next(line for line in out if "constrained activations" in line).split()
  assert activations[5] == "98,304" and "(3" in activations
  largest = out[out.index("largest activations (per device; batch 16):") + 1:]
  assert [line.split()[-1] for line in largest] == ["65,536", "16,384", "16,384"]


@pytest.mark.parametrize("flag, message", [
    ("--mesh=data=4,moodel=2", "error: --mesh=data=4,moodel=2: 'moodel=2' is not axis=size"),
    ("--mesh=data=-1,model=2", "error: --mesh=data=-1,model=2: data=-1 is not a positive size"),
    ("--rules=zero3", "error: mesh.rules='zero3' is not a rules table — choose one of dp, fsdp, tp, fsdp_tp"),
    ("--rules=dp", "error: mesh.model=2 but rules 'dp' shard nothing over 'model'"),
])
def test_the_report_rejects_a_bad_mesh_or_rules_in_one_line(capsys, flag, message):
  argv = ["sharding_report", "--config=configs/t2t.py:debug", "--mesh=data=4,model=2", flag]
  with pytest.raises(SystemExit) as exit_info:
    sharding_report.main(argv)
  err = capsys.readouterr().err.strip().splitlines()
  assert exit_info.value.code == 2
  assert len(err) == 1 and err[0].startswith(message), err


@pytest.mark.parametrize("override, message", [
    ("--config.mesh.rules=zero3", "error: mesh.rules='zero3' is not a rules table — choose one of dp, fsdp, tp, "
                                  "fsdp_tp"),
    ("--config.mesh.fsdp=-1", "error: mesh.data and mesh.fsdp are all -1 — at most one may be -1"),
])
@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_training_with_a_bad_mesh_or_rules_stops_in_one_line(tmp_path, override, message):
  env = dict(os.environ, XLA_FLAGS=helpers.FAST_COMPILE, JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-m", "capjax.main", "--config=configs/t2t.py:shapes,debug", override,
                         f"--workdir={tmp_path / 'w'}"], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 2, proc.stderr[-2000:]
  [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert line.startswith(message) and "Traceback" not in proc.stderr
