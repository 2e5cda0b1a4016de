"""`python -m capjax.recaption` against bad input (tests/hostile/harness.py runs the cases): nothing is decoded and
nothing written (no journal, no settings sidecar, no TFDS copy) when the workdir, the dataset, the split or the output
is wrong."""

from __future__ import annotations

from hostile.harness import FIFO, REPO, case, not_flags, runner

RECAPTION = "capjax.recaption"
OUT = "--output={t}/new.jsonl"
NOTHING = ("new.jsonl", "new.jsonl.settings.json", "new_tfds")
TINY = "--dataset=synthetic_scenes/tiny:test"


def _trained_look() -> dict[str, bytes]:
  """What recaption checks in a workdir before it restores anything (as crossdomain's cases): vocab.txt, the tiny
  shapes run's config.json, a checkpoint folder."""
  from capjax import config_util
  config = config_util.load(f"{REPO}/configs/t2t.py:shapes,debug")
  config.dataset.builder_config = "tiny"
  return {"w/vocab.txt": b"<pad>\n<bos>\n<eos>\n<unk>\na\n", "w/config.json": config.to_json_best_effort().encode(),
          "w/checkpoints/2/_CHECKPOINT_METADATA": b"{}"}


def _case(name: str, *args: str, match: str = "", files: dict | None = None, **kw):
  return case(RECAPTION, name, *args, absent=NOTHING, match=match, files=_trained_look() | (files or {}), **kw)


CASES = [
    *not_flags(RECAPTION, "--workdir={t}/w", TINY, OUT),
    _case("no-workdir", TINY, OUT, match="--workdir"),
    _case("workdir-missing", "--workdir={t}/none", TINY, OUT, match="{t}/none does not exist"),
    _case("workdir-never-trained", "--workdir={t}/folder", TINY, OUT, match="has no vocab.txt"),
    case(RECAPTION, "workdir-without-a-checkpoint", "--workdir={t}/w", TINY, "--data_dir={d}", OUT,
         files={k: v for k, v in _trained_look().items() if "checkpoints" not in k}, absent=NOTHING,
         match="has no checkpoint in"),
    _case("dataset-without-split", "--workdir={t}/w", "--dataset=synthetic_scenes/tiny", OUT, match="names no split"),
    _case("split-spec-not-a-slice", "--workdir={t}/w", "--dataset=synthetic_scenes/tiny:test[abc]", OUT,
          match="not a TFDS split or slice"),
    _case("two-splits", "--workdir={t}/w", "--dataset=synthetic_scenes/tiny:test+validation", OUT,
          match="not one split"),
    _case("unknown-dataset", "--workdir={t}/w", "--dataset=no_such_set:test", OUT, match="unknown dataset"),
    _case("dataset-not-built", "--workdir={t}/w", "--dataset=karpathy/flickr30k:test", "--data_dir={d}", OUT,
          match="is not built in {d}"),
    _case("split-not-in-dataset", "--workdir={t}/w", "--dataset=synthetic_scenes/tiny:nope", "--data_dir={d}", OUT,
          match="split 'nope' is not in"),
    _case("slice-past-the-split", "--workdir={t}/w", "--dataset=synthetic_scenes/tiny:test[:100000]",
          "--data_dir={d}", OUT, match="does not fit"),
    _case("output-is-a-fifo", "--workdir={t}/w", TINY, "--data_dir={d}", "--output={t}/pipe.jsonl",
          files={"pipe.jsonl": FIFO}, match="FIFO"),
    _case("output-is-a-folder", "--workdir={t}/w", TINY, "--data_dir={d}", "--output={t}/folder",
          match="is a directory"),
    _case("output-inside-the-dataset", "--workdir={t}/w", TINY, "--data_dir={d}",
          "--output={d}/synthetic_scenes/tiny/captions.jsonl", match="inside the dataset's own folder"),
    _case("output-is-the-workdir-config", "--workdir={t}/w", TINY, "--data_dir={d}", "--output={t}/w/vocab.txt",
          match="is inside --workdir={t}/w, which the command reads"),
    _case("output-is-another-file", "--workdir={t}/w", TINY, "--data_dir={d}", "--output={t}/out.jsonl",
          match="has no out.jsonl.settings.json"),
    _case("format-unknown", "--workdir={t}/w", TINY, OUT, "--format=csv", match="--format"),
    _case("batch-size-negative", "--workdir={t}/w", TINY, OUT, "--batch_size=-8", match="batch_size"),
    _case("distributed-unknown", "--workdir={t}/w", TINY, OUT, "--distributed=maybe", match="distributed"),
    _case("distributed-on-without-a-cluster", "--workdir={t}/w", TINY, OUT, "--distributed=on",
          match="--distributed=on but no cluster was detected"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
