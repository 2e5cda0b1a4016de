"""A dataset build stopped by SIGTERM (how TPU VMs and SLURM preempt) leaves nothing a rerun or a trainer would
take for a built dataset: TFDS writes into a `*.incomplete*` folder and renames it only once every split is whole."""

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import ml_collections
import pytest

from capjax.data import sources

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_a_build_stopped_by_sigterm_is_not_taken_for_a_built_dataset(tmp_path):
  data_dir = tmp_path / "tfds"
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  # The default config (22,000 scenes) takes minutes: the signal lands once its folder of work in progress exists.
  # In a session of its own: the build's forked workers outlive the signalled parent, and the test ends them.
  proc = subprocess.Popen([sys.executable, "-m", "capjax.data.build", "--dataset=synthetic_scenes",
                           f"--data_dir={data_dir}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
  try:
    deadline = time.time() + 120
    while time.time() < deadline and not list(data_dir.glob("synthetic_scenes/default/*incomplete*")):
      time.sleep(0.1)
    assert proc.poll() is None, "the build finished or failed before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
  finally:
    with contextlib.suppress(ProcessLookupError):  # the group may have ended with its parent
      os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  assert not (data_dir / "synthetic_scenes/default/1.0.0").exists()
  config = ml_collections.ConfigDict({"name": "synthetic_scenes", "builder_config": "default",
                                      "data_dir": str(data_dir), "auto_build": False, "features": ""})
  with pytest.raises(sources.DatasetNotBuiltError, match="is not built"):
    sources.prepare(config)
