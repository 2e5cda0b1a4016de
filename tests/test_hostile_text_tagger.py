"""`python -m capjax.text.tagger` against bad input (tests/hostile/harness.py runs the cases). It reads no file and
has no flag of its own (it scores NLTK's tagger on NLTK's corpora), so a bad flag and a stray argument are all it can
be given; both are refused before NLTK's data is read."""

from __future__ import annotations

from hostile.harness import not_flags, runner

TAGGER = "capjax.text.tagger"

CASES = [
    *not_flags(TAGGER),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
