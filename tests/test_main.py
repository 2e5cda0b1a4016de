"""A run killed with SIGKILL at an arbitrary moment resumes as the same run: identical final parameters."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
STEPS = 30


def _command(workdir: pathlib.Path, data_dir: pathlib.Path) -> list[str]:
  return [sys.executable, "-m", "capjax.main", "--config=configs/t2t.py:shapes,debug",
          "--config.dataset.builder_config=tiny", f"--config.dataset.data_dir={data_dir}",
          f"--config.num_train_steps={STEPS}", "--config.eval_every=1000", "--config.checkpoint_every=3",
          "--config.debug_nans=False", f"--workdir={workdir}"]


def _env() -> dict[str, str]:
  env = dict(os.environ)
  env.pop("XLA_FLAGS", None)  # one CPU device, like a laptop run
  env["JAX_PLATFORMS"] = "cpu"
  return env


def _final_params(workdir: pathlib.Path) -> dict:
  with ocp.CheckpointManager(workdir / "checkpoints", item_names=("state", "data")) as mngr:
    assert mngr.latest_step() == STEPS
    state = mngr.restore(STEPS, args=ocp.args.Composite(state=ocp.args.StandardRestore()))["state"]
  return state["params"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  root = tmp_path_factory.mktemp("resume")
  data_dir, workdir = root / "data", root / "straight"
  subprocess.run(_command(workdir, data_dir), cwd=REPO, env=_env(), check=True, capture_output=True,
                 timeout=600)
  return data_dir, _final_params(workdir)


def test_sigkill_then_resume_gives_the_same_parameters(uninterrupted, tmp_path):
  data_dir, expected = uninterrupted
  workdir = tmp_path / "killed"
  proc = subprocess.Popen(_command(workdir, data_dir), cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  # Kill mid-way: as soon as a checkpoint past step 9 has been committed (a later save may be in flight).
  deadline = time.time() + 300
  ckpt = workdir / "checkpoints"
  while time.time() < deadline and proc.poll() is None:
    done = [int(p.name) for p in ckpt.glob("*") if p.name.isdigit()] if ckpt.exists() else []
    if done and max(done) >= 9:
      break
    time.sleep(0.05)
  assert proc.poll() is None, "the run finished before it could be killed: make it longer"
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  killed_at = max(int(p.name) for p in ckpt.glob("*") if p.name.isdigit())
  assert killed_at < STEPS
  subprocess.run(_command(workdir, data_dir), cwd=REPO, env=_env(), check=True, capture_output=True,
                 timeout=600)
  got = _final_params(workdir)
  flat_expected = jax.tree_util.tree_leaves_with_path(expected)
  flat_got = dict(jax.tree_util.tree_leaves_with_path(got))
  assert len(flat_expected) == len(flat_got)
  for path, value in flat_expected:
    np.testing.assert_array_equal(np.asarray(flat_got[path]), np.asarray(value), err_msg=str(path))
