"""`python -m capjax.text.pipeline` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, hard_link, not_flags, runner, symlink
from hostile.inputs import UTF16, UTF16_NO_BOM

PIPELINE = "capjax.text.pipeline"

OUT = ("--output={t}/result.jsonl",)
NO_RESULT = ("result.jsonl", "result.funnel.json")
CASES = [
    case(PIPELINE, "no-input", *OUT, match="--input", absent=NO_RESULT),
    case(PIPELINE, "no-output", "--input={t}/alt.tsv", match="--output"),
    case(PIPELINE, "input-missing", "--input={t}/missing.tsv", *OUT, match="missing.tsv", absent=NO_RESULT),
    case(PIPELINE, "input-is-a-folder", "--input={t}/folder", *OUT, match="folder", absent=NO_RESULT),
    case(PIPELINE, "input-chmod", "--input={t}/alt.tsv", *OUT, chmod={"alt.tsv": 0o200}, absent=NO_RESULT),
    case(PIPELINE, "output-is-the-input", "--input={t}/alt.tsv", "--output={t}/alt.tsv", match="overwrite"),
    case(PIPELINE, "output-is-the-input-by-another-path", "--input={t}/alt.tsv", "--output={t}/folder/../alt.tsv",
         match="overwrite"),
    case(PIPELINE, "output-links-to-the-input", "--input={t}/alt.tsv", "--output={t}/link.jsonl",
         files={"link.jsonl": symlink("alt.tsv")}, match="would overwrite --input="),
    case(PIPELINE, "output-is-a-hard-link-of-the-input", "--input={t}/alt.tsv", "--output={t}/same.jsonl",
         files={"same.jsonl": hard_link("alt.tsv")}, match="would overwrite --input="),
    case(PIPELINE, "output-is-a-device", "--input={t}/alt.tsv", "--output={t}/null", files={"null": NULL_DEVICE},
         match="is a character device, not a regular file", absent=("null.funnel.json",)),
    case(PIPELINE, "output-is-a-fifo", "--input={t}/alt.tsv", "--output={t}/pipe", files={"pipe": FIFO},
         match="is a FIFO", absent=("pipe.funnel.json",)),
    case(PIPELINE, "output-ends-with-a-slash", "--input={t}/alt.tsv", "--output={t}/new/", match="is a directory",
         absent=("new",)),
    case(PIPELINE, "output-empty", "--input={t}/alt.tsv", "--output=", match="--output= is empty"),
    case(PIPELINE, "output-is-the-root", "--input={t}/alt.tsv", "--output=/", match="--output=/ is a directory"),
    case(PIPELINE, "input-is-a-fifo", "--input={t}/pipe.tsv", *OUT, files={"pipe.tsv": FIFO}, match="is a FIFO",
         absent=NO_RESULT),
    case(PIPELINE, "input-is-a-device", "--input={t}/null.tsv", *OUT, files={"null.tsv": NULL_DEVICE},
         match="is a character device", absent=NO_RESULT),
    case(PIPELINE, "input-utf16", "--input={t}/u.tsv", *OUT, files={"u.tsv": UTF16}, absent=NO_RESULT,
         match="u.tsv is UTF-16, not UTF-8 — convert it with iconv -f UTF-16 -t UTF-8"),
    case(PIPELINE, "input-utf16-without-bom", "--input={t}/u.tsv", *OUT, files={"u.tsv": UTF16_NO_BOM},
         absent=NO_RESULT, match="is UTF-16, not UTF-8"),
    case(PIPELINE, "funnel-is-the-input", "--input={t}/out.funnel.json", "--output={t}/out.jsonl", match="overwrite"),
    case(PIPELINE, "output-is-a-folder", "--input={t}/alt.tsv", "--output={t}/folder", match="directory"),
    case(PIPELINE, "output-folder-missing", "--input={t}/alt.tsv", "--output={t}/nothing/result.jsonl",
         match="does not exist", absent=("nothing",)),
    case(PIPELINE, "output-folder-read-only", "--input={t}/alt.tsv", "--output={ro}/result.jsonl"),
    case(PIPELINE, "output-folder-unwritable", "--input={t}/alt.tsv", "--output=/proc/capjax_result.jsonl"),
    case(PIPELINE, "output-folder-chmod", "--input={t}/alt.tsv", "--output={t}/locked/result.jsonl",
         files={"locked/.keep": b""}, chmod={"locked": 0o500}),
    case(PIPELINE, "min-concept-count-negative", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--min_concept_count=-1", match="min_concept_count"),
    case(PIPELINE, "min-concept-count-not-a-number", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--min_concept_count=many", match="min_concept_count"),
    case(PIPELINE, "vocabulary-missing", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--vocabulary={t}/no.txt",
         match="--vocabulary"),
    case(PIPELINE, "vocabulary-is-a-folder", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--vocabulary={t}/folder", match="--vocabulary"),
    case(PIPELINE, "vocabulary-not-utf8", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--vocabulary={t}/latin1.tsv", match="line 1"),
    case(PIPELINE, "vocabulary-random-bytes", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--vocabulary={t}/random.bin", match="--vocabulary"),
    case(PIPELINE, "vocabulary-empty", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--vocabulary={t}/empty.txt",
         match="--vocabulary"),
    case(PIPELINE, "entities-missing", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--entities={t}/no.tsv",
         match="--entities"),
    case(PIPELINE, "entities-not-utf8", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--entities={t}/latin1.tsv",
         match="--entities"),
    case(PIPELINE, "entities-without-tabs", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--entities={t}/notabs.tsv", files={"notabs.tsv": b"Harrison Ford actor\nParis city\n"}, match="line 1"),
    *not_flags(PIPELINE, "--input={t}/alt.tsv", "--output={t}/out.jsonl"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
