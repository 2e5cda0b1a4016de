"""The rows of a built dataset's TSV that gave no example, as a TSV img2dataset downloads again (link rot: about 30%
of CC3M's urls fail; a later try gets some of them back).

  python -m capjax.data.retry --dataset=cc3m[/CONFIG] --manual_dir=DIR --output=retry.tsv [--split=train]
      [--data_dir=DIR]

--output gets a header line `caption url reason`, then one line per row of the split's TSV without an example: the
kept row of its url, not a malformed one (img2dataset reads the caption and url columns, and ignores `reason`:
`missing_image: <img2dataset's error>`, `missing_image`, or `corrupt_image: <why>`). Download it into
`DIR/images/SPLIT.retry/` and build again: the builder reads every `images/SPLIT*` folder and joins a row to its
good image in either. The rows that were obtained come from the build's manifest (`capjax.data.manifest`), else
from its records. A retry is a builder's (`retry_rows`): cc3m's; the dataset must be built.
"""

from __future__ import annotations

import os
import collections
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from absl import flags

from capjax import cli, files
from capjax.data import integrity, manifest

FLAGS = flags.FlagValues()
_DATASET = flags.DEFINE_string("dataset", None, "The built dataset, NAME or NAME/CONFIG (cc3m, cc3m/labeled).",
                               flag_values=FLAGS)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets).",
                                flag_values=FLAGS)
_MANUAL_DIR = flags.DEFINE_string("manual_dir", None, "The manual dir the dataset was built from (its TSVs and "
                                  "images/).", flag_values=FLAGS)
_SPLIT = flags.DEFINE_string("split", "train", "The split whose rows to list.", flag_values=FLAGS)
_OUTPUT = flags.DEFINE_string("output", None, "The TSV to write (e.g. retry.tsv).", flag_values=FLAGS)
flags.mark_flags_as_required(["dataset", "manual_dir", "output"], flag_values=FLAGS)
HEADER = ("caption", "url", "reason")  # img2dataset: --input_format tsv --caption_col caption --url_col url


def obtained_urls(folder: str, split: str) -> Iterator[str]:
  """The urls of `split`'s examples in the built dataset's `folder`: from its manifest, else read from its records;
  ManifestError when the manifest is not one."""
  path = os.path.join(folder, manifest.NAME)
  rows = manifest.read(path) if os.path.isfile(path) else manifest.entries(folder, with_sha256=False)
  return (url for row_split, _, url, _ in rows if row_split == split and url)


def write_tsv(rows: Iterable[tuple[str, str, str]], f: IO[str]) -> collections.Counter:
  """Writes the retry TSV (`HEADER`, then `rows`) to the open text file `f`; returns the rows by reason (the part
  before any `: `)."""
  f.write("\t".join(HEADER) + "\n")
  counts: collections.Counter = collections.Counter()
  for caption, url, reason in rows:
    f.write(f"{caption}\t{url}\t{reason}\n")
    counts[reason.split(":", 1)[0]] += 1
  return counts


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  cli.quiet_library_logs()
  dataset, split, manual_dir = _DATASET.value, _SPLIT.value, _MANUAL_DIR.value
  if wrong := integrity.dataset_problem(dataset):
    cli.fail(f"--dataset={dataset}: {wrong}")
  if not os.path.isdir(manual_dir):
    cli.fail(f"--manual_dir={manual_dir} is not a directory — give the manual dir the dataset was built from")
  data_dir = integrity.data_dir(_DATA_DIR.value)
  if os.path.exists(data_dir) and not os.path.isdir(data_dir):
    cli.fail(f"--data_dir={data_dir} is a file, not a directory — give the TFDS data dir the dataset is built in")
  output = files.output_file(_OUTPUT.value, inputs={"--manual_dir": manual_dir}, example="retry.tsv")
  from capjax.config_util import ConfigError  # noqa: PLC0415
  from capjax.data import show, sources  # noqa: PLC0415 (JAX and TensorFlow: not for --help and flag errors)
  try:
    builder = show.open_builder(dataset, data_dir)
  except (sources.DatasetNotBuiltError, ConfigError) as e:
    cli.fail(str(e))
  splits = builder.retry_splits() if hasattr(builder, "retry_rows") else []
  if not splits:
    cli.fail(f"{dataset} has no caption TSV to retry rows of — retry works on cc3m (unlabeled or labeled)")
  if split not in splits:
    cli.fail(f"--split={split}: {dataset} has no split {split!r} — use one of {', '.join(splits)}")
  folder = os.fspath(builder.data_dir)
  files.refuse_overlap({"--output": output}, {f"--dataset={dataset}'s folder": folder})  # its manifest, report, ...
  try:
    rows = builder.retry_rows(manual_dir, split, obtained_urls(folder, split))
    with files.writing(output) as f:
      counts = write_tsv(rows, f)
  except manifest.ManifestError as e:
    cli.fail(f"{e} — write it again: `python -m capjax.data.manifest write --dataset={dataset}`")
  except (FileNotFoundError, files.NotRegularError) as e:  # the builder's ManualDataError (a TSV the manual dir
    # lacks), or a TSV that is a FIFO or a device
    cli.fail(str(e))
  total = sum(counts.values())
  print(f"wrote {output}: {total:,} rows of {split} to download again"
        + (f" ({', '.join(f'{reason} {n:,}' for reason, n in sorted(counts.items()))})" if total else ""))


if __name__ == "__main__":
  cli.run(main)
