r"""The cross-domain matrix of the paper's Tables 5-7: each trained workdir's best checkpoint (by validation CIDEr-D)
scored on each test set, beside a constant-caption baseline and the paper's published figures.

usage: python -m capjax.crossdomain --workdirs=A,B,... --output=DIR [--data_dir=D] [--num_examples=N] \
           --test=karpathy/coco:test,karpathy/flickr30k:test,cc3m:validation

Rows are model × training data (read from each workdir's config.json), one column group per test set: CIDEr(-D),
ROUGE-L, METEOR (with Java), SPICE (where its CoreNLP jars and Java 8/11 run), and CHAIR-i/CHAIR-s where the test
set carries its objects. A test set is read the way its model reads input (pixels at its size, or its IRv2 feature
variant); words of the test set the model never saw are simply never predicted (the model's <UNK> is its own).
Conceptual Captions' test split is not public: score cc3m:validation (the table says so).

Writes DIR/matrix.md, DIR/matrix.json, DIR/matrix.html, and the COCO files every figure comes from:
DIR/references/TEST.json and DIR/predictions/ROW/TEST.json (`python -m capjax.metrics REFS PREDS` gives the same).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from absl import flags

from capjax import cli, files

FLAGS = flags.FlagValues()
_WORKDIRS = flags.DEFINE_list("workdirs", None, "Trained workdirs, comma separated (rows).", flag_values=FLAGS,
                              required=True)
_TEST = flags.DEFINE_list("test", None, "Test sets as DATASET[/CONFIG]:SPLIT, comma separated (column groups).",
                          flag_values=FLAGS, required=True)
_OUTPUT = flags.DEFINE_string("output", None, "Folder for matrix.md/.json/.html and the COCO files.",
                              flag_values=FLAGS, required=True)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of the test sets (default: each model's own).",
                                flag_values=FLAGS)
_NUM_EXAMPLES = flags.DEFINE_integer("num_examples", None, "Score only the first N images of each test set.",
                                     lower_bound=1, flag_values=FLAGS)


def main(argv: Sequence[str]) -> int:
  cli.parse(FLAGS, argv, __doc__)
  output = os.path.expanduser(_OUTPUT.value)
  if not output.strip():
    cli.fail("--output= is empty — give the folder to write the matrix in, e.g. --output=matrix")
  if os.path.exists(output) and not os.path.isdir(output):
    cli.fail(f"--output={output} is a file, not a folder — give a folder to write the matrix in")
  workdirs = [w for w in _WORKDIRS.value if w.strip()]
  if not workdirs:
    cli.fail("--workdirs= names no workdir — give the workdirs of trained runs, comma separated")
  files.refuse_overlap({"--output": output}, {"--workdirs": workdirs})
  data_dir = os.path.expanduser(_DATA_DIR.value)
  if data_dir and not os.path.isdir(data_dir):
    cli.fail(f"--data_dir={data_dir} is not a directory — give the TFDS data dir the test sets are built in")
  cli.quiet_library_logs()
  from capjax.config_util import ConfigError  # noqa: PLC0415 (jax and TensorFlow load after the flags are good)
  from capjax.crossdomain import matrix as matrix_lib  # noqa: PLC0415
  from capjax.crossdomain import report  # noqa: PLC0415
  from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
  try:
    test_sets = matrix_lib.parse_test_sets(_TEST.value)
    if not test_sets:
      cli.fail("--test= names no test set — give DATASET:SPLIT, e.g. karpathy/coco:test")
    existing = output  # made when the first file is written, after every input is checked
    while not os.path.exists(existing):
      existing = os.path.dirname(existing) or "."
    reason = cli.unwritable_reason(existing) if os.path.isdir(existing) else "is under a file, not a folder"
    if reason:
      cli.fail(f"--output={output} {reason} — choose a folder you can write to")
    matrix = matrix_lib.compute(workdirs, test_sets, output, data_dir, _NUM_EXAMPLES.value)
  except (matrix_lib.MatrixInputError, ConfigError, DatasetNotBuiltError, FileNotFoundError,
          NotADirectoryError) as error:
    cli.fail(str(error))
  paths = report.write(matrix, output)
  print(report.markdown(matrix))
  for kind, path in paths.items():
    print(f"{kind}: {path}")
  return 0


if __name__ == "__main__":
  cli.run(main)
