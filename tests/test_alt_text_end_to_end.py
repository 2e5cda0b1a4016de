"""The paper's pipeline end to end: HTML pages and a WARC written here are harvested, real img2dataset (in its own
virtualenv) downloads the images from a server on 127.0.0.1, alt_text_captions is built, and a debug T2T model
trains a few steps on it.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tfds_builders.alt_text_captions import make_dummy_data as dummy
import helpers

pytestmark = pytest.mark.slow  # harvests, builds and trains end to end (conftest.py: the slow rule)

REPO = pathlib.Path(__file__).resolve().parent.parent
INSTALL = ("make .venv-img2dataset/.installed (python3 -m venv .venv-img2dataset && "
           ".venv-img2dataset/bin/pip install -c constraints-img2dataset.txt img2dataset==1.47.0)")


def img2dataset_command() -> str | None:
  """$CAPJAX_IMG2DATASET, else the Makefile's .venv-img2dataset; None when neither is installed."""
  for candidate in (os.environ.get("CAPJAX_IMG2DATASET", ""), os.fspath(REPO / ".venv-img2dataset/bin/img2dataset")):
    if candidate and os.access(candidate, os.X_OK):
      return candidate
  return None


GOOD = [  # (file, alt-text): all pass every stage
    ("dog.jpg", "A dog runs along the beach."),
    ("kids.jpg", "Two children play football in the park."),
    ("car.jpg", "A red car is parked on the street."),
    ("woman.jpg", "A woman walks with a dog in the snow."),
    ("man.jpg", "An old man sits on a bench near the lake."),
    ("cat.jpg", "A cat sleeps on a sofa in the living room."),
]


@pytest.fixture
def server(tmp_path):
  site = tmp_path / "site" / "img"
  site.mkdir(parents=True)
  for seed, (name, _) in enumerate(GOOD + [("text.jpg", "")]):
    (site / name).write_bytes(dummy.jpeg(seed))
  (site / "small.jpg").write_bytes(dummy.jpeg(10, 200, 180))
  (site / "strip.jpg").write_bytes(dummy.jpeg(11, 1500, 500))
  (site / "pic.png").write_bytes(dummy.png())  # named .png; img2dataset stores it as .jpg all the same
  handler = functools.partial(QuietHandler, directory=os.fspath(tmp_path / "site"))
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}"
  httpd.shutdown()
  httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
  def log_message(self, format, *args):  # noqa: A002
    del format, args


def write_inputs(folder: pathlib.Path, host: str) -> None:
  """A saved page (its <base href> points at the image folder) and a WARC of two crawled pages."""
  imgs = "".join(f'<img src="{name}" alt="{alt}">' for name, alt in GOOD[:3])
  (folder / "saved.html").write_text(
      f'<html><head><link rel="canonical" href="{host}/blog/post.html"><base href="{host}/img/"></head>'
      f'<body>{imgs}<img src="small.jpg" alt="A small bird sits on a branch."><img src="data:image/gif;base64,R0lG" '
      f'alt="A spacer image here."></body></html>', encoding="utf-8")
  page2 = "".join(f'<img src="/img/{name}" alt="{alt}">' for name, alt in GOOD[3:])
  page2 += ('<img src="/img/strip.jpg" alt="A long panorama of the mountains at dawn.">'
            '<img src="/img/pic.png" alt="A drawing of a house with a garden.">'
            '<img src="/img/gone.jpg" alt="A boat sails on the sea at sunset.">'
            '<img src="/img/text.jpg" alt="click here">'
            '<img src="/img/dog.jpg" alt="A dog runs along the beach.">')  # a duplicate of saved.html's
  with open(folder / "crawl.warc.gz", "wb") as f:
    writer = WARCWriter(f, gzip=True)
    for url, body in ((f"{host}/gallery/index.html", f"<html><body>{page2}</body></html>"),
                      (f"{host}/about.html", "<html><body><p>No pictures.</p></body></html>")):
      headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
      writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body.encode()),
                                                    http_headers=headers))


def run(args, **kwargs):
  env = dict(os.environ, PYTHONPATH=os.fspath(REPO), no_proxy="127.0.0.1", NO_PROXY="127.0.0.1",
             NO_ALBUMENTATIONS_UPDATE="1")
  # One CPU device, as a user's machine: the tests' 8 fake ones want batches of 8.
  env["XLA_FLAGS"] = helpers.FAST_COMPILE
  env.pop("JAX_NUM_CPU_DEVICES", None)
  return subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=600, **kwargs)


def test_warc_to_training(tmp_path, server):
  img2dataset = img2dataset_command()
  if img2dataset is None:
    helpers.extra_missing(f"img2dataset is not installed: {INSTALL}, or set CAPJAX_IMG2DATASET to its command")
  inputs = tmp_path / "crawl"
  inputs.mkdir()
  write_inputs(inputs, server)
  candidates = tmp_path / "candidates.tsv"
  proc = run([sys.executable, "-m", "capjax.tools.harvest_alt_text", f"--input={inputs}/*.html",
              f"--input={inputs}/*.warc.gz", f"--output={candidates}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  counts = json.loads(proc.stderr.splitlines()[0])
  assert (counts["pages"], counts["candidates"], counts["duplicates"], counts["data_uri"]) == (3, 11, 1, 1)

  manual = tmp_path / "i2d"
  proc = run([img2dataset, "--url_list", os.fspath(candidates), "--input_format", "tsv", "--url_col", "url",
              "--caption_col", "caption", "--save_additional_columns", '["page_url"]', "--output_format",
              "webdataset", "--output_folder", os.fspath(manual), "--resize_mode", "no",
              "--disable_all_reencoding", "True", "--processes_count", "1", "--thread_count", "4",
              "--number_sample_per_shard", "6", "--timeout", "5", "--retries", "0", "--enable_wandb", "False"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert sorted(p.name for p in manual.glob("*.tar")) == ["00000.tar", "00001.tar"]

  data_dir = tmp_path / "tfds"
  proc = run([sys.executable, "-m", "capjax.data.build", "--dataset=alt_text_captions", f"--manual_dir={manual}",
              f"--data_dir={data_dir}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "train: 6 examples" in proc.stdout
  metadata = json.loads((data_dir / "alt_text_captions/paper/1.0.0/metadata.json").read_text())
  assert metadata["funnel"] == [
      {"stage": "image", "in": 11, "out": 7, "reasons": {
          "aspect_ratio": 1, "download_failed": 1, "not_jpeg": 1, "too_small": 1}},
      {"stage": "text", "in": 7, "out": 6, "reasons": {"too_short": 1}},
      {"stage": "cross", "in": 6, "out": 6, "reasons": {}},
      {"stage": "hypernym", "in": 6, "out": 6, "reasons": {}},
      {"stage": "concepts", "in": 6, "out": 6, "reasons": {}},
  ]
  print(proc.stdout[proc.stdout.index("stage "):])  # the funnel table docs/datasets.md quotes

  workdir = tmp_path / "work"
  proc = run([sys.executable, "-m", "capjax.main", "--config=configs/t2t.py:shapes,debug",
              "--config.dataset.name=alt_text_captions", "--config.dataset.builder_config=paper",
              "--config.dataset.auto_build=False", f"--config.dataset.data_dir={data_dir}",
              "--config.dataset.eval_split=train", "--config.dataset.test_split=train", "--config.num_train_steps=2",
              "--config.batch_size=4", "--config.eval.batch_size=4", "--config.eval.num_examples=4",
              "--config.eval.gallery_size=2", "--config.vocab.min_count=1", "--config.eval_every=2",
              "--config.checkpoint_every=2", "--config.log_every=1", f"--workdir={workdir}"])
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert "checkpoint of step 2" in proc.stdout
  shutil.rmtree(workdir)
