"""The caption_folder builder on dummy data in every layout (metadata.jsonl, metadata.csv, `.txt` beside each image,
webdataset tars): every caption kept exactly, JPEG bytes as read and other formats re-encoded as PNG, every bad row,
name or image counted by its reason (names outside the split folder never opened), and one `error:` line, exit 2,
nothing written, for input it cannot build from.
"""

from __future__ import annotations

import io
import os
import pathlib
import shutil

import pytest
import tensorflow_datasets as tfds
from PIL import Image

from capjax.data import build as build_command
from capjax.data import registry
from tfds_builders import report as report_lib
from tfds_builders.caption_folder import caption_folder_dataset_builder  # noqa: F401 (registers the builder)
from tfds_builders.caption_folder import folder as folder_lib
from tfds_builders.caption_folder import make_dummy_data as dummy
from tfds_builders.caption_folder import metadata

HERE = pathlib.Path(dummy.__file__).parent
DUMMY, DUMMY_WDS = HERE / "dummy_data", HERE / "dummy_data_wds"
README = "tfds_builders/caption_folder/README.md"


def _report(layout: str, **counts) -> dict:
  out = {"layout": layout, **dict.fromkeys(folder_lib.REPORT_KEYS, 0), "corrupt_reasons": {}, "re_encoded_from": {}}
  out.update(counts)
  return out


REPORTS = {
    "train": _report("metadata.jsonl", rows=14, malformed_row=2, no_text=2, unsafe_name=3, images=6, missing_image=1,
                     corrupt_image=1, corrupt_reasons={"undecodable": 1}, examples=4, captions=6, unreferenced_file=1,
                     re_encoded=2, re_encoded_from={"png": 1, "webp": 1}),
    "validation": _report("metadata.csv", rows=5, no_text=1, images=3, corrupt_image=1,
                          corrupt_reasons={"not_image": 1}, examples=2, captions=3, re_encoded=1,
                          re_encoded_from={"png": 1}),
    "test": _report("files", no_text=1, images=2, examples=2, captions=2, re_encoded=1, re_encoded_from={"webp": 1}),
}
WDS_REPORTS = {
    "train": _report("tars", no_text=1, unsafe_member=2, duplicate_image=1, images=5, missing_image=1,
                     corrupt_image=1, corrupt_reasons={"undecodable": 1}, examples=3, captions=3, re_encoded=1,
                     re_encoded_from={"webp": 1}),
    "validation": _report("tars", images=2, examples=2, captions=2),
}


def _build(manual_dir: pathlib.Path, data_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
  builder = tfds.builder("caption_folder", data_dir=data_dir)
  builder.download_and_prepare(file_format="array_record",
                               download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)))
  return tfds.builder("caption_folder", data_dir=data_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tfds.core.DatasetBuilder]:
  """Each dummy folder built once: dummy_data (jsonl, csv, files) and dummy_data_wds (tars)."""
  return {"files": _build(DUMMY, tmp_path_factory.mktemp("tfds")),
          "wds": _build(DUMMY_WDS, tmp_path_factory.mktemp("tfds_wds"))}


def _records(builder, split: str) -> dict[str, dict]:
  source = builder.as_data_source(split, decoders={"image": tfds.decode.SkipDecoding()})
  return {r["file_name"].decode(): r for r in (source[i] for i in range(len(source)))}


def _captions(records: dict[str, dict]) -> dict[str, list[str]]:
  return {name: [c.decode() for c in r["captions"]] for name, r in records.items()}


def test_every_layout_reports_every_bad_row_name_and_image_by_reason(built):
  assert {s: i.num_examples for s, i in built["files"].info.splits.items()} == {"train": 4, "validation": 2, "test": 2}
  assert dict(built["files"].info.metadata["build_report"]) == REPORTS
  assert {s: i.num_examples for s, i in built["wds"].info.splits.items()} == {"train": 3, "validation": 2}
  assert dict(built["wds"].info.metadata["build_report"]) == WDS_REPORTS


def test_every_caption_is_kept_exactly_with_every_reference_of_an_image(built):
  assert _captions(_records(built["files"], "train")) == dummy.TRAIN_CAPTIONS
  assert _captions(_records(built["files"], "validation")) == dummy.VALIDATION_CAPTIONS
  assert _captions(_records(built["files"], "test")) == dummy.TEST_CAPTIONS
  wds = {name.split("/", 1)[1]: captions for name, captions in _captions(_records(built["wds"], "train")).items()}
  assert wds == dummy.WDS_TRAIN_CAPTIONS
  assert set(_records(built["wds"], "train")) == {f"00000.tar/{key}" for key in dummy.WDS_TRAIN_CAPTIONS}


def test_jpegs_are_stored_as_read_and_png_and_webp_as_rgb_png(built):
  records = _records(built["files"], "train")
  assert records["a.jpg"]["image"] == (DUMMY / "train" / "a.jpg").read_bytes()
  assert records["e.jpg"]["image"] == (DUMMY / "train" / "e.jpg").read_bytes()  # grey JPEG: as read too
  for name in ("nested/deeper/b.png", "c.webp"):
    with Image.open(io.BytesIO(records[name]["image"])) as stored:
      assert (stored.format, stored.mode, stored.size) == ("PNG", "RGB", (16, 16))
  rgba = Image.open(io.BytesIO(records["nested/deeper/b.png"]["image"])).getpixel((0, 0))
  assert all(value >= 127 for value in rgba)  # half transparent over white
  pixels = built["files"].as_data_source("train")
  assert {pixels[i]["image"].shape[-1] for i in range(len(pixels))} == {3}  # what the trainer reads


def test_a_cmyk_jpeg_is_re_encoded_and_other_formats_are_not_images():
  buffer = io.BytesIO()
  Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(buffer, "JPEG")
  stored, source = folder_lib.stored_image(buffer.getvalue())
  assert source == "jpeg_cmyk" and Image.open(io.BytesIO(stored)).getpixel((0, 0))[0] > 200  # red stays red
  gif = io.BytesIO()
  Image.new("RGB", (8, 8)).save(gif, "GIF")
  with pytest.raises(folder_lib.image_io.ImageError, match="not_image"):
    folder_lib.stored_image(gif.getvalue())


def test_names_outside_the_split_folder_are_counted_and_never_opened(monkeypatch):
  opened: list[str] = []
  real_open = os.open
  monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(os.fspath(path)), real_open(path, *a, **k))[1])
  report = report_lib.Report()
  root = os.fspath(DUMMY / "train")
  index = metadata.read_index(os.path.join(root, "metadata.jsonl"), report)
  examples = dict(folder_lib.metadata_examples(root, index, report))
  assert sorted(examples) == sorted(dummy.TRAIN_CAPTIONS)
  assert report.counts["unsafe_name"] == 3  # ../validation/v1.jpg, /etc/passwd, link_out.jpg (a link to validation/)
  assert not [p for p in opened if "v1.jpg" in p or "passwd" in p or "link_out" in p]
  assert metadata.safe_name("./a//b.jpg") == "a/b.jpg"
  assert [metadata.safe_name(n) for n in ("../a.jpg", "a/../../b.jpg", "/a.jpg", "a\\..\\b.jpg", "", ".")] == [None] * 6


def test_a_file_that_is_a_fifo_is_missing_never_read(tmp_path):
  root = tmp_path / "train"
  root.mkdir()
  os.mkfifo(root / "pipe.jpg")
  (root / "pipe.txt").write_text("a caption of a pipe")
  report = report_lib.Report()
  assert list(folder_lib.txt_examples(os.fspath(root), report)) == []
  assert report.counts["missing_image"] == 1


def _fail(capsys, manual: pathlib.Path, data_dir: pathlib.Path) -> str:
  with pytest.raises(SystemExit) as exit_:
    build_command.main(["build", "--dataset=caption_folder", f"--manual_dir={manual}", f"--data_dir={data_dir}"])
  assert exit_.value.code == 2
  err = capsys.readouterr().err
  assert err.count("error: ") == 1 and "Traceback" not in err, err
  # A split found empty mid-build leaves TFDS's progress bars on stderr before the line (no newline after each).
  err = err[err.index("error: "):]
  assert err.count("\n") == 1, err
  assert not (data_dir / "caption_folder").exists() or not any((data_dir / "caption_folder").iterdir())
  return err


def _manual(tmp_path: pathlib.Path, name: str = "manual") -> pathlib.Path:
  manual = tmp_path / name
  shutil.copytree(DUMMY, manual, symlinks=True)
  return manual


def test_metadata_without_its_columns_or_not_a_file_is_one_error_line_and_nothing_written(tmp_path, capsys):
  manual, data_dir = _manual(tmp_path), tmp_path / "tfds"
  jsonl, csv = manual / "train" / "metadata.jsonl", manual / "validation" / "metadata.csv"
  jsonl.write_text('{"name": "a.jpg", "text": "a caption"}\n')
  assert _fail(capsys, manual, data_dir) == (
      f"error: {jsonl} has no file_name column — name the columns file_name and text, as Hugging Face's imagefolder "
      f"does ({README})\n")
  jsonl.write_text('{"file_name": "a.jpg", "description": "a caption"}\n')
  assert _fail(capsys, manual, data_dir).startswith(f"error: {jsonl} has no text (or caption) column — ")
  jsonl.unlink()
  os.mkfifo(jsonl)
  assert _fail(capsys, manual, data_dir) == (
      f"error: {jsonl} is a FIFO (named pipe), not a regular file — save the metadata to a file ({README})\n")
  jsonl.unlink()
  jsonl.write_text('{"file_name": "a.jpg", "text": "a caption"}\n')
  csv.write_text("file_name,description\nv1.jpg,a caption\n")
  assert _fail(capsys, manual, data_dir).startswith(f"error: {csv} has no text (or caption) column — ")
  (manual / "validation" / "metadata.jsonl").write_text('{"file_name": "v1.jpg", "text": "a caption"}\n')
  assert _fail(capsys, manual, data_dir).startswith(f"error: {manual / 'validation'} holds both metadata.jsonl and ")


def test_a_split_with_no_example_or_no_split_at_all_is_one_error_line_and_nothing_written(tmp_path, capsys):
  manual, data_dir = _manual(tmp_path), tmp_path / "tfds"
  for name in ("000000000.jpg", "000000002.webp"):  # the test split's images with a caption: now not images
    (manual / "test" / "00000" / name).write_bytes(b"not an image")
  assert _fail(capsys, manual, data_dir).startswith(
      f"error: no example could be built: the test split ({manual / 'test'}, files) gave ")
  (manual / "train" / "metadata.jsonl").write_text('{"file_name": "../x.jpg", "text": "outside"}\n')
  assert _fail(capsys, manual, data_dir).startswith(
      f"error: no example could be built: no row of {manual / 'train' / 'metadata.jsonl'} names a file with text")
  empty = tmp_path / "empty"
  (empty / "training").mkdir(parents=True)
  assert _fail(capsys, empty, data_dir) == (
      f"error: {empty} holds no train/, validation/ or test/ folder — put each split's images (and its "
      f"metadata.jsonl or metadata.csv) in a folder of its name ({README})\n")


def test_the_builder_is_registered_with_its_readme_command():
  assert registry.KNOWN_BUILDERS["caption_folder"] == (
      "tfds_builders.caption_folder",
      "download what tfds_builders/caption_folder/README.md lists into DIR, then run "
      "`python -m capjax.data.build --dataset=caption_folder --manual_dir=DIR --data_dir=OUT`")
