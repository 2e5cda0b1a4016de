r"""Exports a trained workdir's checkpoint for serving: a TensorFlow SavedModel that takes encoded images, and the same
decode as a `jax.export` function with its parameters.

usage: python -m capjax.export --workdir=W --output=E [--step=N] [--config=configs/t2t.py:VARIANTS] \
           [--weights=DIR] [--overwrite]

E/saved_model/: `serving_default` takes `images` (a 1-D batch of encoded JPEG or PNG bytes, any batch size) and
returns `captions` (string [batch, k], best first; k is the beam size, 1 for greedy) and `scores` (float32 [batch, k]:
beam search's log p / length penalty, greedy's log p). Decoding, resizing and the vocabulary are inside it.
E/jax/: the serialized `jax.export` function, params.npz and vocab.txt; `capjax.export.load_jax(E)` serves them.
E/export.json: the workdir, step and decode settings.

--step defaults to the best checkpoint by validation CIDEr-D; --config to the run's own (W/config.json). A model that
reads Inception-ResNet-v2 features needs --weights (the converted weights that extracted them), which go inside the
export so that it takes images. The export is written beside E and renamed into place when whole; an existing E is
replaced only with --overwrite, and only when it is an export.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from absl import flags

from capjax import cli, files

FLAGS = flags.FlagValues()
_WORKDIR = flags.DEFINE_string("workdir", None, "the trained run's workdir", flag_values=FLAGS, required=True)
_OUTPUT = flags.DEFINE_string("output", None, "the export's folder (must not exist, unless --overwrite)",
                              flag_values=FLAGS, required=True)
_STEP = flags.DEFINE_integer("step", None, "checkpoint step (default: the best by validation CIDEr-D)", lower_bound=0,
                             flag_values=FLAGS)
_CONFIG = flags.DEFINE_string("config", None, "config file[:variants] (default: the workdir's config.json)",
                              flag_values=FLAGS)
_WEIGHTS = flags.DEFINE_string("weights", None, "for a feature model: the converted Inception-ResNet-v2 weights "
                               "(capjax.tools.convert_weights) that extracted its features", flag_values=FLAGS)
_OVERWRITE = flags.DEFINE_boolean("overwrite", False, "replace an existing export at --output", flag_values=FLAGS)


def _config(workdir: str):
  """The config from --config, else the run's config.json (ml_collections reads it back as the run saved it)."""
  from capjax import config_util  # noqa: PLC0415 (ml_collections after the flags)
  import ml_collections  # noqa: PLC0415
  if _CONFIG.value:
    try:
      return config_util.load(_CONFIG.value)
    except (FileNotFoundError, ValueError) as error:
      cli.fail(f"--config={_CONFIG.value}: {error}")
  path = os.path.join(workdir, "config.json")
  if not os.path.isfile(path):
    cli.fail(f"--workdir={workdir} has no config.json, so it holds no training run — give the workdir of a "
             "training run, or its config with --config")
  saved, wrong = files.json_object(path)
  if saved is None:
    cli.fail(f"{wrong} — give the run's config with --config")
  return ml_collections.ConfigDict(saved)


def _check_output(output: str, overwrite: bool) -> None:
  if not output.strip():
    cli.fail("--output= is empty — give the folder to write the export in, e.g. --output=export")
  if os.path.lexists(output):
    if not overwrite:
      cli.fail(f"--output={output} exists — pass --overwrite to replace it, or give another --output")
    from capjax.export import build  # noqa: PLC0415
    if not os.path.isdir(output) or not build.is_export(output):
      cli.fail(f"--output={output} is not an export (no {build.MANIFEST}) — --overwrite replaces only an export; "
               "give another --output")
  existing = os.path.dirname(os.path.abspath(output))
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  reason = cli.unwritable_reason(existing) if os.path.isdir(existing) else "is under a file, not a folder"
  if reason:
    cli.fail(f"--output={output} {reason} — choose a folder you can write to")


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  workdir, output = os.path.expanduser(_WORKDIR.value), os.path.expanduser(_OUTPUT.value)
  _check_output(output, _OVERWRITE.value)
  files.refuse_overlap({"--output": output}, {"--workdir": workdir})
  if not os.path.isdir(workdir):
    cli.fail(f"--workdir={workdir} is not a directory — give the workdir of a training run")
  config = _config(workdir)
  if _WEIGHTS.value:
    config.model.encoder.weights = os.path.expanduser(_WEIGHTS.value)
  cli.quiet_library_logs()
  from capjax.config_util import ConfigError  # noqa: PLC0415 (jax and TensorFlow load after the flags are good)
  # TensorFlow (through the data package) and the devices start here: their start-up notices are no news. The
  # error line is written after the block, so that it stays the last line on stderr.
  message = None
  with cli.quiet_native_startup():
    from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
    from capjax.export import build  # noqa: PLC0415
    from capjax.models.inception_resnet_v2 import WeightsError  # noqa: PLC0415
    try:
      decoder = build.decoder(config, workdir, _STEP.value)
    except (ConfigError, DatasetNotBuiltError, FileNotFoundError, NotADirectoryError, WeightsError) as error:
      message = str(error)
  if message is not None:
    cli.fail(message)
  path = build.write(decoder, workdir, output, _OVERWRITE.value)
  print(f"export of {workdir} step {decoder.step} ({decoder.settings['method']}, {decoder.k} per image): {path}")
  return 0


if __name__ == "__main__":
  cli.run(main)
