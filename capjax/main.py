"""Entry point: `python -m capjax.main --config=configs/t2t.py:shapes --workdir=DIR [--mode=train]`.

Parses flags, starts multi-host JAX when asked (or when a cluster environment is detected), and dispatches.
"""

from __future__ import annotations

import logging as pylogging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags, logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file, e.g. configs/t2t.py:shapes", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Where checkpoints, logs and evaluation outputs go.")
_MODE = flags.DEFINE_enum(
    "mode", "train", ["train", "eval", "caption"],
    "train: train (resuming), then evaluate the best checkpoint on the test split. eval: decode and score "
    "--split with a checkpoint. caption: caption the files matching --images.")
_SPLIT = flags.DEFINE_string("split", None, "--mode=eval: the split to score (default: the config's test split).")
_STEP = flags.DEFINE_integer("step", None, "--mode=eval/caption: checkpoint step (default: best validation CIDEr-D).")
_IMAGES = flags.DEFINE_string("images", None, "--mode=caption: a glob of image files, e.g. 'photos/*.jpg'.")
_DISTRIBUTED = flags.DEFINE_enum(
    "distributed", "auto", ["auto", "on", "off"],
    "Call jax.distributed.initialize(): 'auto' when a cluster is detected (Cloud TPU VM pods, SLURM, "
    "JAX_COORDINATOR_ADDRESS), 'on' always, 'off' never (single process).")


class _QuietLibraries(pylogging.Filter):
  """Drops INFO chatter of orbax/grain/tfds (dozens of lines per checkpoint); warnings still show."""

  _NOISY = (f"{os.sep}orbax{os.sep}", f"{os.sep}grain{os.sep}", f"{os.sep}tensorflow_datasets{os.sep}",
            f"{os.sep}jax{os.sep}_src{os.sep}")

  def filter(self, record: pylogging.LogRecord) -> bool:
    return record.levelno >= pylogging.WARNING or not any(n in record.pathname for n in self._NOISY)


def main(argv) -> None:
  logging.get_absl_handler().addFilter(_QuietLibraries())
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if _CONFIG.value is None or _WORKDIR.value is None:
    raise app.UsageError("--config and --workdir are required, e.g. "
                         "--config=configs/t2t.py:shapes --workdir=workdir/shapes")
  # Imported here rather than at the top: `--help` and flag errors answer without loading jax and TensorFlow, and
  # jax.distributed starts before any module can touch a backend.
  from capjax import distributed  # noqa: PLC0415
  distributed.maybe_initialize(_DISTRIBUTED.value)
  from capjax import inference, train  # noqa: PLC0415
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
  config, workdir = _CONFIG.value, _WORKDIR.value
  try:
    if _MODE.value == "train":
      result = train.train_and_evaluate(config, workdir)
    elif _MODE.value == "eval":
      result = inference.run_eval(config, workdir, _SPLIT.value, _STEP.value)
    else:
      if not _IMAGES.value:
        raise app.UsageError("--mode=caption needs --images=GLOB")
      inference.caption_files(config, workdir, _IMAGES.value, _STEP.value)
      return
  except (ConfigError, DatasetNotBuiltError, FileNotFoundError) as e:
    logging.error("%s", e)
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  for kind, path in result["outputs"].items():
    print(f"{kind}: {path}")


def run() -> None:
  app.run(main)


if __name__ == "__main__":
  run()
