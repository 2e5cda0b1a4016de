"""`python -m capjax.crossdomain` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import REPO, case, not_flags, runner

CROSSDOMAIN = "capjax.crossdomain"


def _trained_look() -> dict[str, bytes]:
  """What the matrix checks in a workdir before it restores anything: vocab.txt, config.json (the tiny shapes run's),
  a checkpoint folder; enough to reach the test sets."""
  from capjax import config_util
  config = config_util.load(f"{REPO}/configs/t2t.py:shapes,debug")
  config.dataset.builder_config = "tiny"
  return {"w/vocab.txt": b"<pad>\n<bos>\n<eos>\n<unk>\na\n", "w/config.json": config.to_json_best_effort().encode(),
          "w/checkpoints/2/_CHECKPOINT_METADATA": b"{}"}


MATRIX_OUT = "--output={t}/matrix"
MATRIX_TEST = "--test=synthetic_scenes/tiny:test"


def _matrix(name: str, *args: str, match: str = "", **kw):
  return case(CROSSDOMAIN, name, *args, absent=("matrix",), match=match, **kw)


CASES = [
    *not_flags(CROSSDOMAIN, "--workdirs={t}/w", MATRIX_TEST, MATRIX_OUT),
    _matrix("no-workdirs", MATRIX_TEST, MATRIX_OUT, match="missing --workdirs"),
    _matrix("no-test", "--workdirs={t}/w", MATRIX_OUT, match="missing --test"),
    _matrix("workdir-missing", "--workdirs={t}/none", MATRIX_TEST, MATRIX_OUT, match="{t}/none does not exist"),
    _matrix("workdir-is-a-file", "--workdirs={t}/alt.tsv", MATRIX_TEST, MATRIX_OUT, match="is a file"),
    _matrix("workdir-never-trained", "--workdirs={t}/folder", MATRIX_TEST, MATRIX_OUT, match="has no vocab.txt"),
    _matrix("workdir-without-a-checkpoint", "--workdirs={t}/w", MATRIX_TEST, MATRIX_OUT,
            files={k: v for k, v in _trained_look().items() if "checkpoints" not in k}, match="has no checkpoint in"),
    _matrix("workdir-config-damaged", "--workdirs={t}/w", MATRIX_TEST, MATRIX_OUT,
            files=_trained_look() | {"w/config.json": b'{"model": '}, match="config.json is damaged"),
    _matrix("test-set-without-split", "--workdirs={t}/w", "--test=karpathy/coco", MATRIX_OUT, files=_trained_look(),
            match="names no split"),
    _matrix("unknown-dataset", "--workdirs={t}/w", "--test=no_such_set:test", MATRIX_OUT, files=_trained_look(),
            match="unknown dataset 'no_such_set'"),
    _matrix("unknown-dataset-config", "--workdirs={t}/w", "--test=karpathy/coco2017:test", MATRIX_OUT,
            files=_trained_look(), match="karpathy has no config 'coco2017'"),
    _matrix("test-set-not-built", "--workdirs={t}/w", "--test=karpathy/flickr30k:test", "--data_dir={d}", MATRIX_OUT,
            files=_trained_look(), match="is not built in {d}"),
    _matrix("test-split-not-in-dataset", "--workdirs={t}/w", "--test=synthetic_scenes/tiny:nope", "--data_dir={d}",
            MATRIX_OUT, files=_trained_look(), match="split 'nope' is not in synthetic_scenes"),
    _matrix("output-is-a-file", "--workdirs={t}/w", MATRIX_TEST, "--output={t}/alt.tsv", files=_trained_look(),
            match="is a file"),
    _matrix("data-dir-is-a-file", "--workdirs={t}/w", MATRIX_TEST, "--data_dir={t}/alt.tsv", MATRIX_OUT,
            files=_trained_look(), match="is not a directory"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
