"""`python -m capjax.data.retry` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import NULL_DEVICE, case, not_flags, runner

RETRY = "capjax.data.retry"

_CC3M = ("--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/data")
CASES = [
    case(RETRY, "no-flags", match="missing --dataset, --manual_dir, --output"),
    case(RETRY, "dataset-not-built", *_CC3M, "--output={t}/retry.tsv", absent=("retry.tsv",),
         match="is not built in {t}/data"),
    case(RETRY, "dataset-unknown", "--dataset=cc4m", "--manual_dir={t}/folder", "--data_dir={t}/data",
         "--output={t}/retry.tsv", match="TFDS has no builder of that name"),
    case(RETRY, "dataset-path-out", "--dataset=../cc3m", "--manual_dir={t}/folder", "--output={t}/retry.tsv",
         match="starts with '.'"),
    case(RETRY, "dataset-without-a-tsv", "--dataset=synthetic_scenes/tiny", "--data_dir={d}",
         "--manual_dir={t}/folder", "--output={t}/retry.tsv", absent=("retry.tsv",),
         match="has no caption TSV to retry rows of"),
    case(RETRY, "manual-dir-missing", "--dataset=cc3m", "--manual_dir={t}/nowhere", "--output={t}/retry.tsv",
         match="--manual_dir={t}/nowhere is not a directory"),
    case(RETRY, "manual-dir-is-a-file", "--dataset=cc3m", "--manual_dir={t}/alt.tsv", "--output={t}/retry.tsv",
         match="--manual_dir={t}/alt.tsv is not a directory"),
    case(RETRY, "data-dir-is-a-file", "--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/alt.tsv",
         "--output={t}/retry.tsv", match="--data_dir={t}/alt.tsv is a file"),
    case(RETRY, "output-is-a-folder", *_CC3M, "--output={t}/images", match="is a directory"),
    case(RETRY, "output-inside-the-manual-dir", *_CC3M, "--output={t}/folder/retry.tsv",
         absent=("folder/retry.tsv",), match="is inside --manual_dir"),
    case(RETRY, "output-is-a-device", *_CC3M, "--output={t}/null.tsv", files={"null.tsv": NULL_DEVICE},
         match="null.tsv is a character device"),
    *not_flags(RETRY, *_CC3M, "--output={t}/retry.tsv"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
