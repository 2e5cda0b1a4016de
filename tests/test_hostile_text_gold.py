"""`python -m capjax.text.gold` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, case, not_flags, runner
from hostile.inputs import GOLD_HEADER

GOLD = "capjax.text.gold"

CASES = [
    case(GOLD, "gold-missing", "--gold={t}/missing.tsv", match="missing.tsv"),
    case(GOLD, "gold-is-a-folder", "--gold={t}/folder", match="folder"),
    case(GOLD, "gold-chmod", "--gold={t}/gold.tsv", chmod={"gold.tsv": 0o200}),
    case(GOLD, "gold-not-utf8", "--gold={t}/bad.tsv", files={"bad.tsv": GOLD_HEADER + b"g\tc\tx\tcaf\xe9\tcafe\t\n"}),
    case(GOLD, "gold-random-bytes", "--gold={t}/random.bin"),
    case(GOLD, "gold-is-a-fifo", "--gold={t}/pipe.tsv", files={"pipe.tsv": FIFO},
         match="--gold={t}/pipe.tsv is a FIFO"),
    case(GOLD, "gold-utf16", "--gold={t}/u.tsv", files={"u.tsv": (GOLD_HEADER + b"g1\tc\tanimals\tA dog.\tdog\t\n")
                                                            .decode().encode("utf-16")}, match="is UTF-16"),
    case(GOLD, "gold-empty", "--gold={t}/empty.txt", match="no gold rows"),
    case(GOLD, "gold-header-only", "--gold={t}/bad.tsv", files={"bad.tsv": GOLD_HEADER}, match="no gold rows"),
    case(GOLD, "gold-wrong-header", "--gold={t}/captions.tsv", match="header"),
    case(GOLD, "gold-short-row", "--gold={t}/bad.tsv", files={"bad.tsv": GOLD_HEADER + b"g1\tcapjax\tanimals\n"},
         match="line 2"),
    case(GOLD, "category-unknown", "--gold={t}/gold.tsv", "--category=planets", match="planets"),
    *not_flags(GOLD),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
