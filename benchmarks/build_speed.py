"""Measures how fast the cc3m builder turns local img2dataset shards into ArrayRecord, every image checked to decode:
the plain path and Beam's DirectRunner with 2 workers, side by side; plus the JPEG check alone and the url index size.

`python benchmarks/build_speed.py [--images=2000] [--per_shard=250] [--index_rows=330000]`
"""

from __future__ import annotations

import io
import os
import pathlib
import shutil
import sys
import tempfile
import time
import tracemalloc

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(REPO))
# Beam's worker processes import the builder's functions by module name.
os.environ["PYTHONPATH"] = os.pathsep.join([os.fspath(REPO), os.environ.get("PYTHONPATH", "")])
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from PIL import Image  # noqa: E402

_IMAGES = flags.DEFINE_integer("images", 2000, "Generated 640x480 JPEGs.")
_PER_SHARD = flags.DEFINE_integer("per_shard", 250, "Images per webdataset shard.")
_INDEX_ROWS = flags.DEFINE_integer("index_rows", 330_000, "TSV rows for the url-index size (scaled to 3.3M).")
_BEAM = flags.DEFINE_bool("beam", True, "Also build with Beam's DirectRunner (needs apache-beam).")


def photo_like(seed: int, width: int = 640, height: int = 480) -> bytes:
  """A 640x480 JPEG (quality 90): smooth colour fields upscaled from 20x15 plus sensor-like noise, about the
  entropy of a web photo."""
  rng = np.random.default_rng(seed)
  small = Image.fromarray(rng.integers(0, 256, (15, 20, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
  noisy = np.asarray(small, np.int16) + rng.integers(-6, 7, (height, width, 3), dtype=np.int16)
  buffer = io.BytesIO()
  Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
  return buffer.getvalue()


def write_manual_dir(root: pathlib.Path, n: int, per_shard: int) -> tuple[int, int]:
  """Train: n images; validation: n // 20 (TFDS refuses an empty split). Returns (images, total bytes)."""
  from tfds_builders.cc3m import make_dummy_data as dummy
  root.mkdir(parents=True, exist_ok=True)
  count = total = 0
  for split, size, tsv in (("train", n, dummy.TRAIN_TSV), ("validation", max(1, n // 20), dummy.VALIDATION_TSV)):
    rows = [[f"a photo number {i} of a scene", dummy.url(i, split)] for i in range(size)]
    dummy.write_tsv(root / tsv, rows)
    folder = root / "images" / split
    folder.mkdir(parents=True)
    for number, start in enumerate(range(0, size, per_shard)):
      samples = []
      for i in range(start, min(start + per_shard, size)):
        key = f"{number:05d}{i - start:04d}"
        data = photo_like(i + (0 if split == "train" else 10**6))
        total += len(data)
        samples.append((key, data, {"key": key, "url": rows[i][1], "caption": rows[i][0], "status": "success",
                                    "error_message": None}))
      dummy.write_tar(folder / f"{number:05d}.tar", samples)
      dummy.write_parquet(folder / f"{number:05d}.parquet", [s[2] for s in samples])
    count += size
  return count, total


def build(manual: pathlib.Path, data_dir: pathlib.Path, beam_options=None) -> float:
  import tensorflow_datasets as tfds

  import tfds_builders.cc3m  # noqa: F401
  builder = tfds.builder("cc3m", data_dir=data_dir)
  config = tfds.download.DownloadConfig(manual_dir=os.fspath(manual), beam_options=beam_options)
  start = time.perf_counter()
  builder.download_and_prepare(file_format="array_record", download_config=config)
  seconds = time.perf_counter() - start
  for report in tfds.builder("cc3m", data_dir=data_dir).info.metadata["build_report"].values():
    assert report["examples"] == report["tsv_rows"], report
  return seconds


def check_speed(manual: pathlib.Path, n: int) -> dict[str, float]:
  """Images/s of the JPEG check alone, on one core: 1/8-scale draft decode vs a full decode vs the header."""
  from capjax.image import io as image_io
  images = [photo_like(i) for i in range(min(n, 200))]
  out = {}
  for name, fn in (("verify_jpeg (1/8 draft, whole stream)", image_io.verify_jpeg),
                   ("full decode (Image.load)", lambda b: Image.open(io.BytesIO(b)).load()),
                   ("header only (probe)", image_io.probe)):
    start = time.perf_counter()
    for data in images:
      fn(data)
    out[name] = len(images) / (time.perf_counter() - start)
  del manual
  return out


def index_size(rows: int) -> tuple[int, int]:
  """(bytes held per row once built, peak traced bytes per row while building) for CC3M-like urls."""
  from tfds_builders import img2dataset as i2d
  with tempfile.TemporaryDirectory() as tmp:
    path = pathlib.Path(tmp) / "rows.tsv"
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as f:
      for i in range(rows):
        # CC3M urls are ~100 characters, captions ~60.
        f.write(f"actor attends the premiere of the film at a theatre {i}\thttp://www.example-images-host.com/"
                f"uploads/2016/{rng.integers(1, 13):02d}/some-long-descriptive-file-name-{i}-1024x768.jpg\n")
    tracemalloc.start()
    index = i2d.TsvIndex(os.fspath(path), labeled=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return index.nbytes // rows, peak // rows


def main(argv) -> None:
  del argv
  n, cores = _IMAGES.value, len(os.sched_getaffinity(0))
  root = pathlib.Path(tempfile.mkdtemp(prefix="cc3m_bench_"))
  try:
    manual = root / "manual"
    start = time.perf_counter()
    n, total = write_manual_dir(manual, n, _PER_SHARD.value)
    print(f"generated {n} 640x480 JPEGs ({total / n / 1024:.0f} KB mean), webdataset shards of {_PER_SHARD.value}, "
          f"in {time.perf_counter() - start:.0f}s; {cores} cores here")
    results = [("plain (one process)", 1, build(manual, root / "plain"))]
    if _BEAM.value:
      from apache_beam.options.pipeline_options import PipelineOptions
      options = PipelineOptions(["--runner=DirectRunner", "--direct_num_workers=2",
                                 "--direct_running_mode=multi_processing"])
      results.append(("Beam DirectRunner, 2 workers", 2, build(manual, root / "beam", options)))
    print(f"\n{'build path':<32}{'seconds':>9}{'images/s':>10}{'images/s per core':>19}")
    for name, used, seconds in results:
      print(f"{name:<32}{seconds:>9.1f}{n / seconds:>10.0f}{n / seconds / used:>19.0f}")
    print(f"\n{'JPEG check alone (one core)':<40}{'images/s':>10}")
    for name, rate in check_speed(manual, n).items():
      print(f"{name:<40}{rate:>10.0f}")
    held, peak = index_size(_INDEX_ROWS.value)
    print(f"\nurl index: {held} B/row held, {peak} B/row peak while building ({_INDEX_ROWS.value:,} generated rows); "
          f"at 3.3M rows: {held * 3.3e6 / 2**20:.0f} MiB held, {peak * 3.3e6 / 2**20:.0f} MiB peak")
  finally:
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
