"""`python -m capjax.data.overlap` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import case, not_flags, runner

OVERLAP = "capjax.data.overlap"

_TINY = "synthetic_scenes/tiny"
CASES = [
    case(OVERLAP, "no-datasets", match="give two datasets, not 0"),
    case(OVERLAP, "one-dataset", _TINY, "--data_dir={d}", match="give two datasets, not 1"),
    case(OVERLAP, "threshold-too-large", _TINY, _TINY, "--data_dir={d}", "--threshold=65",
         match="--threshold=65 is out of range — give a Hamming distance from 0 to 64"),
    case(OVERLAP, "threshold-negative", _TINY, _TINY, "--data_dir={d}", "--threshold=-1",
         match="--threshold=-1 is out of range"),
    case(OVERLAP, "threshold-not-a-number", _TINY, _TINY, "--data_dir={d}", "--threshold=ten",
         match="--threshold"),
    case(OVERLAP, "second-not-built", _TINY, "karpathy/coco:test", "--data_dir={d}",
         match="dataset 'karpathy' is not built in {d}"),
    case(OVERLAP, "first-not-built", _TINY, _TINY, "--data_dir={t}/folder", match="is not built in {t}/folder"),
    case(OVERLAP, "dataset-unknown", "cc4m", _TINY, "--data_dir={d}", match="TFDS has no builder of that name"),
    case(OVERLAP, "dataset-path-out", "../synthetic_scenes", _TINY, "--data_dir={d}", match="starts with '.'"),
    case(OVERLAP, "split-unknown", f"{_TINY}:dev", _TINY, "--data_dir={d}", match="no split 'dev'"),
    case(OVERLAP, "data-dir-is-a-file", _TINY, _TINY, "--data_dir={t}/alt.tsv",
         match="--data_dir={t}/alt.tsv is a file"),
    case(OVERLAP, "pairs-negative", _TINY, _TINY, "--data_dir={d}", "--pairs=-1", match="--pairs"),
    *not_flags(OVERLAP, _TINY, _TINY, "--data_dir={d}"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
