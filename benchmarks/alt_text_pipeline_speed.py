"""Throughput of the paper's pipeline per core: harvesting pages, the image stage (a), the text stage (b), concept
pruning (d), and the Inception-ResNet-v2 labeler, with a projection for the paper's 5 billion candidates.

`python benchmarks/alt_text_pipeline_speed.py [--pages=400] [--images=400] [--texts=3000] [--irv2_batches=3]`
Printed figures, not a timed test: CPU time of this process (process_time) unless said otherwise.
"""

from __future__ import annotations

import collections
import io
import json
import os
import pathlib
import random
import sys
import tempfile
import time
from collections.abc import Sequence

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
if (SHARED / "nltk_data").is_dir():
  os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))  # before nltk is imported
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from absl import flags  # noqa: E402

from capjax import cli  # noqa: E402

PAPER_CANDIDATES = 5_000_000_000
# The paper's funnel: > 65% discarded by the image filters, ~3% of the rest survive the text filters; the
# labeler runs on what is left (a conservative 35% x 3% of the candidates).
LABELED_SHARE = 0.35 * 0.03
IRV2_GFLOPS = 13.2  # multiply-adds x 2 of one 299 x 299 forward pass (6.6 G MACs, the Keras applications table)


def make_warc(path: pathlib.Path, pages: int, rng: random.Random) -> int:
  """A gzipped WARC of web-like pages: ~25 KB of markup, 20 <img> each (alt-texts empty, keywords, sentences)."""
  from warcio.statusandheaders import StatusAndHeaders
  from warcio.warcwriter import WARCWriter
  words = "a dog cat runs on the beach in park red car woman man sits bench near lake sunset photo image".split()
  with open(path, "wb") as f:
    writer = WARCWriter(f, gzip=True)
    for p in range(pages):
      parts = [f"<html><head><title>Page {p}</title><base href='/static/'></head><body>"]
      for i in range(20):
        alt = rng.choice(["", "logo", " ".join(rng.choices(words, k=rng.randint(3, 12))).capitalize() + "."])
        parts.append(f"<div class='c{i}'><p>{' '.join(rng.choices(words, k=150))}</p>"
                     f"<img src='img/{p}_{i}.jpg' alt='{alt}' width=600></div>")
      body = ("".join(parts) + "</body></html>").encode()
      headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
      writer.write_record(writer.create_warc_record(f"http://site{p % 50}.example/p{p}.html", "response",
                                                    payload=io.BytesIO(body), http_headers=headers))
  return pages


def bench_harvest(pages: int) -> float:
  from capjax.tools import harvest_alt_text as harvest
  with tempfile.TemporaryDirectory() as folder:
    warc = pathlib.Path(folder) / "crawl.warc.gz"
    make_warc(warc, pages, random.Random(0))
    start = time.process_time()
    counts = harvest.run([os.fspath(warc)], os.fspath(pathlib.Path(folder) / "c.tsv"))
    seconds = time.process_time() - start
  assert counts["pages"] == pages
  return pages / seconds


def bench_images(n: int) -> tuple[float, dict[str, int]]:
  """Stage a over a web-like mix: 45% large JPEGs, 25% small, 10% PNG, 10% wide, 10% failed downloads."""
  from capjax.image import filters
  from tfds_builders.alt_text_captions import make_dummy_data as dummy
  rng = random.Random(1)
  pool = ([dummy.jpeg(i, 640, 480) for i in range(9)] + [dummy.jpeg(i, 800, 600) for i in range(9)]
          + [dummy.jpeg(i, 300, 200) for i in range(10)] + [dummy.png(500, 500)] * 4
          + [dummy.jpeg(i, 1500, 500) for i in range(4)] + [None] * 4)
  images = [rng.choice(pool) for _ in range(n)]
  config = filters.ImageFilterConfig()
  reasons: collections.Counter = collections.Counter()
  start = time.process_time()
  for image in images:
    reasons[filters.image_filter(image, {"status": "failed_to_download"} if image is None else {}, config)[0]] += 1
  return n / (time.process_time() - start), dict(reasons)


def bench_text(n: int) -> tuple[float, float]:
  """Stage b on alt-texts that passed stage a (the benchmark mix of text_pipeline_speed.py), and stage d."""
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
  import text_pipeline_speed
  from capjax.text import concepts
  from capjax.text.pipeline import TextPipeline
  cc3m = []
  if text_pipeline_speed.DEFAULT_CC3M.exists():
    with open(text_pipeline_speed.DEFAULT_CC3M, encoding="utf-8") as f:
      cc3m = [line.split("\t")[0] for line in f]
  texts = [text for _, text in text_pipeline_speed.realistic_mix(n, 2, cc3m)]
  pipeline = TextPipeline()
  pipeline.process("warm", "A dog runs on the beach.")
  start = time.process_time()
  records = [pipeline.process(str(i), t) for i, t in enumerate(texts)]
  text_rate = len(texts) / (time.process_time() - start)
  kept = [r for r in records if r.kept] * 50  # pruning is cheap: repeat to time it
  start = time.process_time()
  counts = concepts.count_concepts(r.concepts for r in kept)
  pruned = sum(concepts.prune(r.concepts, counts, 100) is None for r in kept)
  prune_rate = len(kept) / max(time.process_time() - start, 1e-9)
  del pruned
  return text_rate, prune_rate


def bench_irv2(batches: int, batch: int = 8) -> float:
  """Images/s of the labeler's model on this CPU (wall clock, all cores XLA uses), random weights, after compile."""
  import jax
  import flax.linen as nn
  import numpy as np
  from capjax.models import inception_resnet_v2 as irv2
  model = irv2.InceptionResNetV2(num_classes=1000)
  rng = np.random.default_rng(0)
  abstract = nn.meta.unbox(irv2.abstract_variables(model))
  variables = jax.tree_util.tree_map(lambda a: (rng.normal(0, 0.02, a.shape) + (1 if len(a.shape) == 1 else 0))
                                     .astype(a.dtype), abstract)
  apply = jax.jit(lambda v, x: jax.nn.softmax(model.apply(v, irv2.preprocess(x))["logits"]))
  pixels = rng.integers(0, 256, (batch, 299, 299, 3), dtype=np.uint8)
  apply(variables, pixels).block_until_ready()
  start = time.perf_counter()
  for _ in range(batches):
    apply(variables, pixels).block_until_ready()
  return batches * batch / (time.perf_counter() - start)


FLAGS = flags.FlagValues()
_PAGES = flags.DEFINE_integer("pages", 400, "generated HTML pages harvested", lower_bound=1, flag_values=FLAGS)
_IMAGES = flags.DEFINE_integer("images", 400, "candidates through the image filters", lower_bound=1, flag_values=FLAGS)
_TEXTS = flags.DEFINE_integer("texts", 3000, "alt-texts through the text stages", lower_bound=1, flag_values=FLAGS)
_IRV2_BATCHES = flags.DEFINE_integer("irv2_batches", 3, "timed labeler batches (0 skips the labeler)", lower_bound=0,
                                     flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  cores = len(os.sched_getaffinity(0))
  harvest_rate = bench_harvest(_PAGES.value)
  image_rate, image_reasons = bench_images(_IMAGES.value)
  text_rate, prune_rate = bench_text(_TEXTS.value)
  irv2_rate = bench_irv2(_IRV2_BATCHES.value) if _IRV2_BATCHES.value else 0.0
  irv2_per_core = irv2_rate / cores
  survive_a = 0.35
  # Core-hours for the paper's 5e9 candidates: stage a on all, b on the 35% stage a keeps, the labeler on ~1%.
  a_hours = PAPER_CANDIDATES / image_rate / 3600
  b_hours = PAPER_CANDIDATES * survive_a / text_rate / 3600
  labeled = PAPER_CANDIDATES * LABELED_SHARE
  irv2_hours = labeled / irv2_per_core / 3600 if irv2_per_core else float("nan")
  # An accelerator at an assumed 100 TFLOP/s sustained (bf16, about 10% of an H100/H200's dense peak, typical of
  # a convolutional net at batch 256 with JPEG decoding on the host): an assumption, not a measurement.
  accelerator_rate = 100e12 / (IRV2_GFLOPS * 1e9)
  rows = [
      ("harvest (WARC → candidates)", f"{harvest_rate:,.0f} pages/s", ""),
      ("stage a: image filters", f"{image_rate:,.0f} candidates/s", f"{a_hours:,.0f} core-h for 5e9"),
      ("stage b: text (filters + hypernyms)", f"{text_rate:,.0f} candidates/s",
       f"{b_hours:,.0f} core-h for 35% of 5e9"),
      ("stage d: concept count + prune", f"{prune_rate:,.0f} candidates/s", "negligible"),
      ("IRv2 labeler (this CPU, per core)", f"{irv2_per_core:,.2f} images/s",
       f"{irv2_hours:,.0f} core-h for {labeled:,.0f} images"),
      ("IRv2 labeler (accelerator, assumed)", f"{accelerator_rate:,.0f} images/s",
       f"{labeled / accelerator_rate / 3600:,.1f} accelerator-h"),
  ]
  print(f"{'per core (CPU time), ' + str(cores) + ' cores here':<40}{'rate':>22}   projection")
  for name, rate, projection in rows:
    print(f"{name:<40}{rate:>22}   {projection}")
  print(json.dumps({"harvest_pages_per_s": round(harvest_rate, 1), "image_per_s": round(image_rate, 1),
                    "image_reasons": image_reasons, "text_per_s": round(text_rate, 1),
                    "prune_per_s": round(prune_rate, 1), "irv2_images_per_s_per_core": round(irv2_per_core, 3),
                    "cores": cores}))


if __name__ == "__main__":
  cli.run(main)
