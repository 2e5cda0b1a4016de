"""launch/tpu_vm.sh and launch/gpu_slurm.sh: `--dry-run` prints the exact gcloud, sbatch, srun and scontrol lines
(one command for every worker, --worker=all, the coordinator, the relaunch and requeue); the printed lines are
shell that gives back the arguments as typed; and the relaunch loops decide as documented, against a gcloud and an
srun/scontrol that act out a preemption (the real ones need a cloud project and a cluster)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
ARGS = ["--config=configs/t2t.py", "--workdir=/mnt/runs/t2t"]
# what launch/tpu_vm.sh copies to the workers (`make venv` and the run need them; .venv/, workdir/ and data stay)
STAGED = ["Makefile", "pyproject.toml", "setup.cfg", "constraints.txt", "README.md", "capjax", "configs",
          "tfds_builders"]
TPU_SSH = ("gcloud compute tpus tpu-vm ssh my-tpu --zone=us-central2-b --worker=all --command='cd ~/capjax && make "
           "venv && .venv/bin/pip install -q \"jax[tpu]==0.10.2\" && .venv/bin/python -m {module} --distributed=on "
           "{args}'")


def _env(**values: str) -> dict[str, str]:
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("SLURM_", "TPU_", "ZONE", "MODULE", "ACCELERATOR_TYPE", "VERSION", "CREATE_FLAGS",
                              "MAX_RELAUNCHES"))}
  env.update(values)
  return env


def _script(name: str, args: list[str], env: dict[str, str], cwd: pathlib.Path = REPO) -> subprocess.CompletedProcess:
  return subprocess.run(["bash", str(REPO / "launch" / name), *args], cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=60)


def _tpu_env(**values: str) -> dict[str, str]:
  return _env(TPU_NAME="my-tpu", ZONE="us-central2-b", **values)


def test_tpu_dry_run_prints_one_command_for_every_worker_and_the_relaunch():
  proc = _script("tpu_vm.sh", ["--dry-run", *ARGS], _tpu_env())
  assert proc.returncode == 0 and proc.stderr == ""
  assert proc.stdout.splitlines() == [
      "# coordinator: worker 0 of my-tpu, port 8482 (jax.distributed.initialize() reads it from the TPU metadata)",
      "# STAGE: a temporary folder; STAGE/capjax holds " + " ".join(STAGED),
      "gcloud compute tpus tpu-vm scp --recurse --zone=us-central2-b --worker=all STAGE/capjax 'my-tpu:~'",
      TPU_SSH.format(module="capjax.main", args=" ".join(ARGS)),
      "# relaunch (up to 100 times): when the run printed \"interrupted at step N\", or failed while",
      "# the TPU is PREEMPTED; its state:",
      "gcloud compute tpus tpu-vm describe my-tpu --zone=us-central2-b --format='value(state)'",
      "# a PREEMPTED or TERMINATED TPU stops the script: set ACCELERATOR_TYPE and VERSION to have it recreated",
  ]


def test_tpu_dry_run_with_a_module_and_the_recreation_of_a_preempted_tpu():
  env = _tpu_env(MODULE="capjax.tools.extract_tfds_features", ACCELERATOR_TYPE="v4-32",
                 VERSION="tpu-ubuntu2204-base", CREATE_FLAGS="--preemptible --network=default", MAX_RELAUNCHES="7")
  proc = _script("tpu_vm.sh", ["--dataset=cc3m", "--dry-run"], env)
  assert proc.returncode == 0 and proc.stderr == ""
  lines = proc.stdout.splitlines()
  assert lines[3] == TPU_SSH.format(module="capjax.tools.extract_tfds_features", args="--dataset=cc3m")
  assert lines[4] == "# relaunch (up to 7 times): when the run printed \"interrupted at step N\", or failed while"
  assert lines[7:] == [
      "# a PREEMPTED or TERMINATED TPU is recreated first:",
      "gcloud compute tpus tpu-vm delete my-tpu --zone=us-central2-b --quiet",
      "gcloud compute tpus tpu-vm create my-tpu --zone=us-central2-b --accelerator-type=v4-32 "
      "--version=tpu-ubuntu2204-base --preemptible --network=default",
  ]


def test_tpu_without_a_name_says_what_to_set():
  proc = _script("tpu_vm.sh", ["--dry-run"], _env(ZONE="us-central2-b"))
  assert proc.returncode != 0 and "TPU_NAME: set TPU_NAME" in proc.stderr and proc.stdout == ""


SLURM_SBATCH = ("# with its #SBATCH lines: --job-name=capjax --nodes=2 --ntasks-per-node=1 --gpus-per-node=8 "
                "--cpus-per-task=16 --requeue --signal=TERM@120 --open-mode=append")
SLURM_REQUEUE = ("# when the run printed \"interrupted at step N\" (SIGTERM: the time limit, a preemption), it is "
                 "requeued:")


def test_slurm_dry_run_outside_a_job_prints_the_submission_and_what_the_job_runs():
  proc = _script("gpu_slurm.sh", ["--dry-run", *ARGS], _env())
  assert proc.returncode == 0 and proc.stderr == ""
  assert proc.stdout.splitlines() == [
      "sbatch launch/gpu_slurm.sh " + " ".join(ARGS),
      SLURM_SBATCH,
      "# then in the job, on its first node:",
      'export JAX_COORDINATOR_ADDRESS="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):'
      '$((61440 + SLURM_JOB_ID % 4096))"',
      "srun --kill-on-bad-exit=1 .venv/bin/python -m capjax.main --distributed=on " + " ".join(ARGS),
      SLURM_REQUEUE,
      'scontrol requeue "$SLURM_JOB_ID"',
  ]


@pytest.mark.parametrize("nodes,first", [("gpu[07-08]", "gpu07"), ("gpu[07-08],cpu1", "gpu07"),
                                         ("a3,gpu[07-08]", "a3"), ("n[5,9-12]", "n5")])
def test_slurm_dry_run_inside_a_job_names_its_coordinator_and_its_requeue(nodes, first):
  env = _env(SLURM_JOB_ID="4242", SLURM_JOB_NODELIST=nodes, MODULE="capjax.tools.extract_tfds_features")
  proc = _script("gpu_slurm.sh", ["--dataset=cc3m", "--dry-run"], env)
  assert proc.returncode == 0 and proc.stderr == ""
  assert proc.stdout.splitlines() == [
      f"export JAX_COORDINATOR_ADDRESS={first}:61586",  # 61440 + 4242 % 4096: the port JAX would choose
      "srun --kill-on-bad-exit=1 .venv/bin/python -m capjax.tools.extract_tfds_features --distributed=on "
      "--dataset=cc3m",
      SLURM_REQUEUE,
      "scontrol requeue 4242",
  ]


@pytest.mark.parametrize("script,env", [("tpu_vm.sh", _tpu_env()), ("gpu_slurm.sh", _env())])
def test_the_printed_lines_give_back_the_arguments_as_typed(script, env, tmp_path):
  args = ["--config=configs/t2t.py:shapes", "--workdir=/mnt/my runs/it's", "--config.dataset.data_dir=$HOME/*"]
  proc = _script(script, ["--dry-run", *args], env)
  assert proc.returncode == 0
  # The launch line, run by bash with the launcher replaced by a program that prints its arguments, one per line.
  launch = next(line for line in proc.stdout.splitlines() if line.startswith(("gcloud compute tpus tpu-vm ssh",
                                                                              "srun")))
  printer = tmp_path / "bin"
  printer.mkdir()
  for name in ("gcloud", "srun"):
    (printer / name).write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    (printer / name).chmod(0o755)
  out = subprocess.run(["bash", "-c", launch], env=dict(env, PATH=f"{printer}:{os.environ['PATH']}"),
                       capture_output=True, text=True, check=True).stdout.splitlines()
  if script == "tpu_vm.sh":  # the worker's command: a shell line again
    command = out[-1].removeprefix("--command=")
    out = subprocess.run(["bash", "-c", command.replace(".venv/bin/python -m capjax.main", "printf '%s\\n'")
                          .split("&& ", 3)[-1]], capture_output=True, text=True, check=True).stdout.splitlines()
  assert out[-len(args):] == args and out[-len(args) - 1] == "--distributed=on"


# A gcloud that acts out a job: each `ssh` takes the next (output, exit status, TPU state after it) of its plan;
# `describe` prints the state; `delete` and `create` change it. Every call is recorded, one per line.
FAKE_GCLOUD = """#!{python}
import json, os, pathlib, sys
here = pathlib.Path(__file__).parent
calls, state, plan = here / "calls", here / "state", json.loads((here / "plan").read_text())
args = [",".join(sorted(os.listdir(a))) if os.path.isdir(a) else a for a in sys.argv[1:]]  # a copied folder: its list
with calls.open("a") as f:
  f.write(" ".join(a for a in args[3:] if not a.startswith("--command=")) + "\\n")
verb = args[3]
if verb == "ssh":
  n = len([c for c in calls.read_text().splitlines() if c.startswith("ssh")]) - 1
  output, status, after = plan[n]
  print(output)
  state.write_text(after)
  sys.exit(status)
if verb == "describe":
  if state.read_text() == "MISSING":
    sys.exit(1)
  print(state.read_text())
if verb == "delete":
  state.write_text("MISSING")
if verb == "create":
  state.write_text("READY")
"""
INTERRUPTED = "interrupted at step {}: checkpoint saved — rerun the same command to resume"


def _fake(tmp_path: pathlib.Path, name: str, text: str) -> pathlib.Path:
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir(parents=True, exist_ok=True)
  (bin_dir / name).write_text(text)
  (bin_dir / name).chmod(0o755)
  return bin_dir


def _tpu_job(tmp_path: pathlib.Path, plan: list, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
  bin_dir = _fake(tmp_path, "gcloud", FAKE_GCLOUD.format(python=sys.executable))
  (bin_dir / "plan").write_text(json.dumps(plan))
  (bin_dir / "state").write_text("READY")
  proc = _script("tpu_vm.sh", ARGS, _tpu_env(PATH=f"{bin_dir}:{os.environ['PATH']}", **env))
  return proc, (bin_dir / "calls").read_text().splitlines()


COPY = f"scp --recurse --zone=us-central2-b --worker=all {','.join(sorted(STAGED))} my-tpu:~"
SSH = "ssh my-tpu --zone=us-central2-b --worker=all"
DESCRIBE = "describe my-tpu --zone=us-central2-b --format=value(state)"


def test_tpu_relaunches_after_preemptions_recreating_a_preempted_tpu(tmp_path):
  plan = [[INTERRUPTED.format(7), 255, "PREEMPTED"],  # the VM went away: recreated, then relaunched
          [INTERRUPTED.format(12), 0, "READY"],       # a SIGTERM on a live TPU (maintenance): relaunched as it is
          ["test split: 64 images", 0, "READY"]]      # the run is over
  proc, calls = _tpu_job(tmp_path, plan, ACCELERATOR_TYPE="v4-32", VERSION="tpu-ubuntu2204-base")
  assert proc.returncode == 0, proc.stderr
  assert calls == [COPY, SSH, DESCRIBE, "delete my-tpu --zone=us-central2-b --quiet",
                   "create my-tpu --zone=us-central2-b --accelerator-type=v4-32 --version=tpu-ubuntu2204-base --spot",
                   COPY, SSH, DESCRIBE, COPY, SSH]
  assert proc.stderr.count("the run resumes from its latest checkpoint") == 2


def test_tpu_stops_on_a_failure_of_a_ready_tpu_and_on_a_preemption_it_cannot_repair(tmp_path):
  proc, calls = _tpu_job(tmp_path / "bug", [["Traceback ...", 1, "READY"]])
  assert proc.returncode == 1 and calls == [COPY, SSH, DESCRIBE]
  assert proc.stderr.strip().endswith(
      "error: the run failed (exit status 1) on a READY TPU: not a preemption — fix it and rerun")
  proc, calls = _tpu_job(tmp_path / "preempted", [[INTERRUPTED.format(3), 0, "PREEMPTED"]])
  assert proc.returncode == 1 and calls == [COPY, SSH, DESCRIBE]
  assert proc.stderr.strip().endswith(
      "error: TPU my-tpu is PREEMPTED — recreate it and rerun, or set ACCELERATOR_TYPE and VERSION")


@pytest.mark.parametrize("output,requeued", [(INTERRUPTED.format(9), True), ("test split: 64 images", False)])
def test_slurm_requeues_the_job_when_the_run_was_interrupted(tmp_path, output, requeued):
  calls = tmp_path / "calls"
  record = f'#!/bin/sh\necho "$(basename "$0") $*" >> {calls}\n'
  _fake(tmp_path, "srun", record + f"echo '{output}'\n")
  bin_dir = _fake(tmp_path, "scontrol", record)
  env = _env(SLURM_JOB_ID="4242", SLURM_JOB_NODELIST="gpu[07-08]", SLURM_SUBMIT_DIR=str(REPO),
             PATH=f"{bin_dir}:{os.environ['PATH']}")
  # SLURM's scontrol expands the node list: the fake answers for this one.
  (bin_dir / "scontrol").write_text(record + 'if [ "$1" = show ]; then echo gpu07; fi\n')
  proc = _script("gpu_slurm.sh", ARGS, env, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert output in proc.stdout
  assert "capjax: job 4242, start 1, coordinator gpu07:61586" in proc.stderr
  expected = ["scontrol show hostnames gpu[07-08]",
              "srun --kill-on-bad-exit=1 .venv/bin/python -m capjax.main --distributed=on " + " ".join(ARGS)]
  assert calls.read_text().splitlines() == expected + (["scontrol requeue 4242"] if requeued else [])
