"""`python -m capjax.text_models.style_phrases` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner
from hostile.inputs import UTF16

STYLE_PHRASES = "capjax.text_models.style_phrases"


def _style_phrases(name: str, *args: str, match: str = "", **kw):
  return case(STYLE_PHRASES, name, *args, absent=("o.jsonl",), match=match, **kw)


OUT = "--output={t}/o.jsonl"
CASES = [
    _style_phrases("no-model", OUT, match="--model"),
    _style_phrases("no-output", "--model={t}/folder", match="--output"),
    _style_phrases("model-missing", "--model={t}/nothing", OUT, match="is not a style classifier"),
    _style_phrases("model-is-a-folder", "--model={t}/folder", OUT, match="is not a style classifier"),
    _style_phrases("model-is-plain-bert", "--model={a}/bert", OUT, match="no style_classifier.json"),
    _style_phrases("sentences-without-style", "--model={a}/bert", "--sentences={t}/alt.tsv", OUT,
                   match="go together"),
    _style_phrases("style-unknown", "--model={a}/bert", "--sentences={t}/alt.tsv", "--style=sarcastic", OUT,
                   match="unknown style 'sarcastic'"),
    _style_phrases("sentences-empty-file", "--model={a}/bert", "--sentences={t}/empty.txt", "--style=romantic", OUT,
                   match="has no sentences"),
    _style_phrases("sentences-empty-line", "--model={a}/bert", "--sentences={t}/gap.txt", "--style=romantic", OUT,
                   files={"gap.txt": b"a dog in love\n\na cat\n"}, match="line 2 is empty"),
    _style_phrases("sentences-latin1", "--model={a}/bert", "--sentences={t}/latin1.tsv", "--style=romantic", OUT,
                   match="UTF-8"),
    _style_phrases("sentences-missing", "--model={a}/bert", "--sentences={t}/missing.txt", "--style=romantic", OUT,
                   match="missing.txt"),
    _style_phrases("epsilon-one", "--model={a}/bert", "--epsilon=1", OUT, match="between 0 and 1"),
    _style_phrases("epsilon-nan", "--model={a}/bert", "--epsilon=nan", OUT, match="--epsilon=nan is not a finite"),
    _style_phrases("output-is-a-folder", "--model={a}/bert", "--output={t}/folder", match="is a directory"),
    _style_phrases("output-is-the-sentences", "--model={a}/bert", "--sentences={t}/alt.tsv", "--style=romantic",
                   "--output={t}/alt.tsv", match="--output={t}/alt.tsv would overwrite --sentences="),
    _style_phrases("html-is-the-sentences", "--model={a}/bert", "--sentences={t}/alt.tsv", "--style=romantic", OUT,
                   "--html={t}/alt.tsv", match="--html={t}/alt.tsv would overwrite --sentences="),
    _style_phrases("html-is-the-output", "--model={a}/bert", OUT, "--html={t}/o.jsonl",
                   match="--html={t}/o.jsonl would overwrite --output="),
    _style_phrases("output-is-a-fifo", "--model={a}/bert", "--output={t}/pipe", files={"pipe": FIFO},
                   match="is a FIFO"),
    _style_phrases("html-is-a-device", "--model={a}/bert", OUT, "--html={t}/null.html",
                   files={"null.html": NULL_DEVICE}, match="--html={t}/null.html is a character device"),
    _style_phrases("sentences-is-a-fifo", "--model={a}/bert", "--sentences={t}/pipe.txt", "--style=romantic", OUT,
                   files={"pipe.txt": FIFO}, match="is a FIFO"),
    _style_phrases("sentences-utf16", "--model={a}/bert", "--sentences={t}/u.txt", "--style=romantic", OUT,
                   files={"u.txt": UTF16}, match="is UTF-16"),
    _style_phrases("output-read-only", "--model={a}/bert", "--output={ro}/o.jsonl", match="--output"),
    *not_flags(STYLE_PHRASES, "--model={a}/bert", OUT),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
