"""`python -m capjax.data.build` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

import io
import pathlib
import tarfile

import pytest

from hostile import harness
from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink
from hostile.inputs import REFS, TRAIN_SHARD, as_json

BUILD = "capjax.data.build"

# A FIFO (its read blocks forever) and a device (/dev/zero's read grows memory without end), as the error names them.
SPECIAL_FILES = (("fifo", FIFO, "a FIFO (named pipe)"), ("device", NULL_DEVICE, "a character device"))
KARPATHY_JSON = {"images": [{"filename": "1.jpg", "imgid": 1, "split": "test",
                             "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"], "sentid": 1}]}]}
# (name, config, manual dir, its files, what the error line says): a manual dir the karpathy builder cannot build.
KARPATHY_BUILDS = [
    ("manual-dir-without-the-files", "flickr30k", "folder", {}, "dataset_flickr30k.json is missing"),
    ("json-not-json", "flickr30k", "kp", {"kp/dataset_flickr30k.json": b'{"images": [',
                                          "kp/flickr30k-images/1.jpg": b"x"}, "is not JSON"),
    ("json-is-coco-format", "flickr30k", "kp", {"kp/dataset_flickr30k.json": as_json(REFS),
                                                "kp/flickr30k-images/1.jpg": b"x"}, "karpathy/coco_format"),
    ("coco-format-json-is-karpathys", "nocaps", "kp", {"kp/nocaps_val_4500_captions.json": as_json(KARPATHY_JSON),
                                                       "kp/validation/1.jpg": b"x"}, "karpathy/coco, flickr30k"),
    ("json-entries-missing-keys", "flickr30k", "kp",
     {"kp/dataset_flickr30k.json": as_json({"images": [{"filename": "1.jpg", "sentences": []}]}),
      "kp/flickr30k-images/1.jpg": b"x"}, "no example could be built"),
    ("image-folder-empty", "flickr30k", "kp", {"kp/dataset_flickr30k.json": as_json(KARPATHY_JSON),
                                               "kp/flickr30k-images/.keep": b""}, "missing or empty"),
    # D1, D2: the json a FIFO (its read blocked forever) or a device (/dev/zero's grew memory without end).
    *((f"json-{name}", "flickr30k", "kp", {"kp/dataset_flickr30k.json": special, "kp/flickr30k-images/1.jpg": b"x"},
       f"kp/dataset_flickr30k.json is {what}, not a regular file — save the data to a file")
      for name, special, what in SPECIAL_FILES),
]
CC3M_TSV = b"a dog on the grass\thttp://example.org/1.jpg\n"


def _hostile_mirror() -> bytes:
  """A cc3m-wds tar whose members are `../x.jpg` and a symlink to /etc/passwd."""
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w") as tar:
    info = tarfile.TarInfo("../000000000.jpg")
    info.size = 4
    tar.addfile(info, io.BytesIO(b"\xff\xd8\xff\xe0"))
    link = tarfile.TarInfo("000000001.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    tar.addfile(link)
  return buffer.getvalue()


HOSTILE_MIRROR = _hostile_mirror()

CASES = [
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
    case(BUILD, "cc3m-wds-without-its-tars", "--dataset=cc3m/wds", "--manual_dir={t}/folder", "--data_dir={t}/new",
         match="no cc3m-wds tars", absent=("new/cc3m/wds/1.0.0",), leaves=("new/cc3m/.config/metadata.json",)),
    *(case(BUILD, f"karpathy-{name}", f"--dataset=karpathy/{config}", f"--manual_dir={{t}}/{folder}",
           "--data_dir={t}/new", files=files, match=match, absent=(f"new/karpathy/{config}/1.0.0",),
           leaves=("new/karpathy/.config/metadata.json",))
      for name, config, folder, files, match in KARPATHY_BUILDS),
    # D1, D2: cc3m's TSV a FIFO or a device: refused before the build starts (it is read in the example generator).
    *(case(BUILD, f"cc3m-tsv-{name}", "--dataset=cc3m", "--manual_dir={t}/m", "--data_dir={t}/new",
           files={"m/Train_GCC-training.tsv": special, "m/Validation_GCC-1.1.0-Validation.tsv": CC3M_TSV,
                  "m/images/train/00000.tar": b""},
           match=f"m/Train_GCC-training.tsv is {what}, not a regular file", absent=("new/cc3m/unlabeled/1.0.0",),
           leaves=("new/cc3m/.config/metadata.json",))
      for name, special, what in SPECIAL_FILES),
    # The one rule for outputs: the dataset's folder neither inside the manual dir, nor around it.
    case(BUILD, "data-dir-inside-the-manual-dir", "--dataset=cc3m", "--manual_dir={t}/folder",
         "--data_dir={t}/folder/tfds", absent=("folder/tfds",),
         match="--data_dir's dataset folder {t}/folder/tfds/cc3m is inside --manual_dir={t}/folder, which the "
               "command reads"),
    case(BUILD, "data-dir-inside-the-manual-dir-through-a-link", "--dataset=cc3m", "--manual_dir={t}/folder",
         "--data_dir={t}/link/tfds", files={"link": symlink("folder")}, absent=("folder/tfds",),
         match="--data_dir's dataset folder {t}/link/tfds/cc3m is inside --manual_dir={t}/folder"),
    case(BUILD, "manual-dir-inside-the-dataset-folder", "--dataset=cc3m", "--manual_dir={t}/new/cc3m/m",
         "--data_dir={t}/new", files={"new/cc3m/m/Train_GCC-training.tsv": CC3M_TSV},
         match="--data_dir's dataset folder {t}/new/cc3m contains --manual_dir={t}/new/cc3m/m"),
    case(BUILD, "set-on-a-builder-without-settings", "--dataset=synthetic_scenes", "--set=size=3",
         "--data_dir={t}/new", match="--set", absent=("new",)),
    case(BUILD, "set-unknown-key", "--dataset=alt_text_captions", "--set=colour=red", "--manual_dir={t}/folder",
         "--data_dir={t}/new", match="colour", absent=("new",)),
    # Every number of --set range-checked: NaN passes every comparison of its stage, a negative size or count
    # keeps everything.
    *(case(BUILD, f"set-{name}", "--dataset=alt_text_captions", f"--set={item}", "--manual_dir={t}/folder",
           "--data_dir={t}/new", match=match, absent=("new",))
      for name, item, match in (
          ("aspect-ratio-nan", "max_aspect_ratio=nan", "--set=max_aspect_ratio=nan is not a finite number — set "
                                                       "--set=max_aspect_ratio to at least 1"),
          ("size-negative", "min_side=-400", "--set=min_side=-400 is impossible — set --set=min_side to at least 0"),
          ("count-negative", "min_concept_count=-1", "--set=min_concept_count=-1 is impossible — set "
                                                     "--set=min_concept_count to at least 0"),
          ("text-ratio-infinite", "filters.max_noun_ratio=inf", "--set=filters.max_noun_ratio=inf is not a finite "
                                                                "number — set --set=filters.max_noun_ratio in [0, 1]"),
          ("threshold-above-one", "unsafe_threshold=2", "--set=unsafe_threshold=2.0 is impossible — set "
                                                        "--set=unsafe_threshold in [0, 1]"))),
    case(BUILD, "set-without-equals", "--dataset=alt_text_captions", "--set=colour", "--manual_dir={t}/folder",
         "--data_dir={t}/new", absent=("new",)),
    *(case(BUILD, f"set-clip-{name}", "--dataset=alt_text_captions", *(f"--set={item}" for item in items),
           "--manual_dir={t}/folder", "--data_dir={t}/new", match=match, absent=("new",))
      for name, items, match in (
          ("threshold-out-of-range", ("clip_weights=clip", "clip_threshold=1.5"), "clip_threshold=1.5 is out of range"),
          ("threshold-unknown", ("clip_weights=clip", "clip_threshold=laion2b"), "laion2b is not a CLIP cut-off"),
          ("threshold-share-out-of-range", ("clip_weights=clip", "clip_threshold=top=1.5"),
           "clip_threshold=top=1.5 is out of range"),
          ("threshold-without-weights", ("clip_threshold=laion",), "needs a CLIP model"))),
    # TFDS records the builder config before it looks into the manual dir: bookkeeping, not an output.
    *(case(BUILD, f"set-clip-weights-{name}", "--dataset=alt_text_captions", f"--set=clip_weights={weights}",
           "--manual_dir={t}/i2d", "--data_dir={t}/new", files={"i2d/00000.tar": b""}, match=match,
           leaves=("new/alt_text_captions/.config/metadata.json",))
      for name, weights, match in (("missing", "nowhere", "i2d/nowhere/config.json is missing — convert it"),
                                   ("not-clip", "{a}/bert", "holds a bert model, not a clip one"))),
    # A FIFO or a device where the weights' config.json or folder should be: refused before it is opened.
    *(case(BUILD, f"set-clip-weights-{name}", "--dataset=alt_text_captions", f"--set=clip_weights={{t}}/{weights}",
           "--manual_dir={t}/i2d", "--data_dir={t}/new", files={"i2d/00000.tar": b"", **files}, match=match,
           leaves=("new/alt_text_captions/.config/metadata.json",))
      for name, weights, files, match in (
          ("config-fifo", "w", {"w/config.json": FIFO}, "config.json is a FIFO (named pipe), not a regular file"),
          ("config-device", "w", {"w/config.json": NULL_DEVICE}, "config.json is a character device, not a regular"),
          ("folder-fifo", "pipe", {"pipe": FIFO}, "pipe is not a folder"),
          ("symlink-loop", "loop", {"loop": symlink("loop")}, "loop is a symlink loop (a link that leads back to "
                                                              "itself) — give the converted folder itself"))),
    case(BUILD, "damaged-dataset-without-its-manual-files", "--dataset=cc3m", "--data_dir={dd:cc3m-shard-cut}",
         match=f"{TRAIN_SHARD} holds 0 records"),
    case(BUILD, "config-escapes", "--dataset=synthetic_scenes/../../x", "--data_dir={t}/new", absent=("new",)),
    *not_flags(BUILD, "--dataset=synthetic_scenes/tiny", "--data_dir={t}/new"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)


def _one_error_line(dataset: str, manual: pathlib.Path, data_dir: pathlib.Path, capsys) -> str:
  """The `error:` line of a build that fails after TFDS's progress bars started (they stay on stderr)."""
  build = harness.command_module(BUILD)
  with pytest.raises(SystemExit) as exit_info:
    build.main([BUILD, f"--dataset={dataset}", f"--manual_dir={manual}", f"--data_dir={data_dir}"])
  out, err = capsys.readouterr()
  assert exit_info.value.code == 2 and "Traceback" not in out + err
  [line] = [line for line in err.splitlines() if "error" in line.lower()]
  assert line.lstrip().startswith("error: no example could be built: ") and " — " in line
  return line


def test_a_manual_dir_of_corrupt_files_is_one_error_line_after_the_progress_bars(tmp_path, capsys):
  """Every file present but corrupt: TFDS has started its progress bars (they stay on stderr) when the builder
  finds it has nothing to build, which is then one `error:` line saying what was read, not TFDS's AssertionError."""
  manual = tmp_path / "cc12m"
  manual.mkdir()
  (manual / "train.jsonl.gz").write_bytes(b"not gzip")
  (manual / "cc12m-train-0000.tar").write_bytes(b"")
  before = harness.snapshot(manual)
  line = _one_error_line("cc12m_llavanext", manual, tmp_path / "tfds", capsys)
  assert "'truncated_jsonl': 1" in line and "'truncated_shard': 1" in line
  assert harness.snapshot(manual) == before
  assert not (tmp_path / "tfds/cc12m_llavanext/all/1.0.0").exists()


def test_a_mirror_tar_of_hostile_members_is_one_error_line_with_them_counted(tmp_path, capsys):
  """cc3m/wds over a tar whose members are an escaping name and a symlink: nothing read or written outside, and
  one `error:` line (after TFDS's progress bars) whose counts say what was left out."""
  manual = tmp_path / "mirror"
  manual.mkdir()
  (manual / "cc3m-train-0000.tar").write_bytes(HOSTILE_MIRROR)
  before = harness.snapshot(tmp_path)
  line = _one_error_line("cc3m/wds", manual, tmp_path / "tfds", capsys)
  assert "1 cc3m-wds tar(s) of train gave {'samples': 0" in line and "'unsafe_member': 2" in line
  assert {k: v for k, v in harness.snapshot(tmp_path).items() if not k.startswith("tfds")} == before
  assert not (tmp_path / "tfds/cc3m/wds/1.0.0").exists() and not (tmp_path / "000000000.jpg").exists()
