"""The paper's caption statistics (examples, unique tokens, tokens per caption: mean, std, median), as JSON.

Usage:
  python -m capjax.text.stats FILE.tsv [--column=N]      # a TSV (CC3M: caption<TAB>url) or a pipeline .jsonl
  python -m capjax.text.stats --dataset=cc3m --split=validation [--data_dir=DIR] [--field=captions]
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
from absl import app, flags

from capjax.strings import as_str

_COLUMN = flags.DEFINE_integer("column", 0, "TSV column holding the caption (default 0, as CC3M).")
_TOKENIZER = flags.DEFINE_enum("tokenizer", "whitespace", ["whitespace", "treebank"],
                               "whitespace for released captions; treebank for raw alt-texts.")
_DATASET = flags.DEFINE_string("dataset", "", "A built TFDS dataset, NAME or NAME/CONFIG (e.g. cc3m), instead of FILE.")
_SPLIT = flags.DEFINE_string("split", "validation", "The split of --dataset to read.")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of --dataset ('' -> $TFDS_DATA_DIR or "
                                "~/tensorflow_datasets).")
_FIELD = flags.DEFINE_string("field", "", "Record field with the captions ('' -> 'captions' when the dataset has "
                             "it, else 'caption').")


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
  }


def read_column(path: str, column: int) -> Iterator[str]:
  """One TSV column (rows too short for it are skipped)."""
  with open(path, encoding="utf-8", errors="replace") as f:
    for line in f:
      fields = line.rstrip("\r\n").split("\t")
      if column < len(fields):
        yield fields[column]


def read_kept_captions(path: str) -> Iterator[str]:
  """The "caption" of kept rows of a `capjax.text.pipeline` output."""
  with open(path, encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      if row.get("kept") and row.get("caption"):
        yield row["caption"]


def read_dataset_captions(name: str, split: str, data_dir: str, field: str = "") -> Iterator[str]:
  """Every caption of a built TFDS dataset's split: each reference of `captions`, or `caption` (pictures and
  feature arrays are not decoded)."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  data_dir = os.path.expanduser(data_dir or os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))
  try:
    builder = tfds.builder(name, data_dir=data_dir)
    features = builder.info.features
  except (tfds.core.registered.DatasetNotFoundError, FileNotFoundError, ValueError) as e:
    raise UsageError(f"no dataset {name!r} is built in {data_dir} — build it first (`python -m "
                     f"capjax.data.build --dataset={name} --data_dir={data_dir}`) or pass --data_dir "
                     f"({str(e).strip().splitlines()[0]})") from e
  if split not in builder.info.splits:
    raise UsageError(f"{name} has no split {split!r} — use one of {sorted(builder.info.splits)}")
  field = field or ("captions" if "captions" in features else "caption")
  if field not in features:
    raise UsageError(f"{name} has no field {field!r} — use --field with one of {sorted(features)}")
  skip = {k: tfds.decode.SkipDecoding() for k, f in features.items()
          if k != field and isinstance(f, tfds.features.Image)}
  source = builder.as_data_source(split=split, decoders=skip or None)
  for i in range(len(source)):
    value = source[i][field]
    if isinstance(value, (list, tuple, np.ndarray)):
      yield from (as_str(v) for v in value)
    else:
      yield as_str(value)


def _captions(paths: Sequence[str]) -> Iterator[str]:
  if _DATASET.value:
    if paths:
      raise UsageError(f"give a FILE or --dataset, not both (got {paths[0]} and --dataset={_DATASET.value})")
    return read_dataset_captions(_DATASET.value, _SPLIT.value, _DATA_DIR.value, _FIELD.value)
  if len(paths) != 1:
    raise UsageError("give one FILE.tsv / FILE.jsonl, or --dataset=NAME --split=SPLIT — see --help")
  if not os.path.isfile(paths[0]):
    raise UsageError(f"{paths[0]} does not exist — give the path of a caption TSV or pipeline .jsonl")
  return read_kept_captions(paths[0]) if paths[0].endswith(".jsonl") else read_column(paths[0], _COLUMN.value)


def run(paths: Sequence[str]) -> int:
  """Prints the statistics for the parsed flags and positional `paths`; 2 after an `error:` line."""
  try:
    captions = _captions(paths)
    if _TOKENIZER.value == "treebank":
      from capjax.text.annotate import normalize_text, tokenize  # noqa: PLC0415
      stats = caption_stats(captions, lambda c: tokenize(normalize_text(c)))
    else:
      stats = caption_stats(captions)
  except UsageError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(json.dumps(stats))
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  """Parses `argv` (without the program name; None: sys.argv) and runs; for callers in Python."""
  argv = sys.argv[1:] if argv is None else list(argv)
  flags.FLAGS.unparse_flags()  # a second call starts from the defaults, not the last call's values
  try:
    rest = flags.FLAGS(["capjax.text.stats", *argv])[1:]
  except flags.Error as e:
    print(f"error: {e} — see --help", file=sys.stderr)
    return 2
  return run(rest)


def _app_main(argv: Sequence[str]) -> None:
  sys.exit(run(argv[1:]))


if __name__ == "__main__":
  flags.FLAGS.set_gnu_getopt(True)  # FILE may come before or after the flags
  try:
    app.run(_app_main, flags_parser=lambda argv: flags.FLAGS(argv))
  except flags.Error as error:
    print(f"error: {error} — see --help", file=sys.stderr)
    sys.exit(2)
