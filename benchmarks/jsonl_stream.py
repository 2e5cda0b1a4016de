"""Measures the cc12m_llavanext builder's first stage on a generated train.jsonl.gz: the file streamed, every row
parsed and checked, and the good ones written to the on-disk key → row store (join.RowStore), as a plain build
does. Prints rows/s, MB/s and the peak RSS, which must stay under --max_rss_mb whatever the file's size (exit 1
otherwise).

`python benchmarks/jsonl_stream.py [--path=/tmp/cc12m_bench.jsonl.gz] [--gigabytes=1.0] [--store=true]`

The file is generated on first use (a child process, so that its memory is not counted): rows with the release's
fields, LLaVA-NeXT-like lengths (a long caption of about 150 words, a short one of about 20, an alt-text, a url,
exif) and words drawn at random, so that gzip compresses them about as much as English text.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(REPO))

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from capjax import cli  # noqa: E402

FLAGS = flags.FlagValues()

_PATH = flags.DEFINE_string("path", "/tmp/cc12m_bench.jsonl.gz", "the jsonl.gz (generated when missing)",
                            flag_values=FLAGS)
_GIGABYTES = flags.DEFINE_float("gigabytes", 1.0, "uncompressed size to generate, in GB (10^9 bytes)",
                                lower_bound=1e-6, flag_values=FLAGS)
_STORE = flags.DEFINE_bool("store", True, "write the row store (a plain build's stage); false: stream and parse",
                           flag_values=FLAGS)
_MAX_RSS_MB = flags.DEFINE_integer("max_rss_mb", 500, "peak resident memory allowed, in MiB", lower_bound=1,
                                   flag_values=FLAGS)
_GENERATE_ONLY = flags.DEFINE_bool("generate_only", False, "only write --path (the child process's task)",
                                   flag_values=FLAGS)

_WORDS = 3000  # a vocabulary of generated words, Zipf-distributed like English


def _vocabulary(rng: np.random.Generator) -> np.ndarray:
  letters = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", np.uint8)
  lengths = rng.integers(2, 10, _WORDS)
  return np.asarray([bytes(rng.choice(letters, n)).decode() for n in lengths])


def generate(path: str, gigabytes: float, seed: int = 0) -> tuple[int, int]:
  """Writes rows until `gigabytes` of JSON lines; returns (rows, uncompressed bytes)."""
  rng = np.random.default_rng(seed)
  words = _vocabulary(rng)
  zipf = 1.0 / np.arange(1, _WORDS + 1)
  zipf /= zipf.sum()
  target, written, rows = int(gigabytes * 1e9), 0, 0
  with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as f:
    while written < target:
      chunk = rng.choice(words, (10_000, 200), p=zipf)
      lines = []
      for i in range(len(chunk)):
        key = f"{rows:09d}"
        long = " ".join(chunk[i, :150]).capitalize() + "."
        row = {"caption_llava": long, "caption_llava_short": " ".join(chunk[i, 150:170]).capitalize() + ".",
               "caption": " ".join(chunk[i, 170:182]), "url": f"https://img.example.com/{chunk[i, 190]}/{key}.jpg",
               "key": key, "status": "success", "error_message": None, "width": 512, "height": 683,
               "exif": json.dumps({"Image Make": str(chunk[i, 195]), "Image Model": str(chunk[i, 196])}),
               "original_width": 1200, "original_height": 1600}
        lines.append(json.dumps(row))
        rows += 1
      data = ("\n".join(lines) + "\n").encode("utf-8")
      f.write(data)
      written += len(data)
  return rows, written


def _peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  path = _PATH.value
  if os.path.isdir(path):
    cli.fail(f"--path={path} is a directory — name the jsonl.gz to read (or to generate)")
  if _GENERATE_ONLY.value:
    rows, size = generate(path, _GIGABYTES.value)
    print(json.dumps({"rows": rows, "uncompressed_bytes": size}))
    return
  if not os.path.exists(path):
    started = time.time()
    out = subprocess.run([sys.executable, __file__, f"--path={path}", f"--gigabytes={_GIGABYTES.value}",
                          "--generate_only"], check=True, capture_output=True, text=True).stdout
    print(f"generated {path}: {json.loads(out)} in {time.time() - started:.0f}s", flush=True)
  from tfds_builders.cc12m_llavanext import join
  baseline = _peak_rss_mib()
  counts: collections.Counter = collections.Counter()
  uncompressed = 0
  started, cpu = time.time(), time.process_time()
  with tempfile.TemporaryDirectory(prefix="cc12m_bench_") as folder:
    if _STORE.value:
      store = join.RowStore(path, folder)
      counts, good, store_bytes = store.counts, len(store), os.path.getsize(os.path.join(folder, "rows.sqlite"))
      store.close()
    else:
      good = sum(1 for _ in join.read_rows(path, counts))
      store_bytes = 0
  seconds, cpu = time.time() - started, time.process_time() - cpu
  peak = _peak_rss_mib()
  with gzip.open(path, "rb") as f:  # the size, after the measured part
    for block in iter(lambda: f.read(1 << 20), b""):
      uncompressed += len(block)
  result = {
      "stage": "stream + parse + store" if _STORE.value else "stream + parse",
      "rows": counts["rows"], "good_rows": good, "compressed_mb": round(os.path.getsize(path) / 1e6, 1),
      "uncompressed_mb": round(uncompressed / 1e6, 1), "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
      "rows_per_s": round(counts["rows"] / seconds), "rows_per_cpu_s": round(counts["rows"] / cpu),
      "uncompressed_mb_per_s": round(uncompressed / 1e6 / seconds, 1), "store_mb": round(store_bytes / 1e6, 1),
      "peak_rss_mib": round(peak, 1), "rss_before_mib": round(baseline, 1)}
  print(json.dumps(result))
  if peak >= _MAX_RSS_MB.value:
    print(f"peak RSS {peak:.0f} MiB is over {_MAX_RSS_MB.value} MiB", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
