"""`python -m capjax.tools.harvest_alt_text` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink

HARVEST = "capjax.tools.harvest_alt_text"

HARVEST_OUT = ("--output={t}/result.tsv",)
NO_TSV = ("result.tsv", "result.tsv.partial")


def _harvest(name: str, *args: str, match: str = "", **kw):
  return case(HARVEST, name, *args, absent=NO_TSV, match=match, **kw)


CASES = [
    _harvest("no-input", *HARVEST_OUT, match="--input"),
    case(HARVEST, "no-output", "--input={t}/page.html", match="--output"),
    _harvest("input-matches-nothing", "--input={t}/none/*.html", *HARVEST_OUT, match="matches no file"),
    _harvest("input-is-a-folder", "--input={t}/folder", *HARVEST_OUT, match="folder"),
    _harvest("input-not-html-or-warc", "--input={t}/alt.tsv", *HARVEST_OUT, match="alt.tsv"),
    _harvest("one-of-two-inputs-missing", "--input={t}/page.html", "--input={t}/gone.warc", *HARVEST_OUT,
             match="gone.warc"),
    _harvest("input-chmod", "--input={t}/page.html", *HARVEST_OUT, chmod={"page.html": 0o200}),
    case(HARVEST, "output-is-the-input", "--input={t}/page.html", "--output={t}/page.html", match="would overwrite"),
    case(HARVEST, "output-is-a-folder", "--input={t}/page.html", "--output={t}/folder", match="directory"),
    case(HARVEST, "output-links-to-the-input", "--input={t}/page.html", "--output={t}/link.tsv",
         files={"link.tsv": symlink("page.html")}, match="would overwrite --input="),
    case(HARVEST, "output-is-a-device", "--input={t}/page.html", "--output={t}/null.tsv",
         files={"null.tsv": NULL_DEVICE}, match="is a character device"),
    case(HARVEST, "output-is-a-fifo", "--input={t}/page.html", "--output={t}/pipe.tsv", files={"pipe.tsv": FIFO},
         match="is a FIFO"),
    _harvest("output-ends-with-a-slash", "--input={t}/page.html", "--output={t}/new/", match="is a directory"),
    _harvest("output-empty", "--input={t}/page.html", "--output=", match="--output= is empty"),
    _harvest("input-is-a-fifo", "--input={t}/pipe.html", *HARVEST_OUT, files={"pipe.html": FIFO},
             match="--input={t}/pipe.html is a FIFO"),
    _harvest("output-folder-missing", "--input={t}/page.html", "--output={t}/nothing/result.tsv",
             match="does not exist"),
    _harvest("output-folder-read-only", "--input={t}/page.html", "--output={ro}/result.tsv"),
    _harvest("output-folder-unwritable", "--input={t}/page.html", "--output=/proc/capjax_result.tsv"),
    _harvest("output-folder-chmod", "--input={t}/page.html", "--output={t}/locked/result.tsv",
             files={"locked/.keep": b""}, chmod={"locked": 0o500}),
    case(HARVEST, "earlier-output-kept-on-error", "--input={t}/none/*.html", "--output={t}/candidates.tsv"),
    _harvest("max-alt-chars-zero", "--input={t}/page.html", *HARVEST_OUT, "--max_alt_chars=0",
             match="max_alt_chars"),
    _harvest("max-alt-chars-negative", "--input={t}/page.html", *HARVEST_OUT, "--max_alt_chars=-10",
             match="max_alt_chars"),
    _harvest("max-record-bytes-zero", "--input={t}/page.html", *HARVEST_OUT, "--max_record_bytes=0",
             match="max_record_bytes"),
    *not_flags(HARVEST, "--input={t}/page.html", *HARVEST_OUT),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
