"""Builds a dataset as ArrayRecord (what `tfds.data_source` and grain read), with TFDS's progress bars.

  python -m capjax.data.build --dataset=NAME[/CONFIG] [--data_dir=DIR] [--manual_dir=DIR] [--set KEY=VALUE ...]

NAME is one of the project's builders (synthetic_scenes, stylized_scenes, cc3m, alt_text_captions, cc12m_llavanext,
flickrstyle10k, senticap, karpathy, caption_folder). Builders that count what they left out print their report. (The
`tfds build` CLI needs apache-beam even for builders that do not use it: tensorflow/datasets#5463.)

A dataset already built is reused only when it is whole (capjax.data.integrity: its metadata parses, each shard
holds the records dataset_info.json lists); a damaged one is built again, kept aside until the new one is whole, or,
when its manual files are not there to build it from, left as it is with an error. Ctrl-C stops a build with one
line and exit status 130 (`capjax.interrupt`), leaving nothing half-built. While a build runs, the same build into
the same data dir is refused with one line and exit status 2 (`DATA_DIR/.NAME_CONFIG.build.lock` holds the
builder's pid).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import multiprocessing
import os
import shutil
import sys
from collections.abc import Iterator, Sequence

from absl import flags

from capjax import cli, files, interrupt
from capjax.data import integrity

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


def builder_name(dataset: str, config: str) -> str:
  """NAME/CONFIG, or NAME for a dataset without configs."""
  return f"{dataset}/{config}" if config else dataset


def set_aside_if_damaged(folder: str, name: str, data_dir: str, manual_dir: str, how: str) -> str | None:
  """A built `folder` of `name` that is not whole (`capjax.data.integrity`) is renamed aside, so that TFDS builds it
  again instead of "Reusing" it; returns where it went (None: nothing set aside). When the build cannot be run
  again (its manual files are not there) it is an `error:` line, and the folder is left as it is."""
  if not os.path.isdir(folder):
    return None
  wrong = integrity.problem(folder)
  if wrong is None:
    return None
  import tensorflow_datasets as tfds  # noqa: PLC0415
  manual = getattr(tfds.builder_cls(integrity.split_dataset(name)[0]), "MANUAL_DOWNLOAD_INSTRUCTIONS", None)
  if manual and not os.path.isdir(manual_dir or os.path.join(data_dir, "downloads", "manual")):
    cli.fail(f"the dataset in {folder} is damaged ({wrong}), and building it again needs its downloaded files — "
             f"{how}")
  from tensorflow_datasets.core import constants  # noqa: PLC0415
  aside = os.path.join(os.path.dirname(folder),
                       f"{constants.INCOMPLETE_PREFIX}damaged_{os.getpid()}_{os.path.basename(folder)}")
  print(f"note: the dataset in {folder} is damaged ({wrong}): building it again (the damaged copy waits in {aside} "
        "until the new one is whole)", file=sys.stderr)
  os.rename(folder, aside)
  return aside


def restore(aside: str | None, folder: str | None) -> None:
  """Puts a damaged dataset set aside back when its new build failed (a rerun finds it damaged again)."""
  if aside and folder and os.path.isdir(aside) and not os.path.exists(folder):
    os.rename(aside, folder)


def lock_path(data_dir: str, name: str) -> str:
  """The file whose lock a build of `name` (NAME[/CONFIG]) into `data_dir` holds while it runs."""
  return os.path.join(data_dir, f".{name.replace('/', '_')}.build.lock")


@contextlib.contextmanager
def one_build(data_dir: str, name: str) -> Iterator[None]:
  """Holds `lock_path`'s flock (with this pid in it) for the build: a second build of the same dataset into the same
  data dir is one `error:` line, exit 2, instead of TFDS's FileExistsError traceback when its rename finds the first
  one's folder (a build that starts after the first has ended reuses the dataset). The file is removed when the build
  ends; a lock taken on a file its holder removed meanwhile is taken again on the new one."""
  path = lock_path(data_dir, name)
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 32).decode(errors="replace").strip()
      os.close(fd)
      cli.fail(f"{name} is being built in {data_dir} by another process{f' (pid {holder})' if holder else ''} — "
               "wait for it to finish and rerun this command (it reuses the dataset), or give another --data_dir")
    with contextlib.suppress(FileNotFoundError):
      if os.path.samestat(os.fstat(fd), os.stat(path)):
        break
    os.close(fd)
  os.ftruncate(fd, 0)  # a killed build's file is left with its pid
  os.write(fd, f"{os.getpid()}\n".encode())
  try:
    yield
  finally:
    os.unlink(path)  # before the lock goes: a process that opened this file finds it gone and takes a new one
    os.close(fd)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  from capjax.data import sources  # noqa: PLC0415 (imports jax: not for --help and flag errors)
  dataset, config_name = integrity.split_dataset(_DATASET.value)
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
  # The build writes the dataset's folder (and TFDS its .config): never in, over or around what it reads.
  files.refuse_overlap({"--data_dir's dataset folder": os.path.join(integrity.data_dir(_DATA_DIR.value), dataset)},
                       {"--manual_dir": _MANUAL_DIR.value})
  # Checked (and made) once the arguments are known to be right, but before the build: a typo creates no folder.
  data_dir = cli.writable_dir(integrity.data_dir(_DATA_DIR.value), "--data_dir")
  chosen = kwargs["config"].name if "config" in kwargs else config_name
  folder = (os.path.join(data_dir, dataset, chosen, str(tfds.builder_cls(dataset).VERSION)) if "config" in kwargs
            else integrity.registered_folder(dataset, chosen, data_dir))  # --set configs are not in BUILDER_CONFIGS
  with one_build(data_dir, builder_name(dataset, chosen)):
    _build(dataset, config_name, chosen, kwargs, data_dir, folder, sources.KNOWN_BUILDERS[dataset][1])


def _build(dataset: str, config_name: str, chosen: str, kwargs: dict, data_dir: str, folder: str | None,
           how: str) -> None:
  """The build itself, once its arguments are checked and `one_build` holds the data dir's lock for it (`how`: how
  to get the dataset's manual files)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415 (loaded by main already)

  damaged = set_aside_if_damaged(folder, builder_name(dataset, chosen), data_dir, _MANUAL_DIR.value,
                                 how) if folder else None
  try:  # Ctrl-C raises here, not in a garbage-collection hook (`cli.run`'s `interrupt.ctrl_c_raises`)
    builder = tfds.builder(integrity.join_dataset(dataset, config_name), data_dir=data_dir, **kwargs)
    if left := [path for path in leftovers(builder) if path != damaged]:
      print(f"note: {len(left)} folder(s) left by interrupted builds of this dataset: {', '.join(left)} — remove "
            "them once no other build of it is running", file=sys.stderr)
    download_config = tfds.download.DownloadConfig(manual_dir=_MANUAL_DIR.value or None)
    try:
      builder.download_and_prepare(file_format="array_record", download_config=download_config)
    except (FileNotFoundError, files.NotRegularError) as e:  # a manual file missing or a FIFO (the message says)
      cli.fail(str(e))
  except KeyboardInterrupt:  # Ctrl-C: TFDS's `finally` has removed its work in progress
    interrupted = True
  except BaseException:
    restore(damaged, folder)
    raise
  else:
    interrupted = False
  if interrupted:  # outside the `except`, whose traceback held the builder's example generators
    children = multiprocessing.active_children()  # a builder's workers: one blocked on a full pipe would never end
    for child in children:
      child.kill()
    for child in children:
      child.join()
    gc.collect()  # the generators close here, in this thread: their worker pools cannot be shut down from another
    restore(damaged, folder)
    interrupt.stop(f"{builder_name(dataset, chosen)} is not built (nothing half-built was kept) — rerun the same "
                   "command to build it")
  if damaged:
    shutil.rmtree(damaged)
  config = builder.builder_config.name if builder.builder_config else ""  # flickrstyle10k has none
  print(f"built {integrity.join_dataset(builder.name, config)} {builder.version} in {builder.data_dir}")
  for split, info in builder.info.splits.items():
    print(f"  {split}: {info.num_examples:,} examples")


if __name__ == "__main__":
  cli.run(main)
