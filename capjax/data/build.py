"""Builds a dataset as ArrayRecord (what `tfds.data_source` and grain read), with TFDS's progress bars.

  python -m capjax.data.build --dataset=NAME[/CONFIG] [--data_dir=DIR] [--manual_dir=DIR] [--set KEY=VALUE ...]

NAME is one of the project's builders (synthetic_scenes, stylized_scenes, cc3m, alt_text_captions, cc12m_llavanext,
flickrstyle10k, senticap). Builders that count what they left out print their report. (The `tfds build` CLI needs
apache-beam even for builders that do not use it: tensorflow/datasets#5463.)
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from absl import flags

from capjax import cli
from capjax.data import sources

FLAGS = flags.FlagValues()
_DATASET = flags.DEFINE_string("dataset", "synthetic_scenes", "TFDS name of the dataset to build (NAME or NAME/CONFIG)",
                               flag_values=FLAGS)
_CONFIG = flags.DEFINE_string("config", "", "builder config (e.g. `tiny` for synthetic_scenes)", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets)",
                                flag_values=FLAGS)
_MANUAL_DIR = flags.DEFINE_string("manual_dir", "", "where the manually downloaded files are (datasets that need it)",
                                  flag_values=FLAGS)
_SET = flags.DEFINE_multi_string("set", [], "KEY=VALUE for the builder config (repeatable; builders with a "
                                 "config_from_settings, e.g. alt_text_captions)", flag_values=FLAGS)


def leftovers(builder) -> list[str]:
  """The folders that builds of `builder`'s dataset and config stopped by a signal left behind: TFDS builds into
  `<config>/incomplete.XXXXXX_<version>` and removes it in a `finally` that a signal skips. A CC3M build's can hold
  hundreds of GB."""
  from tensorflow_datasets.core import constants  # noqa: PLC0415 (TensorFlow: main loads it after its checks)
  return sorted(os.fspath(p) for p in builder.data_path.parent.glob(constants.INCOMPLETE_PREFIX + "*"))


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  dataset, _, config_name = _DATASET.value.partition("/")
  if config_name and _CONFIG.value and config_name != _CONFIG.value:
    cli.fail(f"--dataset={_DATASET.value} and --config={_CONFIG.value} name two configs — give one")
  if dataset not in sources.KNOWN_BUILDERS:
    cli.fail(f"unknown dataset {dataset!r} — choose one of {', '.join(sorted(sources.KNOWN_BUILDERS))}")
  if _MANUAL_DIR.value and not os.path.isdir(_MANUAL_DIR.value):
    cli.fail(f"--manual_dir={_MANUAL_DIR.value} is not a directory — {sources.KNOWN_BUILDERS[dataset][1]}")
  config_name = config_name or _CONFIG.value
  module = importlib.import_module(sources.KNOWN_BUILDERS[dataset][0])
  import tensorflow_datasets as tfds  # noqa: PLC0415 (loads TensorFlow: not for --help and flag errors)
  kwargs = {}
  if _SET.value:  # the builder turns --set items into a config of its own (and checks the keys)
    from_settings = getattr(module, "config_from_settings", None)
    if from_settings is None or config_name:
      cli.fail(f"--set is not supported with --dataset={_DATASET.value} — drop --set, or use a dataset whose "
               "builder takes settings (alt_text_captions)")
    try:
      kwargs["config"] = from_settings(_SET.value)
    except ValueError as e:
      cli.fail(str(e))
  configs = [c.name for c in tfds.builder_cls(dataset).BUILDER_CONFIGS]
  if config_name and config_name not in configs:
    cli.fail(f"{dataset} has no config {config_name!r} — choose one of {', '.join(configs) or '(none)'}")
  # Checked (and made) once the arguments are known to be right, but before the build: a typo creates no folder.
  data_dir = cli.writable_dir(sources.default_data_dir({"data_dir": _DATA_DIR.value}), "--data_dir")
  builder = tfds.builder(dataset + (f"/{config_name}" if config_name else ""), data_dir=data_dir, **kwargs)
  if left := leftovers(builder):
    print(f"note: {len(left)} folder(s) left by interrupted builds of this dataset: {', '.join(left)} — remove them "
          "once no other build of it is running", file=sys.stderr)
  download_config = tfds.download.DownloadConfig(manual_dir=_MANUAL_DIR.value or None)
  try:
    builder.download_and_prepare(file_format="array_record", download_config=download_config)
  except FileNotFoundError as e:  # a manual dir or file the builder needs (its message says what to fetch)
    cli.fail(str(e))
  print(f"built {builder.name}/{builder.builder_config.name if builder.builder_config else ''} "
        f"{builder.version} in {builder.data_dir}")
  for split, info in builder.info.splits.items():
    print(f"  {split}: {info.num_examples:,} examples")


if __name__ == "__main__":
  cli.run(main)
