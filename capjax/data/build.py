"""Builds a dataset as ArrayRecord (what `tfds.data_source` and grain read), with TFDS's progress bars.

`python -m capjax.data.build --dataset=synthetic_scenes [--config=tiny] [--data_dir=DIR] [--manual_dir=DIR]`
(`--dataset=cc3m/labeled` names the config too). Builders that count what they left out print their report.
(the `tfds build` CLI needs apache-beam even for builders that do not use it: tensorflow/datasets#5463).
"""

from __future__ import annotations

import importlib
import sys

from absl import app, flags

from capjax.data import sources

_DATASET = flags.DEFINE_string("dataset", "synthetic_scenes",
                                "TFDS name of the dataset to build (NAME or NAME/CONFIG).")
_CONFIG = flags.DEFINE_string("config", "", "Builder config (e.g. `tiny` for synthetic_scenes).")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets).")
_MANUAL_DIR = flags.DEFINE_string("manual_dir", "", "Where manually downloaded files are (datasets that need it).")
_SET = flags.DEFINE_multi_string("set", [], "KEY=VALUE for the builder config (repeatable; builders with a "
                                 "config_from_settings, e.g. alt_text_captions).")


def main(argv) -> None:
  del argv
  import tensorflow_datasets as tfds  # noqa: PLC0415
  dataset, _, config_name = _DATASET.value.partition("/")
  if config_name and _CONFIG.value and config_name != _CONFIG.value:
    print(f"error: --dataset={_DATASET.value} and --config={_CONFIG.value} name two configs — give one",
          file=sys.stderr)
    sys.exit(2)
  config_name = config_name or _CONFIG.value
  module = sources.KNOWN_BUILDERS.get(dataset, (None, ""))[0]
  if module:
    importlib.import_module(module)
  name = dataset + (f"/{config_name}" if config_name else "")
  kwargs = {}
  if _SET.value:  # the builder turns --set items into a config of its own (and checks the keys)
    from_settings = getattr(importlib.import_module(module), "config_from_settings", None) if module else None
    if from_settings is None or config_name:
      print(f"error: --set is not supported with --dataset={_DATASET.value} — drop --set, or use a dataset whose "
            "builder takes settings (alt_text_captions)", file=sys.stderr)
      sys.exit(2)
    try:
      kwargs["config"] = from_settings(_SET.value)
    except ValueError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(2)
  builder = tfds.builder(name, data_dir=sources.default_data_dir({"data_dir": _DATA_DIR.value}), **kwargs)
  config = tfds.download.DownloadConfig(manual_dir=_MANUAL_DIR.value or None)
  try:
    builder.download_and_prepare(file_format="array_record", download_config=config)
  except FileNotFoundError as e:  # a manual dir or file the builder needs (its message says what to fetch)
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  print(f"built {builder.name}/{builder.builder_config.name if builder.builder_config else ''} "
        f"{builder.version} in {builder.data_dir}")
  for split, info in builder.info.splits.items():
    print(f"  {split}: {info.num_examples:,} examples")


if __name__ == "__main__":
  app.run(main)
