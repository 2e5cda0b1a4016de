"""capjax.model_io (the auxiliary models' save/load) and capjax.small_trainer (their training loop), on tiny trees:
a round trip keeps dtypes and bytes, a save cut short leaves no description and no temporary folder, a checkpoint
of other shapes or none at all is refused with the module's errors, and the loop draws what it always drew."""

import asyncio
import json
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from capjax import model_io, small_trainer

TREE = {"dense": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3), "bias": np.array([1, 2, 3], np.int32)},
        "scale": np.array(0.5, np.float16)}


def test_round_trip_keeps_the_layout_dtypes_and_values(tmp_path):
  source = tmp_path / "vocab.txt"
  source.write_text("a\nb\n", encoding="utf-8")
  directory = model_io.save(tmp_path / "model", {"variables": TREE}, {"model.json": json.dumps({"n": 1}) + "\n"},
                            {"vocab.txt": source})
  assert sorted(p.name for p in directory.iterdir()) == ["model.json", "variables", "vocab.txt"]
  assert (directory / "vocab.txt").read_text(encoding="utf-8") == "a\nb\n"
  target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), TREE)
  restored = model_io.restore(directory / "variables", target)
  assert jax.tree.structure(restored) == jax.tree.structure(TREE)
  for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(TREE), strict=True):
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
  # Saved again over itself (a loaded model re-saved where it came from): the copy's source is its own target.
  model_io.save(directory, {"variables": {**TREE, "scale": np.array(2.0, np.float16)}},
                {"model.json": "{}\n"}, {"vocab.txt": directory / "vocab.txt"})
  assert float(model_io.restore(directory / "variables", target)["scale"]) == 2.0
  assert (directory / "model.json").read_text() == "{}\n" and (directory / "vocab.txt").read_text() == "a\nb\n"
  assert sorted(p.name for p in directory.iterdir()) == ["model.json", "variables", "vocab.txt"]


def test_a_save_cut_short_leaves_no_description_and_no_temporary_folder(tmp_path, monkeypatch):
  directory = model_io.save(tmp_path / "model", {"variables": TREE}, {"model.json": "{}\n"})
  with pytest.raises(FileNotFoundError):  # a copy whose source is gone: the save stops before anything is renamed
    model_io.save(directory, {"variables": TREE}, {"model.json": "{}\n"}, {"vocab.txt": tmp_path / "missing.txt"})
  assert sorted(p.name for p in directory.iterdir()) == ["model.json", "variables"]  # the old save is whole
  rename = model_io.os.replace

  def cut(source, target):  # the disk fills (or the process dies) while the parameters move into place
    if str(target).endswith("variables"):
      raise OSError(28, "No space left on device")
    rename(source, target)

  monkeypatch.setattr(model_io.os, "replace", cut)
  with pytest.raises(OSError, match="No space"):
    model_io.save(directory, {"variables": TREE}, {"model.json": "{}\n"})
  assert sorted(p.name for p in directory.iterdir()) == []  # no description of parameters it did not write


def test_other_shapes_or_no_checkpoint_are_refused(tmp_path):
  directory = model_io.save(tmp_path / "model", {"variables": TREE})
  wider = {**TREE, "dense": {**TREE["dense"], "kernel": np.zeros((2, 4), np.float32)}}
  with pytest.raises(model_io.ShapeError) as shape:
    model_io.restore(directory / "variables", wider)
  assert (shape.value.keys, shape.value.got, shape.value.want) == (("dense", "kernel"), (2, 3), (2, 4))
  assert str(shape.value) == f"{directory / 'variables'} holds dense/kernel of shape (2, 3) where the target has (2, 4)"
  with pytest.raises(model_io.RestoreError) as missing:
    model_io.restore(tmp_path / "nowhere", TREE)
  assert isinstance(missing.value, model_io.ParamsError) and str(missing.value).startswith(
      f"{tmp_path / 'nowhere'} could not be restored (")


def _failed_restore_with_a_read_pending() -> tuple[list[str], list[str]]:
  """(what the pending read delivered, the errors its completion met) of a restore run as orbax runs each one (its
  `asyncio_utils.run_sync`: a fresh event loop, closed when the coroutine returns or raises) that fails at one read
  while another is still pending, completed 0.2 s later by another thread as TensorStore completes its futures."""
  from orbax.checkpoint._src import asyncio_utils
  delivered, errors, threads = [], [], []

  def complete(loop, future):
    time.sleep(0.2)
    try:
      loop.call_soon_threadsafe(future.set_result, "array")
    except RuntimeError as error:  # TensorStore can only pass it to sys.unraisablehook: a traceback on stderr
      errors.append(str(error))

  async def read():
    future = asyncio.get_running_loop().create_future()
    threads.append(threading.Thread(target=complete, args=(asyncio.get_running_loop(), future)))
    threads[-1].start()
    delivered.append(await future)

  async def damaged_read():
    raise ValueError("DATA_LOSS: Error decoding manifest")

  async def restore():
    await asyncio.gather(read(), damaged_read())

  with pytest.raises(ValueError, match="DATA_LOSS"):
    asyncio_utils.run_sync(restore())
  threads[0].join()
  return delivered, errors


def test_a_failed_restores_pending_reads_finish_before_its_event_loop_closes():
  # Orbax's own loop closes under the pending read. Should this fail, orbax waits for its reads itself, and
  # `settled_event_loops` can go.
  assert _failed_restore_with_a_read_pending() == ([], ["Event loop is closed"])
  with model_io.settled_event_loops():
    assert _failed_restore_with_a_read_pending() == (["array"], [])
  assert type(asyncio.get_event_loop_policy()) is asyncio.DefaultEventLoopPolicy  # the process's policy again


def test_epoch_batches_are_whole_batches_of_a_seeded_permutation():
  steps = list(small_trainer.epoch_batches(7, 3, 2, seed=5))
  order_rng = np.random.default_rng(5)
  expected = [(epoch, order[i * 3:(i + 1) * 3]) for epoch in range(2)
              for order in [order_rng.permutation(7)] for i in range(2)]
  assert [e for e, _ in steps] == [0, 0, 1, 1]
  for (_, got), (_, want) in zip(steps, expected, strict=True):
    np.testing.assert_array_equal(got, want)


def test_fit_steps_frozen_parameters_never_and_logs_each_epoch():
  def loss_fn(params, batch, rng, frozen):
    del rng
    return jnp.sum((params["w"] * batch[0] + frozen["b"] - 1.0) ** 2)

  lines = []
  batches = [(0, (jnp.ones(2),)), (0, (jnp.ones(2),)), (1, (jnp.ones(2),))]
  params, losses = small_trainer.fit(loss_fn, optax.sgd(0.1), {"w": np.zeros(2, np.float32)}, batches,
                                     rng=jax.random.key(0), frozen={"b": jnp.zeros(2)}, epochs=2, log=lines.append)
  assert losses == pytest.approx([2.0, 1.28, 0.8192])  # w: 0 -> 0.2 -> 0.36 -> 0.488 (gradient 2(w - 1))
  np.testing.assert_allclose(params["w"], [0.488, 0.488], rtol=1e-6)
  assert [line.split(" (")[0] for line in lines] == ["epoch 1/2: mean loss 1.6400", "epoch 2/2: mean loss 0.8192"]
