"""`python -m capjax.metrics.human_eval` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, case, runner
from hostile.inputs import DEEP_JSON, as_json

HUMAN_EVAL = "capjax.metrics.human_eval"

CASES = [
    case(HUMAN_EVAL, "no-arguments", match="aggregate"),
    case(HUMAN_EVAL, "aggregate-nothing", "aggregate", match="aggregate"),
    case(HUMAN_EVAL, "unknown-subcommand", "average", "{t}/ratings.csv", match="aggregate"),
    case(HUMAN_EVAL, "csv-missing", "aggregate", "{t}/missing.csv", match="missing.csv"),
    case(HUMAN_EVAL, "csv-is-a-folder", "aggregate", "{t}/folder", match="folder"),
    case(HUMAN_EVAL, "csv-chmod", "aggregate", "{t}/ratings.csv", chmod={"ratings.csv": 0o200}),
    case(HUMAN_EVAL, "csv-empty", "aggregate", "{t}/empty.txt", match="header"),
    case(HUMAN_EVAL, "csv-not-utf8", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\ncaf\xe9,1,GOOD\n"}, match="bad.csv"),
    case(HUMAN_EVAL, "csv-random-bytes", "aggregate", "{t}/random.bin", match="random.bin"),
    case(HUMAN_EVAL, "csv-is-a-fifo", "aggregate", "{t}/pipe.csv", files={"pipe.csv": FIFO},
         match="pipe.csv is a FIFO"),
    case(HUMAN_EVAL, "csv-utf16", "aggregate", "{t}/u.csv",
         files={"u.csv": "image_id,rater,rating\n1,1,GOOD\n".encode("utf-16")}, match="u.csv is UTF-16"),
    case(HUMAN_EVAL, "csv-with-a-utf8-bom-and-a-bad-rating", "aggregate", "{t}/bom.csv",
         files={"bom.csv": b"\xef\xbb\xbfimage_id,rater,rating\n1,1,MAYBE\n"}, match="line 2"),  # not the header
    case(HUMAN_EVAL, "csv-wrong-header", "aggregate", "{t}/captions.tsv", match="header"),
    case(HUMAN_EVAL, "csv-header-only", "aggregate", "{t}/bad.csv", files={"bad.csv": b"image_id,rater,rating\n"},
         match="no ratings"),
    case(HUMAN_EVAL, "rating-unknown", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,MAYBE\n"}, match="line 2"),
    case(HUMAN_EVAL, "rater-not-a-number", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,one,GOOD\n"}, match="line 2"),
    case(HUMAN_EVAL, "rater-out-of-range", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,4,GOOD\n"}, match="rater 4"),
    case(HUMAN_EVAL, "rater-votes-twice", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,GOOD\n1,1,BAD\n"}, match="twice"),
    case(HUMAN_EVAL, "ratings-incomplete", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,GOOD\n"}, match="lack"),
    case(HUMAN_EVAL, "image-id-empty", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,GOOD\n,2,GOOD\n"}, match="line 3: the image_id is empty"),
    case(HUMAN_EVAL, "image-id-blank", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n  ,1,BAD\n"}, match="line 2: the image_id is empty"),
    case(HUMAN_EVAL, "row-too-short", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1\n"}, match="line 2"),
    case(HUMAN_EVAL, "raters-zero", "aggregate", "{t}/ratings.csv", "--raters=0", match="raters"),
    case(HUMAN_EVAL, "raters-negative", "aggregate", "{t}/ratings.csv", "--raters=-3", match="raters"),
    case(HUMAN_EVAL, "raters-not-a-number", "aggregate", "{t}/ratings.csv", "--raters=three", match="raters"),
    case(HUMAN_EVAL, "unknown-flag", "aggregate", "{t}/ratings.csv", "--bogus=1", match="bogus"),
    # the blind study: `sheets` and `aggregate --key`
    case(HUMAN_EVAL, "sheets-nothing", "sheets", match="--predictions"),
    case(HUMAN_EVAL, "sheets-predictions-missing", "sheets", "--predictions=a={t}/missing.json",
         "--images=cc3m:validation", "--output={t}/study", match="missing.json", absent=("study",)),
    case(HUMAN_EVAL, "sheets-predictions-fifo", "sheets", "--predictions=a={t}/p.json", "--images=cc3m:validation",
         "--output={t}/study", files={"p.json": FIFO}, match="p.json is a FIFO", absent=("study",)),
    case(HUMAN_EVAL, "sheets-predictions-nested-too-deep", "sheets", "--predictions=a={t}/deep.json",
         "--images=cc3m:validation", "--output={t}/study", files={"deep.json": DEEP_JSON}, match="deep.json",
         absent=("study",)),
    case(HUMAN_EVAL, "sheets-predictions-random-bytes", "sheets", "--predictions=a={t}/random.bin",
         "--images=cc3m:validation", "--output={t}/study", match="random.bin", absent=("study",)),
    case(HUMAN_EVAL, "sheets-output-is-a-file", "sheets", "--predictions=a={t}/preds.json", "--images=cc3m:validation",
         "--output={t}/empty.txt", match="is a file"),
    case(HUMAN_EVAL, "sheets-images-not-built", "sheets", "--predictions=a={t}/preds.json", "--images=cc3m:validation",
         "--data_dir={t}/folder", "--output={t}/study", match="not built", absent=("study/key.json",)),
    case(HUMAN_EVAL, "aggregate-key-missing", "aggregate", "--key={t}/missing.json", "{t}/ratings.csv",
         match="missing.json"),
    case(HUMAN_EVAL, "aggregate-key-not-json", "aggregate", "--key={t}/alt.tsv", "{t}/ratings.csv", match="not JSON"),
    case(HUMAN_EVAL, "aggregate-key-nested-too-deep", "aggregate", "--key={t}/deep.json", "{t}/ratings.csv",
         files={"deep.json": DEEP_JSON}, match="not JSON"),
    case(HUMAN_EVAL, "aggregate-key-item-without-models", "aggregate", "--key={t}/key.json", "{t}/ratings.csv",
         files={"key.json": as_json({"version": 1, "raters": 3, "models": ["a"], "items": {"q1": {"image_id": "0"}}})},
         match="not a key of `sheets`"),
    case(HUMAN_EVAL, "aggregate-key-with-one-model-s-csv", "aggregate", "--key={t}/key.json", "{t}/ratings.csv",
         files={"key.json": as_json({"version": 1, "raters": 3, "models": ["a"],
                                   "items": {"q1": {"image_id": "0", "models": ["a"]}}})},
         match="item 1 is not in the key"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
