"""`python -m capjax.export` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import case, not_flags, runner

EXPORT = "capjax.export"
SHAPES = "--config={r}/configs/t2t.py:shapes,debug"
VOCAB = b"<PAD>\n<BOS>\n<EOS>\n<UNK>\nsquare\ncircle\n"
# A run's files without a checkpoint that restores: its vocabulary and an orbax step folder of garbage.
DAMAGED_RUN = {"w/config.json": b"{}", "w/vocab.txt": VOCAB,
               "w/checkpoints/3/_CHECKPOINT_METADATA": b'{"init_timestamp_nsecs": 1}',
               "w/checkpoints/3/state/_METADATA": b"\0\0 not JSON",
               "w/checkpoints/3/state/manifest.ocdbt": b"\0" * 64}

CASES = [
    case(EXPORT, "no-workdir", "--output={t}/e", match="--workdir", absent=("e",)),
    case(EXPORT, "no-output", "--workdir={t}/folder", match="--output"),
    case(EXPORT, "output-empty", "--workdir={t}/folder", "--output=", match="--output"),
    case(EXPORT, "workdir-missing", "--workdir={t}/nothing", "--output={t}/e", match="not a directory",
         absent=("e",)),
    case(EXPORT, "workdir-is-a-file", "--workdir={t}/alt.tsv", "--output={t}/e", match="alt.tsv", absent=("e",)),
    case(EXPORT, "workdir-of-no-run", "--workdir={t}/folder", "--output={t}/e", match="no config.json",
         absent=("e",)),
    case(EXPORT, "workdir-config-damaged", "--workdir={t}/w", "--output={t}/e", files={"w/config.json": b'{"cut'},
         match="damaged", absent=("e",)),
    case(EXPORT, "workdir-without-vocabulary", "--workdir={t}/folder", "--output={t}/e", SHAPES, match="train first",
         absent=("e",)),
    case(EXPORT, "workdir-without-checkpoint", "--workdir={t}/w", "--output={t}/e", SHAPES,
         files={"w/config.json": b"{}", "w/vocab.txt": VOCAB}, match="no checkpoint", absent=("e",)),
    case(EXPORT, "checkpoint-damaged", "--workdir={t}/w", "--output={t}/e", SHAPES, files=DAMAGED_RUN,
         match="cannot be restored", absent=("e",)),
    case(EXPORT, "step-not-saved", "--workdir={t}/w", "--output={t}/e", SHAPES, "--step=7", files=DAMAGED_RUN,
         match="no checkpoint 7", absent=("e",)),
    case(EXPORT, "output-exists", "--workdir={t}/folder", "--output={t}/images", match="--overwrite"),
    case(EXPORT, "overwrite-what-is-no-export", "--workdir={t}/folder", "--output={t}/images", "--overwrite",
         match="not an export"),
    case(EXPORT, "overwrite-a-file", "--workdir={t}/folder", "--output={t}/alt.tsv", "--overwrite",
         match="not an export"),
    case(EXPORT, "output-under-a-file", "--workdir={t}/folder", "--output={t}/alt.tsv/e", match="under a file"),
    case(EXPORT, "output-read-only", "--workdir={t}/folder", "--output={ro}/e", match="cannot be written"),
    case(EXPORT, "step-negative", "--workdir={t}/folder", "--output={t}/e", "--step=-1", match="step"),
    case(EXPORT, "step-not-a-number", "--workdir={t}/folder", "--output={t}/e", "--step=best", match="step"),
    case(EXPORT, "config-missing", "--workdir={t}/folder", "--output={t}/e", "--config={t}/missing.py",
         match="missing.py", absent=("e",)),
    case(EXPORT, "feature-model-without-weights", "--workdir={t}/w", "--output={t}/e",
         "--config={r}/configs/t2t.py:8x8", files={"w/config.json": b"{}", "w/vocab.txt": VOCAB},
         match="--weights", absent=("e",)),
    case(EXPORT, "weights-missing", "--workdir={t}/w", "--output={t}/e", "--config={r}/configs/t2t.py:8x8",
         "--weights={t}/nothing", files={"w/config.json": b"{}", "w/vocab.txt": VOCAB}, match="nothing",
         absent=("e",)),
    *not_flags(EXPORT, "--workdir={t}/folder", "--output={t}/e"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
