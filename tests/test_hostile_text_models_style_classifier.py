"""`python -m capjax.text_models.style_classifier` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, case, not_flags, runner
from hostile.inputs import UTF16

STYLE_CLS = "capjax.text_models.style_classifier"

# Every case stops before training or loading a model: the inputs are checked first, and nothing is written.


def _style_cls(name: str, *args: str, match: str = "", **kw):
  return case(STYLE_CLS, name, *args, absent=("m",), match=match, **kw)


ROM = "romantic={t}/alt.tsv"
CASES = [
    _style_cls("no-output", match="--output"),
    _style_cls("train-unknown-style", "--train=sarcastic={t}/alt.tsv,factual={t}/alt.tsv", "--output={t}/m",
               match="unknown style 'sarcastic'"),
    _style_cls("train-not-a-pair", "--train=romantic", "--output={t}/m", match="is not STYLE=FILE"),
    _style_cls("train-one-class", f"--train={ROM}", "--output={t}/m", match="at least two"),
    _style_cls("train-file-missing", "--train=romantic={t}/missing.txt,factual={t}/alt.tsv", "--output={t}/m",
               match="missing.txt"),
    _style_cls("train-file-empty", "--train=romantic={t}/empty.txt,factual={t}/alt.tsv", "--output={t}/m",
               match="no romantic sentences"),
    _style_cls("train-file-latin1", "--train=romantic={t}/latin1.tsv,factual={t}/alt.tsv", "--output={t}/m",
               match="not UTF-8"),
    _style_cls("train-file-random-bytes", "--train=romantic={t}/random.bin,factual={t}/alt.tsv", "--output={t}/m",
               match="random.bin"),
    _style_cls("train-file-is-a-folder", "--train=romantic={t}/folder,factual={t}/alt.tsv", "--output={t}/m",
               match="is a directory"),
    _style_cls("train-file-is-a-fifo", "--train=romantic={t}/pipe.txt,factual={t}/alt.tsv", "--output={t}/m",
               files={"pipe.txt": FIFO}, match="--train=romantic={t}/pipe.txt is a FIFO"),
    _style_cls("train-file-utf16", "--train=romantic={t}/u.txt,factual={t}/alt.tsv", "--output={t}/m",
               files={"u.txt": UTF16}, match="is UTF-16"),
    _style_cls("init-missing", f"--train={ROM},factual={{t}}/alt.tsv", "--init={t}/nothing", "--output={t}/m",
               match="config.json is missing"),
    _style_cls("init-gpt2", f"--train={ROM},factual={{t}}/alt.tsv", "--init={a}/gpt2", "--output={t}/m",
               match="holds a gpt2 model"),
    case(STYLE_CLS, "output-is-the-init", f"--train={ROM},factual={{t}}/alt.tsv", "--init={a}/bert",
         "--output={a}/bert", match="--output={a}/bert would overwrite --init={a}/bert"),
    _style_cls("epochs-zero", "--epochs=0", "--output={t}/m", match="epochs"),
    _style_cls("train-style-twice", f"--train={ROM},romantic={{t}}/captions.tsv,factual={{t}}/gold.tsv",
               "--output={t}/m", match="--train names romantic twice"),
    _style_cls("learning-rate-zero", "--learning_rate=0", "--output={t}/m", match="--learning_rate=0.0 is impossible"),
    _style_cls("learning-rate-nan", "--learning_rate=nan", "--output={t}/m", match="--learning_rate=nan"),
    case(STYLE_CLS, "output-is-a-file", f"--train={ROM},factual={{t}}/captions.tsv", "--output={t}/alt.tsv",
         match="--output={t}/alt.tsv is a file, not a directory"),
    *not_flags(STYLE_CLS, "--output={t}/m"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
