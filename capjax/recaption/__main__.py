r"""Recaption a built dataset's split with a trained captioner: one JSON line per example, resumable.

usage: python -m capjax.recaption --workdir=W --dataset=NAME[/CONFIG]:SPLIT --output=F.jsonl [--data_dir=D] \
           [--step=N] [--format=jsonl|tfds] [--batch_size=B] [--decode=greedy|beam] [--beam_size=K] \
           [--distributed=auto|on|off]

Each line: {"index": I, "key": ..., "captions": [...], "scores": [...]}: I is the example's index in the full split
(also in a slice such as test[:300] or test[10%:]), "key" the record's key, id or file_name where the dataset has
one, the captions best first (the k best of beam search, one for greedy) and their scores (beam: log-probability
divided by the GNMT length penalty, the search's own ranking; greedy: the caption's log-probability). The search is
the workdir's config.decode unless --decode says otherwise; --step defaults to the best checkpoint.

Killed and run again with the same flags, it keeps the finished lines (a torn last line is cut off) and continues
after the last one; F.settings.json beside F holds the workdir, step, dataset, split and search, and a run with
other ones into the same F is refused. Decoding is data-parallel over every device of the model's mesh, and over
every process of a multi-host job, started as training's is (--distributed, as capjax.main's: each process reads its
own rows of every global batch, process 0 alone writes F, which must be on a disk it sees). --format=tfds also
writes F_tfds/, a TFDS dataset of the split's records with their `recaptions` and `recaption_scores` beside the
original captions (tfds.builder_from_directory reads it).
"""

from __future__ import annotations

from collections.abc import Sequence

from absl import flags

from capjax import cli

FLAGS = flags.FlagValues()
_WORKDIR = flags.DEFINE_string("workdir", None, "A training run's workdir (its config.json, vocabulary, checkpoints).",
                               flag_values=FLAGS, required=True)
_DATASET = flags.DEFINE_string("dataset", None, "The built split: NAME[/CONFIG]:SPLIT, SPLIT possibly a slice.",
                               flag_values=FLAGS, required=True)
_OUTPUT = flags.DEFINE_string("output", None, "The JSONL file to write (or continue).", flag_values=FLAGS,
                              required=True)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of the dataset (default: the model's).",
                                flag_values=FLAGS)
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step (default: the best by validation CIDEr-D).",
                             lower_bound=0, flag_values=FLAGS)
_FORMAT = flags.DEFINE_enum("format", "jsonl", ["jsonl", "tfds"], "jsonl, or jsonl plus a TFDS dataset (F_tfds/).",
                            flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch_size", 0, "Global batch (default: the config's eval.batch_size).",
                              lower_bound=0, flag_values=FLAGS)
_DECODE = flags.DEFINE_enum("decode", "", ["", "greedy", "beam"], "The search (default: the config's).",
                            flag_values=FLAGS)
_BEAM = flags.DEFINE_integer("beam_size", 0, "Beam size, the captions per image (default: the config's).",
                             lower_bound=0, flag_values=FLAGS)
_DISTRIBUTED = flags.DEFINE_enum("distributed", "auto", ["auto", "on", "off"],
                                 "jax.distributed.initialize(), as capjax.main: 'auto' when a cluster is detected",
                                 flag_values=FLAGS)


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  for flag in (_WORKDIR, _DATASET, _OUTPUT):
    if not flag.value.strip():
      cli.fail(f"--{flag.name}= is empty — give it (python -m capjax.recaption --help)")
  cli.quiet_library_logs()
  from capjax import distributed  # noqa: PLC0415 (jax and TensorFlow load after the flags are good)
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
  from capjax.recaption import job as job_lib  # noqa: PLC0415
  from capjax.recaption import journal  # noqa: PLC0415
  try:
    distributed.maybe_initialize(_DISTRIBUTED.value)  # before anything touches a device
  except distributed.NoClusterError as error:
    cli.fail(str(error))
  request = job_lib.Request(workdir=_WORKDIR.value, dataset=_DATASET.value, output=_OUTPUT.value,
                            data_dir=_DATA_DIR.value, step=_STEP.value, format=_FORMAT.value,
                            batch_size=_BATCH.value, decode=_DECODE.value, beam_size=_BEAM.value)
  try:
    job = job_lib.resolve(request)
    summary = job_lib.run(job)
    import jax  # noqa: PLC0415
    if request.format == "tfds" and jax.process_index() == 0:  # the journal's one writer writes its copy
      from capjax.recaption import tfds_output  # noqa: PLC0415
      folder = tfds_output.write(job)
      print(f"tfds: {folder}")
  except (job_lib.RecaptionInputError, journal.JournalError, ConfigError, DatasetNotBuiltError, FileNotFoundError,
          NotADirectoryError) as error:
    cli.fail(str(error))
  print(f"recaption: {summary['written']:,} examples written now, {summary['examples']:,} in {request.output} "
        f"(checkpoint {summary['step']})")
  return 0


if __name__ == "__main__":
  cli.run(main)
