#!/usr/bin/env bash
# One table for a new GPU or TPU machine, in under 8 minutes: the device's matmul peak, the paper's T2T 8x8 train
# step (batch 256, float32 and bfloat16, with MFU), IRv2 feature extraction at 299 px and beam-4 captions/s.
# On a machine without an accelerator it runs with tiny sizes (figures meaningless) so CI keeps it working.
# usage: benchmarks/accelerator_check.sh [--steps=N]      (PYTHON=... to choose the interpreter; default .venv's)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
platform="$("$PYTHON" -c 'import jax; print(jax.default_backend())' 2>/dev/null)"
small=()
if [ "$platform" = "cpu" ]; then
  small=(--small)
fi
exec "$PYTHON" benchmarks/accelerator_check.py "${small[@]}" "$@"
