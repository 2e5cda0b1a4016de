"""Trains, evaluates or captions with a config: the project's entry point.

  python -m capjax.main --config=configs/t2t.py[:VARIANTS] [--config.FIELD=VALUE ...] [--workdir=DIR]
                        [--mode=train|eval|caption] [--ensemble=WORKDIR,...]

--mode=eval and --mode=caption with --ensemble=B,C decode with the ensemble of --workdir's checkpoint (--step, or
its best) and the best checkpoints of B and C, trained with the same config and vocabulary: greedy or beam search
over the log of the mean of their probabilities. Outputs go to --workdir.

--workdir defaults to workdir/<config name>[_<variants>] (e.g. workdir/t2t_shapes for configs/t2t.py:shapes),
printed first. Training resumes from the workdir's latest checkpoint. SIGTERM or Ctrl-C finishes the current step,
saves it and exits 0; rerunning the same command resumes there. Multi-host JAX starts when a cluster is detected;
there a SIGTERM to any process makes all of them save one agreed step and exit 0 (JAX's preemption sync point).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags, logging
from ml_collections import config_flags

from capjax import cli, config_util


class _ConfigLoadError(Exception):
  """`config_util.load`'s error for a --config value, carried out of absl's parsing to `parse_flags` (absl would
  fold a ValueError into its own `flag --config=...` line and let a FileNotFoundError through as a traceback)."""

  def __init__(self, spec: str, error: Exception):
    super().__init__(f"--config={spec}: {error}")


class _ConfigParser(flags.ArgumentParser):
  """Loads --config's file through `config_util.load`, the one loader, and locks it: ml_collections keeps its flag
  (the `--config.FIELD=VALUE` overrides and their "did you mean") but not its own second load of the file."""

  def parse(self, argument: str):
    try:
      config = config_util.load(argument)
    except (FileNotFoundError, ValueError) as error:
      raise _ConfigLoadError(argument, error) from error
    if callable(getattr(config, "lock", None)):  # as ml_collections locks: whatever get_config returned goes on
      config.lock()
    return config

  def flag_type(self) -> str:
    return "config object"


FLAGS = flags.FlagValues()
_CONFIG = config_flags.DEFINE_config_file("config", None, "config file[:variants], e.g. configs/t2t.py:shapes",
                                          flag_values=FLAGS, lock_config=True)
FLAGS["config"].parser = _ConfigParser()  # the file's one load: config_util.load's, not ml_collections' own
_WORKDIR = flags.DEFINE_string("workdir", None, "where checkpoints, logs and evaluation outputs go (default: "
                               "workdir/<config name>[_<variants>])", flag_values=FLAGS)
_MODE = flags.DEFINE_enum(
    "mode", "train", ["train", "eval", "caption"],
    "train: train (resuming), then evaluate the best checkpoint on the test split. eval: decode and score "
    "--split with a checkpoint. caption: caption the files matching --images.", flag_values=FLAGS)
_SPLIT = flags.DEFINE_string("split", None, "--mode=eval: the split to score (default: the config's test split)",
                             flag_values=FLAGS)
_STEP = flags.DEFINE_integer("step", None, "--mode=eval/caption: checkpoint step (default: best validation CIDEr-D)",
                             lower_bound=0, flag_values=FLAGS)
_IMAGES = flags.DEFINE_string("images", None, "--mode=caption: a glob of image files, e.g. 'photos/*.jpg'",
                              flag_values=FLAGS)
_ENSEMBLE = flags.DEFINE_list(
    "ensemble", [], "--mode=eval/caption: other workdirs of the same config and vocabulary whose best checkpoints "
    "decode together with --workdir's (the mean of their probabilities), e.g. --ensemble=workdir/b,workdir/c",
    flag_values=FLAGS)
_COMPILATION_CACHE = flags.DEFINE_boolean(
    "compilation_cache", True, "keep compiled programs in WORKDIR/compilation_cache, so that the next command with "
    "the same config and shapes (a second --mode=caption or eval, a resumed training) loads them instead of "
    "compiling again; --nocompilation_cache turns it off", flag_values=FLAGS)
_DISTRIBUTED = flags.DEFINE_enum(
    "distributed", "auto", ["auto", "on", "off"],
    "call jax.distributed.initialize(): 'auto' when a cluster is detected (Cloud TPU VM pods, SLURM, "
    "JAX_COORDINATOR_ADDRESS), 'on' always, 'off' never (single process)", flag_values=FLAGS)


def default_workdir(spec: str) -> str:
  """`configs/t2t.py:shapes,debug` -> `workdir/t2t_shapes_debug`: one folder per config and variants, so that two
  configs never resume from each other's checkpoints. Characters unsafe in a folder name become `_`."""
  path, _, arg = spec.partition(".py:")
  name = os.path.splitext(os.path.basename(path if arg else spec))[0]
  parts = [name] + [p.strip() for p in arg.split(",") if p.strip()]
  return os.path.join("workdir", re.sub(r"[^\w.=+-]", "_", "_".join(parts)))


def _config_spec(argv: Sequence[str]) -> str | None:
  """The value of --config in `argv` (the last one wins, as in absl), or None."""
  spec = None
  for i, arg in enumerate(argv):
    if re.fullmatch(r"--?config=.*", arg):
      spec = arg.split("=", 1)[1]
    elif arg in ("--config", "-config") and i + 1 < len(argv):
      spec = argv[i + 1]
  return spec


def parse_flags(argv: Sequence[str]) -> None:
  """Sets FLAGS from `argv`; bad input is one `error:` line and exit 2, not absl's flag list.

  The config file is loaded once, by the flag's parser (`_ConfigParser`, through `config_util.load`), so that a
  missing file or a misspelled variant gets its own message rather than ml_collections' deferred `Configuration is
  not available` traceback; absl then applies the `--config.FIELD=VALUE` overrides, where ml_collections' "did you
  mean" for an unknown field is kept."""
  spec = _config_spec(argv)
  if spec is None and not any(arg in cli.HELP_FLAGS for arg in argv[1:]):
    cli.fail("missing --config — e.g. --config=configs/t2t.py:shapes, see --help")
  try:
    cli.parse(FLAGS, argv, __doc__)
  except _ConfigLoadError as error:
    cli.fail(str(error))
  except (AttributeError, KeyError) as error:  # ml_collections: an override of a field the config does not have
    cli.fail(_unknown_field_message(str(error), argv, spec))


def _unknown_field_message(error: str, argv: Sequence[str], spec: str) -> str:
  """ml_collections' `'\\'batch_sise\\'\\nDid you mean "batch_size" instead of "batch_sise"?'` as one line that names
  the flag the user typed: `unknown config field --config.batch_sise (did you mean batch_size?)`."""
  field = re.search(r"\w+", error)
  overrides = [arg.split("=", 1)[0].lstrip("-") for arg in argv if re.match(r"--?(no)?config\.", arg)]
  typed = next((o for o in overrides if field and field.group() in o.split(".")[1:]), field and field.group())
  suggestion = re.search(r'Did you mean "([^"]+)"', error)
  hint = f" (did you mean {suggestion.group(1)}?)" if suggestion else ""
  return f"unknown config field --{typed}{hint} — see the fields of {spec.partition(':')[0]}"


def enable_compilation_cache(workdir: str) -> str:
  """Points JAX's persistent compilation cache at WORKDIR/compilation_cache (programs that took over a second to
  compile; the first process writes them, every process reads them; an unreadable entry is compiled again), unless
  JAX_COMPILATION_CACHE_DIR already names one (a disk that outlives the VM, a cache shared by many runs). JAX
  fixes the folder at the first compile of a process, so the command line sets it (`run`), not a `main` that
  tests call several times in one process. Returns the folder in use."""
  import jax  # noqa: PLC0415

  if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    return os.environ["JAX_COMPILATION_CACHE_DIR"]
  folder = os.path.join(os.path.abspath(workdir), "compilation_cache")
  jax.config.update("jax_compilation_cache_dir", folder)
  return folder


def main(argv: Sequence[str], compilation_cache: bool = False) -> None:
  """The command (`compilation_cache`: whether --compilation_cache may turn JAX's persistent cache on, as the
  command line does)."""
  parse_flags(argv)
  logging.get_absl_handler().addFilter(cli.QuietLibraries())
  workdir = _WORKDIR.value or default_workdir(_config_spec(argv))
  print(f"workdir: {workdir}", flush=True)
  if _MODE.value == "caption" and not _IMAGES.value:
    cli.fail("--mode=caption needs --images=GLOB — e.g. --images='photos/*.jpg'")
  if _ENSEMBLE.value and _MODE.value == "train":
    cli.fail("--ensemble decodes with several trained workdirs: it is for --mode=eval and --mode=caption — drop it, "
             "or train each model in its own --workdir first")
  if any(not member.strip() for member in _ENSEMBLE.value):
    cli.fail(f"--ensemble={','.join(_ENSEMBLE.value)} names an empty workdir — give workdirs separated by commas, "
             "e.g. --ensemble=workdir/b,workdir/c")
  # Imported here rather than at the top: `--help` and flag errors answer without loading jax and TensorFlow, and
  # jax.distributed starts before any module can touch a backend.
  from capjax import distributed  # noqa: PLC0415
  try:
    distributed.maybe_initialize(_DISTRIBUTED.value)
  except distributed.NoClusterError as error:
    cli.fail(str(error))
  if compilation_cache and _COMPILATION_CACHE.value:
    logging.info("compilation cache: %s", enable_compilation_cache(workdir))
  from capjax import inference, train  # noqa: PLC0415
  from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
  config = _CONFIG.value
  try:  # what the library raises for input it cannot work with, each with a message that says what to do
    if _MODE.value == "train":
      result = train.train_and_evaluate(config, workdir)
    elif _MODE.value == "eval":
      result = inference.run_eval(config, workdir, _SPLIT.value, _STEP.value, _ENSEMBLE.value)
    else:
      inference.caption_files(config, workdir, _IMAGES.value, _STEP.value, _ENSEMBLE.value)
      return
  except (config_util.ConfigError, DatasetNotBuiltError, FileNotFoundError, NotADirectoryError) as error:
    cli.fail(str(error))
  if "interrupted_at" in result:  # SIGTERM or Ctrl-C: the step is saved, the run is not over
    print(f"interrupted at step {result['interrupted_at']}: checkpoint saved — rerun the same command to resume")
    return
  for kind, path in result["outputs"].items():
    print(f"{kind}: {path}")


def run() -> None:
  cli.run(lambda argv: main(argv, compilation_cache=True))


if __name__ == "__main__":
  run()
