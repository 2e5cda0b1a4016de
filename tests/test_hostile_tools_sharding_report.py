"""`python -m capjax.tools.sharding_report` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import case, not_flags, runner

SHARDING_REPORT = "capjax.tools.sharding_report"

SHAPES = "--config={r}/configs/t2t.py:shapes"
CASES = [
    case(SHARDING_REPORT, "no-config", match="--config"),
    case(SHARDING_REPORT, "config-missing", "--config={t}/missing.py", match="missing.py"),
    case(SHARDING_REPORT, "config-mesh-has-a-free-axis", SHAPES, match="has a -1"),
    case(SHARDING_REPORT, "mesh-not-axis-equals-size", SHAPES, "--mesh=data4", match="is not axis=size"),
    case(SHARDING_REPORT, "mesh-unknown-axis", SHAPES, "--mesh=pipeline=2", match="pipeline=2"),
    case(SHARDING_REPORT, "mesh-size-zero", SHAPES, "--mesh=data=0", match="not a positive size"),
    # issue 40 (D20): str.isdigit takes "²", which int() refuses
    case(SHARDING_REPORT, "mesh-size-a-superscript-digit", SHAPES, "--mesh=data=\u00b2",
         match="data=\u00b2 is not a positive size"),
    case(SHARDING_REPORT, "vocab-size-zero", SHAPES, "--mesh=data=1", "--vocab_size=0", match="vocab_size"),
    case(SHARDING_REPORT, "vocab-size-beyond-int32", SHAPES, "--mesh=data=1", "--vocab_size=3000000000",
         match="--vocab_size=3000000000: a vocabulary of 3,000,000,000 words"),
    case(SHARDING_REPORT, "top-negative", SHAPES, "--mesh=data=1", "--top=-1", match="top"),
    case(SHARDING_REPORT, "config-field-impossible", "--config={r}/configs/t2t.py:shapes,batch=0", "--mesh=data=1",
         match="batch_size"),
    *not_flags(SHARDING_REPORT, SHAPES, "--mesh=data=1"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
