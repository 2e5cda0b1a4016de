"""Queries/s of ERG's exact cosine top-k retrieval, the JAX search (bank sharded over all devices) and faiss's
IndexFlatIP side by side, and the projected time of the paper-sized search: 1M queries against a 100k bank.

usage: python benchmarks/retrieval_speed.py [--queries=1000000] [--bank=100000] [--dim=256] [--k=10]
           [--query_batch=1024] [--chunk=16384] [--backends=jax,faiss]
Random embeddings (speed does not depend on them). Exact search costs queries x bank x dim: a scaled-down run
(say --queries=20000 --bank=100000) measures the rate per query at its bank size, and the projection scales it
linearly to 1M x 100k. Both backends' ids are compared on the timed queries (they must agree: exact search).
faiss runs only when faiss-cpu is installed (`pip install -e '.[faiss]'`); it uses every core it is given.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import numpy as np
from absl import flags

from capjax import cli
from capjax.erg import retrieve

FULL_QUERIES, FULL_BANK = 1_000_000, 100_000
BACKENDS = ("jax", "faiss")
FLAGS = flags.FlagValues()
_QUERIES = flags.DEFINE_integer("queries", FULL_QUERIES, "queries to time", lower_bound=1, flag_values=FLAGS)
_BANK = flags.DEFINE_integer("bank", FULL_BANK, "bank rows", lower_bound=1, flag_values=FLAGS)
_DIM = flags.DEFINE_integer("dim", 256, "embedding dimension", lower_bound=1, flag_values=FLAGS)
_K = flags.DEFINE_integer("k", 10, "neighbours per query", lower_bound=1, flag_values=FLAGS)
_QUERY_BATCH = flags.DEFINE_integer("query_batch", 1024, "queries per JAX search call", lower_bound=1,
                                    flag_values=FLAGS)
_CHUNK = flags.DEFINE_integer("chunk", 16_384, "bank rows a shard scores at once (JAX)", lower_bound=1,
                              flag_values=FLAGS)
_BACKENDS = flags.DEFINE_list("backends", list(BACKENDS), f"of {list(BACKENDS)}", flag_values=FLAGS)


def time_jax(bank: np.ndarray, queries: np.ndarray, k: int) -> tuple[float, retrieve.SearchResult]:
  """Seconds for the timed queries, after one batch to compile (the bank's transfer is not counted)."""
  searcher = retrieve.Bank(bank, chunk=_CHUNK.value, query_batch=_QUERY_BATCH.value)
  searcher.search(queries[:1], k)
  start = time.perf_counter()
  result = searcher.search(queries, k)
  return time.perf_counter() - start, result


def time_faiss(bank: np.ndarray, queries: np.ndarray, k: int) -> tuple[float, retrieve.SearchResult]:
  """Seconds for the timed queries (building the index is not counted)."""
  searcher = retrieve.FaissBank(bank)
  start = time.perf_counter()
  result = searcher.search(queries, k)
  return time.perf_counter() - start, result


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  if unknown := sorted(set(_BACKENDS.value) - set(BACKENDS)):
    cli.fail(f"--backends: unknown {unknown} — choose from {list(BACKENDS)}")
  if _K.value > _BANK.value:
    cli.fail(f"--k={_K.value} is more than the --bank={_BANK.value} rows — ask for at most as many neighbours")
  backends = list(_BACKENDS.value)
  if "faiss" in backends:
    try:
      import faiss  # noqa: F401 (optional)
    except ModuleNotFoundError:
      print("faiss: not installed (pip install -e '.[faiss]'): JAX only")
      backends.remove("faiss")
  rng = np.random.default_rng(0)
  bank = rng.standard_normal((_BANK.value, _DIM.value), np.float32)
  queries = rng.standard_normal((_QUERIES.value, _DIM.value), np.float32)
  scale = (FULL_QUERIES / _QUERIES.value) * (FULL_BANK / _BANK.value)
  print(f"{_QUERIES.value:,} queries x {_BANK.value:,} bank rows, dim {_DIM.value}, top-{_K.value}; "
        f"{jax.device_count()} {jax.devices()[0].platform} device(s)")
  print("| backend | s | queries/s | projected 1M x 100k |\n|---|---:|---:|---:|")
  results = {}
  for backend in backends:
    seconds, results[backend] = (time_jax if backend == "jax" else time_faiss)(bank, queries, _K.value)
    projected = seconds * scale
    print(f"| {backend} | {seconds:.3f} | {_QUERIES.value / seconds:,.0f} | {projected:,.0f} s "
          f"({projected / 3600:.2f} h) |")
  if len(results) == 2:
    same = np.mean(np.all(results["jax"].ids == results["faiss"].ids, axis=1))
    print(f"same top-{_K.value} ids from both: {same:.2%} of queries")


if __name__ == "__main__":
  cli.run(main)
