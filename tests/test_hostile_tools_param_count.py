"""`python -m capjax.tools.param_count` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import REPO, case, not_flags, runner

PARAM_COUNT = "capjax.tools.param_count"

CASES = [
    case(PARAM_COUNT, "no-config", match="--config"),
    case(PARAM_COUNT, "config-missing", "--config={t}/missing.py", match="missing.py"),
    case(PARAM_COUNT, "config-is-a-folder", "--config={t}/folder", match="folder"),
    case(PARAM_COUNT, "config-syntax-error", "--config={t}/broken.py", files={"broken.py": b"def get_config(:\n"},
         match="broken.py"),
    case(PARAM_COUNT, "config-without-get_config", "--config={t}/noget.py", files={"noget.py": b"X = 1\n"},
         match="get_config"),
    case(PARAM_COUNT, "misspelled-variant", "--config={r}/configs/rnn.py:1x2", match="1x2"),
    case(PARAM_COUNT, "second-config-missing", "--config={r}/configs/t2t.py:shapes", "--config={t}/missing.py",
         match="missing.py"),
    case(PARAM_COUNT, "variant-value-not-a-number", "--config={r}/configs/t2t.py:batch=big", match="batch"),
    case(PARAM_COUNT, "config-that-does-not-fit", "--config={t}/mixed.py",
         files={"mixed.py": b"from capjax import config_util\n\n\ndef get_config(arg=None):\n"
                            b"  c = config_util.load('" + str(REPO / "configs/t2t.py").encode() + b":shapes')\n"
                            b"  c.model.encoder.name = 'features'\n  return c\n"},
         match="dataset.features"),
    case(PARAM_COUNT, "vocab-size-zero", "--config={r}/configs/t2t.py:shapes", "--vocab_size=0", match="vocab_size"),
    case(PARAM_COUNT, "vocab-size-negative", "--config={r}/configs/t2t.py:shapes", "--vocab_size=-5",
         match="vocab_size"),
    case(PARAM_COUNT, "vocab-size-not-a-number", "--config={r}/configs/t2t.py:shapes", "--vocab_size=10k",
         match="vocab_size"),
    case(PARAM_COUNT, "vocab-size-beyond-int32", "--config={r}/configs/t2t.py:shapes", "--vocab_size=3000000000",
         match="does not fit int32 token ids"),
    *not_flags(PARAM_COUNT, "--config={r}/configs/t2t.py:shapes"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
