#!/usr/bin/env bash
#SBATCH --job-name=capjax
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=16
#SBATCH --requeue
#SBATCH --signal=TERM@120
#SBATCH --open-mode=append
# Multi-host GPU training under SLURM: one process per node, all of the node's GPUs in it.
#   sbatch launch/gpu_slurm.sh --config=configs/t2t.py --workdir=/shared/runs/t2t
#   launch/gpu_slurm.sh [--dry-run] --config=...   (outside a job: submits itself with sbatch)
# jax.distributed.initialize() finds the processes in the SLURM environment; the script names the coordinator
# (the first node, port 61440 + job id % 4096, as JAX would choose) in JAX_COORDINATOR_ADDRESS.
# Preemption and time limits: --signal=TERM@120 sends SIGTERM to every task 2 minutes before the time limit, and a
# preemption sends it too; the processes save one agreed step, print "interrupted at step N" and exit 0, and the
# script requeues the job (`scontrol requeue`; --requeue also puts it back after a preemption or a node failure).
# The requeued job runs the same command and resumes from --workdir, which must be on the file system the nodes
# share, as must the repo and its .venv; --open-mode=append keeps one log across the requeues.
# --dry-run prints the sbatch, srun and requeue lines without running any (inside an allocation, with its values).
# Set-up once on the shared file system: `make venv && .venv/bin/pip install 'jax[cuda12]==0.10.2'`.
# Another entry point with MODULE, e.g. the feature extraction (the nodes take shards in turn):
#   MODULE=capjax.tools.extract_tfds_features sbatch launch/gpu_slurm.sh --dataset=cc3m --weights=weights/irv2
set -euo pipefail
dry_run=0
args=()
for arg in "$@"; do
  if [[ $arg == --dry-run ]]; then dry_run=1; else args+=("$arg"); fi
done
in_job=0
[[ -n ${SLURM_JOB_ID:-} ]] && in_job=1
script="launch/gpu_slurm.sh"

quote() {  # the arguments as one shell line, quoted where needed (`--flag='a value'`)
  local words=() word
  for word in "$@"; do
    if [[ $word =~ ^[][A-Za-z0-9_./:=,@%+-]*$ && -n $word ]]; then
      words+=("$word")
    elif [[ $word =~ ^(--[A-Za-z0-9_.-]+=)(.*)$ ]]; then
      words+=("${BASH_REMATCH[1]}'${BASH_REMATCH[2]//\'/\'\\\'\'}'")
    else
      words+=("'${word//\'/\'\\\'\'}'")
    fi
  done
  echo "${words[*]}"
}

first_node() {  # the first host of SLURM_JOB_NODELIST (gpu[07-08],gpu10 -> gpu07), as scontrol and JAX read it
  if command -v scontrol > /dev/null; then
    scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1
    return
  fi
  local list="$SLURM_JOB_NODELIST" prefix rest
  prefix="${list%%[,[]*}"
  if [[ ${list:${#prefix}:1} == "[" ]]; then
    rest="${list:${#prefix}+1}"
    echo "$prefix${rest%%[],-]*}"
  else
    echo "$prefix"
  fi
}

submit=(sbatch "$script" "${args[@]}")
train=(srun --kill-on-bad-exit=1 .venv/bin/python -m "${MODULE:-capjax.main}" --distributed=on "${args[@]}")
if ((in_job)); then
  coordinator="$(first_node):$((61440 + SLURM_JOB_ID % 4096))"
  requeue=(scontrol requeue "$SLURM_JOB_ID")
fi

if ((dry_run)); then
  if ((!in_job)); then
    quote "${submit[@]}"
    directives="$(sed -n 's/^#SBATCH //p' "$(dirname "$0")/gpu_slurm.sh")"
    echo "# with its #SBATCH lines: ${directives//$'\n'/ }"
    echo "# then in the job, on its first node:"
    echo -n 'export JAX_COORDINATOR_ADDRESS="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    echo ':$((61440 + SLURM_JOB_ID % 4096))"'
  else
    echo "export JAX_COORDINATOR_ADDRESS=$coordinator"
  fi
  quote "${train[@]}"
  echo "# when the run printed \"interrupted at step N\" (SIGTERM: the time limit, a preemption), it is requeued:"
  if ((in_job)); then quote "${requeue[@]}"; else echo 'scontrol requeue "$SLURM_JOB_ID"'; fi
  exit 0
fi

if ((!in_job)); then
  cd "$(dirname "$0")/.."
  exec "${submit[@]}"
fi
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
export JAX_COORDINATOR_ADDRESS="$coordinator"
echo "capjax: job $SLURM_JOB_ID, start $((${SLURM_RESTART_COUNT:-0} + 1)), coordinator $JAX_COORDINATOR_ADDRESS" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
"${train[@]}" | tee "$log" || status=$?
if grep -q "interrupted at step [0-9]*: checkpoint saved" "$log"; then
  "${requeue[@]}" || echo "warning: scontrol requeue failed — resubmit: sbatch $script $(quote "${args[@]}")" >&2
fi
exit "$status"
