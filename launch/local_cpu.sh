#!/usr/bin/env bash
# Local CPU debugging mode: a tiny model for a few steps with NaN checks, on N fake devices (default 1).
#   launch/local_cpu.sh [NUM_FAKE_DEVICES] [extra flags...]
# e.g. launch/local_cpu.sh 8 --config.mesh.model=2   (data=4 x model=2 on 8 fake CPU devices)
# It runs `make venv` first: creates or updates .venv from the pinned dependencies (minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
devices="${1:-1}"; shift || true
make venv
export XLA_FLAGS="--xla_force_host_platform_device_count=${devices} ${XLA_FLAGS:-}"
export JAX_PLATFORMS=cpu
exec .venv/bin/python -m capjax.main --config=configs/t2t.py:shapes,debug --workdir="${WORKDIR:-workdir/debug}" "$@"
