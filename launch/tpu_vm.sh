#!/usr/bin/env bash
# Cloud TPU VM (single host or pod slice): copy the repo to every worker, set up, and train.
#   TPU_NAME=my-tpu ZONE=us-central2-b launch/tpu_vm.sh --config=configs/t2t.py --workdir=gs://BUCKET/run1
# Every worker runs the same command; capjax.main calls jax.distributed.initialize() (TPU metadata gives
# the coordinator), each process reads its own data shard, and orbax writes one checkpoint for all.
# The dataset must be built as ArrayRecord on each worker's local disk (tfds.data_source reads local files).
# Another entry point with MODULE, e.g. the feature extraction (the workers take shards in turn; its output
# directory must be one file system they share, or gather the shards afterwards):
#   MODULE=capjax.tools.extract_tfds_features TPU_NAME=... ZONE=... launch/tpu_vm.sh --dataset=cc3m --weights=...
set -euo pipefail
: "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}"
cd "$(dirname "$0")/.."
repo="capjax"
gcloud compute tpus tpu-vm scp --recurse --zone="$ZONE" --worker=all . "$TPU_NAME:~/$repo"
gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" --worker=all --command="
  set -e; cd ~/$repo && make venv && .venv/bin/pip install -q 'jax[tpu]==0.10.2' &&
  .venv/bin/python -m ${MODULE:-capjax.main} --distributed=on $*"
