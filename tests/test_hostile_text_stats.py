"""`python -m capjax.text.stats` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, runner
from hostile.inputs import DEEP_JSON, TRAIN_SHARD, UTF16

STATS = "capjax.text.stats"

CASES = [
    case(STATS, "no-file", match="FILE"),
    case(STATS, "two-files", "{t}/captions.tsv", "{t}/alt.tsv"),
    case(STATS, "file-missing", "{t}/missing.tsv", match="missing.tsv"),
    case(STATS, "file-is-a-folder", "{t}/folder", match="folder"),
    case(STATS, "file-chmod", "{t}/captions.tsv", chmod={"captions.tsv": 0o200}),
    case(STATS, "file-is-a-fifo", "{t}/pipe.tsv", files={"pipe.tsv": FIFO}, match="pipe.tsv is a FIFO"),
    case(STATS, "file-is-a-device", "{t}/null.tsv", files={"null.tsv": NULL_DEVICE},
         match="null.tsv is a character device"),
    case(STATS, "tsv-utf16", "{t}/u.tsv", files={"u.tsv": UTF16}, match="u.tsv is UTF-16"),
    case(STATS, "jsonl-utf16-without-bom", "{t}/u.jsonl",
         files={"u.jsonl": '{"kept": true, "caption": "a dog"}\n'.encode("utf-16-le")}, match="u.jsonl is UTF-16"),
    case(STATS, "tsv-not-utf8", "{t}/latin1.tsv", "--column=1", match="line 1"),
    case(STATS, "tsv-random-bytes", "{t}/random.bin", match="UTF-8"),
    case(STATS, "jsonl-not-utf8", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": "caf\xe9"}\n'},
         match="line 1"),
    case(STATS, "jsonl-not-json", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": "a"}\nnope\n'},
         match="line 2"),
    case(STATS, "jsonl-truncated", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "capt'}, match="line 1"),
    case(STATS, "jsonl-array-line", "{t}/bad.jsonl", files={"bad.jsonl": b"[1, 2]\n"}, match="JSON object"),
    case(STATS, "jsonl-caption-not-text", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": 5}\n'},
         match="caption"),
    case(STATS, "jsonl-nested-deep", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": "a"}\n'
                                                                           + DEEP_JSON + b"\n"},
         match="line 2 is nested deeper than the JSON parser follows"),
    case(STATS, "column-missing-in-a-row", "{t}/ragged.tsv", "--column=1",
         files={"ragged.tsv": b"a dog\turl\nno url here\n"}, match="line 2"),
    case(STATS, "column-beyond-every-row", "{t}/captions.tsv", "--column=7", match="column 7"),
    case(STATS, "column-negative", "{t}/captions.tsv", "--column=-1", match="column"),
    case(STATS, "column-not-a-number", "{t}/captions.tsv", "--column=first", match="column"),
    case(STATS, "tokenizer-unknown", "{t}/captions.tsv", "--tokenizer=spacy", match="tokenizer"),
    case(STATS, "file-and-dataset", "{t}/captions.tsv", "--dataset=synthetic_scenes/tiny", "--data_dir={d}"),
    case(STATS, "dataset-unknown", "--dataset=cc4m", "--data_dir={t}/folder", match="cc4m"),
    case(STATS, "dataset-not-built", "--dataset=synthetic_scenes/tiny", "--data_dir={t}/folder",
         match="capjax.data.build"),
    case(STATS, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--data_dir={t}/alt.tsv"),
    case(STATS, "split-unknown", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=dev", match="dev"),
    case(STATS, "field-unknown", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--field=alt", match="alt"),
    case(STATS, "dataset-shard-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-cut}", "--split=train",
         match=f"{TRAIN_SHARD} holds 0 records, not the 512 of dataset_info.json: truncated or damaged — build it "
               "again: `python -m capjax.data.build --dataset=synthetic_scenes/tiny"),
    case(STATS, "dataset-shard-zeroed-inside", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-zeroed-inside}",
         "--split=train", match="so a build would reuse it) and build it again: `python -m capjax.data.build"),
    case(STATS, "dataset-info-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:info-cut}",
         match="dataset_info.json is not JSON"),
    case(STATS, "dataset-features-garbled", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:features-garbled}",
         match="features.json is not JSON"),
    case(STATS, "field-is-the-image", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--field=image",
         match="'image' is Image, not text — use --field with one of its text fields: background, captions"),
    case(STATS, "field-is-the-objects", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--field=objects",
         match="'objects' is Sequence, not text"),
    case(STATS, "dataset-name-escapes", "--dataset=../tfds", "--data_dir={d}",
         match="the dataset name '..' starts with '.' (a path out of the data dir)"),
    case(STATS, "dataset-config-escapes", "--dataset=synthetic_scenes/../../x", "--data_dir={d}",
         match="the builder config '../../x' holds a path separator"),
    case(STATS, "dataset-config-empty", "--dataset=synthetic_scenes/", "--data_dir={d}", match="is empty"),
    case(STATS, "unknown-flag", "{t}/captions.tsv", "--bogus=1", match="bogus"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
