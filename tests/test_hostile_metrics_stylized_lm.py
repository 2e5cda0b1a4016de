"""`python -m capjax.metrics.stylized_lm` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink
from hostile.inputs import UTF16

STYLE_LM = "capjax.metrics.stylized_lm"


def _style_lm(name: str, *args: str, **kw):
  return case(STYLE_LM, name, *args, absent=("out/lm.json", "lm.json.tmp"), **kw)


CASES = [
    _style_lm("no-flags", match="missing"),
    _style_lm("no-output", "--sentences={t}/alt.tsv", match="--output"),
    _style_lm("sentences-missing", "--sentences={t}/missing.txt", "--output={t}/out/lm.json", match="missing.txt"),
    _style_lm("sentences-is-a-folder", "--sentences={t}/folder", "--output={t}/out/lm.json", match="folder"),
    _style_lm("sentences-chmod", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", chmod={"alt.tsv": 0o200}),
    _style_lm("sentences-empty", "--sentences={t}/empty.txt", "--output={t}/out/lm.json", match="no sentence"),
    _style_lm("sentences-blank-lines", "--sentences={t}/blank.txt", "--output={t}/out/lm.json",
              files={"blank.txt": b"\n \n\t\n"}, match="no sentence"),
    _style_lm("sentences-random-bytes", "--sentences={t}/random.bin", "--output={t}/out/lm.json", match="UTF-8"),
    _style_lm("sentences-latin1", "--sentences={t}/latin1.tsv", "--output={t}/out/lm.json", match="line 1"),
    _style_lm("discount-zero", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=0",
              match="--discount"),
    _style_lm("discount-above-one", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=1.5",
              match="--discount"),
    _style_lm("discount-not-a-number", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=high",
              match="discount"),
    _style_lm("discount-nan", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=nan",
              match="--discount=nan is not a finite number"),
    _style_lm("output-is-a-folder", "--sentences={t}/alt.tsv", "--output={t}/folder", match="directory"),
    _style_lm("output-is-the-sentences", "--sentences={t}/alt.tsv", "--output={t}/alt.tsv",
              match="would overwrite --sentences="),
    _style_lm("output-links-to-the-sentences", "--sentences={t}/alt.tsv", "--output={t}/link.json",
              files={"link.json": symlink("alt.tsv")}, match="would overwrite --sentences="),
    _style_lm("output-is-a-device", "--sentences={t}/alt.tsv", "--output={t}/null", files={"null": NULL_DEVICE},
              match="is a character device"),
    _style_lm("output-is-a-fifo", "--sentences={t}/alt.tsv", "--output={t}/pipe", files={"pipe": FIFO},
              match="is a FIFO"),
    _style_lm("output-ends-with-a-slash", "--sentences={t}/alt.tsv", "--output={t}/out/", match="is a directory"),
    _style_lm("output-empty", "--sentences={t}/alt.tsv", "--output=", match="--output= is empty"),
    _style_lm("sentences-is-a-fifo", "--sentences={t}/pipe.txt", "--output={t}/out/lm.json",
              files={"pipe.txt": FIFO}, match="--sentences={t}/pipe.txt is a FIFO"),
    _style_lm("sentences-utf16", "--sentences={t}/u.txt", "--output={t}/out/lm.json", files={"u.txt": UTF16},
              match="is UTF-16"),
    _style_lm("output-under-a-file", "--sentences={t}/alt.tsv", "--output={t}/empty.txt/lm.json", match="a file"),
    _style_lm("output-read-only", "--sentences={t}/alt.tsv", "--output={ro}/lm.json", match="--output"),
    _style_lm("output-folder-chmod", "--sentences={t}/alt.tsv", "--output={t}/locked/lm.json",
              files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--output"),
    *not_flags(STYLE_LM, "--sentences={t}/alt.tsv", "--output={t}/out/lm.json"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
