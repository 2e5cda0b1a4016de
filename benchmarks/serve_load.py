"""Images/s of `python -m capjax.serve` under load, batched and one at a time: the server is started on loopback,
then the same number of requests is sent by `--clients` concurrent clients and by one client waiting for each answer
before the next. The issue's bar: batched throughput at least 4x the one-at-a-time rate under 32 clients.

usage: PYTHONPATH=$PWD python benchmarks/serve_load.py --export=E | --workdir=W [--requests=512] [--clients=32]
           [--max_batch=16] [--max_wait_ms=10] [--image_size=224]

Each request is a PNG of random pixels at --image_size (the server resizes it to the model's size, as it would a
user's photo), one of 16 made up front, sent raw as image/png over a new connection. Printed: images/s, p50 and p99
latency, and errors (any answer but 200; there must be none), for each mode, then the ratio.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import io
import json
import os
import subprocess
import sys
import time

import numpy as np
from absl import app, flags
from PIL import Image

FLAGS = flags.FLAGS
_EXPORT = flags.DEFINE_string("export", None, "an export's folder")
_WORKDIR = flags.DEFINE_string("workdir", None, "a trained workdir (exported in memory by the server)")
_REQUESTS = flags.DEFINE_integer("requests", 512, "requests in each mode", lower_bound=1, upper_bound=100_000)
_CLIENTS = flags.DEFINE_integer("clients", 32, "concurrent clients in the batched mode", lower_bound=1,
                                upper_bound=256)
_MAX_BATCH = flags.DEFINE_integer("max_batch", 16, "the server's --max_batch", lower_bound=1)
_MAX_WAIT_MS = flags.DEFINE_float("max_wait_ms", 10.0, "the server's --max_wait_ms", lower_bound=0.0)
_IMAGE_SIZE = flags.DEFINE_integer("image_size", 224, "the side of the PNGs sent", lower_bound=8, upper_bound=4096)

HOST = "127.0.0.1"  # loopback only: the load never leaves this machine


def pictures(size: int, count: int = 16) -> list[bytes]:
  rng = np.random.default_rng(0)
  out = []
  for _ in range(count):
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (size, size, 3), np.uint8)).save(buffer, "PNG")
    out.append(buffer.getvalue())
  return out


def one_request(port: int, data: bytes) -> tuple[float, int]:
  """(seconds, HTTP status) of one POST /caption; status 0 for a connection that failed."""
  start = time.perf_counter()
  try:
    connection = http.client.HTTPConnection(HOST, port, timeout=120)
    connection.request("POST", "/caption", data, {"Content-Type": "image/png"})
    answer = connection.getresponse()
    answer.read()
    status = answer.status
    connection.close()
  except OSError:
    status = 0
  return time.perf_counter() - start, status


def load(port: int, images: list[bytes], requests: int, clients: int) -> dict:
  start = time.perf_counter()
  work = [images[i % len(images)] for i in range(requests)]
  if clients == 1:
    results = [one_request(port, data) for data in work]
  else:
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
      results = list(pool.map(lambda data: one_request(port, data), work))
  elapsed = time.perf_counter() - start
  latencies = np.array([seconds for seconds, _ in results]) * 1000
  return {"clients": clients, "images_per_s": requests / elapsed, "p50_ms": float(np.percentile(latencies, 50)),
          "p99_ms": float(np.percentile(latencies, 99)), "errors": sum(status != 200 for _, status in results)}


def main(argv: list[str]) -> None:
  del argv
  if (_EXPORT.value is None) == (_WORKDIR.value is None):
    raise app.UsageError("give one of --export and --workdir")
  model = f"--export={_EXPORT.value}" if _EXPORT.value else f"--workdir={_WORKDIR.value}"
  server = subprocess.Popen([sys.executable, "-m", "capjax.serve", model, "--port=0", f"--host={HOST}",
                             f"--max_batch={_MAX_BATCH.value}", f"--max_wait_ms={_MAX_WAIT_MS.value}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=os.environ)
  try:
    ready = json.loads(server.stdout.readline())
    port = int(ready["url"].rstrip("/").rsplit(":", 1)[1])
    print(f"server ready in {ready['ready_s']} s: k={ready['k']}, padded sizes {ready['batch_sizes']}")
    images = pictures(_IMAGE_SIZE.value)
    one_request(port, images[0])  # the first answer of each thread pool is no different, but the process's first is
    rows = [load(port, images, _REQUESTS.value, 1), load(port, images, _REQUESTS.value, _CLIENTS.value)]
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    connection.request("GET", "/healthz")
    health = json.loads(connection.getresponse().read())
  finally:
    server.terminate()
    server.wait(timeout=60)
  print(f"{_REQUESTS.value} requests of {_IMAGE_SIZE.value}x{_IMAGE_SIZE.value} PNGs per mode, --max_batch="
        f"{_MAX_BATCH.value} --max_wait_ms={_MAX_WAIT_MS.value}")
  print("| clients | images/s | p50 ms | p99 ms | errors |\n|---:|---:|---:|---:|---:|")
  for row in rows:
    print(f"| {row['clients']} | {row['images_per_s']:.1f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | "
          f"{row['errors']} |")
  print(f"batched / one at a time: {rows[1]['images_per_s'] / rows[0]['images_per_s']:.2f}x; decode calls "
        f"{health['decode_calls']} for {health['images']} images, batch sizes {health['batch_sizes']}")


if __name__ == "__main__":
  app.run(main)
