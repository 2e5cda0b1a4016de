#!/usr/bin/env bash
# Cloud TPU VM (single host or pod slice): copy the repo to every worker, set up, train, and relaunch after a
# preemption until the run is over.
#   TPU_NAME=my-tpu ZONE=us-central2-b launch/tpu_vm.sh [--dry-run] --config=configs/t2t.py --workdir=/mnt/runs/t2t
# What it does on each worker: copies to ~/capjax only what the set-up and the run need (Makefile, pyproject.toml,
# setup.cfg, constraints.txt, README.md, capjax/, configs/, tfds_builders/: never .venv/, workdir/ or data), then
# runs `make venv` there (creates or updates ~/capjax/.venv, installs jax[tpu]) before the command.
# Every worker runs the same command (--worker=all); capjax.main calls jax.distributed.initialize(), which reads the
# coordinator (worker 0, port 8482) from the TPU metadata; each process reads its own data shard, and orbax writes
# one checkpoint for all. --workdir must be a path that every worker sees and that outlives the VM (a Filestore NFS
# share, or a Cloud Storage bucket mounted with gcsfuse, at the same path on every worker): relaunches resume there.
# The dataset (ArrayRecord) must be readable by each worker at --config.dataset.data_dir: on the shared file system,
# or built on each worker's local disk (again after a recreation).
# Relaunch: a preemption notice (SIGTERM to any worker) makes every process save the same step, print "interrupted
# at step N" and exit 0. The script then runs the same command again, up to MAX_RELAUNCHES (default 100) times; it
# does the same when the command fails while the TPU is PREEMPTED. A PREEMPTED or TERMINATED TPU is deleted and
# recreated first when ACCELERATOR_TYPE and VERSION are set (e.g. v4-32 and tpu-ubuntu2204-base; CREATE_FLAGS,
# default --spot); without them the script stops and says so. A failure on a READY TPU is a bug: no relaunch.
# --dry-run prints the gcloud lines (one launch, and a recreation) without running any.
# Another entry point with MODULE, e.g. the feature extraction (the workers take shards in turn; its output
# directory must be one file system they share, or gather the shards afterwards):
#   MODULE=capjax.tools.extract_tfds_features TPU_NAME=... ZONE=... launch/tpu_vm.sh --dataset=cc3m --weights=...
set -euo pipefail
dry_run=0
args=()
for arg in "$@"; do
  if [[ $arg == --dry-run ]]; then dry_run=1; else args+=("$arg"); fi
done
: "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}"
cd "$(dirname "$0")/.."
repo="capjax"
max_relaunches="${MAX_RELAUNCHES:-100}"
read -ra create_flags <<< "${CREATE_FLAGS---spot}"

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

remote="cd ~/$repo && make venv && .venv/bin/pip install -q \"jax[tpu]==0.10.2\" && .venv/bin/python -m \
${MODULE:-capjax.main} --distributed=on $(quote "${args[@]}")"
# The copy: the files `make venv` and the run need, staged as a folder named $repo (scp merges it into ~/$repo).
needed=(Makefile pyproject.toml setup.cfg constraints.txt README.md capjax configs tfds_builders)
stage=STAGE  # the dry run's name for it; a run makes it below
((dry_run)) || stage="$(mktemp -d)"
copy=(gcloud compute tpus tpu-vm scp --recurse --zone="$ZONE" --worker=all "$stage/$repo" "$TPU_NAME:~")
launch=(gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" --worker=all --command="$remote")
describe=(gcloud compute tpus tpu-vm describe "$TPU_NAME" --zone="$ZONE" --format=value\(state\))
delete=(gcloud compute tpus tpu-vm delete "$TPU_NAME" --zone="$ZONE" --quiet)
create=(gcloud compute tpus tpu-vm create "$TPU_NAME" --zone="$ZONE" --accelerator-type="${ACCELERATOR_TYPE:-}"
        --version="${VERSION:-}" "${create_flags[@]}")

if ((dry_run)); then
  echo "# coordinator: worker 0 of $TPU_NAME, port 8482 (jax.distributed.initialize() reads it from the TPU metadata)"
  echo "# STAGE: a temporary folder; STAGE/$repo holds ${needed[*]}"
  quote "${copy[@]}"
  quote "${launch[@]}"
  echo "# relaunch (up to $max_relaunches times): when the run printed \"interrupted at step N\", or failed while"
  echo "# the TPU is PREEMPTED; its state:"
  quote "${describe[@]}"
  if [[ -n ${ACCELERATOR_TYPE:-} && -n ${VERSION:-} ]]; then
    echo "# a PREEMPTED or TERMINATED TPU is recreated first:"
    quote "${delete[@]}"
    quote "${create[@]}"
  else
    echo "# a PREEMPTED or TERMINATED TPU stops the script: set ACCELERATOR_TYPE and VERSION to have it recreated"
  fi
  exit 0
fi

tpu_state() {
  "${describe[@]}" 2>/dev/null || echo MISSING
}

log="$(mktemp)"
trap 'rm -rf "$log" "$stage"' EXIT
mkdir "$stage/$repo"
tar -c --exclude=__pycache__ "${needed[@]}" | tar -x -C "$stage/$repo"
for ((relaunch = 0; ; relaunch++)); do
  status=0
  "${copy[@]}" || status=$?
  if ((status == 0)); then
    "${launch[@]}" 2>&1 | tee "$log" || status=$?
  fi
  interrupted=0
  grep -q "interrupted at step [0-9]*: checkpoint saved" "$log" && interrupted=1
  if ((status == 0 && !interrupted)); then
    exit 0  # the run is over
  fi
  state="$(tpu_state)"
  while [[ $state =~ ^(CREATING|STARTING|RESTARTING|REPAIRING|REIMAGING|STOPPING|DELETING)$ ]]; do
    sleep 30
    state="$(tpu_state)"
  done
  if [[ $state == READY && $interrupted == 0 ]]; then
    echo "error: the run failed (exit status $status) on a READY TPU: not a preemption — fix it and rerun" >&2
    exit "$status"
  fi
  if ((relaunch >= max_relaunches)); then
    echo "error: $max_relaunches relaunches done — rerun the script to go on (the run resumes)" >&2
    exit 1
  fi
  if [[ $state != READY ]]; then
    if [[ -z ${ACCELERATOR_TYPE:-} || -z ${VERSION:-} ]]; then
      echo "error: TPU $TPU_NAME is $state — recreate it and rerun, or set ACCELERATOR_TYPE and VERSION" >&2
      exit 1
    fi
    [[ $state == MISSING ]] || "${delete[@]}"
    "${create[@]}"
  fi
  echo "capjax: relaunch $((relaunch + 1)) (TPU $state); the run resumes from its latest checkpoint" >&2
done
