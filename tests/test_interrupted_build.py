"""A dataset build stopped by SIGTERM (how TPU VMs and SLURM preempt), SIGKILL or Ctrl-C leaves nothing a rerun or a
trainer would take for a built dataset: TFDS writes into a `*.incomplete*` folder and renames it only once every split
is whole. Nor does it leave its worker processes running; Ctrl-C ends it with one line, without a traceback."""

import contextlib
import fcntl
import gc
import importlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import ml_collections
import pytest

from capjax import interrupt
from capjax.data import build, integrity, sources

REPO = pathlib.Path(__file__).resolve().parent.parent


def _live_members(group: int) -> list[str]:
  """The processes of process group `group` that are not zombies, as "pid (name)"."""
  live = []
  for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
    with contextlib.suppress(OSError):  # a process that ended while the list was read
      text = stat.read_text()
      name, _, rest = text.partition("(")[2].rpartition(")")
      state, _, pgrp = rest.split()[:3]
      if int(pgrp) == group and state != "Z":
        live.append(f"{stat.parent.name} ({name})")
  return live


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_build_stopped_by_a_signal_leaves_no_dataset_and_no_workers(tmp_path, sig):
  data_dir = tmp_path / "tfds"
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  # The default config (22,000 scenes) takes minutes: the signal lands once its folder of work in progress exists,
  # when the split's forked workers are drawing scenes. In a session of its own, so that they can be found after.
  proc = subprocess.Popen([sys.executable, "-m", "capjax.data.build", "--dataset=synthetic_scenes",
                           f"--data_dir={data_dir}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
  try:
    deadline = time.time() + 120
    while time.time() < deadline and not list(data_dir.glob("synthetic_scenes/default/*incomplete*")):
      time.sleep(0.1)
    assert proc.poll() is None, "the build finished or failed before it could be stopped"
    proc.send_signal(sig)
    assert proc.wait(timeout=60) != 0
    # The workers hold both ends of the pool's pipes: unless the kernel ends them with the build (PR_SET_PDEATHSIG),
    # they wait for work forever.
    deadline = time.time() + 10
    while (live := _live_members(proc.pid)) and time.time() < deadline:
      time.sleep(0.1)
    assert not live, f"the build's workers outlived it: {live}"
  finally:
    with contextlib.suppress(ProcessLookupError):  # the group has ended with its parent unless the test failed
      os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  assert not (data_dir / "synthetic_scenes/default/1.0.0").exists()
  config = ml_collections.ConfigDict({"name": "synthetic_scenes", "builder_config": "default",
                                      "data_dir": str(data_dir), "auto_build": False, "features": ""})
  with pytest.raises(sources.DatasetNotBuiltError, match="is not built"):
    sources.prepare(config)


def test_ctrl_c_is_one_line_exit_130_and_leaves_no_dataset_and_no_workers(tmp_path):
  data_dir = tmp_path / "tfds"
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  # SIGINT as a terminal sends it, to the whole process group (the forked workers get it too). Its default action
  # restored in the child: a shell starting this test in the background has it ignored, and children inherit that.
  proc = subprocess.Popen([sys.executable, "-m", "capjax.data.build", "--dataset=synthetic_scenes",
                           f"--data_dir={data_dir}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, start_new_session=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    deadline = time.time() + 120
    while time.time() < deadline and not list(data_dir.glob("synthetic_scenes/default/*incomplete*")):
      time.sleep(0.1)
    time.sleep(1)  # the split's workers are drawing scenes
    assert proc.poll() is None, "the build finished or failed before it could be stopped"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    deadline = time.time() + 10
    while (live := _live_members(proc.pid)) and time.time() < deadline:
      time.sleep(0.1)
    assert not live, f"the build's workers outlived it: {live}"
  finally:
    with contextlib.suppress(ProcessLookupError):
      os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
  assert err.splitlines()[-1] == ("interrupted: synthetic_scenes is not built (nothing half-built was kept) — rerun "
                                  "the same command to build it"), err[-3000:]
  assert sorted(p.name for p in (data_dir / "synthetic_scenes/default").iterdir()) == []


def _mapped(pid: int, library: str) -> bool:
  """Whether process `pid` has loaded a shared library whose path holds `library` (False once it has ended)."""
  try:
    return library in pathlib.Path(f"/proc/{pid}/maps").read_text()
  except OSError:
    return False


def test_ctrl_c_while_the_build_imports_jax_is_one_line_exit_130(tmp_path):
  # The first second of a build: its `main` importing JAX and TensorFlow, before any dataset is touched. The signal
  # is sent once jaxlib's library is mapped, so it lands in that import.
  proc = subprocess.Popen([sys.executable, "-m", "capjax.data.build", "--dataset=synthetic_scenes",
                           f"--data_dir={tmp_path / 'tfds'}"], cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not _mapped(proc.pid, "jaxlib"):
      time.sleep(0.001)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
  finally:
    proc.kill()
    proc.wait()
  assert (proc.returncode, err.splitlines()) == (
      130, ["interrupted: the command stopped before it finished — run it again to finish"]), err[-3000:]
  assert not (tmp_path / "tfds").exists()


def _interrupted_after(work) -> bool:
  """Runs `work` under the commands' SIGINT handling (`capjax.interrupt`), then waits up to 2 s in plain code:
  whether KeyboardInterrupt reached that code."""
  with interrupt.ctrl_c_raises():
    try:
      work()
      deadline = time.time() + 2
      while time.time() < deadline:
        time.sleep(0.001)
    except KeyboardInterrupt:
      return True
  return False


def test_ctrl_c_in_a_garbage_collection_callback_lands_after_it(capfd):
  steps, armed = [], []

  def callback(phase, info) -> None:  # as JAX's: Python cannot raise from it
    del info
    if phase == "start" and armed and not steps:
      os.kill(os.getpid(), signal.SIGINT)
      for i in range(100_000):  # bytecode after the signal: where Python runs the handler
        steps.append(i)
  gc.callbacks.append(callback)
  try:
    landed = _interrupted_after(lambda: (armed.append(True), gc.collect()))
  finally:
    gc.callbacks.remove(callback)
  assert landed and len(steps) == 100_000
  assert capfd.readouterr().err == ""


def test_ctrl_c_in_code_that_exec_runs_at_an_import_lands_after_the_import(tmp_path, monkeypatch, capfd):
  # As in dataclasses' generated methods while flax loads: a KeyboardInterrupt raised in exec'd code makes CPython
  # 3.11 end the process by SIGINT whatever catches it (a build Ctrl-C'd 0.45 s into its imports exited -2, not 130).
  name = "capjax_test_exec_at_import"
  (tmp_path / f"{name}.py").write_text(
      "import os, signal\nsteps = []\n"
      "exec('os.kill(os.getpid(), signal.SIGINT)\\nfor i in range(100_000):\\n  steps.append(i)\\n')\n")
  monkeypatch.syspath_prepend(tmp_path)
  monkeypatch.delitem(sys.modules, name, raising=False)
  landed = _interrupted_after(lambda: importlib.import_module(name))
  assert landed and len(sys.modules[name].steps) == 100_000  # the module was imported whole
  assert capfd.readouterr().err == ""


def test_ctrl_c_that_a_finalizer_swallowed_lands_after_it(capfd):
  class Finalized:
    def __del__(self):  # where a SIGINT between two bytecodes would raise
      raise KeyboardInterrupt

  def drop() -> None:
    Finalized()
  landed = _interrupted_after(drop)
  assert landed
  assert capfd.readouterr().err == ""


def test_two_identical_builds_at_once_one_builds_and_the_other_says_so(tmp_path):
  """The same build started twice at once into one data dir: the one that takes the data dir's lock builds; the
  other, unless it starts after the first has ended (then it reuses the dataset), is one `error:` line naming the
  builder's pid, exit 2 — not TFDS's FileExistsError traceback from the loser's rename."""
  data_dir = tmp_path / "tfds"
  command = [sys.executable, "-m", "capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={data_dir}"]
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  procs = [subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for _ in range(2)]
  results = [(p.pid, *p.communicate(timeout=300), p.returncode) for p in procs]
  for pid, out, err, code in results:
    assert "Traceback" not in err and code in (0, 2), err[-3000:]
    if code == 2:
      [other] = [p for p, *_ in results if p != pid]
      assert (out, err) == ("", f"error: synthetic_scenes/tiny is being built in {data_dir} by another process "
                                f"(pid {other}) — wait for it to finish and rerun this command (it reuses the "
                                "dataset), or give another --data_dir\n")
  assert 0 in [code for *_, code in results]
  folder = data_dir / "synthetic_scenes/tiny/1.0.0"
  assert integrity.problem(folder) is None
  assert sorted(p.name for p in folder.parent.iterdir()) == ["1.0.0"]  # no incomplete.* folder left
  assert not os.path.exists(build.lock_path(os.fspath(data_dir), "synthetic_scenes/tiny"))


def test_a_build_while_another_holds_the_lock_is_one_error_line_and_writes_nothing(tmp_path, capsys):
  data_dir = tmp_path / "tfds"
  data_dir.mkdir()
  lock = build.lock_path(os.fspath(data_dir), "synthetic_scenes/tiny")
  with open(lock, "w") as holder:  # another build's, as one_build writes it
    fcntl.flock(holder, fcntl.LOCK_EX)
    holder.write("4242\n")
    holder.flush()
    with pytest.raises(SystemExit) as exit_info:
      build.main(["build", "--dataset=synthetic_scenes/tiny", f"--data_dir={data_dir}"])
  assert exit_info.value.code == 2
  assert capsys.readouterr() == ("", f"error: synthetic_scenes/tiny is being built in {data_dir} by another process "
                                     "(pid 4242) — wait for it to finish and rerun this command (it reuses the "
                                     "dataset), or give another --data_dir\n")
  assert [p.name for p in data_dir.iterdir()] == [os.path.basename(lock)]
