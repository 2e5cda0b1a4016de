"""`python -m capjax.erg.generate` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink

GENERATE = "capjax.erg.generate"

# Every case stops before training, loading or generating: the flags' values are checked first.

PAIRS = {"pairs.jsonl": b'{"phrase": "in love", "caption": "a dog runs on the grass"}\n'}


def _generate(name: str, *args: str, match: str = "", **kw):
  return case(GENERATE, name, *args, absent=("g",), match=match, **kw)


CASES = [
    _generate("learning-rate-zero", "--train", "--output={t}/g", "--learning_rate=0",
              match="--learning_rate=0.0 is impossible — set --learning_rate to more than 0"),
    _generate("learning-rate-nan", "--train", "--output={t}/g", "--learning_rate=nan", match="--learning_rate=nan"),
    _generate("learning-rate-negative", "--train", "--output={t}/g", "--learning_rate=-0.1", match="learning_rate"),
    _generate("epochs-zero", "--train", "--output={t}/g", "--epochs=0", match="epochs"),
    _generate("num-train-zero", "--train", "--output={t}/g", "--num_train=0", match="num_train"),
    _generate("train-without-output", "--train", match="--output"),
    _generate("output-is-a-file", "--train", "--output={t}/alt.tsv", match="--output"),
    _generate("top-p-zero", "--generator={t}/folder", "--input={t}/pairs.jsonl", "--top_p=0", files=PAIRS,
              match="--top_p=0.0 is impossible"),
    _generate("top-p-above-one", "--generator={t}/folder", "--input={t}/pairs.jsonl", "--top_p=1.5", files=PAIRS,
              match="--top_p"),
    _generate("top-p-nan", "--generator={t}/folder", "--input={t}/pairs.jsonl", "--top_p=nan", files=PAIRS,
              match="--top_p=nan"),
    _generate("beam-size-zero", "--generator={t}/folder", "--input={t}/pairs.jsonl", "--beam_size=0", files=PAIRS,
              match="beam_size"),
    _generate("generate-without-input", "--generator={t}/folder", match="--input"),
    _generate("generator-not-a-generator", "--generator={t}/folder", "--input={t}/pairs.jsonl", files=PAIRS,
              match="--generator="),
    *not_flags(GENERATE, "--train", "--output={t}/g"),
]

# Its files: every case stops before a model loads or a dataset is read, the paths are checked first.

GEN = "--generator={t}/folder"  # no generator there: a case that got as far as loading it would say so
PAIRS_TSV = {"pairs.tsv": b"in love\ta dog runs on the grass\n"}
CASES += [
    case(GENERATE, "input-missing", GEN, "--input={t}/missing.tsv", match="missing.tsv does not exist"),
    case(GENERATE, "input-is-a-folder", GEN, "--input={t}/folder", match="is a directory"),
    case(GENERATE, "input-is-a-fifo", GEN, "--input={t}/pipe.tsv", files={"pipe.tsv": FIFO},
         match="--input={t}/pipe.tsv is a FIFO"),
    case(GENERATE, "input-is-a-device", GEN, "--input={t}/null.tsv", files={"null.tsv": NULL_DEVICE},
         match="is a character device"),
    case(GENERATE, "input-utf16", GEN, "--input={t}/u.tsv", files={"u.tsv": "in love\ta dog\n".encode("utf-16")},
         match="is UTF-16, not UTF-8"),
    case(GENERATE, "output-is-the-input", GEN, "--input={t}/pairs.tsv", "--output={t}/pairs.tsv", files=PAIRS_TSV,
         match="--output={t}/pairs.tsv would overwrite --input={t}/pairs.tsv"),
    case(GENERATE, "output-links-to-the-input", GEN, "--input={t}/pairs.tsv", "--output={t}/link.jsonl",
         files=PAIRS_TSV | {"link.jsonl": symlink("pairs.tsv")}, match="would overwrite --input="),
    case(GENERATE, "output-is-a-device", GEN, "--input={t}/pairs.tsv", "--output={t}/null.jsonl",
         files=PAIRS_TSV | {"null.jsonl": NULL_DEVICE}, match="is a character device"),
    case(GENERATE, "output-ends-with-a-slash", GEN, "--input={t}/pairs.tsv", "--output={t}/new/", files=PAIRS_TSV,
         match="is a directory"),
    case(GENERATE, "output-empty", GEN, "--input={t}/pairs.tsv", "--output=", files=PAIRS_TSV, match="is empty"),
    case(GENERATE, "generator-not-trained", GEN, "--input={t}/pairs.tsv", files=PAIRS_TSV, match="--generator="),
    case(GENERATE, "generator-missing", "--generator={t}/missing", "--input={t}/pairs.tsv", files=PAIRS_TSV,
         match="missing/generator.json is missing", absent=("missing",)),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
