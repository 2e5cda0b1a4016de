"""The paper's caption statistics (examples, unique tokens, tokens per caption: mean, std, median), plus the
95th percentile of the length (a max_caption_tokens that keeps 95% of the captions whole), as JSON.

Usage:
  python -m capjax.text.stats FILE.tsv [--column=N]      # a TSV (CC3M: caption<TAB>url) or a pipeline .jsonl
  python -m capjax.text.stats --dataset=cc3m --split=validation [--data_dir=DIR] [--field=captions]
  python -m capjax.text.stats --dataset=cc12m_llavanext --split=train --tokenizer=treebank \
      --field=caption_llava,caption_llava_short,alt_text    # several fields: {field: statistics}

FILE may come before or after the flags. Blank lines of FILE are skipped, not read as 0-token captions, and
counted on stderr ("blank lines skipped: N"); a row without the --column, a line that is not UTF-8 or (.jsonl)
not JSON is an error naming the line. --field names text fields; a damaged --dataset (a shard cut short, a
metadata file that does not parse: capjax.data.integrity) is an error naming the file and how to build it again.
not JSON is an error naming the line. A .jsonl row counts as kept only when its "kept" is JSON `true`: any other
value that is not `false` ("false", 1, NaN, 1e309, null, or no "kept") makes the row malformed, skipped and counted on
stderr with its reason and first line ("malformed rows skipped: kept_not_boolean 2 (first: line 3 ...)").
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
from absl import flags

from capjax import cli, files
from capjax.data import integrity
from capjax.strings import as_str
from capjax.text import lines as lines_lib

FLAGS = flags.FlagValues()
FLAGS.set_gnu_getopt(True)  # FILE may come before or after the flags
_COLUMN = flags.DEFINE_integer("column", 0, "TSV column holding the caption (default 0, as CC3M).", lower_bound=0,
                               flag_values=FLAGS)
_TOKENIZER = flags.DEFINE_enum("tokenizer", "whitespace", ["whitespace", "treebank"],
                               "whitespace for released captions; treebank for raw alt-texts.", flag_values=FLAGS)
_DATASET = flags.DEFINE_string("dataset", "", "A built TFDS dataset, NAME or NAME/CONFIG (e.g. cc3m), instead of FILE.",
                               flag_values=FLAGS)
_SPLIT = flags.DEFINE_string("split", "validation", "The split of --dataset to read.", flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of --dataset ('' -> $TFDS_DATA_DIR or "
                                "~/tensorflow_datasets).", flag_values=FLAGS)
_FIELD = flags.DEFINE_list("field", [], "Record field(s) with the captions ('' -> 'captions' when the dataset has "
                           "it, else 'caption'); several, comma separated, print one object per field.",
                           flag_values=FLAGS)


class UsageError(ValueError):
  """Input the user can fix: printed as one `error:` line, exit status 2."""


def caption_stats(captions: Iterable[str], tokenize: Callable[[str], Sequence[str]] = str.split) -> dict[str, float]:
  """Statistics over captions; the default whitespace tokens suit released (already tokenized) captions."""
  lengths: list[int] = []
  vocabulary: set[str] = set()
  for caption in captions:
    tokens = tokenize(caption)
    lengths.append(len(tokens))
    vocabulary.update(tokens)
  n = np.asarray(lengths, dtype=np.float64)
  return {
      "examples": len(lengths),
      "unique_tokens": len(vocabulary),
      "tokens_mean": round(float(n.mean()), 4) if len(n) else 0.0,
      "tokens_std": round(float(n.std()), 4) if len(n) else 0.0,
      "tokens_median": float(np.median(n)) if len(n) else 0.0,
      # The smallest length that 95% of the captions do not exceed: a max_caption_tokens keeping them whole.
      "tokens_p95": float(np.percentile(n, 95, method="inverted_cdf")) if len(n) else 0.0,
  }


@dataclasses.dataclass
class LineCounts:
  """What reading a FILE skipped, for the report on stderr: blank lines, and malformed rows by reason (with the
  first one's line and what was wrong, `first_malformed`)."""

  blank: int = 0
  malformed: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
  first_malformed: str = ""

  def add_malformed(self, reason: str, where: str) -> None:
    self.malformed[reason] += 1
    self.first_malformed = self.first_malformed or where

  def report(self) -> list[str]:
    """The stderr lines for what was skipped (none when nothing was)."""
    lines = [f"blank lines skipped: {self.blank}"] if self.blank else []
    if self.malformed:
      reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(self.malformed.items()))
      lines.append(f"malformed rows skipped: {reasons} (first: {self.first_malformed})")
    return lines


def _text_lines(path: str, counts: LineCounts) -> Iterator[tuple[int, str]]:
  """(line number from 1, text) of every line that is not blank; UsageError on a line that is not UTF-8."""
  for number, line in enumerate(lines_lib.read_lines(path), 1):
    try:
      text = line.decode("utf-8")
    except UnicodeDecodeError as e:
      raise UsageError(f"{path} line {number}: {lines_lib.undecodable(line, e)} is not UTF-8 — save the file as "
                       "UTF-8") from e
    if not text.strip():
      counts.blank += 1
      continue
    yield number, text


def read_column(path: str, column: int, counts: LineCounts | None = None) -> Iterator[str]:
  """One TSV column; a row without it is a UsageError naming the line (blank lines are skipped, counted in
  `counts`)."""
  for number, text in _text_lines(path, counts or LineCounts()):
    fields = text.split("\t")
    if column >= len(fields):
      raise UsageError(f"{path} line {number} has {len(fields)} column(s), no column {column} (counted from 0) — "
                       "pass the --column every row has")
    yield fields[column]


def read_kept_captions(path: str, counts: LineCounts | None = None) -> Iterator[str]:
  """The "caption" of kept rows (their "kept" is JSON `true`) of a `capjax.text.pipeline` output; a line that is
  not a JSON object is a UsageError naming it. Blank lines, and rows whose "kept" is neither true nor false
  (`kept_not_boolean`: a string "false" and NaN are truthy in Python), are skipped and counted in `counts`."""
  counts = counts if counts is not None else LineCounts()
  for number, text in _text_lines(path, counts):
    try:
      row = json.loads(text)
    except json.JSONDecodeError as e:
      raise UsageError(f"{path} line {number} is not JSON ({e.msg}) — give a capjax.text.pipeline output") from e
    except RecursionError as e:  # a line of arrays nested thousands deep
      raise UsageError(f"{path} line {number} is nested deeper than the JSON parser follows — give a "
                       "capjax.text.pipeline output") from e
    if not isinstance(row, dict):
      raise UsageError(f"{path} line {number} is not a JSON object — give a capjax.text.pipeline output")
    kept = row.get("kept")
    if not isinstance(kept, bool):  # only JSON true and false are answers: json.loads gives NaN, 1e309 (inf), "false"
      shown = json.dumps(kept)[:40] if "kept" in row else "absent"
      counts.add_malformed("kept_not_boolean", f"line {number}, \"kept\": {shown}")
      continue
    caption = row.get("caption")
    if kept and caption:
      if not isinstance(caption, str):
        raise UsageError(f"{path} line {number}: the caption is {type(caption).__name__}, not a string — give a "
                         "capjax.text.pipeline output")
      yield caption


def _is_text(feature) -> bool:
  """Text, or a sequence of text (`captions`)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  inner = feature.feature if isinstance(feature, tfds.features.Sequence) else feature
  return isinstance(inner, tfds.features.Text)


def read_dataset_captions(name: str, split: str, data_dir: str, field: str = "") -> Iterator[str]:
  """Every caption of a built TFDS dataset's split: each reference of `captions`, or `caption` (pictures and
  feature arrays are not decoded). A damaged dataset (`capjax.data.integrity`) is a UsageError saying how to build
  it again."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  data_dir = integrity.data_dir(data_dir)
  if wrong := integrity.dataset_problem(name):
    raise UsageError(f"--dataset={name}: {wrong}")
  base, config = integrity.split_dataset(name)
  rebuild = integrity.rebuild_command(name, data_dir)
  try:
    for folder in integrity.version_folders(data_dir, base, config):
      integrity.check(folder, rebuild)
  except integrity.DamagedDatasetError as e:
    raise UsageError(str(e)) from e
  try:
    builder = tfds.builder(name, data_dir=data_dir)
    features = builder.info.features
  except (tfds.core.registered.DatasetNotFoundError, FileNotFoundError, ValueError) as e:
    raise UsageError(f"no dataset {name!r} is built in {data_dir} — build it first (`python -m "
                     f"capjax.data.build --dataset={name} --data_dir={data_dir}`) or pass --data_dir "
                     f"({str(e).strip().splitlines()[0]})") from e
  if not os.path.exists(os.path.join(builder.data_dir, "dataset_info.json")):  # a registered builder, not built
    raise UsageError(f"no dataset {name!r} is built in {data_dir} — build it first (`python -m capjax.data.build "
                     f"--dataset={name} --data_dir={data_dir}`) or pass --data_dir")
  if split not in builder.info.splits:
    raise UsageError(f"{name} has no split {split!r} — use one of {sorted(builder.info.splits)}")
  field = field or ("captions" if "captions" in features else "caption")
  texts = sorted(k for k, f in features.items() if _is_text(f))
  if field not in features:
    raise UsageError(f"{name} has no field {field!r} — use --field with one of its text fields: "
                     f"{', '.join(texts) or '(none)'}")
  if not _is_text(features[field]):
    raise UsageError(f"{name}'s field {field!r} is {type(features[field]).__name__}, not text — use --field with "
                     f"one of its text fields: {', '.join(texts) or '(none)'}")
  skip = {k: tfds.decode.SkipDecoding() for k, f in features.items()
          if k != field and isinstance(f, tfds.features.Image)}
  source = builder.as_data_source(split=split, decoders=skip or None)
  for i in range(len(source)):
    try:
      value = source[i][field]
    except RuntimeError as e:  # ArrayRecord: "Corrupted Riegeli/records file" (damage the cheap check cannot see)
      raise UsageError(f"record {i} of {name}:{split} in {builder.data_dir} cannot be read ("
                       f"{str(e).strip().splitlines()[0]}) — remove {builder.data_dir} (its shards count their "
                       f"records right, so a build would reuse it) and {rebuild}") from e
    if isinstance(value, (list, tuple, np.ndarray)):
      yield from (as_str(v) for v in value)
    else:
      yield as_str(value)


def _captions(paths: Sequence[str], counts: LineCounts, field: str = "") -> Iterator[str]:
  if _DATASET.value:
    if paths:
      raise UsageError(f"both a FILE ({paths[0]}) and --dataset={_DATASET.value} given — give one of them")
    return read_dataset_captions(_DATASET.value, _SPLIT.value, _DATA_DIR.value, field)
  if _FIELD.value:
    raise UsageError("--field reads a --dataset's records — give --dataset, or --column for a FILE")
  if len(paths) != 1:
    raise UsageError("give one FILE.tsv / FILE.jsonl, or --dataset=NAME --split=SPLIT — see --help")
  files.input_file(paths[0], what="a caption TSV or pipeline .jsonl")  # a FIFO or device is refused, not read
  if paths[0].endswith(".jsonl"):
    return read_kept_captions(paths[0], counts)
  return read_column(paths[0], _COLUMN.value, counts)


def _tokenizer() -> Callable[[str], Sequence[str]]:
  """Whitespace tokens, or (--tokenizer=treebank) Penn Treebank tokens of the normalized text, sentence by
  sentence, as the trainer reads a `dataset.caption_field` (capjax.data.sources.reference_text)."""
  if _TOKENIZER.value == "whitespace":
    return str.split
  from capjax.text.annotate import caption_tokens  # noqa: PLC0415
  return caption_tokens


def run(paths: Sequence[str]) -> int:
  """Prints the statistics for the parsed flags and positional `paths`; an `error:` line and exit 2 on bad input."""
  counts = LineCounts()
  try:
    fields = _FIELD.value or [""]
    per_field = {field: caption_stats(_captions(paths, counts, field), _tokenizer()) for field in fields}
    stats = per_field[fields[0]] if len(fields) == 1 else per_field
  except UsageError as e:
    cli.fail(str(e))
  except OSError as e:
    cli.fail(f"cannot read {e.filename}: {e.strerror} — check the path and its permissions")
  for line in counts.report():
    print(line, file=sys.stderr)
  print(json.dumps(stats))
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  """Parses `argv` (without the program name; None: sys.argv) and runs; for callers in Python."""
  argv = sys.argv[1:] if argv is None else list(argv)
  return run(cli.parse(FLAGS, ["capjax.text.stats", *argv], __doc__, positional=True))


if __name__ == "__main__":
  cli.run(lambda argv: main(argv[1:]))
