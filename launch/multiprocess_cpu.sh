#!/usr/bin/env bash
# Multi-host rehearsal on one machine: NUM_PROCESSES processes x DEVICES fake CPU devices each, talking through
# gloo, exactly as a multi-host GPU/TPU job would (each process reads its own data shard).
#   launch/multiprocess_cpu.sh [NUM_PROCESSES=2] [DEVICES=4] [extra flags...]
# It runs `make venv` first: creates or updates .venv from the pinned dependencies (minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
procs="${1:-2}"; devices="${2:-4}"; shift 2 || true
make venv
export XLA_FLAGS="--xla_force_host_platform_device_count=${devices}"
export JAX_PLATFORMS=cpu JAX_COORDINATOR_ADDRESS="127.0.0.1:${PORT:-12355}" JAX_NUM_PROCESSES="${procs}"
pids=()
for ((i = 0; i < procs; i++)); do
  JAX_PROCESS_ID=$i .venv/bin/python -m capjax.main --config=configs/t2t.py:shapes,debug \
    --workdir="${WORKDIR:-workdir/multiprocess}" "$@" > "/tmp/capjax_process_$i.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
tail -n 5 /tmp/capjax_process_0.log
exit $status
