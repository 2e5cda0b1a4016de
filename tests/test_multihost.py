"""A real multi-host job on one machine: 2 processes x 4 fake CPU devices through jax.distributed on 127.0.0.1 (as
launch/multiprocess_cpu.sh starts them), against one process on 8 devices.

One workdir goes through the life of a preemptible job, each run a fresh launch of both processes of capjax.main:
  1. both train from scratch and are SIGKILLed once a checkpoint is committed;
  2. the relaunch resumes from it, and process 1 alone gets SIGTERM (a preemption notice): both save the same step
     (JAX's preemption sync point) and exit 0;
  3. the relaunch continues from that step, and process 0 gets SIGINT (Ctrl-C): both stop at one step again.
The train history of the three runs, each step once, has the single process's losses to 1e-5 (the same global
batches, tests/test_pipeline.py; the same init and updates, whatever the device layout). The single process runs
beside run 1, and every run ends by a signal long before its last step: none pays for the final evaluation.
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import helpers
import pytest

from capjax import config_util
from capjax.data import sources

pytestmark = pytest.mark.slow  # a two-process training job (conftest.py: the slow rule)

REPO = pathlib.Path(__file__).resolve().parent.parent
# The sharding rules of both the 2-process and the 1-process run: FSDP, parameters and optimizer state sharded over
# all 8 devices of either, so the two processes hold different parts of the state and must still agree.
RULES_FLAGS = ["--config.mesh.rules=fsdp"]
CONFIG = "configs/t2t.py:shapes,debug"
STEPS = 400  # the learning-rate schedule's length; no run here gets near it
TIMEOUT = 420  # seconds for one stage of a run (cold XLA compiles on a loaded 2-core machine)


def _command(workdir: pathlib.Path, data_dir: pathlib.Path, distributed: str) -> list[str]:
  return [sys.executable, "-m", "capjax.main", f"--config={CONFIG}", "--config.dataset.builder_config=tiny",
          f"--config.dataset.data_dir={data_dir}", f"--config.num_train_steps={STEPS}", "--config.log_every=1",
          "--config.checkpoint_every=5", "--config.eval_every=100000", "--config.debug_nans=False",
          "--config.input.num_threads=1", *RULES_FLAGS, f"--workdir={workdir}", f"--distributed={distributed}"]


class Run:
  """One launch of `processes` processes x `devices` CPU devices on `workdir`; their output in files beside it."""

  def __init__(self, name: str, workdir: pathlib.Path, data_dir: pathlib.Path, processes: int, devices: int):
    self.name, self.workdir = name, workdir
    self.logs = [workdir.parent / f"{name}_{i}" for i in range(processes)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "SLURM_", "TPU_", "MEGASCALE_"))}
    # helpers.FAST_COMPILE: every run here uses it.
    base.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {helpers.FAST_COMPILE}",
                JAX_PLATFORMS="cpu",
                # Compiled programs persist between the launches, as with a cache on a cluster's shared disk.
                # Only process 0 writes it, and only process 0 of a relaunch finds its programs there: process 1's
                # cache keys differ (measured with JAX_EXPLAIN_CACHE_MISSES=1, jax 0.10.2), so it compiles its train
                # step at every launch.
                JAX_COMPILATION_CACHE_DIR=str(workdir.parent / "jax_cache"),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    port = helpers.free_port()
    self.procs = []
    for i, log in enumerate(self.logs):
      env = dict(base)
      if processes > 1:  # what launch/multiprocess_cpu.sh sets
        env.update(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES=str(processes),
                   JAX_PROCESS_ID=str(i))
      command = _command(workdir, data_dir, "on" if processes > 1 else "off")
      with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        self.procs.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=err))

  def stdout(self, i: int) -> str:
    return pathlib.Path(f"{self.logs[i]}.out").read_text()

  def stderr(self, i: int) -> str:
    return pathlib.Path(f"{self.logs[i]}.err").read_text()

  def tails(self) -> str:
    return "\n".join(f"--- {self.name} process {i}:\n{self.stderr(i)[-3000:]}{self.stdout(i)[-300:]}"
                     for i in range(len(self.logs)))

  def history(self) -> list[dict]:
    path = self.workdir / "train_history.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.endswith("}")]  # a line being written is skipped

  def logged_past(self, step: int) -> bool:
    return any(h["step"] > step for h in self.history())

  def wait(self) -> list[int]:
    try:
      return [p.wait(timeout=TIMEOUT) for p in self.procs]
    finally:
      self.kill()

  def kill(self) -> None:
    for p in self.procs:
      if p.poll() is None:
        p.kill()
        p.wait()


def _when(*watches: tuple[Run, Callable[[], bool], Callable[[], None], str]) -> None:
  """For each (run, condition, action, what): runs the action as soon as the condition holds, while every process
  of the run is alive. Fails (killing all) if a process ends first or TIMEOUT passes."""
  pending, deadline = list(watches), time.time() + TIMEOUT
  while pending:
    for watch in list(pending):
      run, condition, action, what = watch
      if condition():
        action()
        pending.remove(watch)
      elif any(p.poll() is not None for p in run.procs) or time.time() > deadline:
        for r, *_ in watches:
          r.kill()
        pytest.fail(f"{run.name}: no {what} — a process ended or {TIMEOUT}s passed\n{run.tails()}")
    time.sleep(0.05)


def _saved_steps(workdir: pathlib.Path) -> list[int]:
  """Committed checkpoints (orbax renames a finished one from its tmp name to its step)."""
  ckpt = workdir / "checkpoints"
  return sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit()) if ckpt.exists() else []


def _interrupted_at(run: Run, i: int) -> int:
  found = re.findall(r"^interrupted at step (\d+): checkpoint saved", run.stdout(i), re.MULTILINE)
  assert len(found) == 1, run.tails()
  return int(found[0])


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict:
  """The runs of the module docstring and the 1-process reference, each finished; what they left."""
  root = tmp_path_factory.mktemp("multihost")
  data_dir, workdir = root / "data", root / "job"
  config = config_util.load(CONFIG)
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  sources.prepare(config.dataset)  # built once here, not by two runs at once
  out = {}

  # The reference (SIGTERM once it has logged step 8) beside run 1 (SIGKILL once a checkpoint is committed; a later
  # save may be in flight).
  reference = Run("reference", root / "reference", data_dir, processes=1, devices=8)
  killed = Run("killed", workdir, data_dir, processes=2, devices=4)
  _when((reference, lambda: reference.logged_past(7), lambda: reference.procs[0].send_signal(signal.SIGTERM),
         "step 8 logged"),
        (killed, lambda: bool(_saved_steps(workdir)), killed.kill, "committed checkpoint"))
  out["killed_at"] = _saved_steps(workdir)[-1]
  out["killed_history"] = [h["step"] for h in killed.history()]
  assert reference.wait() == [0], reference.tails()
  out["reference"] = {h["step"]: h["loss"] for h in reference.history()}

  # 2. The relaunch; SIGTERM to process 1 alone once it has trained a step.
  preempted = out["preempted"] = Run("preempted", workdir, data_dir, processes=2, devices=4)
  _when((preempted, lambda: preempted.logged_past(out["killed_at"]),
         lambda: preempted.procs[1].send_signal(signal.SIGTERM), "step trained after the restart"))
  out["preempted_status"] = preempted.wait()
  out["preempted_saved"] = _saved_steps(workdir)
  stopped_at = _interrupted_at(preempted, 0)

  # 3. The relaunch; SIGINT to process 0 once it has trained a step.
  interrupted = out["interrupted"] = Run("interrupted", workdir, data_dir, processes=2, devices=4)
  _when((interrupted, lambda: interrupted.logged_past(stopped_at),
         lambda: interrupted.procs[0].send_signal(signal.SIGINT), "step trained after the restart"))
  out["interrupted_status"] = interrupted.wait()
  out["history"] = interrupted.history()
  return out


def test_two_processes_train_as_one_process_on_8_devices(job):
  history = job["history"]
  assert [h["step"] for h in history] == list(range(1, history[-1]["step"] + 1))  # each step once, in order
  reference = job["reference"]
  assert sorted(reference)[:8] == list(range(1, 9))
  compared = [h for h in history if h["step"] in reference]
  assert len(compared) >= 5
  for h in compared:
    assert h["loss"] == pytest.approx(reference[h["step"]], abs=1e-5), h["step"]


def test_killed_processes_resume_from_the_last_committed_checkpoint(job):
  killed_at, run = job["killed_at"], job["preempted"]
  assert killed_at % 5 == 0 and job["killed_history"][:killed_at] == list(range(1, killed_at + 1))
  for i in range(2):
    assert re.search(rf"Resumed from step {killed_at}$", run.stderr(i), re.MULTILINE), run.tails()


def test_sigterm_to_one_process_makes_both_save_the_same_step_and_exit_0(job):
  run = job["preempted"]
  assert job["preempted_status"] == [0, 0], run.tails()
  stopped_at = _interrupted_at(run, 0)
  assert _interrupted_at(run, 1) == stopped_at > job["killed_at"]
  assert job["preempted_saved"][-1] == stopped_at  # the agreed step is the latest checkpoint
  for i in range(2):
    log = run.stderr(i)
    assert f"Preemption sync point at step {stopped_at}: all 2 processes save it and stop" in log, run.tails()
    assert (f"Stopped by a preemption notice (SIGTERM to a process of the job) at step {stopped_at}: checkpoint "
            "saved" in log), run.tails()


def test_the_relaunch_continues_from_the_agreed_step_and_ctrl_c_stops_both(job):
  stopped_at, run = _interrupted_at(job["preempted"], 0), job["interrupted"]
  assert job["interrupted_status"] == [0, 0], run.tails()
  for i in range(2):
    assert re.search(rf"Resumed from step {stopped_at}$", run.stderr(i), re.MULTILINE), run.tails()
  last = _interrupted_at(run, 0)
  assert _interrupted_at(run, 1) == last > stopped_at
  assert job["history"][-1]["step"] == last
  assert f"Stopped by SIGINT at step {last}: checkpoint saved" in run.stderr(0)
  assert f"Stopped by a signal to another process at step {last}: checkpoint saved" in run.stderr(1)
