"""`python -m capjax.serve` over real HTTP on loopback, serving the session's trained `:shapes,debug` run
(tests/trained_models.py) exported once with beam search of 3: the endpoints; captions equal to `load_jax`'s; bad
bodies answered 4xx in JSON, the server answering afterwards; concurrent requests decoded in fewer calls; SIGTERM
with a request in flight (a `--workdir` server, which exports in memory) answers it and exits 0; the page in a
headless Chromium. One server per module, one more for SIGTERM."""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from PIL import Image

import browser
from capjax import config_util, inference
from capjax.data import sources
from image_bytes import black_bilevel_png
import helpers
from trained_models import REPO, main_env

NUM_IMAGES = 4
START_S = 300  # a server's start-up (JAX, the export, one compile per padded size) on a busy 2-core machine


@pytest.fixture(scope="module")
def run(shapes_debug_run, tmp_path_factory):
  """(config, workdir, PNG paths of test-split pictures)."""
  data_dir, workdir, _ = shapes_debug_run
  config = config_util.load("configs/t2t.py:shapes,debug")
  config.dataset.update(builder_config="tiny", data_dir=str(data_dir))
  source = sources.data_source(config.dataset, "test")
  folder = tmp_path_factory.mktemp("pictures")
  paths = []
  for i in range(NUM_IMAGES):
    image = source[i]["image"]
    image = np.asarray(Image.open(io.BytesIO(image)).convert("RGB")) if isinstance(image, bytes) else image
    paths.append(folder / f"{i}.png")
    Image.fromarray(np.asarray(image)).save(paths[-1])
  return config, workdir, paths


@pytest.fixture(scope="module")
def export(run, tmp_path_factory):
  """The run exported with beam search of 3 (k = 3 captions per image)."""
  config, workdir, _ = run
  folder = tmp_path_factory.mktemp("beam")
  helpers.beam_config(folder, config.dataset.data_dir)
  proc = subprocess.run([sys.executable, "-m", "capjax.export", f"--workdir={workdir}", f"--output={folder / 'e'}",
                         f"--config={folder / 'beam.py'}"], cwd=REPO, env=main_env(), capture_output=True, text=True,
                        timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return folder / "e"


class Served:
  """A `python -m capjax.serve` process on a free loopback port; `url` from its first stdout line."""

  def __init__(self, log: pathlib.Path, *args: str):
    self.log = log.open("w")
    self.process = subprocess.Popen([sys.executable, "-m", "capjax.serve", "--port=0", *args], cwd=REPO,
                                    env=main_env(), stdout=subprocess.PIPE, stderr=self.log, text=True)
    line = self.process.stdout.readline()  # the ready line: blocks until the sizes are compiled, or the exit
    assert line, f"the server exited: {log.read_text()[-3000:]}"
    self.ready = json.loads(line)
    self.url = self.ready["url"].rstrip("/")

  def stop(self, signalled: bool = False) -> tuple[int, str]:
    if not signalled:
      self.process.send_signal(signal.SIGTERM)
    rest = self.process.communicate(timeout=60)[0]
    self.log.close()
    return self.process.returncode, rest


@pytest.fixture(scope="module")
def server(export, tmp_path_factory):
  served = Served(tmp_path_factory.mktemp("serve") / "stderr.txt", f"--export={export}", "--max_batch=16",
                  "--max_wait_ms=200", "--max_bytes=5000000")
  yield served
  assert served.stop()[0] == 0


def request(url: str, data: bytes | None = None, content_type: str = "image/png") -> tuple[int, dict | str]:
  """(status, JSON body, or text for the page) of a GET, or a POST of `data`."""
  req = urllib.request.Request(url, data=data, headers={"Content-Type": content_type} if data is not None else {})
  try:
    with urllib.request.urlopen(req, timeout=120) as answer:
      status, body, kind = answer.status, answer.read(), answer.headers["Content-Type"]
  except urllib.error.HTTPError as error:
    status, body, kind = error.code, error.read(), error.headers["Content-Type"]
  return status, json.loads(body) if kind == "application/json" else body.decode()


def multipart(field: str, data: bytes, filename: str = "picture.png") -> tuple[bytes, str]:
  boundary = "capjax-test-boundary"
  body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
          f"Content-Type: image/png\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
  return body, f"multipart/form-data; boundary={boundary}"


def test_healthz_and_the_page(server):
  status, health = request(f"{server.url}/healthz")
  assert status == 200 and health["ok"] and health["k"] == 3 and health["batch_sizes_warmed"] == [1, 2, 4, 8, 16]
  status, page = request(f"{server.url}/")
  assert status == 200 and '<input id="file" type="file"' in page and 'fetch("/caption"' in page
  assert "http" not in page.replace('"http', "")  # self-contained: no script, style or font from elsewhere
  assert request(f"{server.url}/nowhere")[0] == 404


def test_captions_equal_load_jax_s_raw_bytes_and_multipart(run, export, server):
  _, _, paths = run
  from capjax import export as export_lib
  captions, scores = export_lib.load_jax(export)([p.read_bytes() for p in paths])
  for i, path in enumerate(paths):
    raw = request(f"{server.url}/caption", path.read_bytes())
    form = request(f"{server.url}/caption", *multipart("image", path.read_bytes()))
    assert raw == form
    status, body = raw
    assert status == 200 and [c["text"] for c in body["captions"]] == captions[i]
    np.testing.assert_allclose([c["score"] for c in body["captions"]], scores[i], rtol=1e-5, atol=1e-5)
    assert np.all(np.diff([c["score"] for c in body["captions"]]) <= 0)  # best first
  assert len({tuple(np.round(row, 4)) for row in scores}) > 1  # a comparison of each picture's own, not of constants


def _truncated_jpeg(path: pathlib.Path) -> bytes:
  out = io.BytesIO()
  Image.open(path).convert("RGB").resize((256, 256)).save(out, "JPEG", quality=95)
  return out.getvalue()[: len(out.getvalue()) // 2]


def test_bad_bodies_are_400_json_and_the_server_still_answers(run, server):
  _, _, paths = run
  bad = {"not an image": (b"caption this, please", "image/png"), "truncated JPEG": (_truncated_jpeg(paths[0]),
         "image/jpeg"), "0 bytes": (b"", "image/png"), "decompression bomb": (black_bilevel_png(30_000, 30_000),
         "image/png"), "form without image": multipart("picture", paths[0].read_bytes())}
  for name, (data, content_type) in bad.items():
    status, body = request(f"{server.url}/caption", data, content_type)
    assert status == 400 and set(body) == {"error"} and "Traceback" not in body["error"], (name, status, body)
  assert request(f"{server.url}/caption", paths[0].read_bytes())[0] == 200
  assert "Traceback" not in pathlib.Path(server.log.name).read_text()


def test_an_oversized_body_is_413_before_it_is_sent(run, server):
  host, port = server.url.removeprefix("http://").split(":")
  with socket.create_connection((host, int(port)), timeout=30) as connection:
    # the headers of a 50 MB upload, and none of its body: the answer can only come from Content-Length
    connection.sendall(f"POST /caption HTTP/1.1\r\nHost: {host}\r\nContent-Type: image/jpeg\r\n"
                       f"Content-Length: {50_000_000}\r\n\r\n".encode())
    answer = b""
    while chunk := connection.recv(65536):
      answer += chunk
  head, _, body = answer.partition(b"\r\n\r\n")
  assert head.startswith(b"HTTP/1.0 413") and "max_bytes" in json.loads(body)["error"], answer[:300]
  assert request(f"{server.url}/caption", run[2][0].read_bytes())[0] == 200


def raw(url: str, data: bytes) -> tuple[bytes, bytes]:
  """(status line and headers, body) of `data` sent as is, the whole answer read."""
  host, port = url.removeprefix("http://").split(":")
  with socket.create_connection((host, int(port)), timeout=30) as connection:
    connection.sendall(data)
    answer = b""
    while chunk := connection.recv(65536):
      answer += chunk
  head, _, body = answer.partition(b"\r\n\r\n")
  return head, body


def test_a_request_the_server_cannot_parse_is_answered_in_json(server):
  head, body = raw(server.url, b"GET / too many words HTTP/1.1\r\n\r\n")
  assert head.startswith(b"HTTP/1.0 400") and "error" in json.loads(body), head
  head, body = raw(server.url, b"PUT /caption HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
  assert head.startswith(b"HTTP/1.0 501") and "error" in json.loads(body), head
  assert request(f"{server.url}/healthz")[0] == 200


def test_sixteen_concurrent_requests_are_decoded_in_fewer_calls(run, export, server):
  _, _, paths = run
  images = [paths[i % NUM_IMAGES].read_bytes() for i in range(16)]
  calls_before = request(f"{server.url}/healthz")[1]["decode_calls"]
  with concurrent.futures.ThreadPoolExecutor(16) as pool:
    answers = list(pool.map(lambda data: request(f"{server.url}/caption", data), images))
  health = request(f"{server.url}/healthz")[1]
  assert [status for status, _ in answers] == [200] * 16
  assert health["decode_calls"] - calls_before < 16, health
  texts = [[c["text"] for c in body["captions"]] for _, body in answers]
  scores = [[c["score"] for c in body["captions"]] for _, body in answers]
  assert texts[:NUM_IMAGES] * 4 == texts  # each picture its own captions, wherever the batch put it
  np.testing.assert_allclose(scores[:NUM_IMAGES] * 4, scores, rtol=1e-5, atol=1e-5)


def reference(config, workdir, paths) -> list[str]:
  """`--mode=caption`'s captions of `paths`, in their order."""
  captions = inference.caption_files(config, str(workdir), str(paths[0].parent / "*.png"))["captions"]
  return [captions[str(p)] for p in paths]


def test_sigterm_answers_the_request_in_flight_and_exits_0(run, tmp_path):
  config, workdir, paths = run
  served = Served(tmp_path / "stderr.txt", f"--workdir={workdir}", "--max_batch=1")  # the run's greedy decode
  host, port = served.url.removeprefix("http://").split(":")
  data = paths[1].read_bytes()
  with socket.create_connection((host, int(port)), timeout=60) as connection:
    connection.sendall(f"POST /caption HTTP/1.1\r\nHost: {host}\r\nContent-Type: image/png\r\n"
                       f"Content-Length: {len(data)}\r\n\r\n".encode() + data[:10])
    time.sleep(0.5)  # the request is accepted, its body half sent
    served.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    connection.sendall(data[10:])
    answer = b""
    while chunk := connection.recv(65536):
      answer += chunk
  start = time.monotonic()
  status, rest = served.stop(signalled=True)
  assert status == 0 and time.monotonic() - start < 10, pathlib.Path(served.log.name).read_text()[-3000:]
  head, _, body = answer.partition(b"\r\n\r\n")
  assert head.startswith(b"HTTP/1.0 200"), answer[:300]
  assert [c["text"] for c in json.loads(body)["captions"]] == reference(config, workdir, paths[1:2])
  assert json.loads(rest.strip().splitlines()[-1])["stopped"]


@pytest.mark.skipif(browser.find() is None, reason=browser.MISSING)
def test_the_page_captions_a_picked_file_in_chromium(run, server, tmp_path):
  _, _, paths = run
  want = request(f"{server.url}/caption", paths[2].read_bytes())[1]["captions"][0]["text"]
  page = browser.Browser(browser.find(), tmp_path)
  try:
    page.events = []
    page.send("Page.navigate", {"url": f"{server.url}/"}, session=True)
    page.wait_for("Page.loadEventFired")
    node = page.send("Runtime.evaluate", {"expression": "document.getElementById('file')"}, session=True)
    page.send("DOM.setFileInputFiles", {"files": [os.fspath(paths[2])], "objectId": node["result"]["objectId"]},
              session=True)
    deadline = time.monotonic() + 60
    shown = None
    while time.monotonic() < deadline and not shown:
      shown = page.evaluate("[...document.querySelectorAll('#captions .text')].map(e => e.textContent)")
      time.sleep(0.2)
    status = page.evaluate("document.getElementById('status').textContent")
    assert shown and shown[0] == (want or "(an empty caption)"), status  # the page names an empty best caption
  finally:
    page.close()
