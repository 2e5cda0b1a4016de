"""`python -m capjax.metrics.human_eval` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, case, hard_link, runner
from hostile.inputs import DEEP_JSON, PREDS, as_json

HUMAN_EVAL = "capjax.metrics.human_eval"
# `sheets` on a built split ({d}): without a bad input, these would write the sheets.
TINY = ("--images=synthetic_scenes/tiny:test", "--data_dir={d}", "--output={t}/study")
KEY_RATINGS = {"key.csv": b"item,rater,rating\nq1,1,GOOD\nq1,2,GOOD\nq1,3,BAD\n"}


def _key(**fields) -> bytes:
  """A key.json of one item, q1, with `fields` changed (as a user may edit it)."""
  return as_json({"version": 1, "raters": 3, "models": ["a"], "items": {"q1": {"image_id": "0", "models": ["a"]}},
                  **fields})


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
    case(HUMAN_EVAL, "sheets-predictions-is-a-folder", "sheets", "--predictions=a={t}/folder",
         "--images=cc3m:validation", "--output={t}/study", match="--predictions={t}/folder is a directory",
         absent=("study",)),
    case(HUMAN_EVAL, "sheets-output-holds-the-predictions-as-its-key", "sheets", "--predictions=a={t}/study/key.json",
         "--images=cc3m:validation", "--output={t}/study", files={"study/key.json": as_json(PREDS)},
         match="study/key.json exists: a study's sheets are written once"),
    case(HUMAN_EVAL, "aggregate-key-is-a-folder", "aggregate", "--key={t}/folder", "{t}/ratings.csv",
         match="--key={t}/folder is a directory"),
    case(HUMAN_EVAL, "aggregate-second-csv-missing", "aggregate", "{t}/ratings.csv", "{t}/missing.csv",
         match="{t}/missing.csv does not exist"),
    # issue 40 (D6, D11, D12, D20): a caption that is null or holds a lone surrogate, an image id that only
    # str.isdigit takes, and outputs that cannot be written or are inputs, refused before any sheet is written.
    case(HUMAN_EVAL, "sheets-null-caption", "sheets", "--predictions=a={t}/p.json", *TINY,
         files={"p.json": as_json([{"image_id": 1, "caption": None}])},
         match="{t}/p.json is not a COCO results list of {image_id, caption} (entry 1: its caption null is not UTF-8 "
               "text)",
         absent=("study",)),
    case(HUMAN_EVAL, "sheets-caption-with-a-lone-surrogate", "sheets", "--predictions=a={t}/p.json", *TINY,
         files={"p.json": b'[{"image_id": 1, "caption": "a dog"}, {"image_id": 2, "caption": "a \\ud800 cat"}]'},
         match='(entry 2: its caption "a \\ud800 cat" is not UTF-8 text)', absent=("study",)),
    case(HUMAN_EVAL, "sheets-superscript-digit-image-id", "sheets", "--predictions=a={t}/p.json", *TINY,
         files={"p.json": as_json([{"image_id": "\u00b2", "caption": "a dog"}])},
         match="--images: image id \u00b2 is not an index of synthetic_scenes/tiny:test (64 examples) — give the split",
         absent=("study/rater_1.html", "study/key.json")),
    case(HUMAN_EVAL, "sheets-a-later-sheet-is-a-folder", "sheets", "--predictions=a={t}/preds.json", "--raters=2",
         *TINY, files={"study/rater_2.html/notes.txt": b"a folder where a sheet goes"},
         match="--output={t}/study: rater_2.html in it is a folder — move it away, or choose another --output",
         absent=("study/rater_1.html", "study/key.json")),
    case(HUMAN_EVAL, "sheets-predictions-under-a-sheet-s-name", "sheets", "--predictions=a={t}/study/rater_1.html",
         *TINY, files={"study/rater_1.html": as_json(PREDS)},
         match="--output={t}/study/rater_1.html would overwrite --predictions={t}/study/rater_1.html",
         absent=("study/key.json",)),
    case(HUMAN_EVAL, "sheets-a-sheet-is-a-hard-link-of-the-predictions", "sheets", "--predictions=a={t}/preds.json",
         *TINY, files={"study/rater_3.html": hard_link("preds.json")},
         match="--output={t}/study/rater_3.html would overwrite --predictions={t}/preds.json",
         absent=("study/rater_1.html", "study/key.json")),
    # issue 40 (D3, D15): counts bounded, in flags and in a key.json a user edited; a key without models.
    case(HUMAN_EVAL, "aggregate-key-of-10-20-raters", "aggregate", "--key={t}/key.json", "{t}/key.csv",
         files={"key.json": _key(raters=10**20), **KEY_RATINGS},
         match="its raters is not a number of raters 1..100"),
    case(HUMAN_EVAL, "aggregate-key-without-models", "aggregate", "--key={t}/key.json", "{t}/key.csv",
         files={"key.json": _key(models=[]), **KEY_RATINGS}, match="its models are not a non-empty list of names"),
    case(HUMAN_EVAL, "raters-10-20", "aggregate", "{t}/ratings.csv", "--raters=100000000000000000000",
         match="--raters"),
    case(HUMAN_EVAL, "sheets-raters-10-20", "sheets", "--predictions=a={t}/preds.json",
         "--raters=100000000000000000000", *TINY, match="--raters", absent=("study",)),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
