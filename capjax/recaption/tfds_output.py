"""`--format=tfds`: the recaptioned split as a TFDS dataset beside the journal (`F_tfds/`), each example the original
record (its images' bytes as stored, never re-encoded; its `captions` and every other field) joined with its new
`recaptions` and `recaption_scores` and its `split_index`, as cc12m_llavanext joins CC12M's alt-text with the
LLaVA-NeXT recaptions. Written from the complete journal through `capjax.data.shards`' writer: a killed write resumes
at its first missing shard."""

from __future__ import annotations

import os
import pathlib

import numpy as np

from capjax.data import shards
from capjax.recaption import journal

EXAMPLES_PER_SHARD = 1000
ADDED = ("recaptions", "recaption_scores", "split_index")


def features(original):
  """The original features and the recaptioning's."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  clash = sorted(set(ADDED) & set(original))
  if clash:
    raise ValueError(f"the dataset already has {', '.join(clash)} — recaption its source dataset instead")
  return tfds.features.FeaturesDict({
      **dict(original.items()),
      "recaptions": tfds.features.Sequence(tfds.features.Text(), doc="capjax.recaption's captions, best first."),
      "recaption_scores": tfds.features.Sequence(np.float32, doc="Their scores (the search's own ranking)."),
      "split_index": tfds.features.Scalar(np.int64, doc="The example's index in its split of the source dataset."),
  })


def write(job) -> str:
  """Writes `F_tfds/` from the complete journal of `job` (`capjax.recaption.job.Job`); returns its folder."""
  import tensorflow_datasets as tfds  # noqa: PLC0415

  from capjax.recaption.job import RecaptionInputError, tfds_folder  # noqa: PLC0415
  output = job.request.output
  lines = journal.read_lines(output)
  if [line["index"] for line in lines] != list(range(job.first, job.stop)):
    raise RecaptionInputError(f"--format=tfds: {output} does not hold every example of {job.settings['split']} yet — "
                              "run the same command again to finish it, then the TFDS copy is written")
  builder = job.builder
  name = f"{builder.name}_recaptioned"
  out_dir = pathlib.Path(tfds_folder(output))
  out_dir.mkdir(parents=True, exist_ok=True)
  settings = dict(job.settings, step=lines and _saved_step(output))
  shards.check_manifest(out_dir / "settings.json", settings, lambda details: RecaptionInputError(
      f"{out_dir} holds a TFDS copy of another recaptioning ({details}) — remove it"))
  feats = features(builder.info.features)
  skip = {k: tfds.decode.SkipDecoding() for k, f in builder.info.features.items() if isinstance(f, tfds.features.Image)}
  source = builder.as_data_source(split=job.split, decoders=skip or None)
  ranges = shards.shard_ranges(len(lines), EXAMPLES_PER_SHARD)
  written = shards.SplitShards(out_dir, name, job.split, ranges, info_name="{number:05d}.json")
  for number in written.missing():
    start, stop = ranges[number]
    with written.writer(number) as writer:
      for line in lines[start:stop]:
        record = dict(source[line["index"]])
        record.update(recaptions=line["captions"], recaption_scores=np.asarray(line["scores"], np.float32),
                      split_index=line["index"])
        writer.write(feats.serialize_example(record))
      writer.info = {"num_examples": stop - start}
  shards.write_info(out_dir, name, str(builder.info.version), feats, {job.split: [s - f for f, s in ranges]},
                    config_name=builder.builder_config.name if builder.builder_config else None,
                    description=f"{builder.name} {job.settings['split']} with capjax.recaption's captions "
                                f"({job.settings['decode']}) of {job.settings['workdir']}.",
                    metadata={"recaption": settings})
  return os.fspath(out_dir)


def _saved_step(output: str) -> int | None:
  import json  # noqa: PLC0415
  with open(journal.settings_path(output), encoding="utf-8") as f:
    return json.load(f).get("step")
