#!/usr/bin/env bash
#SBATCH --job-name=capjax
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=16
# Multi-host GPU training under SLURM: one process per node, all of the node's GPUs in it.
#   sbatch launch/gpu_slurm.sh --config=configs/t2t.py --workdir=/shared/runs/t2t
# jax.distributed.initialize() reads the SLURM environment (coordinator = first node).
# Set-up once on the shared file system: `make venv && .venv/bin/pip install 'jax[cuda12]==0.10.2'`.
# Another entry point with MODULE, e.g. the feature extraction (the nodes take shards in turn):
#   MODULE=capjax.tools.extract_tfds_features sbatch launch/gpu_slurm.sh --dataset=cc3m --weights=weights/irv2
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
srun .venv/bin/python -m "${MODULE:-capjax.main}" --distributed=on "$@"
