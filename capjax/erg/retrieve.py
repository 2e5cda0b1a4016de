"""ERG's scene retriever: exact cosine top-k of query embeddings against a stylized bank, in four modes.

The bank (N up to millions of embeddings) is sharded by rows over the mesh's `data` axis and padded to a multiple
of the shard count (padding rows never score); queries go in fixed-size batches, replicated to every shard. Each
shard keeps its own top-k over bank chunks, then one `lax.top_k` merges the shards' candidates. `lax.top_k` puts
the lower index first among equal values and candidates arrive in global-index order, so ties go to the lower bank
index: the same ids on 1 or 8 devices. The paper (Table 1) retrieves with the query and the bank each on the image
or the text side (i2i, i2t, t2i, t2t) and keeps neighbours with similarity > 0.6.

Embeddings come from any `Encoder` (`embed_images`, `embed_texts`); `capjax.erg.dual_encoder` trains one.
`faiss-cpu` (`pip install -e '.[faiss]'`) is an optional exact backend (IndexFlatIP on the same normalised vectors).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from capjax import sharding
from capjax.erg.settings import MODES, THRESHOLD

BACKENDS = ("jax", "faiss")
NO_NEIGHBOUR = -1  # the id of a neighbour at or below the threshold
# Chunk widths are multiples of 128 bank rows: XLA's CPU dot then computes each (query, row) score to the same
# float whatever the width (measured on jax 0.10.2; widths such as 32 or 1003 change the last bit), so the
# scores, not only the ids, are the same on 1 or 8 devices.
TILE = 128


class Encoder(Protocol):
  """Images and texts embedded in one space (any dimension D; the retriever normalises)."""

  def embed_images(self, batch: Any) -> np.ndarray:
    """A batch of images (whatever the encoder reads: pixels, features) -> [B, D]."""

  def embed_texts(self, texts: list[str]) -> np.ndarray:
    """Texts -> [B, D]."""


@dataclasses.dataclass(frozen=True)
class SearchResult:
  """Per query, the k nearest bank rows, most similar first; ties go to the lower bank index.

  Attributes:
    ids: [Q, k] bank indices; `NO_NEIGHBOUR` (-1) where the similarity is not above the threshold.
    scores: [Q, k] cosine similarities of the k nearest rows, whether above the threshold or not.
    threshold: the similarity a neighbour must exceed.
  """

  ids: np.ndarray
  scores: np.ndarray
  threshold: float

  @property
  def kept(self) -> np.ndarray:
    """[Q, k] bool: the neighbour is above the threshold."""
    return self.ids != NO_NEIGHBOUR

  @property
  def num_without_neighbour(self) -> int:
    """Queries with no bank row above the threshold (what the augmentation counts as a reject)."""
    return int(np.sum(~self.kept.any(axis=1)))


def normalize(x: np.ndarray | jax.Array, what: str = "embeddings") -> np.ndarray:
  """Rows scaled to unit length in float32 (cosine = dot product); a zero row is an error, not a silent 0."""
  x = np.asarray(x, np.float32)
  if x.ndim != 2:
    raise ValueError(f"{what} must be a [rows, dim] matrix, got shape {x.shape} — embed a batch, not one item")
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  if np.any(norms == 0) or not np.all(np.isfinite(norms)):
    bad = int(np.flatnonzero((norms[:, 0] == 0) | ~np.isfinite(norms[:, 0]))[0])
    raise ValueError(f"{what} row {bad} is zero or not finite — a cosine needs a nonzero finite vector")
  return x / norms


def _threshold(ids: np.ndarray, scores: np.ndarray, threshold: float) -> SearchResult:
  return SearchResult(np.where(scores > threshold, ids, NO_NEIGHBOUR), scores, float(threshold))


def _bank(embeddings: np.ndarray) -> np.ndarray:
  """A bank's embeddings as an array, refused when they are not one or more rows."""
  embeddings = np.asarray(embeddings)
  if embeddings.ndim != 2 or embeddings.shape[0] == 0:
    raise ValueError(f"the bank is empty (shape {embeddings.shape}) — retrieve from at least one embedding")
  return embeddings


def _queries(queries: np.ndarray, dim: int) -> np.ndarray:
  """Query embeddings as an array, refused unless they are rows of the bank's dimension `dim`."""
  queries = np.asarray(queries)
  if queries.ndim != 2 or queries.shape[1] != dim:
    raise ValueError(f"queries have shape {queries.shape} but the bank's embeddings have dimension {dim} — "
                     "embed queries and bank with the same encoder")
  return queries


def _check_k(k: int, size: int) -> None:
  if not 1 <= k <= size:
    raise ValueError(f"k={k} is outside 1..{size}, the bank's size — ask for at most as many neighbours as rows")


class Bank:
  """A normalised bank of embeddings sharded by rows over the mesh's `data` axis, searched exactly.

  Args:
    embeddings: [N, D], any scale (rows are normalised here).
    mesh: a mesh with a `data` axis (default: `sharding.data_mesh` over all devices).
    chunk: bank rows a shard scores at once: with `query_batch`, the [query_batch, chunk] similarity block bounds
      the memory per device whatever N is. Rounded up to a multiple of `TILE`.
    query_batch: queries per call (the last batch is padded, so one compiled search serves every batch).
  """

  def __init__(self, embeddings: np.ndarray, mesh: Mesh | None = None, chunk: int = 16_384, query_batch: int = 1024):
    embeddings = _bank(embeddings)
    self.size, self.dim = embeddings.shape
    self.mesh = mesh if mesh is not None else sharding.data_mesh(jax.devices())
    self.shards = self.mesh.shape["data"]
    self.query_batch = query_batch
    per_shard = -(-self.size // self.shards)
    self.chunk = -(-min(chunk, per_shard) // TILE) * TILE
    rows_per_shard = -(-per_shard // self.chunk) * self.chunk
    padded = np.zeros((rows_per_shard * self.shards, self.dim), np.float32)
    padded[:self.size] = normalize(embeddings, "bank embeddings")
    self.rows = jax.device_put(padded, NamedSharding(self.mesh, P("data", None)))

  def search(self, queries: np.ndarray, k: int = 1, threshold: float = THRESHOLD) -> SearchResult:
    """The k most similar bank rows of each query row (exact), thresholded."""
    queries = _queries(queries, self.dim)
    _check_k(k, self.size)
    queries = normalize(queries, "query embeddings")
    fn = _search_fn(self.mesh, self.size, self.chunk, k)
    replicated = sharding.replicated(self.mesh)
    found = []  # device arrays: every batch is dispatched before any result is read back (no sync per batch)
    for start in range(0, len(queries), self.query_batch):
      batch = queries[start:start + self.query_batch]
      padded = np.zeros((self.query_batch, self.dim), np.float32)
      padded[:len(batch)] = batch
      found.append(fn(jax.device_put(padded, replicated), self.rows))
    if not found:
      return _threshold(np.zeros((0, k), np.int64), np.zeros((0, k), np.float32), threshold)
    scores = np.concatenate([np.asarray(s) for s, _ in found])[:len(queries)]
    ids = np.concatenate([np.asarray(i) for _, i in found])[:len(queries)].astype(np.int64)
    return _threshold(ids, scores, threshold)


@functools.lru_cache(maxsize=32)
def _search_fn(mesh: Mesh, size: int, chunk: int, k: int):
  """The jitted search of one (mesh, bank size, chunk, k): per-shard running top-k over chunks, then the merge."""

  def shard_top_k(queries: jax.Array, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    offset = jax.lax.axis_index("data") * rows.shape[0]  # this shard's first global row
    chunks = rows.reshape(-1, chunk, rows.shape[1])
    keep = min(k, chunk)
    # The running best starts as k empty slots (-inf): every real score beats them, and padding never surfaces
    # because the bank holds at least k real rows.
    init = (jnp.full((queries.shape[0], k), -jnp.inf, jnp.float32), jnp.full((queries.shape[0], k), -1, jnp.int32))

    def step(best, c):
      best_scores, best_ids = best
      ids = offset + c * chunk + jnp.arange(chunk, dtype=jnp.int32)
      scores = jnp.dot(queries, chunks[c].T, precision=jax.lax.Precision.HIGHEST)
      scores = jnp.where(ids < size, scores, -jnp.inf)  # padding rows never win
      chunk_scores, at = jax.lax.top_k(scores, keep)
      # Earlier chunks (lower ids) first: top_k keeps the first of equal scores, so ties go to the lower id.
      merged_scores = jnp.concatenate([best_scores, chunk_scores], axis=1)
      merged_ids = jnp.concatenate([best_ids, ids[at]], axis=1)
      top, at = jax.lax.top_k(merged_scores, k)
      return (top, jnp.take_along_axis(merged_ids, at, axis=1)), None

    best, _ = jax.lax.scan(step, init, jnp.arange(chunks.shape[0]))
    return best

  def search(queries: jax.Array, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    scores, ids = jax.shard_map(shard_top_k, mesh=mesh, in_specs=(P(), P("data", None)),
                                out_specs=(P(None, "data"), P(None, "data")), check_vma=False)(queries, rows)
    # [B, shards * k'] in shard order = global-id order among equal scores: the merge keeps ties on the lower id.
    top, at = jax.lax.top_k(scores, k)
    return top, jnp.take_along_axis(ids, at, axis=1)

  return jax.jit(search)


class FaissBank:
  """The same exact search with faiss (IndexFlatIP on the normalised bank, built once): the optional CPU backend.
  Its ids equal `Bank`'s wherever the k-th and (k+1)-th scores differ; among exactly equal scores faiss keeps its
  own order."""

  def __init__(self, embeddings: np.ndarray):
    try:
      import faiss  # noqa: PLC0415 (optional dependency)
    except ModuleNotFoundError as e:
      raise ModuleNotFoundError(
          "the faiss backend needs faiss-cpu — install it with `pip install -e '.[faiss]'`") from e
    embeddings = _bank(embeddings)
    self.size, self.dim = embeddings.shape
    self.normalized = normalize(embeddings, "bank embeddings")
    self.index = faiss.IndexFlatIP(self.dim)
    self.index.add(np.ascontiguousarray(self.normalized))

  def search(self, queries: np.ndarray, k: int = 1, threshold: float = THRESHOLD) -> SearchResult:
    queries = _queries(queries, self.dim)
    _check_k(k, self.size)
    scores, ids = self.index.search(np.ascontiguousarray(normalize(queries, "query embeddings")), k)
    return _threshold(ids.astype(np.int64), scores, threshold)


def faiss_search(queries: np.ndarray, bank: np.ndarray, k: int = 1, threshold: float = THRESHOLD) -> SearchResult:
  """One search of `bank` with faiss (`FaissBank` keeps the index for many)."""
  return FaissBank(bank).search(queries, k, threshold)


def embed(encoder: Encoder, side: str, items: Any, batch_size: int = 256) -> np.ndarray:
  """Embeddings [n, D] of images (an array-like indexed by rows) or texts (a sequence of str), in batches."""
  if side not in ("image", "text"):
    raise ValueError(f"side must be 'image' or 'text', got {side!r}")
  if isinstance(items, str):
    raise ValueError("texts must be a list of strings, got one string — wrap it in a list")
  n = len(items)
  if n == 0:
    raise ValueError(f"no {side}s to embed — give at least one")
  out = []
  for start in range(0, n, batch_size):
    part = items[start:start + batch_size]
    out.append(np.asarray(encoder.embed_images(part) if side == "image" else encoder.embed_texts(list(part))))
  return np.concatenate(out)


class Retriever:
  """Stylized scenes for factual queries in the paper's four modes, over one `Encoder`.

  Args:
    encoder: embeds both sides.
    bank_images: the stylized scenes' images (for i2i, t2i), or None.
    bank_texts: their stylized or factual captions (for i2t, t2t), or None.
    backend: "jax" (sharded over `mesh`) or "faiss".
  """

  def __init__(self, encoder: Encoder, bank_images: Any = None, bank_texts: Sequence[str] | None = None,
               backend: str = "jax", mesh: Mesh | None = None, **bank_options: Any):
    if backend not in BACKENDS:
      raise ValueError(f"backend {backend!r} is unknown — choose one of {', '.join(BACKENDS)}")
    if bank_images is None and bank_texts is None:
      raise ValueError("the bank is empty: no images and no texts — give bank_images, bank_texts or both")
    self.encoder, self.backend = encoder, backend
    self.banks: dict[str, Bank | FaissBank] = {}
    for side, items in (("image", bank_images), ("text", bank_texts)):
      if items is None:
        continue
      if len(items) == 0:
        raise ValueError(f"the bank's {side}s are empty — retrieve from at least one stylized scene")
      vectors = embed(encoder, side, items)
      self.banks[side] = Bank(vectors, mesh, **bank_options) if backend == "jax" else FaissBank(vectors)

  def retrieve(self, mode: str, queries: Any, k: int = 1, threshold: float = THRESHOLD) -> SearchResult:
    """The k nearest bank scenes of each query (images or texts, by `mode`'s query side)."""
    if mode not in MODES:
      raise ValueError(f"mode {mode!r} is unknown — choose one of {', '.join(MODES)}")
    query_side, bank_side = MODES[mode]
    if bank_side not in self.banks:
      raise ValueError(f"mode {mode} searches the bank's {bank_side}s, and this retriever has none — give "
                       f"bank_{bank_side}s")
    return self.banks[bank_side].search(embed(self.encoder, query_side, queries), k, threshold)
