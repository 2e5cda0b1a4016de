"""`python -m capjax.data.show` on built tiny datasets: what it prints, the HTML page and its contact sheet, and the
COCO references that capjax.metrics scores."""

from __future__ import annotations

import html
import json
import os
import pathlib
import re

import pytest
import tensorflow_datasets as tfds
from PIL import Image

from capjax.data import build, show
from capjax.metrics import __main__ as metrics_cli

REPO = pathlib.Path(__file__).resolve().parent.parent
KARPATHY_DUMMY = REPO / "tfds_builders" / "karpathy" / "dummy_data"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> pathlib.Path:
  """synthetic_scenes/tiny and stylized_scenes/tiny built as `python -m capjax.data.build` builds them."""
  directory = tmp_path_factory.mktemp("tfds")
  for dataset in ("synthetic_scenes/tiny", "stylized_scenes/tiny"):
    build.main(["capjax.data.build", f"--dataset={dataset}", f"--data_dir={directory}"])
  return directory


@pytest.fixture(scope="module")
def karpathy_dir(tmp_path_factory) -> pathlib.Path:
  """karpathy/flickr30k built from its dummy data."""
  import tfds_builders.karpathy  # noqa: F401 (registers the builder)
  directory = tmp_path_factory.mktemp("karpathy")
  tfds.builder("karpathy/flickr30k", data_dir=directory).download_and_prepare(
      file_format="array_record", download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(KARPATHY_DUMMY)))
  return directory


def _show(capsys, *args: str) -> str:
  capsys.readouterr()
  assert show.main(["capjax.data.show", *args]) == 0
  return capsys.readouterr().out


def _captions(data_dir: pathlib.Path, dataset: str, split: str, count: int = -1) -> list[list[str]]:
  builder = tfds.builder(dataset, data_dir=data_dir)
  source = builder.as_data_source(split=split, decoders={"image": tfds.decode.SkipDecoding()})
  return [[c.decode() for c in record["captions"]] for record in show.records(source, count)]


def test_it_prints_the_splits_and_the_caption_statistics(data_dir, capsys):
  out = _show(capsys, "--dataset=synthetic_scenes/tiny", "--split=validation", f"--data_dir={data_dir}")
  assert out.splitlines() == [
      f"synthetic_scenes/tiny 1.0.0 in {data_dir}/synthetic_scenes/tiny/1.0.0",
      "  train: 512 examples", "  validation: 64 examples", "  test: 64 examples",
      "build report: none stored (this builder records none)",
      'captions of validation (captions): {"examples": 256, "unique_tokens": 34, "tokens_mean": 10.2383, '
      '"tokens_std": 3.4991, "tokens_median": 11.0, "tokens_p95": 14.0}',
  ]


def test_the_page_has_each_examples_image_and_escaped_captions_and_the_sheet_their_grid(data_dir, tmp_path, capsys):
  page = tmp_path / "page.html"
  out = _show(capsys, "--dataset=synthetic_scenes/tiny", "--split=validation", f"--data_dir={data_dir}",
              f"--html={page}", "--num=12")
  assert f"wrote {page} (12 examples) and {tmp_path / 'page.png'} (12 images)" in out
  text = page.read_text()
  assert len(re.findall(r'<img src="data:image/jpeg;base64,', text)) == 12
  for index, captions in enumerate(_captions(data_dir, "synthetic_scenes/tiny", "validation", 12)):
    block = text.split(f'id="example-{index}"')[1].split('<div class="ex"')[0]
    assert "<ol>" + "".join(f"<li>{html.escape(c)}</li>" for c in captions) + "</ol>" in block
  assert 'id="example-12"' not in text
  assert Image.open(tmp_path / "page.png").size == (10 * show.CELL, 2 * show.CELL)


def test_text_from_the_data_is_escaped():
  record = {"captions": ["a <b>bold</b> & \"quoted\" cat"], "note": "<script>alert(1)</script>"}
  text = show.page("<title>", [record], "captions")
  assert "<li>a &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot; cat</li>" in text
  assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>" not in text
  assert "<title>&lt;title&gt;</title>" in text


def test_a_stylized_set_shows_its_stylized_captions(data_dir, tmp_path, capsys):
  page = tmp_path / "stylized.html"
  _show(capsys, "--dataset=stylized_scenes/tiny", "--split=test", f"--data_dir={data_dir}", f"--html={page}",
        "--num=3")
  text = page.read_text()
  builder = tfds.builder("stylized_scenes/tiny", data_dir=data_dir)
  record = builder.as_data_source(split="test")[0]
  assert "<p><b>stylized</b></p>" in text and "<p><b>objects</b></p>" in text
  for phrase in record["stylized"]["phrase"]:
    assert html.escape(json.dumps(phrase.decode()), quote=True) in text
  assert Image.open(tmp_path / "stylized.png").size == (3 * show.CELL, show.CELL)


def test_the_references_are_every_caption_and_score_perfectly_against_themselves(data_dir, tmp_path, capsys):
  refs = tmp_path / "refs.json"
  out = _show(capsys, "--dataset=synthetic_scenes/tiny", "--split=test", f"--data_dir={data_dir}", f"--refs={refs}")
  assert f"wrote {refs} (64 images, 256 captions)" in out
  data = json.loads(refs.read_text())
  captions = _captions(data_dir, "synthetic_scenes/tiny", "test")
  assert data["images"] == [{"id": i} for i in range(64)]
  assert [(a["image_id"], a["caption"]) for a in data["annotations"]] == [
      (i, c) for i, cs in enumerate(captions) for c in cs]
  assert [a["id"] for a in data["annotations"]] == list(range(256))
  preds = tmp_path / "preds.json"
  preds.write_text(json.dumps([{"image_id": i, "caption": cs[0]} for i, cs in enumerate(captions)]))
  capsys.readouterr()
  metrics_cli.main(["capjax.metrics", str(refs), str(preds), "--metrics=Bleu,ROUGE_L,CIDEr"])
  scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert scores["Bleu_4"] == pytest.approx(1.0) and scores["ROUGE_L"] == 1.0 and scores["CIDEr"] > 3


def test_karpathy_prints_its_build_report_and_its_references_keep_the_image_ids(karpathy_dir, tmp_path, capsys):
  refs = tmp_path / "refs.json"
  out = _show(capsys, "--dataset=karpathy/flickr30k", "--split=test", f"--data_dir={karpathy_dir}", f"--refs={refs}")
  report = dict(tfds.builder("karpathy/flickr30k", data_dir=karpathy_dir).info.metadata["build_report"])
  assert f"build report: {json.dumps(report, indent=2, ensure_ascii=False)}" in out
  data = json.loads(refs.read_text())
  assert data["images"] == [{"id": 5}, {"id": 6}]
  assert [a["caption"] for a in data["annotations"] if a["image_id"] == 5][0] == "a child stands near the dog"
  assert len(data["annotations"]) == 10
