"""`python -m capjax.data.show` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import NULL_DEVICE, case, not_flags, runner
from hostile.inputs import TRAIN_SHARD

SHOW = "capjax.data.show"

_TINY = ("--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=validation")
CASES = [
    case(SHOW, "no-dataset", "--split=train", match="missing --dataset"),
    case(SHOW, "no-split", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", match="missing --split"),
    case(SHOW, "dataset-not-built", "--dataset=synthetic_scenes/tiny", "--split=train", "--data_dir={t}/folder",
         match="is not built in {t}/folder"),
    case(SHOW, "dataset-unknown", "--dataset=cc4m", "--split=train", "--data_dir={t}/folder",
         match="TFDS has no builder of that name"),
    case(SHOW, "dataset-path-out", "--dataset=../synthetic_scenes", "--split=train", "--data_dir={d}",
         match="starts with '.'"),
    case(SHOW, "config-unknown", "--dataset=synthetic_scenes/huge", "--split=train", "--data_dir={d}",
         match="huge"),
    case(SHOW, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--split=train", "--data_dir={t}/alt.tsv",
         match="--data_dir={t}/alt.tsv is a file"),
    case(SHOW, "split-unknown", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=dev",
         match="no split 'dev'"),
    case(SHOW, "dataset-shard-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-cut}", "--split=train",
         match=f"{TRAIN_SHARD} holds 0 records"),
    case(SHOW, "html-is-the-datasets-info", *_TINY, "--html={d}/synthetic_scenes/tiny/1.0.0/dataset_info.json",
         match="is inside --data_dir="),
    case(SHOW, "html-is-a-device", *_TINY, "--html={t}/null.html", files={"null.html": NULL_DEVICE},
         match="null.html is a character device"),
    case(SHOW, "html-is-a-folder", *_TINY, "--html={t}/folder", match="is a directory"),
    case(SHOW, "html-is-its-own-sheet", *_TINY, "--html={t}/page.png", match="its own contact sheet"),
    case(SHOW, "sheet-is-a-device", *_TINY, "--html={t}/page.html", files={"page.png": NULL_DEVICE},
         match="page.png is a character device"),
    case(SHOW, "refs-is-the-html", *_TINY, "--html={t}/page.html", "--refs={t}/page.html",
         match="would overwrite --html="),
    case(SHOW, "refs-in-a-missing-folder", *_TINY, "--refs={t}/nowhere/refs.json", match="does not exist"),
    case(SHOW, "num-zero", *_TINY, "--html={t}/page.html", "--num=0", match="--num"),
    case(SHOW, "num-negative", *_TINY, "--html={t}/page.html", "--num=-3", match="--num"),
    case(SHOW, "num-not-a-number", *_TINY, "--num=all", match="--num"),
    *not_flags(SHOW, *_TINY),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
