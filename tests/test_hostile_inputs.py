"""Every command against bad input (issue 13): each case gives one command a hostile argument, file or folder,
and checks what a user sees and what is left on disk.

For every case: exit status 2; exactly one line on stderr, `error: <what is wrong> — <what to do>`; no traceback;
every file that was there before (inputs, earlier outputs, the shared assets and built dataset it names) has the
same bytes after, no new file appeared, and no half-written output where the case names one (`absent`).

Cases run in this process (`main(argv)` of each command, `SystemExit` caught) so that hundreds of them take a minute;
capjax.main's config flag reads `sys.argv`, which is set to the same argv. A few subprocess cases check the real
exit status and that `--verbose` adds the traceback.

Besides bytes, a case's files may be `FIFO`, `NULL_DEVICE` (a character device node with /dev/null's numbers, made
in the case's folder: no case touches the real /dev), or `symlink(target)` / `hard_link(target)` to another file
of the folder. A case with a FIFO runs under an alarm, so that a read that blocks fails the case instead of hanging.

Placeholders in the arguments: {t} the case's own folder (the files of `BASE_FILES` plus the case's), {a} shared
assets (weight files and folders), {d} a built synthetic_scenes/tiny data dir, {dd:NAME} a copy of it in the case's
folder damaged as `DAMAGED[NAME]` says, {r} the repository, {ro} a folder
that cannot be created, even by root (under /proc). Permission cases (chmod) run only where modes bind: root
reads and writes through any mode (as root, run them under `setpriv --bounding-set=-dac_override,-dac_read_search`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import os
import pathlib
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from PIL import Image

from capjax import distributed
from capjax.metrics.stylized_lm import StyleLanguageModel

REPO = pathlib.Path(__file__).resolve().parent.parent
READ_ONLY = "/proc/capjax_ro"  # /proc takes no new entries: what a read-only mount is, for root as for anyone
# What capjax and jax take for a cluster: capjax's variables, and those of jax's Open MPI and Kubernetes detection.
CLUSTER_ENV = (*distributed.CLUSTER_ENV, "OMPI_MCA_orte_hnp_uri", "KUBERNETES_SERVICE_HOST")


def _modes_bind() -> bool:
  """Whether a folder's mode stops this process writing in it (not for root, nor with CAP_DAC_OVERRIDE)."""
  with tempfile.TemporaryDirectory() as folder:
    os.chmod(folder, 0o500)
    try:
      with open(os.path.join(folder, "probe"), "w"):
        return False
    except PermissionError:
      return True
    finally:
      os.chmod(folder, 0o700)


MODES_BIND = _modes_bind()

MAIN, BUILD, SHOW = "capjax.main", "capjax.data.build", "capjax.data.show"
PIPELINE, STATS, GOLD = "capjax.text.pipeline", "capjax.text.stats", "capjax.text.gold"
METRICS, HUMAN_EVAL, STYLE_LM = "capjax.metrics", "capjax.metrics.human_eval", "capjax.metrics.stylized_lm"
CONVERT, EXTRACT, EXTRACT_TFDS = "capjax.tools.convert_weights", "capjax.tools.extract_features", \
    "capjax.tools.extract_tfds_features"
HARVEST, PARAM_COUNT = "capjax.tools.harvest_alt_text", "capjax.tools.param_count"
EMBED = "capjax.text_models.embed"
STYLE_CLS, STYLE_PHRASES = "capjax.text_models.style_classifier", "capjax.text_models.style_phrases"
SHARDING_REPORT = "capjax.tools.sharding_report"
GENERATE, AUGMENT, DEMO = "capjax.erg.generate", "capjax.erg.augment", "capjax.erg.demo"
CROSSDOMAIN = "capjax.crossdomain"
COMMANDS = (MAIN, BUILD, SHOW, PIPELINE, STATS, GOLD, METRICS, HUMAN_EVAL, STYLE_LM, CONVERT, EXTRACT, EXTRACT_TFDS,
            HARVEST, PARAM_COUNT, SHARDING_REPORT, EMBED, STYLE_CLS, STYLE_PHRASES, GENERATE, AUGMENT, DEMO,
            CROSSDOMAIN)


def _png() -> bytes:
  buffer = io.BytesIO()
  Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), np.uint8)).save(buffer, format="PNG")
  return buffer.getvalue()


def _json(value) -> bytes:
  return json.dumps(value).encode()


REFS = {"images": [{"id": 1}, {"id": 2}],
        "annotations": [{"image_id": 1, "caption": "a dog runs"}, {"image_id": 2, "caption": "a cat sleeps"}]}
PREDS = [{"image_id": 1, "caption": "a dog"}, {"image_id": 2, "caption": "a cat"}]
GOLD_HEADER = b"id\tsource\tcategory\talt_text\texpected\tnote\n"
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000  # nested past Python's recursion limit

# Every case's folder starts with these: inputs that are fine, earlier outputs, and the usual suspects.
BASE_FILES: dict[str, bytes] = {
    "alt.tsv": b"1\tA brown dog runs on the grass in the park.\n2\tTwo cats sleep on a red sofa.\n",
    "out.jsonl": b'{"id": "0", "alt_text": "earlier", "kept": false, "reason": "empty", "caption": null, '
                 b'"concepts": []}\n',  # an earlier run's output, with its funnel
    "out.funnel.json": b'{"input": 1, "kept": 0}\n',
    "captions.tsv": b"a dog runs on the grass\thttp://example.org/1.jpg\nthe cat sleeps\thttp://example.org/2.jpg\n",
    "empty.txt": b"",
    "random.bin": np.random.default_rng(1).integers(0, 256, 512, np.uint8).tobytes(),
    "latin1.tsv": b"1\tcaf\xe9 cr\xe8me on a table\n",
    "folder/inner.txt": b"a file inside a folder\n",
    "refs.json": _json(REFS),
    "preds.json": _json(PREDS),
    "ratings.csv": b"image_id,rater,rating\n1,1,GOOD\n1,2,BAD\n1,3,GOOD\n",
    "page.html": b"<html><body><img src='http://example.org/a.jpg' alt='a dog on the grass'></body></html>",
    "candidates.tsv": b"url\tcaption\tpage_url\nhttp://example.org/old.jpg\tearlier output\thttp://example.org/\n",
    "features.npz": b"PK an earlier extraction's output",
    "images/a.png": _png(),
    "gold.tsv": GOLD_HEADER + b"g1\tcapjax\tanimals\tA dog runs on the grass.\tdog runs on the grass\t\n",
    "lm.json": _json(StyleLanguageModel.train(["a dog runs on the grass", "a cat sleeps"], style="romantic").to_json()),
}


@dataclasses.dataclass(frozen=True)
class Special:
  """A file of a case's folder that is not bytes: `kind` is "fifo", "device", "symlink" or "hard_link" (to
  `target`, a name in the folder)."""
  kind: str
  target: str = ""


FIFO, NULL_DEVICE = Special("fifo"), Special("device")
UTF16 = "1\tA brown dog runs on the grass.\n".encode("utf-16")           # with its byte-order mark
UTF16_NO_BOM = "1\tA brown dog runs on the grass.\n".encode("utf-16-le")


def symlink(target: str) -> Special:
  return Special("symlink", target)


def hard_link(target: str) -> Special:
  return Special("hard_link", target)


@dataclasses.dataclass(frozen=True)
class Case:
  command: str
  args: tuple[str, ...]
  files: tuple[tuple[str, bytes], ...] = ()  # extra files in {t}
  absent: tuple[str, ...] = ()               # outputs that must not exist afterwards
  match: str = ""                            # text the error line must contain
  chmod: tuple[tuple[str, int], ...] = ()    # modes set on paths under {t} before the run (not as root)
  leaves: tuple[str, ...] = ()               # files the case may add (bookkeeping of a library, not an output)


def case(command: str, name: str, *args: str, files: dict[str, bytes] | None = None, absent: tuple[str, ...] = (),
         match: str = "", chmod: dict[str, int] | None = None, leaves: tuple[str, ...] = (), xfail: str | None = None):
  marks = []
  if xfail:
    marks.append(pytest.mark.xfail(strict=True, reason=xfail))
  return pytest.param(Case(command, args, tuple((files or {}).items()), absent, match, tuple((chmod or {}).items()),
                           leaves), id=f"{command.rsplit('.', 1)[-1]}-{name}", marks=marks)


def not_flags(command: str, *required: str) -> list:
  """An unknown flag and a stray positional argument, each with the command's required flags."""
  return [case(command, "unknown-flag", *required, "--bogus=1", match="bogus"),
          case(command, "stray-argument", *required, "stray.txt", match="stray.txt")]


# --- damaged copies of the built dataset ({dd:NAME}) ----------------------------------------------------------------

TINY_DIR = "synthetic_scenes/tiny/1.0.0"
TRAIN_SHARD = "synthetic_scenes-train.array_record-00000-of-00001"


def _cut(path: pathlib.Path) -> None:
  """`path` cut to half its length, as a full disk or a killed copy leaves it."""
  path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _zero_inside(path: pathlib.Path) -> None:
  """100 kB in the middle of `path` zeroed: its footer, and so its record count, intact (what a cheap check misses)."""
  data = bytearray(path.read_bytes())
  middle = len(data) // 2
  data[middle:middle + 100_000] = bytes(100_000)
  path.write_bytes(bytes(data))


def _as_cc3m(root: pathlib.Path) -> None:
  """The dataset moved to where cc3m's build goes (a builder that needs manual files), its train shard cut."""
  (root / "cc3m/unlabeled").mkdir(parents=True)
  (root / TINY_DIR).rename(root / "cc3m/unlabeled/1.0.0")
  _cut(root / "cc3m/unlabeled/1.0.0" / TRAIN_SHARD)


def _as_variant(root: pathlib.Path) -> None:
  """The dataset moved to where its feature variant `irv2` goes, its features.json garbled (as a reader sees it:
  a variant has no builder code, so TFDS takes its features from that file)."""
  (root / "synthetic_scenes_irv2/tiny").mkdir(parents=True)
  (root / TINY_DIR).rename(root / "synthetic_scenes_irv2/tiny/1.0.0")
  (root / "synthetic_scenes_irv2/tiny/1.0.0/features.json").write_bytes(b"\x89\xff{garbled")


def _test_split_emptied(root: pathlib.Path) -> None:
  """The test split holds no example: its shard a whole ArrayRecord file of 0 records, as dataset_info.json says
  (a whole dataset with an empty split, not a damaged one)."""
  from array_record.python import array_record_module
  folder = root / TINY_DIR
  writer = array_record_module.ArrayRecordWriter(str(folder / "synthetic_scenes-test.array_record-00000-of-00001"),
                                                 "group_size:1")
  writer.close()
  info = json.loads((folder / "dataset_info.json").read_text())
  [test] = [split for split in info["splits"] if split["name"] == "test"]
  test["shardLengths"], test["numBytes"] = ["0"], "0"
  (folder / "dataset_info.json").write_text(json.dumps(info))


DAMAGED = {
    "shard-cut": lambda root: _cut(root / TINY_DIR / TRAIN_SHARD),
    "shard-zeroed-inside": lambda root: _zero_inside(root / TINY_DIR / TRAIN_SHARD),
    "info-cut": lambda root: _cut(root / TINY_DIR / "dataset_info.json"),
    "features-garbled": lambda root: (root / TINY_DIR / "features.json").write_bytes(b"\x89\xff{garbled"),
    "cc3m-shard-cut": _as_cc3m,
    "variant-features-garbled": _as_variant,
    "test-split-emptied": _test_split_emptied,
}

# --- capjax.main ---------------------------------------------------------------------------------------------------

CONFIG = "--config={r}/configs/t2t.py:shapes,debug"
TINY = ("--config.dataset.builder_config=tiny", "--config.dataset.data_dir={d}")


def train(name: str, *args: str, **kw):
  """`--mode=train` in {t}/w: a start that stops at bad input leaves only config.json there (the config it was
  given, which the next start overwrites until the run has written a vocabulary or a checkpoint)."""
  return case(MAIN, name, *args, "--workdir={t}/w", leaves=("w/config.json",), **kw)


def _other_run() -> bytes:
  """config.json of a run of the `CONFIG` with another model width."""
  from capjax import config_util
  config = config_util.load(f"{REPO}/configs/t2t.py:shapes,debug")
  config.dataset.builder_config = "tiny"
  config.model.d_model = 64
  return config.to_json_best_effort().encode()


MAIN_CASES = [
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
         "--workdir={t}/folder", files={"pics/a.png": _png(), "pics/b.png": FIFO},
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
    *not_flags(MAIN, CONFIG, "--workdir={t}/w"),
]

# --- capjax.data.build ---------------------------------------------------------------------------------------------

KARPATHY_JSON = {"images": [{"filename": "1.jpg", "imgid": 1, "split": "test",
                             "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"], "sentid": 1}]}]}
# (name, config, manual dir, its files, what the error line says): a manual dir the karpathy builder cannot build.
KARPATHY_BUILDS = [
    ("manual-dir-without-the-files", "flickr30k", "folder", {}, "dataset_flickr30k.json is missing"),
    ("json-not-json", "flickr30k", "kp", {"kp/dataset_flickr30k.json": b'{"images": [',
                                          "kp/flickr30k-images/1.jpg": b"x"}, "is not JSON"),
    ("json-is-coco-format", "flickr30k", "kp", {"kp/dataset_flickr30k.json": _json(REFS),
                                                "kp/flickr30k-images/1.jpg": b"x"}, "karpathy/coco_format"),
    ("coco-format-json-is-karpathys", "nocaps", "kp", {"kp/nocaps_val_4500_captions.json": _json(KARPATHY_JSON),
                                                       "kp/validation/1.jpg": b"x"}, "karpathy/coco, flickr30k"),
    ("json-entries-missing-keys", "flickr30k", "kp",
     {"kp/dataset_flickr30k.json": _json({"images": [{"filename": "1.jpg", "sentences": []}]}),
      "kp/flickr30k-images/1.jpg": b"x"}, "no example could be built"),
    ("image-folder-empty", "flickr30k", "kp", {"kp/dataset_flickr30k.json": _json(KARPATHY_JSON),
                                               "kp/flickr30k-images/.keep": b""}, "missing or empty"),
]

BUILD_CASES = [
    case(BUILD, "dataset-unknown", "--dataset=cc4m", "--data_dir={t}/new", match="cc4m", absent=("new",)),
    case(BUILD, "dataset-empty", "--dataset=", "--data_dir={t}/new", absent=("new",)),
    case(BUILD, "builder-config-unknown", "--dataset=synthetic_scenes/huge", "--data_dir={t}/new", match="huge",
         absent=("new",)),
    case(BUILD, "two-builder-configs", "--dataset=synthetic_scenes/tiny", "--config=default", "--data_dir={t}/new",
         absent=("new",)),
    case(BUILD, "data-dir-read-only", "--dataset=synthetic_scenes/tiny", "--data_dir={ro}/tfds", match="--data_dir"),
    case(BUILD, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--data_dir={t}/alt.tsv",
         match="--data_dir"),
    case(BUILD, "data-dir-chmod", "--dataset=synthetic_scenes/tiny", "--data_dir={t}/locked/tfds",
         files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--data_dir"),
    case(BUILD, "manual-dir-missing", "--dataset=cc3m", "--manual_dir={t}/nothing", "--data_dir={t}/new",
         match="--manual_dir", absent=("new",)),
    case(BUILD, "manual-dir-is-a-file", "--dataset=cc3m", "--manual_dir={t}/alt.tsv", "--data_dir={t}/new",
         match="--manual_dir", absent=("new",)),
    # TFDS records the builder config before it looks into the manual dir: bookkeeping, not an output.
    case(BUILD, "manual-dir-without-the-files", "--dataset=cc3m", "--manual_dir={t}/folder", "--data_dir={t}/new",
         match="Train_GCC-training.tsv", absent=("new/cc3m/unlabeled/1.0.0",),
         leaves=("new/cc3m/.config/metadata.json",)),
    *(case(BUILD, f"karpathy-{name}", f"--dataset=karpathy/{config}", f"--manual_dir={{t}}/{folder}",
           "--data_dir={t}/new", files=files, match=match, absent=(f"new/karpathy/{config}/1.0.0",),
           leaves=("new/karpathy/.config/metadata.json",))
      for name, config, folder, files, match in KARPATHY_BUILDS),
    case(BUILD, "set-on-a-builder-without-settings", "--dataset=synthetic_scenes", "--set=size=3",
         "--data_dir={t}/new", match="--set", absent=("new",)),
    case(BUILD, "set-unknown-key", "--dataset=alt_text_captions", "--set=colour=red", "--manual_dir={t}/folder",
         "--data_dir={t}/new", match="colour", absent=("new",)),
    case(BUILD, "set-without-equals", "--dataset=alt_text_captions", "--set=colour", "--manual_dir={t}/folder",
         "--data_dir={t}/new", absent=("new",)),
    case(BUILD, "damaged-dataset-without-its-manual-files", "--dataset=cc3m", "--data_dir={dd:cc3m-shard-cut}",
         match=f"{TRAIN_SHARD} holds 0 records"),
    case(BUILD, "config-escapes", "--dataset=synthetic_scenes/../../x", "--data_dir={t}/new", absent=("new",)),
    *not_flags(BUILD, "--dataset=synthetic_scenes/tiny", "--data_dir={t}/new"),
]

# --- capjax.text.pipeline ------------------------------------------------------------------------------------------

OUT = ("--output={t}/result.jsonl",)
NO_RESULT = ("result.jsonl", "result.funnel.json")
PIPELINE_CASES = [
    case(PIPELINE, "no-input", *OUT, match="--input", absent=NO_RESULT),
    case(PIPELINE, "no-output", "--input={t}/alt.tsv", match="--output"),
    case(PIPELINE, "input-missing", "--input={t}/missing.tsv", *OUT, match="missing.tsv", absent=NO_RESULT),
    case(PIPELINE, "input-is-a-folder", "--input={t}/folder", *OUT, match="folder", absent=NO_RESULT),
    case(PIPELINE, "input-chmod", "--input={t}/alt.tsv", *OUT, chmod={"alt.tsv": 0o200}, absent=NO_RESULT),
    case(PIPELINE, "output-is-the-input", "--input={t}/alt.tsv", "--output={t}/alt.tsv", match="overwrite"),
    case(PIPELINE, "output-is-the-input-by-another-path", "--input={t}/alt.tsv", "--output={t}/folder/../alt.tsv",
         match="overwrite"),
    case(PIPELINE, "output-links-to-the-input", "--input={t}/alt.tsv", "--output={t}/link.jsonl",
         files={"link.jsonl": symlink("alt.tsv")}, match="would overwrite --input="),
    case(PIPELINE, "output-is-a-hard-link-of-the-input", "--input={t}/alt.tsv", "--output={t}/same.jsonl",
         files={"same.jsonl": hard_link("alt.tsv")}, match="would overwrite --input="),
    case(PIPELINE, "output-is-a-device", "--input={t}/alt.tsv", "--output={t}/null", files={"null": NULL_DEVICE},
         match="is a character device, not a regular file", absent=("null.funnel.json",)),
    case(PIPELINE, "output-is-a-fifo", "--input={t}/alt.tsv", "--output={t}/pipe", files={"pipe": FIFO},
         match="is a FIFO", absent=("pipe.funnel.json",)),
    case(PIPELINE, "output-ends-with-a-slash", "--input={t}/alt.tsv", "--output={t}/new/", match="is a directory",
         absent=("new",)),
    case(PIPELINE, "output-empty", "--input={t}/alt.tsv", "--output=", match="--output= is empty"),
    case(PIPELINE, "output-is-the-root", "--input={t}/alt.tsv", "--output=/", match="--output=/ is a directory"),
    case(PIPELINE, "input-is-a-fifo", "--input={t}/pipe.tsv", *OUT, files={"pipe.tsv": FIFO}, match="is a FIFO",
         absent=NO_RESULT),
    case(PIPELINE, "input-is-a-device", "--input={t}/null.tsv", *OUT, files={"null.tsv": NULL_DEVICE},
         match="is a character device", absent=NO_RESULT),
    case(PIPELINE, "input-utf16", "--input={t}/u.tsv", *OUT, files={"u.tsv": UTF16}, absent=NO_RESULT,
         match="u.tsv is UTF-16, not UTF-8 — convert it with iconv -f UTF-16 -t UTF-8"),
    case(PIPELINE, "input-utf16-without-bom", "--input={t}/u.tsv", *OUT, files={"u.tsv": UTF16_NO_BOM},
         absent=NO_RESULT, match="is UTF-16, not UTF-8"),
    case(PIPELINE, "funnel-is-the-input", "--input={t}/out.funnel.json", "--output={t}/out.jsonl", match="overwrite"),
    case(PIPELINE, "output-is-a-folder", "--input={t}/alt.tsv", "--output={t}/folder", match="directory"),
    case(PIPELINE, "output-folder-missing", "--input={t}/alt.tsv", "--output={t}/nothing/result.jsonl",
         match="does not exist", absent=("nothing",)),
    case(PIPELINE, "output-folder-read-only", "--input={t}/alt.tsv", "--output={ro}/result.jsonl"),
    case(PIPELINE, "output-folder-unwritable", "--input={t}/alt.tsv", "--output=/proc/capjax_result.jsonl"),
    case(PIPELINE, "output-folder-chmod", "--input={t}/alt.tsv", "--output={t}/locked/result.jsonl",
         files={"locked/.keep": b""}, chmod={"locked": 0o500}),
    case(PIPELINE, "min-concept-count-negative", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--min_concept_count=-1", match="min_concept_count"),
    case(PIPELINE, "min-concept-count-not-a-number", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--min_concept_count=many", match="min_concept_count"),
    case(PIPELINE, "vocabulary-missing", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--vocabulary={t}/no.txt",
         match="--vocabulary"),
    case(PIPELINE, "vocabulary-is-a-folder", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--vocabulary={t}/folder", match="--vocabulary"),
    case(PIPELINE, "vocabulary-not-utf8", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--vocabulary={t}/latin1.tsv", match="line 1"),
    case(PIPELINE, "vocabulary-random-bytes", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--vocabulary={t}/random.bin", match="--vocabulary"),
    case(PIPELINE, "vocabulary-empty", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--vocabulary={t}/empty.txt",
         match="--vocabulary"),
    case(PIPELINE, "entities-missing", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--entities={t}/no.tsv",
         match="--entities"),
    case(PIPELINE, "entities-not-utf8", "--input={t}/alt.tsv", "--output={t}/out.jsonl", "--entities={t}/latin1.tsv",
         match="--entities"),
    case(PIPELINE, "entities-without-tabs", "--input={t}/alt.tsv", "--output={t}/out.jsonl",
         "--entities={t}/notabs.tsv", files={"notabs.tsv": b"Harrison Ford actor\nParis city\n"}, match="line 1"),
    *not_flags(PIPELINE, "--input={t}/alt.tsv", "--output={t}/out.jsonl"),
]

# --- capjax.data.show ----------------------------------------------------------------------------------------------

_TINY = ("--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=validation")
SHOW_CASES = [
    case(SHOW, "no-dataset", "--split=train", match="missing --dataset"),
    case(SHOW, "no-split", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", match="missing --split"),
    case(SHOW, "dataset-not-built", "--dataset=synthetic_scenes/tiny", "--split=train", "--data_dir={t}/folder",
         match="is not built in {t}/folder"),
    case(SHOW, "dataset-unknown", "--dataset=cc4m", "--split=train", "--data_dir={t}/folder",
         match="TFDS has no builder of that name"),
    case(SHOW, "dataset-path-out", "--dataset=../synthetic_scenes", "--split=train", "--data_dir={d}",
         match="starts with '.'"),
    case(SHOW, "config-unknown", "--dataset=synthetic_scenes/huge", "--split=train", "--data_dir={d}",
         match="huge"),
    case(SHOW, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--split=train", "--data_dir={t}/alt.tsv",
         match="--data_dir={t}/alt.tsv is a file"),
    case(SHOW, "split-unknown", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=dev",
         match="no split 'dev'"),
    case(SHOW, "dataset-shard-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-cut}", "--split=train",
         match=f"{TRAIN_SHARD} holds 0 records"),
    case(SHOW, "html-is-the-datasets-info", *_TINY, "--html={d}/synthetic_scenes/tiny/1.0.0/dataset_info.json",
         match="would overwrite --data_dir="),
    case(SHOW, "html-is-a-device", *_TINY, "--html={t}/null.html", files={"null.html": NULL_DEVICE},
         match="null.html is a character device"),
    case(SHOW, "html-is-a-folder", *_TINY, "--html={t}/folder", match="is a directory"),
    case(SHOW, "html-is-its-own-sheet", *_TINY, "--html={t}/page.png", match="its own contact sheet"),
    case(SHOW, "sheet-is-a-device", *_TINY, "--html={t}/page.html", files={"page.png": NULL_DEVICE},
         match="page.png is a character device"),
    case(SHOW, "refs-is-the-html", *_TINY, "--html={t}/page.html", "--refs={t}/page.html",
         match="would overwrite --html="),
    case(SHOW, "refs-in-a-missing-folder", *_TINY, "--refs={t}/nowhere/refs.json", match="does not exist"),
    case(SHOW, "num-zero", *_TINY, "--html={t}/page.html", "--num=0", match="--num"),
    case(SHOW, "num-negative", *_TINY, "--html={t}/page.html", "--num=-3", match="--num"),
    case(SHOW, "num-not-a-number", *_TINY, "--num=all", match="--num"),
    *not_flags(SHOW, *_TINY),
]

# --- capjax.text.stats ---------------------------------------------------------------------------------------------

STATS_CASES = [
    case(STATS, "no-file", match="FILE"),
    case(STATS, "two-files", "{t}/captions.tsv", "{t}/alt.tsv"),
    case(STATS, "file-missing", "{t}/missing.tsv", match="missing.tsv"),
    case(STATS, "file-is-a-folder", "{t}/folder", match="folder"),
    case(STATS, "file-chmod", "{t}/captions.tsv", chmod={"captions.tsv": 0o200}),
    case(STATS, "file-is-a-fifo", "{t}/pipe.tsv", files={"pipe.tsv": FIFO}, match="pipe.tsv is a FIFO"),
    case(STATS, "file-is-a-device", "{t}/null.tsv", files={"null.tsv": NULL_DEVICE},
         match="null.tsv is a character device"),
    case(STATS, "tsv-utf16", "{t}/u.tsv", files={"u.tsv": UTF16}, match="u.tsv is UTF-16"),
    case(STATS, "jsonl-utf16-without-bom", "{t}/u.jsonl",
         files={"u.jsonl": '{"kept": true, "caption": "a dog"}\n'.encode("utf-16-le")}, match="u.jsonl is UTF-16"),
    case(STATS, "tsv-not-utf8", "{t}/latin1.tsv", "--column=1", match="line 1"),
    case(STATS, "tsv-random-bytes", "{t}/random.bin", match="UTF-8"),
    case(STATS, "jsonl-not-utf8", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": "caf\xe9"}\n'},
         match="line 1"),
    case(STATS, "jsonl-not-json", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": "a"}\nnope\n'},
         match="line 2"),
    case(STATS, "jsonl-truncated", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "capt'}, match="line 1"),
    case(STATS, "jsonl-array-line", "{t}/bad.jsonl", files={"bad.jsonl": b"[1, 2]\n"}, match="JSON object"),
    case(STATS, "jsonl-caption-not-text", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": 5}\n'},
         match="caption"),
    case(STATS, "jsonl-nested-deep", "{t}/bad.jsonl", files={"bad.jsonl": b'{"kept": true, "caption": "a"}\n'
                                                                           + DEEP_JSON + b"\n"},
         match="line 2 is nested deeper than the JSON parser follows"),
    case(STATS, "column-missing-in-a-row", "{t}/ragged.tsv", "--column=1",
         files={"ragged.tsv": b"a dog\turl\nno url here\n"}, match="line 2"),
    case(STATS, "column-beyond-every-row", "{t}/captions.tsv", "--column=7", match="column 7"),
    case(STATS, "column-negative", "{t}/captions.tsv", "--column=-1", match="column"),
    case(STATS, "column-not-a-number", "{t}/captions.tsv", "--column=first", match="column"),
    case(STATS, "tokenizer-unknown", "{t}/captions.tsv", "--tokenizer=spacy", match="tokenizer"),
    case(STATS, "file-and-dataset", "{t}/captions.tsv", "--dataset=synthetic_scenes/tiny", "--data_dir={d}"),
    case(STATS, "dataset-unknown", "--dataset=cc4m", "--data_dir={t}/folder", match="cc4m"),
    case(STATS, "dataset-not-built", "--dataset=synthetic_scenes/tiny", "--data_dir={t}/folder",
         match="capjax.data.build"),
    case(STATS, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--data_dir={t}/alt.tsv"),
    case(STATS, "split-unknown", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--split=dev", match="dev"),
    case(STATS, "field-unknown", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--field=alt", match="alt"),
    case(STATS, "dataset-shard-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-cut}", "--split=train",
         match=f"{TRAIN_SHARD} holds 0 records, not the 512 of dataset_info.json: truncated or damaged — build it "
               "again: `python -m capjax.data.build --dataset=synthetic_scenes/tiny"),
    case(STATS, "dataset-shard-zeroed-inside", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-zeroed-inside}",
         "--split=train", match="so a build would reuse it) and build it again: `python -m capjax.data.build"),
    case(STATS, "dataset-info-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:info-cut}",
         match="dataset_info.json is not JSON"),
    case(STATS, "dataset-features-garbled", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:features-garbled}",
         match="features.json is not JSON"),
    case(STATS, "field-is-the-image", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--field=image",
         match="'image' is Image, not text — use --field with one of its text fields: background, captions"),
    case(STATS, "field-is-the-objects", "--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--field=objects",
         match="'objects' is Sequence, not text"),
    case(STATS, "dataset-name-escapes", "--dataset=../tfds", "--data_dir={d}",
         match="the dataset name '..' starts with '.' (a path out of the data dir)"),
    case(STATS, "dataset-config-escapes", "--dataset=synthetic_scenes/../../x", "--data_dir={d}",
         match="the builder config '../../x' holds a path separator"),
    case(STATS, "dataset-config-empty", "--dataset=synthetic_scenes/", "--data_dir={d}", match="is empty"),
    case(STATS, "unknown-flag", "{t}/captions.tsv", "--bogus=1", match="bogus"),
]

# --- capjax.text.gold ----------------------------------------------------------------------------------------------

GOLD_CASES = [
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

# --- capjax.metrics ------------------------------------------------------------------------------------------------


def _metrics(name: str, refs: object = REFS, preds: object = PREDS, *flags: str, match: str = "",
             raw_refs: bytes | None = None, raw_preds: bytes | None = None):
  files = {"r.json": raw_refs if raw_refs is not None else _json(refs),
           "p.json": raw_preds if raw_preds is not None else _json(preds)}
  return case(METRICS, name, "{t}/r.json", "{t}/p.json", "--notokenize", *flags, files=files, match=match)


METRICS_CASES = [
    case(METRICS, "no-files", match="two files"),
    case(METRICS, "one-file", "{t}/refs.json", match="two files"),
    case(METRICS, "three-files", "{t}/refs.json", "{t}/preds.json", "{t}/preds.json", match="two files"),
    case(METRICS, "refs-missing", "{t}/missing.json", "{t}/preds.json", match="missing.json"),
    case(METRICS, "preds-missing", "{t}/refs.json", "{t}/missing.json", match="missing.json"),
    case(METRICS, "refs-is-a-folder", "{t}/folder", "{t}/preds.json", match="folder"),
    case(METRICS, "refs-chmod", "{t}/refs.json", "{t}/preds.json", chmod={"refs.json": 0o200}),
    case(METRICS, "refs-is-a-fifo", "{t}/pipe.json", "{t}/preds.json", files={"pipe.json": FIFO},
         match="pipe.json is a FIFO"),
    case(METRICS, "preds-is-a-device", "{t}/refs.json", "{t}/null.json", files={"null.json": NULL_DEVICE},
         match="null.json is a character device"),
    case(METRICS, "lm-is-a-fifo", "{t}/refs.json", "{t}/preds.json", "--style=romantic", "--lm={t}/pipe.json",
         files={"pipe.json": FIFO}, match="pipe.json is a FIFO"),
    case(METRICS, "refs-empty-file", "{t}/empty.txt", "{t}/preds.json", match="not JSON"),
    case(METRICS, "refs-random-bytes", "{t}/random.bin", "{t}/preds.json", match="random.bin"),
    case(METRICS, "preds-tsv", "{t}/refs.json", "{t}/captions.tsv", match="not JSON"),
    _metrics("refs-truncated", raw_refs=_json(REFS)[:30], match="not JSON"),
    _metrics("refs-not-utf8", raw_refs=b'{"annotations": [{"image_id": 1, "caption": "caf\xe9"}]}', match="UTF-8"),
    _metrics("refs-a-list", refs=PREDS, match="annotations"),
    _metrics("refs-annotations-not-a-list", refs={"annotations": {"1": "a dog"}}, match="annotations"),
    _metrics("refs-images-not-a-list", refs={"images": 3, "annotations": REFS["annotations"]}, match="images"),
    _metrics("refs-image-without-id", refs={"images": [{"name": 1}], "annotations": []}, match="image 0"),
    _metrics("refs-annotation-without-caption", refs={"annotations": [{"image_id": 1}]}, match="annotation 0"),
    _metrics("refs-caption-not-text", refs={"annotations": [{"image_id": 1, "caption": ["a", "dog"]}]},
             match="annotation 0"),
    _metrics("refs-caption-empty", refs={"annotations": [{"image_id": 1, "caption": " "}]}, match="empty caption"),
    _metrics("refs-image-id-float", refs={"annotations": [{"image_id": 1.5, "caption": "a"}]}, match="1.5"),
    _metrics("refs-image-id-boolean", refs={"annotations": [{"image_id": True, "caption": "a"}]}, match="true"),
    _metrics("refs-no-images", refs={"images": [], "annotations": []}, preds=[]),
    _metrics("preds-an-object", preds={"1": "a dog"}, match="JSON object"),
    _metrics("preds-entry-without-image-id", preds=[{"caption": "a dog"}], match="result 0"),
    _metrics("preds-caption-null", preds=[{"image_id": 1, "caption": None}, PREDS[1]], match="null"),
    _metrics("preds-two-for-one-image", preds=[*PREDS, PREDS[0]], match="more than one"),
    _metrics("preds-missing-an-image", preds=PREDS[:1], match="no prediction"),
    _metrics("preds-extra-image", preds=[*PREDS, {"image_id": 3, "caption": "a bird"}], match="no references"),
    _metrics("ids-numbers-and-strings", preds=[{"image_id": "1", "caption": "a"}, {"image_id": "2", "caption": "b"}],
             match="the same way"),
    _metrics("metric-unknown", REFS, PREDS, "--metrics=Bleu,BLUE", match="BLUE"),
    _metrics("metrics-empty", REFS, PREDS, "--metrics=", match="metrics"),
    case(METRICS, "unknown-flag", "{t}/refs.json", "{t}/preds.json", "--bogus=1", match="bogus"),
    _metrics("style-unknown", REFS, PREDS, "--style=sarcastic", "--lm={t}/lm.json", match="unknown style"),
    _metrics("style-without-lm", REFS, PREDS, "--style=romantic", match="--lm"),
    _metrics("lm-without-style", REFS, PREDS, "--lm={t}/lm.json", match="--style"),
    _metrics("style-with-metrics", REFS, PREDS, "--style=romantic", "--lm={t}/lm.json", "--metrics=CIDEr",
             match="--metrics"),
    _metrics("style-model-not-a-style-model", REFS, PREDS, "--style=romantic", "--lm={t}/lm.json", "--style_model={t}",
             match="is not a style classifier"),
    _metrics("lm-missing", REFS, PREDS, "--style=romantic", "--lm={t}/missing.json", match="missing.json"),
    _metrics("lm-random-bytes", REFS, PREDS, "--style=romantic", "--lm={t}/random.bin", match="random.bin"),
    _metrics("lm-is-refs", REFS, PREDS, "--style=romantic", "--lm={t}/refs.json", match="language model"),
    _metrics("lm-of-another-style", REFS, PREDS, "--style=humorous", "--lm={t}/lm.json", match="romantic"),
    _metrics("refs-nested-deep", raw_refs=DEEP_JSON, match="r.json is not the COCO format expected"),
    _metrics("preds-nested-deep", raw_preds=DEEP_JSON, match="p.json is not the COCO format expected"),
    case(METRICS, "lm-nested-deep", "{t}/refs.json", "{t}/preds.json", "--style=romantic", "--lm={t}/deep.json",
         files={"deep.json": DEEP_JSON}, match="deep.json is not a style language model"),
]

# --- capjax.metrics.stylized_lm ------------------------------------------------------------------------------------


def _style_lm(name: str, *args: str, **kw):
  return case(STYLE_LM, name, *args, absent=("out/lm.json", "lm.json.tmp"), **kw)


STYLE_LM_CASES = [
    _style_lm("no-flags", match="missing"),
    _style_lm("no-output", "--sentences={t}/alt.tsv", match="--output"),
    _style_lm("sentences-missing", "--sentences={t}/missing.txt", "--output={t}/out/lm.json", match="missing.txt"),
    _style_lm("sentences-is-a-folder", "--sentences={t}/folder", "--output={t}/out/lm.json", match="folder"),
    _style_lm("sentences-chmod", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", chmod={"alt.tsv": 0o200}),
    _style_lm("sentences-empty", "--sentences={t}/empty.txt", "--output={t}/out/lm.json", match="no sentence"),
    _style_lm("sentences-blank-lines", "--sentences={t}/blank.txt", "--output={t}/out/lm.json",
              files={"blank.txt": b"\n \n\t\n"}, match="no sentence"),
    _style_lm("sentences-random-bytes", "--sentences={t}/random.bin", "--output={t}/out/lm.json", match="UTF-8"),
    _style_lm("sentences-latin1", "--sentences={t}/latin1.tsv", "--output={t}/out/lm.json", match="line 1"),
    _style_lm("discount-zero", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=0",
              match="--discount"),
    _style_lm("discount-above-one", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=1.5",
              match="--discount"),
    _style_lm("discount-not-a-number", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=high",
              match="discount"),
    _style_lm("discount-nan", "--sentences={t}/alt.tsv", "--output={t}/out/lm.json", "--discount=nan",
              match="--discount=nan is not a finite number"),
    _style_lm("output-is-a-folder", "--sentences={t}/alt.tsv", "--output={t}/folder", match="directory"),
    _style_lm("output-is-the-sentences", "--sentences={t}/alt.tsv", "--output={t}/alt.tsv",
              match="would overwrite --sentences="),
    _style_lm("output-links-to-the-sentences", "--sentences={t}/alt.tsv", "--output={t}/link.json",
              files={"link.json": symlink("alt.tsv")}, match="would overwrite --sentences="),
    _style_lm("output-is-a-device", "--sentences={t}/alt.tsv", "--output={t}/null", files={"null": NULL_DEVICE},
              match="is a character device"),
    _style_lm("output-is-a-fifo", "--sentences={t}/alt.tsv", "--output={t}/pipe", files={"pipe": FIFO},
              match="is a FIFO"),
    _style_lm("output-ends-with-a-slash", "--sentences={t}/alt.tsv", "--output={t}/out/", match="is a directory"),
    _style_lm("output-empty", "--sentences={t}/alt.tsv", "--output=", match="--output= is empty"),
    _style_lm("sentences-is-a-fifo", "--sentences={t}/pipe.txt", "--output={t}/out/lm.json",
              files={"pipe.txt": FIFO}, match="--sentences={t}/pipe.txt is a FIFO"),
    _style_lm("sentences-utf16", "--sentences={t}/u.txt", "--output={t}/out/lm.json", files={"u.txt": UTF16},
              match="is UTF-16"),
    _style_lm("output-under-a-file", "--sentences={t}/alt.tsv", "--output={t}/empty.txt/lm.json", match="a file"),
    _style_lm("output-read-only", "--sentences={t}/alt.tsv", "--output={ro}/lm.json", match="--output"),
    _style_lm("output-folder-chmod", "--sentences={t}/alt.tsv", "--output={t}/locked/lm.json",
              files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--output"),
    *not_flags(STYLE_LM, "--sentences={t}/alt.tsv", "--output={t}/out/lm.json"),
]

# --- capjax.metrics.human_eval -------------------------------------------------------------------------------------

HUMAN_EVAL_CASES = [
    case(HUMAN_EVAL, "no-arguments", match="aggregate"),
    case(HUMAN_EVAL, "aggregate-nothing", "aggregate", match="aggregate"),
    case(HUMAN_EVAL, "unknown-subcommand", "average", "{t}/ratings.csv", match="aggregate"),
    case(HUMAN_EVAL, "csv-missing", "aggregate", "{t}/missing.csv", match="missing.csv"),
    case(HUMAN_EVAL, "csv-is-a-folder", "aggregate", "{t}/folder", match="folder"),
    case(HUMAN_EVAL, "csv-chmod", "aggregate", "{t}/ratings.csv", chmod={"ratings.csv": 0o200}),
    case(HUMAN_EVAL, "csv-empty", "aggregate", "{t}/empty.txt", match="header"),
    case(HUMAN_EVAL, "csv-not-utf8", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\ncaf\xe9,1,GOOD\n"}, match="bad.csv"),
    case(HUMAN_EVAL, "csv-random-bytes", "aggregate", "{t}/random.bin", match="random.bin"),
    case(HUMAN_EVAL, "csv-is-a-fifo", "aggregate", "{t}/pipe.csv", files={"pipe.csv": FIFO},
         match="pipe.csv is a FIFO"),
    case(HUMAN_EVAL, "csv-utf16", "aggregate", "{t}/u.csv",
         files={"u.csv": "image_id,rater,rating\n1,1,GOOD\n".encode("utf-16")}, match="u.csv is UTF-16"),
    case(HUMAN_EVAL, "csv-with-a-utf8-bom-and-a-bad-rating", "aggregate", "{t}/bom.csv",
         files={"bom.csv": b"\xef\xbb\xbfimage_id,rater,rating\n1,1,MAYBE\n"}, match="line 2"),  # not the header
    case(HUMAN_EVAL, "csv-wrong-header", "aggregate", "{t}/captions.tsv", match="header"),
    case(HUMAN_EVAL, "csv-header-only", "aggregate", "{t}/bad.csv", files={"bad.csv": b"image_id,rater,rating\n"},
         match="no ratings"),
    case(HUMAN_EVAL, "rating-unknown", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,MAYBE\n"}, match="line 2"),
    case(HUMAN_EVAL, "rater-not-a-number", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,one,GOOD\n"}, match="line 2"),
    case(HUMAN_EVAL, "rater-out-of-range", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,4,GOOD\n"}, match="rater 4"),
    case(HUMAN_EVAL, "rater-votes-twice", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,GOOD\n1,1,BAD\n"}, match="twice"),
    case(HUMAN_EVAL, "ratings-incomplete", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,GOOD\n"}, match="lack"),
    case(HUMAN_EVAL, "image-id-empty", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1,GOOD\n,2,GOOD\n"}, match="line 3: the image_id is empty"),
    case(HUMAN_EVAL, "image-id-blank", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n  ,1,BAD\n"}, match="line 2: the image_id is empty"),
    case(HUMAN_EVAL, "row-too-short", "aggregate", "{t}/bad.csv",
         files={"bad.csv": b"image_id,rater,rating\n1,1\n"}, match="line 2"),
    case(HUMAN_EVAL, "raters-zero", "aggregate", "{t}/ratings.csv", "--raters=0", match="raters"),
    case(HUMAN_EVAL, "raters-negative", "aggregate", "{t}/ratings.csv", "--raters=-3", match="raters"),
    case(HUMAN_EVAL, "raters-not-a-number", "aggregate", "{t}/ratings.csv", "--raters=three", match="raters"),
    case(HUMAN_EVAL, "unknown-flag", "aggregate", "{t}/ratings.csv", "--bogus=1", match="bogus"),
    # the blind study: `sheets` and `aggregate --key`
    case(HUMAN_EVAL, "sheets-nothing", "sheets", match="--predictions"),
    case(HUMAN_EVAL, "sheets-predictions-missing", "sheets", "--predictions=a={t}/missing.json",
         "--images=cc3m:validation", "--output={t}/study", match="missing.json", absent=("study",)),
    case(HUMAN_EVAL, "sheets-predictions-fifo", "sheets", "--predictions=a={t}/p.json", "--images=cc3m:validation",
         "--output={t}/study", files={"p.json": FIFO}, match="p.json is a FIFO", absent=("study",)),
    case(HUMAN_EVAL, "sheets-predictions-nested-too-deep", "sheets", "--predictions=a={t}/deep.json",
         "--images=cc3m:validation", "--output={t}/study", files={"deep.json": DEEP_JSON}, match="deep.json",
         absent=("study",)),
    case(HUMAN_EVAL, "sheets-predictions-random-bytes", "sheets", "--predictions=a={t}/random.bin",
         "--images=cc3m:validation", "--output={t}/study", match="random.bin", absent=("study",)),
    case(HUMAN_EVAL, "sheets-output-is-a-file", "sheets", "--predictions=a={t}/preds.json", "--images=cc3m:validation",
         "--output={t}/empty.txt", match="is a file"),
    case(HUMAN_EVAL, "sheets-images-not-built", "sheets", "--predictions=a={t}/preds.json", "--images=cc3m:validation",
         "--data_dir={t}/folder", "--output={t}/study", match="not built", absent=("study/key.json",)),
    case(HUMAN_EVAL, "aggregate-key-missing", "aggregate", "--key={t}/missing.json", "{t}/ratings.csv",
         match="missing.json"),
    case(HUMAN_EVAL, "aggregate-key-not-json", "aggregate", "--key={t}/alt.tsv", "{t}/ratings.csv", match="not JSON"),
    case(HUMAN_EVAL, "aggregate-key-nested-too-deep", "aggregate", "--key={t}/deep.json", "{t}/ratings.csv",
         files={"deep.json": DEEP_JSON}, match="not JSON"),
    case(HUMAN_EVAL, "aggregate-key-item-without-models", "aggregate", "--key={t}/key.json", "{t}/ratings.csv",
         files={"key.json": _json({"version": 1, "raters": 3, "models": ["a"], "items": {"q1": {"image_id": "0"}}})},
         match="not a key of `sheets`"),
    case(HUMAN_EVAL, "aggregate-key-with-one-model-s-csv", "aggregate", "--key={t}/key.json", "{t}/ratings.csv",
         files={"key.json": _json({"version": 1, "raters": 3, "models": ["a"],
                                   "items": {"q1": {"image_id": "0", "models": ["a"]}}})},
         match="item 1 is not in the key"),
]

# --- capjax.tools.convert_weights ----------------------------------------------------------------------------------

NO_CONVERSION = ("converted/metadata.json", "converted/variables")


def _convert(name: str, weights_format: str, weights: str, match: str = "", **kw):
  return case(CONVERT, name, f"--format={weights_format}", f"--input={weights}", "--output={t}/converted",
              absent=NO_CONVERSION, match=match, **kw)


CONVERT_CASES = [
    case(CONVERT, "random-with-input", "--format=random", "--input={a}/other.safetensors", "--output={t}/converted",
         match="--format=random reads no file", absent=("converted",)),
    case(CONVERT, "random-output-is-a-file", "--format=random", "--output={t}/alt.tsv", match="is a file"),
    case(CONVERT, "random-over-real-weights", "--format=random", "--output={t}/real",
         files={"real/metadata.json": b'{"format": "keras-h5", "num_classes": 1000}\n', "real/variables/x": b"x"},
         match="holds weights converted from a file"),
    case(CONVERT, "random-into-a-full-folder", "--format=random", "--output={t}/folder", match="other files in it"),
    case(CONVERT, "random-seed-negative", "--format=random", "--output={t}/converted", "--seed=-1", match="--seed",
         absent=("converted",)),
    case(CONVERT, "no-format", "--input={a}/other.safetensors", "--output={t}/converted", match="--format"),
    case(CONVERT, "format-unknown", "--format=onnx", "--input={a}/other.safetensors", "--output={t}/converted",
         match="--format", absent=NO_CONVERSION),
    case(CONVERT, "no-input", "--format=timm", "--output={t}/converted", match="--input"),
    case(CONVERT, "no-output", "--format=timm", "--input={a}/other.safetensors", match="--output"),
    _convert("input-missing", "timm", "{t}/missing.safetensors", match="missing.safetensors"),
    _convert("input-is-a-folder", "keras", "{t}/folder", match="folder"),
    _convert("input-chmod", "timm", "{t}/copy.safetensors", files={"copy.safetensors": b"\0" * 16},
             chmod={"copy.safetensors": 0o200}),
    _convert("timm-empty-file", "timm", "{t}/empty.txt", match="too short"),
    _convert("keras-empty-file", "keras", "{t}/empty.txt", match="empty.txt"),
    _convert("timm-random-bytes", "timm", "{t}/random.bin", match="random.bin"),
    _convert("keras-random-bytes", "keras", "{t}/random.bin", match="random.bin"),
    _convert("timm-truncated", "timm", "{a}/truncated.safetensors", match="truncated.safetensors"),
    _convert("keras-truncated", "keras", "{a}/truncated.h5", match="truncated.h5"),
    _convert("timm-other-model", "timm", "{a}/other.safetensors", match="missing tensor"),
    _convert("keras-other-model", "keras", "{a}/other.h5", match="other.h5"),
    _convert("keras-h5-not-keras", "keras", "{a}/plain.h5", match="plain.h5"),
    _convert("keras-given-safetensors", "keras", "{a}/other.safetensors", match="other.safetensors"),
    _convert("timm-given-h5", "timm", "{a}/other.h5", match="other.h5"),
    _convert("timm-header-not-json", "timm", "{t}/bad.safetensors",
             files={"bad.safetensors": (9).to_bytes(8, "little") + b"{not json"}, match="JSON"),
    _convert("timm-header-nested-deep", "timm", "{t}/bad.safetensors",
             files={"bad.safetensors": len(DEEP_JSON).to_bytes(8, "little") + DEEP_JSON + b"\0" * 8},
             match="header is nested deeper than the JSON parser follows"),
    case(CONVERT, "output-is-a-file", "--format=timm", "--input={a}/other.safetensors", "--output={t}/alt.tsv",
         match="--output"),
    case(CONVERT, "output-is-the-input", "--format=timm", "--input={t}/random.bin", "--output={t}/random.bin",
         match="--output"),
    case(CONVERT, "output-read-only", "--format=timm", "--input={a}/other.safetensors", "--output={ro}/w",
         match="--output"),
    case(CONVERT, "output-chmod", "--format=timm", "--input={a}/other.safetensors", "--output={t}/locked/w",
         files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--output"),
    *not_flags(CONVERT, "--format=timm", "--input={a}/other.safetensors", "--output={t}/converted"),
]

# Hugging Face directories: the tiny BERT fixture, and copies of it with one thing wrong.
HF_BERT = REPO / "tests" / "fixtures" / "text_models" / "bert"


def _hf_bert(**replaced: bytes) -> dict[str, bytes]:
  files = {f"hf/{name}": (HF_BERT / name).read_bytes() for name in ("model.safetensors", "config.json", "vocab.txt")}
  return files | {f"hf/{name}": data for name, data in replaced.items()}


def _config(**changes) -> bytes:
  return _json({**json.loads((HF_BERT / "config.json").read_text()), **changes})


CONVERT_CASES += [
    _convert("hf-input-is-a-file", "hf_bert", "{a}/other.safetensors", match="is not a directory"),
    _convert("hf-folder-without-checkpoint", "hf_bert", "{t}/folder", match="model.safetensors is missing"),
    _convert("hf-gpt2-given-bert", "hf_gpt2", "{r}/tests/fixtures/text_models/bert", match="vocab.json is missing"),
    _convert("hf-config-hidden-size", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": _config(hidden_size=48)}),
             match="config.json implies (48,)"),
    _convert("hf-config-layers", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": _config(num_hidden_layers=1)}),
             match="unexpected tensor 'encoder.layer.1."),
    _convert("hf-config-not-json", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": b'{"hidden_size": '}),
             match="not readable JSON"),
    _convert("hf-config-heads", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": _config(num_attention_heads=5)}),
             match="not divisible"),
    case(CONVERT, "hf-output-is-the-input", "--format=hf_bert", "--input={t}/hf", "--output={t}/hf", files=_hf_bert(),
         match="--output={t}/hf would overwrite --input={t}/hf — write the conversion to another directory"),
    case(CONVERT, "hf-output-links-to-the-input", "--format=hf_bert", "--input={t}/hf", "--output={t}/link",
         files=_hf_bert() | {"link": symlink("hf")}, match="would overwrite --input="),
    _convert("input-is-a-fifo", "timm", "{t}/pipe.safetensors", files={"pipe.safetensors": FIFO}, match="is a FIFO"),
    _convert("input-is-a-device", "keras", "{t}/null.h5", files={"null.h5": NULL_DEVICE},
             match="is a character device"),
    _convert("hf-weights-truncated", "hf_bert", "{t}/hf", match="model.safetensors",
             files=_hf_bert(**{"model.safetensors": (HF_BERT / "model.safetensors").read_bytes()[:-100]})),
]

# --- capjax.text_models.embed --------------------------------------------------------------------------------------

LINES = "--input={t}/alt.tsv"  # two sentences (with a tab: any text is a sentence)
EMBED_OUT = "--output={t}/features.npz"  # an earlier output, which a failed run must leave as it was


def _embed(name: str, *args: str, match: str = "", **kw):
  return case(EMBED, name, *args, absent=("embeddings.npz",), match=match, **kw)


EMBED_CASES = [
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

# --- capjax.text_models.style_classifier and style_phrases ---------------------------------------------------------
# Every case stops before training or loading a model: the inputs are checked first, and nothing is written.

def _style_cls(name: str, *args: str, match: str = "", **kw):
  return case(STYLE_CLS, name, *args, absent=("m",), match=match, **kw)


ROM = "romantic={t}/alt.tsv"
STYLE_CLS_CASES = [
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
    _style_cls("epochs-zero", "--epochs=0", "--output={t}/m", match="epochs"),
    _style_cls("train-style-twice", f"--train={ROM},romantic={{t}}/captions.tsv,factual={{t}}/gold.tsv",
               "--output={t}/m", match="--train names romantic twice"),
    _style_cls("learning-rate-zero", "--learning_rate=0", "--output={t}/m", match="--learning_rate=0.0 is impossible"),
    _style_cls("learning-rate-nan", "--learning_rate=nan", "--output={t}/m", match="--learning_rate=nan"),
    *not_flags(STYLE_CLS, "--output={t}/m"),
]


def _style_phrases(name: str, *args: str, match: str = "", **kw):
  return case(STYLE_PHRASES, name, *args, absent=("o.jsonl",), match=match, **kw)


OUT = "--output={t}/o.jsonl"
STYLE_PHRASES_CASES = [
    _style_phrases("no-model", OUT, match="--model"),
    _style_phrases("no-output", "--model={t}/folder", match="--output"),
    _style_phrases("model-missing", "--model={t}/nothing", OUT, match="is not a style classifier"),
    _style_phrases("model-is-a-folder", "--model={t}/folder", OUT, match="is not a style classifier"),
    _style_phrases("model-is-plain-bert", "--model={a}/bert", OUT, match="no style_classifier.json"),
    _style_phrases("sentences-without-style", "--model={a}/bert", "--sentences={t}/alt.tsv", OUT,
                   match="go together"),
    _style_phrases("style-unknown", "--model={a}/bert", "--sentences={t}/alt.tsv", "--style=sarcastic", OUT,
                   match="unknown style 'sarcastic'"),
    _style_phrases("sentences-empty-file", "--model={a}/bert", "--sentences={t}/empty.txt", "--style=romantic", OUT,
                   match="has no sentences"),
    _style_phrases("sentences-empty-line", "--model={a}/bert", "--sentences={t}/gap.txt", "--style=romantic", OUT,
                   files={"gap.txt": b"a dog in love\n\na cat\n"}, match="line 2 is empty"),
    _style_phrases("sentences-latin1", "--model={a}/bert", "--sentences={t}/latin1.tsv", "--style=romantic", OUT,
                   match="UTF-8"),
    _style_phrases("sentences-missing", "--model={a}/bert", "--sentences={t}/missing.txt", "--style=romantic", OUT,
                   match="missing.txt"),
    _style_phrases("epsilon-one", "--model={a}/bert", "--epsilon=1", OUT, match="between 0 and 1"),
    _style_phrases("epsilon-nan", "--model={a}/bert", "--epsilon=nan", OUT, match="--epsilon=nan is not a finite"),
    _style_phrases("output-is-a-folder", "--model={a}/bert", "--output={t}/folder", match="is a directory"),
    _style_phrases("output-is-the-sentences", "--model={a}/bert", "--sentences={t}/alt.tsv", "--style=romantic",
                   "--output={t}/alt.tsv", match="--output={t}/alt.tsv would overwrite --sentences="),
    _style_phrases("html-is-the-sentences", "--model={a}/bert", "--sentences={t}/alt.tsv", "--style=romantic", OUT,
                   "--html={t}/alt.tsv", match="--html={t}/alt.tsv would overwrite --sentences="),
    _style_phrases("html-is-the-output", "--model={a}/bert", OUT, "--html={t}/o.jsonl",
                   match="--html={t}/o.jsonl would overwrite --output="),
    _style_phrases("output-is-a-fifo", "--model={a}/bert", "--output={t}/pipe", files={"pipe": FIFO},
                   match="is a FIFO"),
    _style_phrases("html-is-a-device", "--model={a}/bert", OUT, "--html={t}/null.html",
                   files={"null.html": NULL_DEVICE}, match="--html={t}/null.html is a character device"),
    _style_phrases("sentences-is-a-fifo", "--model={a}/bert", "--sentences={t}/pipe.txt", "--style=romantic", OUT,
                   files={"pipe.txt": FIFO}, match="is a FIFO"),
    _style_phrases("sentences-utf16", "--model={a}/bert", "--sentences={t}/u.txt", "--style=romantic", OUT,
                   files={"u.txt": UTF16}, match="is UTF-16"),
    _style_phrases("output-read-only", "--model={a}/bert", "--output={ro}/o.jsonl", match="--output"),
    *not_flags(STYLE_PHRASES, "--model={a}/bert", OUT),
]

# --- capjax.tools.extract_features ---------------------------------------------------------------------------------

IMAGES = "--images={t}/images/*.png"
NPZ = "--output={t}/result.npz"
NO_NPZ = ("result.npz", "result.partial.npz")


def _extract(name: str, *args: str, match: str = "", **kw):
  return case(EXTRACT, name, *args, absent=NO_NPZ, match=match, **kw)


EXTRACT_CASES = [
    _extract("no-weights", IMAGES, NPZ, match="--weights"),
    _extract("weights-missing", "--weights={t}/nothing", IMAGES, NPZ, match="convert_weights"),
    _extract("weights-is-a-file", "--weights={t}/alt.tsv", IMAGES, NPZ, match="alt.tsv"),
    _extract("weights-empty-folder", "--weights={t}/folder", IMAGES, NPZ, match="metadata.json"),
    _extract("weights-metadata-not-json", "--weights={a}/bad_metadata", IMAGES, NPZ, match="metadata.json"),
    _extract("weights-metadata-without-classes", "--weights={a}/no_classes", IMAGES, NPZ, match="num_classes"),
    _extract("weights-without-variables", "--weights={a}/metadata_only", IMAGES, NPZ, match="variables"),
    _extract("weights-of-another-model", "--weights={a}/other_model", IMAGES, NPZ, match="variables"),
    _extract("images-match-nothing", "--weights={a}/metadata_only", "--images={t}/none/*.jpg", NPZ,
             match="--images"),
    _extract("no-images-flag", "--weights={a}/metadata_only", NPZ, match="--images"),
    case(EXTRACT, "no-output", "--weights={a}/metadata_only", IMAGES, match="--output"),
    case(EXTRACT, "output-not-npz", "--weights={a}/metadata_only", IMAGES, "--output={t}/result.txt",
         match=".npz", absent=("result.txt",)),
    case(EXTRACT, "output-is-a-folder", "--weights={a}/metadata_only", IMAGES, "--output={t}/folder",
         match="folder"),
    _extract("output-folder-missing", "--weights={a}/metadata_only", IMAGES, "--output={t}/nothing/result.npz",
             match="does not exist"),
    _extract("output-folder-read-only", "--weights={a}/metadata_only", IMAGES, "--output={ro}/result.npz",
             match="--output"),
    _extract("output-folder-unwritable", "--weights={a}/metadata_only", IMAGES, "--output=/proc/capjax.npz",
             match="--output"),
    _extract("output-folder-chmod", "--weights={a}/metadata_only", IMAGES, "--output={t}/locked/result.npz",
             files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--output"),
    case(EXTRACT, "output-is-an-input", "--weights={a}/metadata_only", "--images={t}/*.npz",
         "--output={t}/features.npz", match="features.npz"),
    case(EXTRACT, "earlier-output-kept-on-error", "--weights={t}/nothing", IMAGES, "--output={t}/features.npz"),
    _extract("images-include-a-fifo", "--weights={a}/metadata_only", "--images={t}/pics/*", NPZ,
             files={"pics/a.png": _png(), "pics/b.png": FIFO}, match="--images={t}/pics/b.png is a FIFO"),
    case(EXTRACT, "output-is-a-device", "--weights={a}/metadata_only", IMAGES, "--output={t}/null.npz",
         files={"null.npz": NULL_DEVICE}, match="is a character device"),
    case(EXTRACT, "output-links-to-an-image", "--weights={a}/metadata_only", IMAGES, "--output={t}/link.npz",
         files={"link.npz": symlink("images/a.png")}, match="would overwrite --images="),
    _extract("batch-size-zero", "--weights={a}/metadata_only", IMAGES, NPZ, "--batch_size=0", match="batch_size"),
    _extract("batch-size-negative", "--weights={a}/metadata_only", IMAGES, NPZ, "--batch_size=-4",
             match="batch_size"),
    _extract("image-size-zero", "--weights={a}/metadata_only", IMAGES, NPZ, "--image_size=0", match="image_size"),
    _extract("image-size-negative", "--weights={a}/metadata_only", IMAGES, NPZ, "--image_size=-299",
             match="image_size"),
    _extract("image-size-too-small", "--weights={a}/metadata_only", IMAGES, NPZ, "--image_size=74",
             match="image_size"),
    *not_flags(EXTRACT, "--weights={a}/metadata_only", IMAGES, NPZ),
]

# --- capjax.tools.extract_tfds_features ----------------------------------------------------------------------------

TINY_SOURCE = ("--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--distributed=off")
VARIANT_OUT = ("--output_data_dir={t}/features",)
NO_VARIANT = ("features/synthetic_scenes_irv2",)


def _tfds(name: str, *args: str, match: str = "", weights: str = "{a}/metadata_only", **kw):
  return case(EXTRACT_TFDS, name, *TINY_SOURCE, f"--weights={weights}", *VARIANT_OUT, *args, absent=NO_VARIANT,
              match=match, **kw)


OTHER_MANIFEST = _json({"source": "synthetic_scenes/tiny/1.0.0", "weights": "0" * 64, "image_size": 139,
                        "dtype": "float32", "image_key": "image", "examples_per_shard": 24})
EXTRACT_TFDS_CASES = [
    case(EXTRACT_TFDS, "no-dataset", "--weights={a}/metadata_only", "--data_dir={d}", match="--dataset"),
    case(EXTRACT_TFDS, "dataset-unknown", "--dataset=cc4m", "--weights={a}/metadata_only", "--data_dir={t}/folder",
         match="cc4m"),
    case(EXTRACT_TFDS, "dataset-not-built", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={t}/folder", "--distributed=off", match="capjax.data.build",
         absent=("folder/synthetic_scenes_irv2",)),
    case(EXTRACT_TFDS, "data-dir-missing", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={t}/nothing", match="--data_dir", absent=("nothing",)),
    case(EXTRACT_TFDS, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={t}/alt.tsv", match="--data_dir"),
    case(EXTRACT_TFDS, "data-dir-read-only", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={ro}", match="--data_dir"),
    _tfds("weights-empty", weights="", match="convert_weights"),
    _tfds("weights-missing", weights="{t}/nothing", match="convert_weights"),
    _tfds("weights-is-a-file", weights="{t}/alt.tsv", match="alt.tsv"),
    _tfds("weights-metadata-not-json", weights="{a}/bad_metadata", match="metadata.json"),
    _tfds("weights-metadata-without-classes", weights="{a}/no_classes", match="num_classes"),
    _tfds("weights-without-variables", weights="{a}/metadata_only", match="variables"),
    _tfds("weights-of-another-model", weights="{a}/other_model", match="variables"),
    _tfds("split-unknown", "--splits=dev", match="dev"),
    _tfds("variant-empty", "--variant=", match="--variant"),
    case(EXTRACT_TFDS, "variant-escapes", *TINY_SOURCE, "--weights={a}/metadata_only", *VARIANT_OUT,
         "--variant=../../../escape", match="--variant=../../../escape holds a path separator",
         absent=("escape", *NO_VARIANT)),
    case(EXTRACT_TFDS, "source-shard-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-cut}",
         "--distributed=off", "--weights={a}/metadata_only", *VARIANT_OUT, absent=NO_VARIANT,
         match=f"{TRAIN_SHARD} holds 0 records"),
    case(EXTRACT_TFDS, "source-info-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:info-cut}",
         "--distributed=off", "--weights={a}/metadata_only", *VARIANT_OUT, absent=NO_VARIANT,
         match="dataset_info.json is not JSON"),
    case(EXTRACT_TFDS, "source-config-escapes", "--dataset=synthetic_scenes/../x", "--data_dir={d}",
         "--distributed=off", "--weights={a}/metadata_only", *VARIANT_OUT, absent=NO_VARIANT,
         match="holds a path separator"),
    _tfds("image-key-unknown", "--image_key=picture", match="picture"),
    _tfds("image-size-zero", "--image_size=0", match="image_size"),
    _tfds("image-size-too-small", "--image_size=74", match="image_size"),
    _tfds("batch-size-zero", "--batch_size=0", match="batch_size"),
    _tfds("batch-size-negative", "--batch_size=-8", match="batch_size"),
    _tfds("examples-per-shard-zero", "--examples_per_shard=0", match="examples_per_shard"),
    _tfds("examples-per-shard-negative", "--examples_per_shard=-1", match="examples_per_shard"),
    _tfds("dtype-unknown", "--dtype=float64", match="dtype"),
    _tfds("distributed-unknown", "--distributed=maybe", match="distributed"),
    _tfds("distributed-on-without-a-cluster", "--distributed=on", match="no cluster was detected"),
    case(EXTRACT_TFDS, "output-data-dir-is-a-file", *TINY_SOURCE, "--weights={a}/metadata_only",
         "--output_data_dir={t}/alt.tsv", match="--output_data_dir"),
    case(EXTRACT_TFDS, "output-data-dir-read-only", *TINY_SOURCE, "--weights={a}/metadata_only",
         "--output_data_dir={ro}/features", match="--output_data_dir"),
    case(EXTRACT_TFDS, "output-data-dir-chmod", *TINY_SOURCE, "--weights={a}/metadata_only",
         "--output_data_dir={t}/locked/features", files={"locked/.keep": b""}, chmod={"locked": 0o500},
         match="--output_data_dir"),
    case(EXTRACT_TFDS, "partial-extraction-with-other-settings", *TINY_SOURCE, "--weights={a}/metadata_only",
         *VARIANT_OUT,
         files={"features/synthetic_scenes_irv2/tiny/1.0.0/extraction.json": OTHER_MANIFEST},
         match="holds a partial extraction with other settings (dtype: 'float32' -> 'float16', examples_per_shard: "
               "24 -> 4096, image_size: 139 -> 299, weights: "),
    *not_flags(EXTRACT_TFDS, *TINY_SOURCE, "--weights={a}/metadata_only", *VARIANT_OUT),
]

# --- capjax.tools.harvest_alt_text ---------------------------------------------------------------------------------

HARVEST_OUT = ("--output={t}/result.tsv",)
NO_TSV = ("result.tsv", "result.tsv.partial")


def _harvest(name: str, *args: str, match: str = "", **kw):
  return case(HARVEST, name, *args, absent=NO_TSV, match=match, **kw)


HARVEST_CASES = [
    _harvest("no-input", *HARVEST_OUT, match="--input"),
    case(HARVEST, "no-output", "--input={t}/page.html", match="--output"),
    _harvest("input-matches-nothing", "--input={t}/none/*.html", *HARVEST_OUT, match="matches no file"),
    _harvest("input-is-a-folder", "--input={t}/folder", *HARVEST_OUT, match="folder"),
    _harvest("input-not-html-or-warc", "--input={t}/alt.tsv", *HARVEST_OUT, match="alt.tsv"),
    _harvest("one-of-two-inputs-missing", "--input={t}/page.html", "--input={t}/gone.warc", *HARVEST_OUT,
             match="gone.warc"),
    _harvest("input-chmod", "--input={t}/page.html", *HARVEST_OUT, chmod={"page.html": 0o200}),
    case(HARVEST, "output-is-the-input", "--input={t}/page.html", "--output={t}/page.html", match="would overwrite"),
    case(HARVEST, "output-is-a-folder", "--input={t}/page.html", "--output={t}/folder", match="directory"),
    case(HARVEST, "output-links-to-the-input", "--input={t}/page.html", "--output={t}/link.tsv",
         files={"link.tsv": symlink("page.html")}, match="would overwrite --input="),
    case(HARVEST, "output-is-a-device", "--input={t}/page.html", "--output={t}/null.tsv",
         files={"null.tsv": NULL_DEVICE}, match="is a character device"),
    case(HARVEST, "output-is-a-fifo", "--input={t}/page.html", "--output={t}/pipe.tsv", files={"pipe.tsv": FIFO},
         match="is a FIFO"),
    _harvest("output-ends-with-a-slash", "--input={t}/page.html", "--output={t}/new/", match="is a directory"),
    _harvest("output-empty", "--input={t}/page.html", "--output=", match="--output= is empty"),
    _harvest("input-is-a-fifo", "--input={t}/pipe.html", *HARVEST_OUT, files={"pipe.html": FIFO},
             match="--input={t}/pipe.html is a FIFO"),
    _harvest("output-folder-missing", "--input={t}/page.html", "--output={t}/nothing/result.tsv",
             match="does not exist"),
    _harvest("output-folder-read-only", "--input={t}/page.html", "--output={ro}/result.tsv"),
    _harvest("output-folder-unwritable", "--input={t}/page.html", "--output=/proc/capjax_result.tsv"),
    _harvest("output-folder-chmod", "--input={t}/page.html", "--output={t}/locked/result.tsv",
             files={"locked/.keep": b""}, chmod={"locked": 0o500}),
    case(HARVEST, "earlier-output-kept-on-error", "--input={t}/none/*.html", "--output={t}/candidates.tsv"),
    _harvest("max-alt-chars-zero", "--input={t}/page.html", *HARVEST_OUT, "--max_alt_chars=0",
             match="max_alt_chars"),
    _harvest("max-alt-chars-negative", "--input={t}/page.html", *HARVEST_OUT, "--max_alt_chars=-10",
             match="max_alt_chars"),
    _harvest("max-record-bytes-zero", "--input={t}/page.html", *HARVEST_OUT, "--max_record_bytes=0",
             match="max_record_bytes"),
    *not_flags(HARVEST, "--input={t}/page.html", *HARVEST_OUT),
]

# --- capjax.tools.param_count --------------------------------------------------------------------------------------

PARAM_COUNT_CASES = [
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

# --- capjax.tools.sharding_report ----------------------------------------------------------------------------------

SHAPES = "--config={r}/configs/t2t.py:shapes"
SHARDING_REPORT_CASES = [
    case(SHARDING_REPORT, "no-config", match="--config"),
    case(SHARDING_REPORT, "config-missing", "--config={t}/missing.py", match="missing.py"),
    case(SHARDING_REPORT, "config-mesh-has-a-free-axis", SHAPES, match="has a -1"),
    case(SHARDING_REPORT, "mesh-not-axis-equals-size", SHAPES, "--mesh=data4", match="is not axis=size"),
    case(SHARDING_REPORT, "mesh-unknown-axis", SHAPES, "--mesh=pipeline=2", match="pipeline=2"),
    case(SHARDING_REPORT, "mesh-size-zero", SHAPES, "--mesh=data=0", match="not a positive size"),
    case(SHARDING_REPORT, "vocab-size-zero", SHAPES, "--mesh=data=1", "--vocab_size=0", match="vocab_size"),
    case(SHARDING_REPORT, "vocab-size-beyond-int32", SHAPES, "--mesh=data=1", "--vocab_size=3000000000",
         match="--vocab_size=3000000000: a vocabulary of 3,000,000,000 words"),
    case(SHARDING_REPORT, "top-negative", SHAPES, "--mesh=data=1", "--top=-1", match="top"),
    case(SHARDING_REPORT, "config-field-impossible", "--config={r}/configs/t2t.py:shapes,batch=0", "--mesh=data=1",
         match="batch_size"),
    *not_flags(SHARDING_REPORT, SHAPES, "--mesh=data=1"),
]

# --- capjax.erg.generate -------------------------------------------------------------------------------------------
# Every case stops before training, loading or generating: the flags' values are checked first.

PAIRS = {"pairs.jsonl": b'{"phrase": "in love", "caption": "a dog runs on the grass"}\n'}


def _generate(name: str, *args: str, match: str = "", **kw):
  return case(GENERATE, name, *args, absent=("g",), match=match, **kw)


GENERATE_CASES = [
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

# --- capjax.erg.augment --------------------------------------------------------------------------------------------

AUGMENT_ARGS = ("--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny", "--style=romantic",
                "--output_dataset=erg", "--data_dir={t}/tfds", "--output_data_dir={t}/out")


def _augment(name: str, *args: str, match: str = "", **kw):
  return case(AUGMENT, name, *AUGMENT_ARGS, *args, absent=("out", "tfds"), match=match, **kw)


AUGMENT_CASES = [
    case(AUGMENT, "required-flags-missing", "--style=romantic", match="--stylized, --factual, --output_dataset are"),
    _augment("min-similarity-nan", "--min_similarity=nan", match="--min_similarity=nan is not a finite number"),
    _augment("min-similarity-above-one", "--min_similarity=1.5", match="--min_similarity=1.5 is impossible — set "
             "--min_similarity in [-1, 1]"),
    _augment("min-similarity-below-minus-one", "--min_similarity=-2", match="--min_similarity"),
    _augment("max-perplexity-negative", "--max_perplexity=-1", match="--max_perplexity=-1.0 is impossible — set "
             "--max_perplexity to more than 0"),
    _augment("max-perplexity-zero", "--max_perplexity=0", match="--max_perplexity"),
    _augment("max-perplexity-infinite", "--max_perplexity=inf", match="--max_perplexity=inf is not a finite number"),
    _augment("min-content-two", "--min_content=2", match="--min_content=2.0 is impossible — set --min_content in "
             "[0, 1]"),
    _augment("min-content-negative", "--min_content=-0.5", match="--min_content"),
    _augment("beam-size-zero", "--beam_size=0", match="beam_size"),
    _augment("mode-unknown", "--mode=x2y", match="mode"),
    *not_flags(AUGMENT, *AUGMENT_ARGS),
]

# --- capjax.erg.demo -----------------------------------------------------------------------------------------------
# Every case stops before the first stage (the dataset build): the flags, the config and the sizes are checked
# first. A failed start may leave its --workdir, empty.

W = "--workdir={t}/w"
DEMO_CASES = [
    case(DEMO, "variants-unknown", W, "--variants=bogus", match="--variants=bogus: unknown config variant 'bogus'"),
    case(DEMO, "variants-value-not-a-number", W, "--variants=steps=many", match="steps"),
    case(DEMO, "variants-impossible-value", W, "--variants=batch=0", match="batch_size"),
    case(DEMO, "tiny-with-default-sizes", W, "--dataset_config=tiny",
         match="--original_images=100 is more than the 64 train images of stylized_scenes/tiny"),
    case(DEMO, "factual-examples-beyond-the-split", W, "--dataset_config=tiny", "--original_images=0",
         "--factual_captions=0", "--factual_examples=200", match="--factual_examples=200 is more than the 128"),
    case(DEMO, "factual-captions-beyond-the-split", W, "--dataset_config=tiny", "--original_images=64",
         "--factual_captions=129", "--factual_examples=128", match="--factual_captions=129"),
    case(DEMO, "min-content-two", W, "--min_content=2", match="--min_content=2.0 is impossible"),
    case(DEMO, "min-content-nan", W, "--min_content=nan", match="--min_content=nan"),
    case(DEMO, "captioner-unknown", W, "--captioner=lstm", match="captioner"),
    case(DEMO, "steps-negative", W, "--steps=-1", match="steps"),
    case(DEMO, "style-model-not-a-classifier", W, "--style_model={t}/folder", match="--style_model"),
    case(DEMO, "workdir-is-a-file", "--workdir={t}/alt.tsv", match="--workdir"),
    *not_flags(DEMO, W),
]

# --- capjax.erg.generate and capjax.erg.augment: their files ------------------------------------------------------
# Every case stops before a model loads or a dataset is read: the paths are checked first.

GEN = "--generator={t}/folder"  # no generator there: a case that got as far as loading it would say so
PAIRS_TSV = {"pairs.tsv": b"in love\ta dog runs on the grass\n"}
GENERATE_FILE_CASES = [
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
]

AUG = ("--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny", "--style=romantic",
       "--output_dataset=augmented", "--data_dir={t}/folder")  # nothing built there: no case reads a dataset
AUGMENT_FILE_CASES = [
    case(AUGMENT, "no-flags", match="are required"),
    case(AUGMENT, "no-output-dataset", *AUG[:3], match="--output_dataset is required"),
    case(AUGMENT, "output-data-dir-is-a-file", *AUG, "--output_data_dir={t}/alt.tsv", match="--output_data_dir"),
    case(AUGMENT, "output-data-dir-is-a-device", *AUG, "--output_data_dir={t}/null", files={"null": NULL_DEVICE},
         match="--output_data_dir"),
    case(AUGMENT, "output-data-dir-read-only", *AUG, "--output_data_dir={ro}/tfds", match="--output_data_dir"),
    case(AUGMENT, "save-retriever-is-a-file", *AUG, "--save_retriever={t}/alt.tsv", match="--save_retriever"),
    case(AUGMENT, "lm-is-a-fifo", *AUG, "--lm={t}/pipe.json", files={"pipe.json": FIFO},
         match="--lm={t}/pipe.json is a FIFO"),
    case(AUGMENT, "lm-missing", *AUG, "--lm={t}/missing.json", match="--lm={t}/missing.json does not exist"),
    case(AUGMENT, "lm-is-a-folder", *AUG, "--lm={t}/folder", match="is a directory"),
    case(AUGMENT, "output-dataset-a-path", *AUG[:3], "--output_dataset=../escape", "--data_dir={t}/folder",
         match="is not a TFDS name"),]

# --- capjax.crossdomain --------------------------------------------------------------------------------------------


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


CROSSDOMAIN_CASES = [
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

ALL_CASES = (MAIN_CASES + BUILD_CASES + SHOW_CASES + PIPELINE_CASES + STATS_CASES + GOLD_CASES + METRICS_CASES
             + HUMAN_EVAL_CASES + STYLE_LM_CASES + CONVERT_CASES + EXTRACT_CASES + EXTRACT_TFDS_CASES + HARVEST_CASES
             + PARAM_COUNT_CASES + SHARDING_REPORT_CASES + EMBED_CASES + STYLE_CLS_CASES + STYLE_PHRASES_CASES
             + GENERATE_CASES + GENERATE_FILE_CASES + AUGMENT_CASES + AUGMENT_FILE_CASES + DEMO_CASES
             + CROSSDOMAIN_CASES)
# Root writes through any file mode: there the cases of unreadable or unwritable files run in a pytest of their own
# without the capabilities that allow it (test_file_mode_cases_without_root_s_capabilities).
MODE_CASES = [c for c in ALL_CASES if c.values[0].chmod]
CASES = ALL_CASES if MODES_BIND else [c for c in ALL_CASES if not c.values[0].chmod]


# --- fixtures ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> pathlib.Path:
  """Weight files and folders that take a library to write: made once, and checked unchanged by every case."""
  import h5py
  import orbax.checkpoint as ocp

  from capjax.models import inception_resnet_v2 as irv2
  from capjax.tools import convert_weights as cw
  root = tmp_path_factory.mktemp("assets")
  rng = np.random.default_rng(2)
  # Another model's tensors, in a well-formed safetensors file (a BERT layer, as a user might grab by mistake).
  cw.write_safetensors(root / "other.safetensors", {
      "bert.embeddings.word_embeddings.weight": rng.normal(size=(64, 16)).astype(np.float32),
      "bert.encoder.layer.0.attention.self.query.weight": rng.normal(size=(16, 16)).astype(np.float32)},
      {"format": "pt"})
  whole = (root / "other.safetensors").read_bytes()
  (root / "truncated.safetensors").write_bytes(whole[:len(whole) - 1000])  # a download cut short
  with h5py.File(root / "other.h5", "w") as f:  # legacy Keras layout, another network's layers
    f.attrs["layer_names"] = [b"dense", b"dense_1"]
    for layer, shape in (("dense", (16, 8)), ("dense_1", (8, 2))):
      group = f.create_group(layer)
      group.attrs["weight_names"] = [f"{layer}/kernel:0".encode()]
      group.create_dataset(f"{layer}/kernel:0", data=rng.normal(size=shape).astype(np.float32))
  with h5py.File(root / "plain.h5", "w") as f:  # HDF5, but not Keras weights
    f.create_dataset("x", data=np.arange(10))
  whole = (root / "other.h5").read_bytes()
  (root / "truncated.h5").write_bytes(whole[:len(whole) // 2])
  metadata = {"model": "inception_resnet_v2", "format": "test", "num_classes": 1000}
  for name, text in (("metadata_only", json.dumps(metadata)), ("bad_metadata", '{"num_classes": 10'),
                     ("no_classes", json.dumps({"format": "keras-legacy-h5"}))):
    (root / name).mkdir()
    (root / name / irv2.METADATA_FILE).write_text(text)
  # metadata.json as convert_weights writes it, over an orbax checkpoint of another network.
  (root / "other_model").mkdir()
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(root / "other_model" / irv2.VARIABLES_DIR, {"params": {"dense": {"kernel": np.ones((4, 2))}}})
  (root / "other_model" / irv2.METADATA_FILE).write_text(json.dumps(metadata))
  # The tiny text-model fixtures converted, and a conversion whose config.json was edited afterwards.
  fixtures = REPO / "tests" / "fixtures" / "text_models"
  for kind in ("bert", "gpt2"):
    cw.convert_hf(f"hf_{kind}", fixtures / kind, root / kind)
  shutil.copytree(root / "bert", root / "bert_edited")
  config = json.loads((root / "bert_edited" / "config.json").read_text())
  (root / "bert_edited" / "config.json").write_text(json.dumps({**config, "intermediate_size": 128}))
  return root


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> pathlib.Path:
  """synthetic_scenes/tiny built as `python -m capjax.data.build` builds it (about 2 s)."""
  from capjax.data import build
  directory = tmp_path_factory.mktemp("tfds")
  build.main(["capjax.data.build", "--dataset=synthetic_scenes/tiny", f"--data_dir={directory}"])
  return directory


def populate(folder: pathlib.Path, files: dict[str, bytes | Special]) -> None:
  """Writes `files` under `folder`: bytes first, then the `Special` files (links need their targets)."""
  for name, data in sorted(files.items(), key=lambda item: isinstance(item[1], Special)):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(data, Special):
      path.write_bytes(data)
    elif data.kind == "fifo":
      os.mkfifo(path)
    elif data.kind == "device":
      os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers, in the case's own folder
    elif data.kind == "symlink":
      path.symlink_to(folder / data.target)
    else:
      os.link(folder / data.target, path)


def snapshot(root: pathlib.Path) -> dict[str, str]:
  """sha256 of every regular file under `root`, by relative path; what anything else is (a FIFO, a device and its
  numbers, where a symbolic link points), so that a device replaced by a file shows. Nothing but files is opened."""
  found = {}
  for folder, _, names in os.walk(root):
    for name in names:
      path = os.path.join(folder, name)
      info = os.lstat(path)
      if stat.S_ISLNK(info.st_mode):
        found[os.path.relpath(path, root)] = f"symlink to {os.readlink(path)}"
      elif stat.S_ISREG(info.st_mode):
        with open(path, "rb") as f:
          found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
      else:
        found[os.path.relpath(path, root)] = f"mode {stat.S_IFMT(info.st_mode):o} device {info.st_rdev}"
  return found


def _module(command: str):
  return importlib.import_module(f"{command}.__main__" if command in (METRICS, CROSSDOMAIN) else command)


@pytest.fixture(scope="module", autouse=True)
def imported():
  """Every command and TensorFlow imported before the cases, so that import-time chatter on stderr (TensorFlow's
  oneDNN notice) is not taken for a case's output."""
  import tensorflow_datasets  # noqa: F401
  for command in COMMANDS:
    _module(command)


def invoke(command: str, argv: list[str], monkeypatch) -> int | str | None:
  """The exit status of `command`'s `main(argv)` in this process (0 when it returns)."""
  module = _module(command)
  if command == MAIN:
    monkeypatch.setattr(sys, "argv", argv)  # ml_collections reads --config.FIELD overrides from sys.argv
    # ml_collections defines a flag per --config.FIELD override when it parses: drop the last case's, as a new
    # process starts without them.
    for name in [name for name in module.FLAGS if name.startswith("config.")]:
      delattr(module.FLAGS, name)
  try:
    module.main(argv[1:] if command == STATS else argv)  # stats' main takes the arguments alone
  except SystemExit as exit_:
    return exit_.code
  return 0


def expand(arg: str, places: dict[str, str]) -> str:
  for key, value in places.items():
    arg = arg.replace("{" + key + "}", value)
  return arg


def _blocked(signum, frame):
  raise TimeoutError("the command blocked for 60 s (reading a FIFO?)")


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_error_line_and_changes_nothing(case: Case, tmp_path, request, monkeypatch, capsys):
  folder = tmp_path / "case"
  populate(folder, BASE_FILES | dict(case.files))
  places = {"t": str(folder), "r": str(REPO), "ro": READ_ONLY}
  roots = [folder]
  for key, fixture in (("a", "assets"), ("d", "data_dir")):
    if any("{" + key + "}" in arg for arg in case.args):
      roots.append(request.getfixturevalue(fixture))
      places[key] = str(roots[-1])
  for key in sorted({key for arg in case.args for key in re.findall(r"\{(dd:[\w-]+)\}", arg)}):
    copy = folder / key.replace(":", "-")
    shutil.copytree(request.getfixturevalue("data_dir"), copy)
    DAMAGED[key[3:]](copy)
    places[key] = str(copy)
  argv = [case.command] + [expand(arg, places) for arg in case.args]
  for name in CLUSTER_ENV:  # no case runs in a cluster: a SLURM or MPI job running the tests must not make one
    monkeypatch.delenv(name, raising=False)
  before = [snapshot(root) for root in roots]
  monkeypatch.chdir(folder)  # a relative default (capjax.main's workdir/...) lands in the case's folder
  for path, mode in case.chmod:
    os.chmod(folder / path, mode)
  capsys.readouterr()  # what the fixtures printed (the dataset build's progress)
  blocking = any(data == FIFO for _, data in case.files)
  if blocking:  # a read of the FIFO would wait for a writer forever: the alarm interrupts it
    signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(60)
  try:
    code = invoke(case.command, argv, monkeypatch)
  finally:
    if blocking:
      signal.alarm(0)
    for path, _ in case.chmod:
      os.chmod(folder / path, 0o700)
  out, err = capsys.readouterr()
  assert "Traceback" not in out + err
  assert code == 2, f"exit status {code!r}, stderr: {err}"
  lines = err.splitlines()
  assert len(lines) == 1, f"stderr is not one line: {err}"
  assert lines[0].startswith("error: ") and " — " in lines[0], lines[0]
  assert expand(case.match, places) in lines[0]
  for root, old in zip(roots, before):
    new = snapshot(root)
    assert {k: v for k, v in new.items() if k in old} == old, f"a file under {root} was changed or removed"
    assert sorted(set(new) - set(old) - {os.path.join(*p.split("/")) for p in case.leaves}) == [], \
        f"new files under {root}"
  for path in case.absent:
    assert not (folder / path).exists(), f"{path} was written"


def test_every_command_has_its_bad_inputs_here():
  counts = {command: sum(p.values[0].command == command for p in CASES) for command in COMMANDS}
  assert all(n >= 10 for n in counts.values()), counts
  assert len(CASES) >= 130


# --- the real process: exit status, and --verbose ------------------------------------------------------------------


def _run(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
             JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, match", [
    (("capjax.text.pipeline", "--input=missing.tsv", "--output=out.jsonl"), "missing.tsv"),
    (("capjax.metrics", "refs.json", "preds.json"), "refs.json is not JSON"),
    (("capjax.tools.convert_weights", "--format=timm", "--input=refs.json", "--output=out"), "refs.json"),
    (("capjax.text.stats", "refs.json", "--column=-1"), "--column"),
])
def test_the_process_exits_2_with_one_line(tmp_path, args, match):
  (tmp_path / "refs.json").write_text('{"annotations": [')
  (tmp_path / "preds.json").write_text("[]")
  before = snapshot(tmp_path)
  proc = _run(*args, cwd=tmp_path)
  assert proc.returncode == 2, proc.stderr
  [line] = proc.stderr.splitlines()
  assert line.startswith("error: ") and " — " in line and match in line
  assert proc.stdout == "" and snapshot(tmp_path) == before


def test_verbose_adds_the_traceback(tmp_path):
  proc = _run("capjax.text.stats", "missing.tsv", "--verbose", cwd=tmp_path)
  assert proc.returncode == 2
  assert proc.stderr.startswith("error: missing.tsv does not exist — ")
  assert "Traceback (most recent call last)" in proc.stderr and "capjax.cli.Failure" in proc.stderr


if not MODES_BIND:
  def test_file_mode_cases_without_root_s_capabilities():
    """The file-mode cases, in a pytest that setpriv starts without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so
    that the modes bind as they do for every other user."""
    assert MODE_CASES
    node = f"{pathlib.Path(__file__).relative_to(REPO)}::test_bad_input_is_one_error_line_and_changes_nothing"
    proc = subprocess.run(
        ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "pytest", "-q",
         "-p", "no:cacheprovider", *[f"{node}[{c.id}]" for c in MODE_CASES]],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"{len(MODE_CASES)} passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-1000:]


def test_a_manual_dir_of_corrupt_files_is_one_error_line_after_the_progress_bars(tmp_path, capsys):
  """Every file present but corrupt: TFDS has started its progress bars (they stay on stderr) when the builder
  finds it has nothing to build, which is then one `error:` line saying what was read, not TFDS's AssertionError."""
  manual = tmp_path / "cc12m"
  manual.mkdir()
  (manual / "train.jsonl.gz").write_bytes(b"not gzip")
  (manual / "cc12m-train-0000.tar").write_bytes(b"")
  before = snapshot(manual)
  build = importlib.import_module(BUILD)
  with pytest.raises(SystemExit) as exit_info:
    build.main([BUILD, "--dataset=cc12m_llavanext", f"--manual_dir={manual}", f"--data_dir={tmp_path / 'tfds'}"])
  out, err = capsys.readouterr()
  assert exit_info.value.code == 2 and "Traceback" not in out + err
  [line] = [line for line in err.splitlines() if "error" in line.lower()]
  assert line.lstrip().startswith("error: no example could be built: ") and " — " in line
  assert "'truncated_jsonl': 1" in line and "'truncated_shard': 1" in line
  assert snapshot(manual) == before
  assert not (tmp_path / "tfds/cc12m_llavanext/all/1.0.0").exists()
