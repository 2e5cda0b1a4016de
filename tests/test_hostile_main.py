"""`python -m capjax.main` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, REPO, case, not_flags, runner, symlink
from hostile.inputs import TRAIN_SHARD, png

MAIN = "capjax.main"

CONFIG = "--config={r}/configs/t2t.py:shapes,debug"
SCST = ("--config={r}/configs/t2t.py:shapes,debug,scst", "--config.init_from={t}/mle")
TINY = ("--config.dataset.builder_config=tiny", "--config.dataset.data_dir={d}")


def train(name: str, *args: str, **kw):
  """`--mode=train` in {t}/w: a start that stops at bad input leaves only config.json there (the config it was
  given, which the next start overwrites until the run has written a vocabulary or a checkpoint)."""
  return case(MAIN, name, *args, "--workdir={t}/w", leaves=("w/config.json",), **kw)


def _other_run(d_model: int = 64) -> bytes:
  """config.json of a run of the `CONFIG` with another model width."""
  from capjax import config_util
  config = config_util.load(f"{REPO}/configs/t2t.py:shapes,debug")
  config.dataset.builder_config = "tiny"
  config.model.d_model = d_model
  return config.to_json_best_effort().encode()


def _mle_run(d_model: int) -> dict[str, bytes]:
  """An `--config.init_from` folder: what SCST checks of a trained MLE run (config.json, vocab.txt)."""
  return {"mle/config.json": _other_run(d_model), "mle/vocab.txt": b"<pad>\n<s>\n</s>\n<unk>\na\n"}

def _pretrained_run(d_model: int) -> dict[str, bytes]:
  """An `--config.init_from` folder for a fine-tune, without checkpoints: a run's config.json and vocab.txt."""
  return {"pre/config.json": _other_run(d_model), "pre/vocab.txt": b"<pad>\n<s>\n</s>\n<unk>\na\n"}

# Two workdirs' vocabularies (all a check needs of a run) that differ at id 5.
_TWO_VOCABULARIES = {"a/vocab.txt": b"<PAD>\n<BOS>\n<EOS>\n<UNK>\na\nsquare\n",
                     "b/vocab.txt": b"<PAD>\n<BOS>\n<EOS>\n<UNK>\na\ncircle\n"}

CASES = [
    case(MAIN, "no-config", "--workdir={t}/w", match="missing --config"),
    case(MAIN, "config-file-missing", "--config={t}/missing.py", match="not found"),
    case(MAIN, "config-is-a-folder", "--config={t}/folder"),
    case(MAIN, "config-not-python", "--config={t}/alt.tsv"),
    case(MAIN, "config-syntax-error", "--config={t}/broken.py", files={"broken.py": b"def get_config(:\n"}),
    case(MAIN, "config-without-get_config", "--config={t}/noget.py", files={"noget.py": b"X = 1\n"},
         match="get_config"),
    case(MAIN, "misspelled-variant", "--config={r}/configs/t2t.py:shapez", match="unknown config variant 'shapez'"),
    case(MAIN, "two-grid-variants", "--config={r}/configs/t2t.py:8x8,1x1"),
    case(MAIN, "unknown-variant-value", "--config={r}/configs/t2t.py:stepz=3", match="stepz"),
    case(MAIN, "variant-value-not-a-number", "--config={r}/configs/t2t.py:shapes,steps=many", match="steps"),
    case(MAIN, "unknown-field", CONFIG, "--config.batch_sise=3", match="did you mean batch_size"),
    case(MAIN, "unknown-nested-field", CONFIG, "--config.model.d_modle=3", match="--config.model.d_modle"),
    case(MAIN, "field-of-wrong-type", CONFIG, "--config.batch_size=lots", match="batch_size"),
    case(MAIN, "mode-unknown", CONFIG, "--mode=fly", "--workdir={t}/w", match="--mode"),
    case(MAIN, "step-negative", CONFIG, "--mode=eval", "--step=-1", "--workdir={t}/w", match="step"),
    case(MAIN, "step-not-a-number", CONFIG, "--mode=eval", "--step=last", "--workdir={t}/w", match="step"),
    case(MAIN, "distributed-unknown", CONFIG, "--distributed=maybe", "--workdir={t}/w", match="distributed"),
    case(MAIN, "caption-without-images", CONFIG, "--mode=caption", "--workdir={t}/w", match="--images"),
    case(MAIN, "caption-images-match-nothing", CONFIG, *TINY, "--mode=caption", "--images={t}/none/*.png",
         "--workdir={t}/w", match="--images"),
    case(MAIN, "eval-untrained-workdir", CONFIG, *TINY, "--mode=eval", "--workdir={t}/folder", match="train first"),
    case(MAIN, "eval-workdir-missing", CONFIG, *TINY, "--mode=eval", "--workdir={t}/nothing", absent=("nothing",)),
    case(MAIN, "eval-workdir-is-a-file", CONFIG, *TINY, "--mode=eval", "--workdir={t}/alt.tsv"),
    case(MAIN, "caption-untrained-workdir", CONFIG, *TINY, "--mode=caption", "--images={t}/images/*.png",
         "--workdir={t}/folder"),
    case(MAIN, "caption-images-include-a-fifo", CONFIG, *TINY, "--mode=caption", "--images={t}/pics/*",
         "--workdir={t}/folder", files={"pics/a.png": png(), "pics/b.png": FIFO},
         match="--images={t}/pics/b.png is a FIFO"),
    case(MAIN, "train-workdir-read-only", CONFIG, *TINY, "--workdir={ro}/w", match="--workdir"),
    case(MAIN, "train-workdir-is-a-file", CONFIG, *TINY, "--workdir={t}/alt.tsv", match="--workdir"),
    case(MAIN, "train-workdir-chmod", CONFIG, *TINY, "--workdir={t}/locked/w", files={"locked/.keep": b""},
         chmod={"locked": 0o500}, match="--workdir"),
    train("workdir-of-another-run", CONFIG, *TINY, files={"w/config.json": _other_run(), "w/vocab.txt": b"<pad>\n"},
          match="holds a run of another config (model.d_model: 64 → 32)"),
    train("data-dir-read-only", CONFIG, "--config.dataset.data_dir={ro}/tfds", match="data_dir"),
    train("data-dir-is-a-file", CONFIG, "--config.dataset.data_dir={t}/alt.tsv", match="alt.tsv"),
    train("data-dir-chmod", CONFIG, "--config.dataset.data_dir={t}/locked/tfds", files={"locked/.keep": b""},
          chmod={"locked": 0o500}, match="data_dir"),
    train("batch-size-not-divisible", "--config={r}/configs/t2t.py", "--config.dataset.data_dir={t}/folder",
          match="batch_size"),
    train("batch-size-zero", CONFIG, *TINY, "--config.batch_size=0", match="batch_size"),
    train("d-model-zero", CONFIG, *TINY, "--config.model.d_model=0", match="d_model"),
    train("log-every-zero", CONFIG, *TINY, "--config.log_every=0", match="log_every"),
    train("eval-every-zero", CONFIG, *TINY, "--config.eval_every=0", match="eval_every"),
    train("checkpoint-every-zero", CONFIG, *TINY, "--config.checkpoint_every=0", match="checkpoint_every"),
    train("steps-negative", CONFIG, *TINY, "--config.num_train_steps=-1", match="num_train_steps"),
    train("learning-rate-negative", CONFIG, *TINY, "--config.optimizer.learning_rate=-1", match="learning_rate"),
    train("learning-rate-zero", CONFIG, *TINY, "--config.optimizer.learning_rate=0.0", match="learning_rate"),
    train("learning-rate-nan", CONFIG, *TINY, "--config.optimizer.learning_rate=nan",
          match="optimizer.learning_rate=nan is not a finite number"),
    train("learning-rate-infinite", CONFIG, *TINY, "--config.optimizer.learning_rate=inf",
          match="optimizer.learning_rate=inf is not a finite number"),
    train("dropout-nan", CONFIG, *TINY, "--config.model.dropout_rate=nan", match="dropout_rate=nan"),
    train("caption-tokens-beyond-memory", CONFIG, *TINY, "--config.max_caption_tokens=100000",
          match="max_caption_tokens=100000 needs more memory than the run has"),
    train("dataset-name-empty", CONFIG, *TINY, "--config.dataset.name=", match="dataset.name is empty"),
    train("eval-split-empty-slice", CONFIG, *TINY, "--config.dataset.eval_split=validation[:0]",
          match="split 'validation[:0]' of synthetic_scenes holds no examples"),
    train("test-split-empty-slice", CONFIG, *TINY, "--config.dataset.test_split=test[5:5]",
          match="split 'test[5:5]' of synthetic_scenes holds no examples"),
    case(MAIN, "distributed-on-without-a-cluster", CONFIG, *TINY, "--distributed=on", "--workdir={t}/w",
         match="--distributed=on but no cluster was detected"),
    train("min-count-negative", CONFIG, *TINY, "--config.vocab.min_count=-1", match="min_count"),
    train("caption-tokens-zero", CONFIG, *TINY, "--config.max_caption_tokens=0", match="max_caption_tokens"),
    train("keep-checkpoints-zero", CONFIG, *TINY, "--config.keep_checkpoints=0", match="keep_checkpoints"),
    train("dropout-one", CONFIG, *TINY, "--config.model.dropout_rate=1.0", match="dropout_rate"),
    train("heads-do-not-divide", CONFIG, *TINY, "--config.model.num_heads=3", match="num_heads"),
    train("dataset-not-built", "--config={r}/configs/t2t.py", "--config.batch_size=24",
          "--config.dataset.data_dir={t}/folder", match="capjax.data.build --dataset=cc3m"),
    train("dataset-unknown", CONFIG, "--config.dataset.name=cc4m", "--config.dataset.data_dir={t}/folder",
          match="cc4m"),
    train("train-split-unknown", CONFIG, *TINY, "--config.dataset.train_split=dev", match="dev"),
    train("train-split-beyond-the-data", CONFIG, *TINY, "--config.dataset.train_split=train[10000:]",
          match="split 'train[10000:]' does not fit synthetic_scenes's train split of 512 examples"),
    train("eval-split-beyond-the-data", CONFIG, *TINY, "--config.dataset.eval_split=validation[:10000]",
          match="split 'validation[:10000]' does not fit"),
    train("test-split-holds-no-example", CONFIG, "--config.dataset.builder_config=tiny",
          "--config.dataset.data_dir={dd:test-split-emptied}", "--config.dataset.test_split=test",
          match="holds no example — choose another split (it has ['test', 'train', 'validation'])"),
    train("dataset-shard-cut", CONFIG, "--config.dataset.builder_config=tiny",
          "--config.dataset.data_dir={dd:shard-cut}",
          match=f"{TRAIN_SHARD} holds 0 records, not the 512 of dataset_info.json: truncated or damaged — build it "
                "again: `python -m capjax.data.build --dataset=synthetic_scenes/tiny"),
    train("dataset-info-cut", CONFIG, "--config.dataset.builder_config=tiny", "--config.dataset.data_dir={dd:info-cut}",
          match="dataset_info.json is not JSON"),
    train("dataset-features-garbled", CONFIG, "--config.dataset.builder_config=tiny",
          "--config.dataset.data_dir={dd:features-garbled}", match="features.json is not JSON"),
    train("feature-variant-features-garbled", CONFIG, "--config.dataset.builder_config=tiny",
          "--config.dataset.data_dir={dd:variant-features-garbled}", "--config.model.encoder.name=features",
          "--config.dataset.features=irv2", match="features.json is not JSON: truncated or damaged — remove "),
    train("dataset-name-escapes", CONFIG, *TINY, "--config.dataset.name=../tfds/synthetic_scenes",
          match="holds a path separator"),
    train("builder-config-escapes", CONFIG, "--config.dataset.builder_config=../../x", "--config.dataset.data_dir={d}",
          match="dataset.builder_config='../../x' holds a path separator"),
    train("builder-config-unknown", CONFIG, "--config.dataset.builder_config=huge", "--config.dataset.data_dir={d}",
          match="huge"),
    case(MAIN, "encoder-and-features-mismatch", CONFIG, *TINY, "--config.model.encoder.name=features",
         "--workdir={t}/w", match="dataset.features"),
    train("feature-variant-not-extracted", CONFIG, *TINY, "--config.model.encoder.name=features",
          "--config.dataset.features=irv2", match="extract_tfds_features"),
    train("scst-top-p-above-one", *SCST, *TINY, "--config.scst.top_p=1.5", files=_mle_run(32),
          match="--config.scst.top_p=1.5 is impossible — set --config.scst.top_p in (0, 1]"),
    train("scst-top-p-zero", *SCST, *TINY, "--config.scst.top_p=0.0", files=_mle_run(32),
          match="--config.scst.top_p=0.0 is impossible"),
    train("scst-no-samples", *SCST, *TINY, "--config.scst.num_samples=0", files=_mle_run(32),
          match="--config.scst.num_samples=0 is impossible"),
    train("scst-baseline-unknown", *SCST, *TINY, "--config.scst.baseline=best", files=_mle_run(32),
          match="scst.baseline='best' is not a baseline"),
    train("scst-without-init-from", "--config={r}/configs/t2t.py:shapes,debug,scst", *TINY,
          match="give its workdir with --config.init_from=WORKDIR"),
    train("scst-init-from-untrained", *SCST, *TINY, files={"mle/.keep": b""}, match="holds no trained model"),
    train("scst-init-from-another-model", *SCST, *TINY, files=_mle_run(64),
          match="holds a run of another model or vocabulary (model.d_model: 64 there, 32 here)"),
    case(MAIN, "finetune-init-from-without-checkpoint", CONFIG, *TINY, "--config.init_from={t}/pre", "--workdir={t}/w",
         files=_pretrained_run(32), match="--config.init_from={t}/pre has no checkpoint — train it first"),
    case(MAIN, "finetune-init-from-another-model", CONFIG, *TINY, "--config.init_from={t}/pre", "--workdir={t}/w",
         files={**_pretrained_run(64), "pre/checkpoints/3/x": b""},
         match="--config.init_from={t}/pre holds a model of another architecture (model.d_model: 64 there, 32 here)"),
    case(MAIN, "finetune-init-step-not-kept", CONFIG, *TINY, "--config.init_from={t}/pre", "--config.init_step=7",
         "--workdir={t}/w", files={**_pretrained_run(32), "pre/checkpoints/3/x": b""},
         match="--config.init_step=7: {t}/pre has checkpoints of steps 3 — pick one of them"),
    case(MAIN, "finetune-freeze-unknown", CONFIG, *TINY, "--config.freeze=decoder", "--workdir={t}/w",
         match="--config.freeze=decoder is not a part to freeze"),
    train("ema-decay-one", CONFIG, *TINY, "--config.optimizer.ema_decay=1.0",
          match="optimizer.ema_decay=1.0 is impossible — set --config.optimizer.ema_decay in [0, 1)"),
    train("ema-decay-negative", CONFIG, *TINY, "--config.optimizer.ema_decay=-0.5", match="ema_decay=-0.5"),
    train("ema-decay-nan", CONFIG, *TINY, "--config.optimizer.ema_decay=nan", match="ema_decay=nan is not a finite"),
    case(MAIN, "ensemble-in-training", CONFIG, *TINY, "--ensemble={t}/folder", "--workdir={t}/w",
         match="--ensemble decodes with several trained workdirs: it is for --mode=eval and --mode=caption"),
    case(MAIN, "ensemble-names-an-empty-workdir", CONFIG, *TINY, "--mode=eval", "--ensemble={t}/a,,{t}/b",
         "--workdir={t}/a", files=_TWO_VOCABULARIES, match="names an empty workdir"),
    case(MAIN, "ensemble-of-another-vocabulary", CONFIG, *TINY, "--mode=eval", "--ensemble={t}/b", "--workdir={t}/a",
         files=_TWO_VOCABULARIES,
         match="--ensemble={t}/b has another vocabulary than --workdir={t}/a (id 5 is 'square' there and 'circle' "
               "here) — ensemble models trained on the same captions"),
    case(MAIN, "caption-ensemble-of-another-vocabulary", CONFIG, *TINY, "--mode=caption", "--images={t}/images/*.png",
         "--ensemble={t}/b", "--workdir={t}/a", files=_TWO_VOCABULARIES, match="has another vocabulary"),
    case(MAIN, "ensemble-names-the-workdir", CONFIG, *TINY, "--mode=eval", "--ensemble={t}/a/.", "--workdir={t}/a",
         files=_TWO_VOCABULARIES, match="--ensemble's {t}/a/. is the same workdir as --workdir={t}/a — name each "
                                        "workdir once: drop it from --ensemble (the mixture would count its model "
                                        "twice)"),
    case(MAIN, "ensemble-names-a-member-twice", CONFIG, *TINY, "--mode=caption", "--images={t}/images/*.png",
         "--ensemble={t}/a,{t}/c", "--workdir={t}/b", files={**_TWO_VOCABULARIES, "c": symlink("a")},
         match="--ensemble's {t}/c is the same workdir as --ensemble's {t}/a — name each workdir once"),
    train("decode-method-sample", CONFIG, *TINY, "--config.decode.method=sample",
          match="--config.decode.method='sample' is not a search evaluation decodes with — set it to greedy or beam"),
    case(MAIN, "eval-decode-method-sample", CONFIG, *TINY, "--mode=eval", "--config.decode.method=sample",
         "--workdir={t}/a", files=_TWO_VOCABULARIES, match="--config.decode.method='sample' is not a search"),
    case(MAIN, "ensemble-untrained-workdir", CONFIG, *TINY, "--mode=eval", "--ensemble={t}/folder", "--workdir={t}/a",
         files=_TWO_VOCABULARIES, match="folder has no vocab.txt, so it holds no trained model"),
    *not_flags(MAIN, CONFIG, "--workdir={t}/w"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
