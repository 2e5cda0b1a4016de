"""`python -m capjax.text_models.embed` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink
from hostile.inputs import UTF16

EMBED = "capjax.text_models.embed"

LINES = "--input={t}/alt.tsv"  # two sentences (with a tab: any text is a sentence)
EMBED_OUT = "--output={t}/features.npz"  # an earlier output, which a failed run must leave as it was


def _embed(name: str, *args: str, match: str = "", **kw):
  return case(EMBED, name, *args, absent=("embeddings.npz",), match=match, **kw)


CASES = [
    _embed("no-weights", LINES, EMBED_OUT, match="--weights"),
    _embed("no-input", "--weights={a}/bert", EMBED_OUT, match="--input"),
    _embed("no-output", "--weights={a}/bert", LINES, match="--output"),
    _embed("weights-missing", "--weights={t}/nothing", LINES, EMBED_OUT, match="config.json is missing"),
    _embed("weights-gpt2", "--weights={a}/gpt2", LINES, EMBED_OUT, match="holds a gpt2 model"),
    _embed("weights-not-converted", "--weights={r}/tests/fixtures/text_models/bert", LINES, EMBED_OUT,
           match="does not hold the parameters"),
    _embed("weights-config-edited", "--weights={a}/bert_edited", LINES, EMBED_OUT, match="does not hold"),
    _embed("input-missing", "--weights={a}/bert", "--input={t}/missing.txt", EMBED_OUT, match="missing.txt"),
    _embed("input-is-a-folder", "--weights={a}/bert", "--input={t}/folder", EMBED_OUT, match="folder"),
    _embed("input-empty-file", "--weights={a}/bert", "--input={t}/empty.txt", EMBED_OUT, match="has no lines"),
    _embed("input-empty-line", "--weights={a}/bert", "--input={t}/gap.txt", EMBED_OUT,
           files={"gap.txt": b"a dog\n\na cat\n"}, match="line 2 is empty"),
    _embed("input-blank-line", "--weights={a}/bert", "--input={t}/gap.txt", EMBED_OUT,
           files={"gap.txt": b"a dog\n  \t\n"}, match="line 2 is blank"),
    _embed("input-latin1", "--weights={a}/bert", "--input={t}/latin1.tsv", EMBED_OUT, match="UTF-8"),
    _embed("input-random-bytes", "--weights={a}/bert", "--input={t}/random.bin", EMBED_OUT, match="random.bin"),
    _embed("output-is-a-folder", "--weights={a}/bert", LINES, "--output={t}/folder", match="is a directory"),
    _embed("output-is-the-input", "--weights={a}/bert", LINES, "--output={t}/alt.tsv",
           match="would overwrite --input="),
    _embed("output-links-to-the-input", "--weights={a}/bert", LINES, "--output={t}/link.npz",
           files={"link.npz": symlink("alt.tsv")}, match="would overwrite --input="),
    _embed("output-is-a-device", "--weights={a}/bert", LINES, "--output={t}/null.npz", files={"null.npz": NULL_DEVICE},
           match="is a character device"),
    _embed("output-ends-with-a-slash", "--weights={a}/bert", LINES, "--output={t}/new/", match="is a directory"),
    _embed("input-is-a-fifo", "--weights={a}/bert", "--input={t}/pipe.txt", EMBED_OUT, files={"pipe.txt": FIFO},
           match="--input={t}/pipe.txt is a FIFO"),
    _embed("input-utf16", "--weights={a}/bert", "--input={t}/u.txt", EMBED_OUT, files={"u.txt": UTF16},
           match="is UTF-16"),
    _embed("output-read-only", "--weights={a}/bert", LINES, "--output={ro}/e.npz", match="--output"),
    _embed("output-chmod", "--weights={a}/bert", LINES, "--output={t}/locked/e.npz", files={"locked/.keep": b""},
           chmod={"locked": 0o500}, match="--output"),
    *not_flags(EMBED, "--weights={a}/bert", LINES, EMBED_OUT),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
