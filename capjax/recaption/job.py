"""The recaptioning job: a built split (or a TFDS slice of it) decoded by a trained workdir's checkpoint on every
device of its mesh, each example's captions (the k best for beam search, best first) and scores appended to the
journal (`capjax.recaption.journal`) a batch at a time, so that a killed job continues where it stopped.

Every input is checked in `resolve`, before the model loads and before anything is written: the split spec, the
output path (no FIFO or device, not inside the dataset's own folder), the workdir (a vocabulary, config.json and a
checkpoint), the dataset built in the data dir with that split and slice, and the settings of an earlier run into the
same file. `run` then loads the checkpoint, compares the step too, and decodes from the first missing index.

Scale: the global batch (`--batch_size`) is split over the mesh's batch axes (data, fsdp) as evaluation's is
(`capjax.data.pipeline.eval_batches`). On several hosts (`jax.distributed`, started as training starts) each process
reads and decodes only its own rows of every global batch, the tokens are all-gathered (`sharding.
global_batch_to_host`), and process 0 alone reads the journal (its next index reaches the others through
`distributed.from_process_zero`) and appends to it: one writer, one file, no part files to join. The output must
then be on a disk process 0 sees; the other processes never open it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from capjax import files
from capjax.recaption import journal

SEARCHES = ("", "greedy", "beam")  # "": the workdir's config.decode
KEY_FIELDS = ("key", "id", "file_name")  # a record's own name, written beside its index where the dataset has one


class RecaptionInputError(ValueError):
  """Bad input found before any work; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Request:
  """What the command was asked (its flags)."""

  workdir: str
  dataset: str             # NAME[/CONFIG]:SPLIT, SPLIT possibly a TFDS slice ("test[:300]")
  output: str
  data_dir: str = ""
  step: int | None = None  # None: the best by validation CIDEr-D
  format: str = "jsonl"
  batch_size: int = 0      # 0: the config's eval.batch_size
  decode: str = ""         # "" (the config's), "greedy" or "beam"
  beam_size: int = 0       # 0: the config's decode.beam_size
  progress_every: float = 30.0
  stop_after: int | None = None  # batches, then stop as a kill would (tests)


def parse_dataset(spec: str) -> tuple[str, str]:
  """(NAME[/CONFIG], SPLIT) of `--dataset`; one split, optionally sliced, since each line's index is its index in
  that split."""
  dataset, _, split = spec.strip().partition(":")
  if not dataset or not split:
    raise RecaptionInputError(f"--dataset={spec} names no split — write NAME[/CONFIG]:SPLIT, e.g. "
                              "synthetic_scenes/tiny:test or karpathy/coco:test[:300]")
  if not re.fullmatch(r"[\w-]+(/[\w.-]+)?", dataset):
    raise RecaptionInputError(f"--dataset={spec}: {dataset!r} is not a dataset name — write NAME[/CONFIG]:SPLIT")
  if "+" in split or not re.fullmatch(r"\w+(\[[^\[\]]*\])?", split):
    raise RecaptionInputError(f"--dataset={spec}: {split!r} is not one split or a slice of it — write SPLIT or "
                              "SPLIT[START:STOP] (e.g. test[:300], train[10%:20%]); recaption split by split")
  import tensorflow_datasets as tfds  # noqa: PLC0415
  try:
    tfds.core.ReadInstruction.from_spec(split)
  except (ValueError, AssertionError) as error:
    raise RecaptionInputError(f"--dataset={spec}: {split!r} is not a TFDS split or slice ({error}) — write "
                              "SPLIT[START:STOP], e.g. test[:300] or test[10%:]") from None
  return dataset, split


def tfds_folder(output: str) -> str:
  """Where `--format=tfds` writes its dataset: beside the journal, `F_tfds/` for `F.jsonl`."""
  return os.path.splitext(output)[0] + "_tfds"


def _inside(path: str, folder: str) -> bool:
  path, folder = os.path.realpath(path), os.path.realpath(folder)
  return path == folder or path.startswith(folder + os.sep)


@dataclasses.dataclass
class Job:
  """A checked request: the model's config pointed at the split, the split's source, the absolute [first, stop)
  range of the slice within the full split, and the settings the journal's sidecar holds."""

  request: Request
  config: Any
  builder: Any
  split: str       # the base split
  source: Any      # the full split, as the model reads it
  first: int
  stop: int
  key_field: str | None
  settings: dict[str, Any]

  @property
  def method(self) -> str:
    return self.config.decode.method

  @property
  def beam_size(self) -> int:
    return 1 if self.method == "greedy" else int(self.config.decode.beam_size)


def resolve(request: Request) -> Job:
  """Every check before any work (module docstring); a RecaptionInputError, ConfigError or DatasetNotBuiltError (or
  `cli.fail`'s one line, for the output path) otherwise. Nothing is written."""
  from capjax.crossdomain import matrix  # noqa: PLC0415 (the workdir and test-set checks the matrix makes)
  from capjax.data import integrity, sources  # noqa: PLC0415
  dataset, split = parse_dataset(request.dataset)
  if request.format not in ("jsonl", "tfds"):
    raise RecaptionInputError(f"--format={request.format} — choose jsonl or tfds")
  if request.decode not in SEARCHES:
    raise RecaptionInputError(f"--decode={request.decode} — choose greedy or beam (or leave it to the workdir's "
                              "config)")
  workdir_inputs = [request.workdir, *(os.path.join(request.workdir, n) for n in ("vocab.txt", "config.json"))]
  files.output_file(request.output, "--output", inputs={"--workdir": workdir_inputs}, example="captions.jsonl")
  files.output_file(journal.settings_path(request.output), "--output", example="captions.jsonl")
  try:
    config = matrix.load_workdir_config(request.workdir, "--workdir")
    test_set = matrix.resolve(matrix.TestSet(dataset, split))
  except matrix.MatrixInputError as error:
    raise RecaptionInputError(str(error).replace("--test=", "--dataset=")) from None
  data_dir = integrity.data_dir(request.data_dir or config.dataset.get("data_dir", ""))
  name = test_set.name
  for path, what in ((request.output, "--output"), (tfds_folder(request.output), "its TFDS copy")):
    if _inside(path, os.path.join(data_dir, name)):
      raise RecaptionInputError(f"--output={request.output}: {what} would be written inside the dataset's own folder "
                                f"{os.path.join(data_dir, name)}, the input — write it outside the data dir's "
                                "dataset folders")
  if request.format == "tfds" and os.path.exists(tfds_folder(request.output)) \
     and not os.path.isdir(tfds_folder(request.output)):
    raise RecaptionInputError(f"--format=tfds writes {tfds_folder(request.output)}/, which is a file — move it, or "
                              "give another --output")
  d = matrix.test_dataset(config, test_set, data_dir)
  d.auto_build = False  # a dataset not built is said, never built into the user's data dir by a recaptioning
  base = re.sub(r"\[.*", "", split)
  sources.data_source(d, split)  # the slice checked: one that selects nothing or reaches past the split fails here
  builder = sources.prepare(d)
  first, stop = _absolute(split, builder.info.splits)
  config = matrix.with_dataset(config, d)
  if request.batch_size:
    config.eval.batch_size = request.batch_size
  if request.decode:
    config.decode.method = request.decode
  if request.beam_size:
    config.decode.beam_size = request.beam_size
  key_field = next((k for k in KEY_FIELDS if k in builder.info.features), None)
  settings = {"workdir": os.path.realpath(request.workdir), "dataset": test_set.dataset, "split": split,
              "data_dir": os.path.realpath(data_dir), "features": d.get("features", ""),
              "decode": config.decode.method,
              "beam_size": 1 if config.decode.method == "greedy" else int(config.decode.beam_size),
              "alpha": None if config.decode.method == "greedy" else float(config.decode.alpha),
              "step": request.step}
  # the step of a run without --step (the best) is known once the checkpoints are read: `run` compares it
  changed = journal.settings_mismatch(request.output, settings, ignore=() if request.step is not None else ("step",))
  if changed:
    raise RecaptionInputError(f"--output={request.output} holds a recaptioning with other settings ({changed}) — "
                              "run again with the same flags to continue it, or give another --output")
  return Job(request, config, builder, base, sources.data_source(d, base), first, stop, key_field,
             settings)


def _absolute(split: str, split_infos) -> tuple[int, int]:
  """[first, stop) of a split or slice within its full split (TFDS says None for either end of the split)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  [absolute] = tfds.core.ReadInstruction.from_spec(split).to_absolute(split_infos)
  size = split_infos[absolute.splitname].num_examples
  return absolute.from_ or 0, size if absolute.to is None else absolute.to


@dataclasses.dataclass(frozen=True)
class Window:
  """Examples [first, stop) of a source, indexed from 0: `eval_batches` reads it as a split of its own."""

  source: Any
  first: int
  stop: int

  def __len__(self) -> int:
    return self.stop - self.first

  def __getitem__(self, i: int) -> dict[str, Any]:
    return self.source[self.first + int(i)]


def search_function(setup, start: int, method: str, beam_size: int, alpha: float) -> Callable:
  """(params, images) -> (tokens (B, k, L), scores (B, k)), jitted on the setup's mesh as `setup.decode` is: greedy
  (k = 1, the caption's log-probability) or beam search (its k best, GNMT-penalized scores). The best of each is the
  caption `setup.decode` (and so `--mode=eval`) gives."""
  import jax  # noqa: PLC0415

  from capjax import decode as decode_lib  # noqa: PLC0415
  from capjax import ensemble as ensemble_lib  # noqa: PLC0415
  from capjax import sharding  # noqa: PLC0415
  max_len = setup.config.max_caption_tokens + 1

  def search(params, images):
    with sharding.axis_rules(setup.mesh, setup.rules):
      fns = ensemble_lib.step_functions(setup.model, params)
      if method == "greedy":
        tokens, logp = decode_lib.greedy_search_scored(fns, images, max_len, start)
        return tokens[:, None], logp[:, None]
      return decode_lib.beam_hypotheses(fns, images, max_len, beam_size, alpha, start)

  data = sharding.batch_sharding(setup.mesh)
  return jax.jit(search, in_shardings=(setup.state_shardings.params, data), out_shardings=(data, data))


def _key(record: dict[str, Any], field: str | None) -> Any:
  if field is None:
    return None
  value = record[field]
  if isinstance(value, bytes):
    return value.decode("utf-8", "replace")
  return value.item() if hasattr(value, "item") else value


def run(job: Job, log: Callable[[str], None] = lambda text: print(text, file=sys.stderr)) -> dict[str, Any]:
  """Loads the checkpoint and decodes the examples the journal lacks, a global batch at a time; returns a summary
  (examples written now and in all, the step, images/s)."""
  import jax  # noqa: PLC0415
  import tensorflow_datasets as tfds  # noqa: PLC0415

  from capjax import decode as decode_lib  # noqa: PLC0415
  from capjax import distributed, inference, progress, sharding, train  # noqa: PLC0415
  from capjax.data import pipeline  # noqa: PLC0415
  r, config = job.request, job.config
  setup, params, vocab, step = inference.load_trained(config, r.workdir, r.step)
  batch = config.eval.batch_size
  shards = sharding.batch_shards(setup.mesh)  # over every process's devices: a multiple splits over the processes too
  if batch % shards:
    raise RecaptionInputError(f"--batch_size={batch} does not split over the {shards} devices of the mesh's batch "
                              f"axes — give a multiple of {shards}")
  settings = dict(job.settings, step=step)
  changed = journal.settings_mismatch(r.output, settings)
  if changed:
    raise RecaptionInputError(f"--output={r.output} holds a recaptioning with other settings ({changed}) — run again "
                              f"with the same flags (and --step) to continue it, or give another --output")
  writer = jax.process_index() == 0
  next_index = job.first
  if writer:
    done = journal.read_done(r.output)
    journal.cut_torn(r.output, done)
    next_index = max(job.first, done.next_index or job.first)
  next_index = distributed.from_process_zero(next_index)
  total = job.stop - job.first
  if next_index >= job.stop:
    log(f"recaption: {r.output} already holds all {total:,} examples")
    return {"written": 0, "examples": total, "step": step, "images_per_s": None}
  if writer:
    journal.write_settings(r.output, settings)
  if next_index > job.first:
    log(f"recaption: resuming at index {next_index} ({next_index - job.first:,} of {total:,} already written)")
  keys = None
  if job.key_field is not None and writer:  # the key alone: images are not decoded for it
    skip = {k: tfds.decode.SkipDecoding() for k, f in job.builder.info.features.items()
            if isinstance(f, tfds.features.Image)}
    keys = job.builder.as_data_source(split=job.split, decoders=skip or None)
  search = search_function(setup, train.decode_start(config, vocab), job.method, job.beam_size,
                           float(config.decode.get("alpha", 0.6)))
  window = Window(job.source, next_index, job.stop)
  meter = progress.Progress("recaption", len(window), every=r.progress_every, log=log, unit="images",
                            failed="failed")
  start_time, written = time.monotonic(), 0
  after_first = (start_time, 0)
  for number, b in enumerate(pipeline.eval_batches(window, config.dataset.image_size, batch, None, setup.inputs.key)):
    index = b.pop("index")
    tokens, scores = search(params, sharding.host_to_global(b, setup.mesh)["image"])
    tokens, scores = sharding.global_batch_to_host(tokens), sharding.global_batch_to_host(scores)
    all_index = sharding.global_batch_to_host(sharding.host_to_global({"i": index}, setup.mesh)["i"])
    lines = []
    for i, row_tokens, row_scores in zip(all_index, tokens, scores):
      if i < 0:
        continue
      found = [(vocab.decode(t), float(s)) for t, s in zip(row_tokens, row_scores) if s > decode_lib.NEG_INF / 2]
      absolute = next_index + int(i)
      key = _key(keys[absolute], job.key_field) if keys is not None else None
      lines.append(journal.line(absolute, [c for c, _ in found], [s for _, s in found], key))
    if writer:
      journal.append(r.output, lines)
    written += len(lines)
    meter.update(len(lines))
    if number == 0:  # the first batch compiles the search: the steady rate is measured after it
      after_first = (time.monotonic(), written)
    if r.stop_after is not None and number + 1 >= r.stop_after:
      log(f"recaption: stopped after {number + 1} batches (stop_after)")
      break
  meter.finish()
  now = time.monotonic()
  seconds = now - start_time
  steady = (written - after_first[1]) / (now - after_first[0]) if written > after_first[1] else None
  return {"written": written, "examples": total, "step": step, "batch_shards": shards,
          "images_per_s": written / seconds if seconds > 0 else None, "steady_images_per_s": steady,
          "seconds": seconds}
