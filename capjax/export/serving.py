"""Serving an export with JAX alone: `load_jax(E)` reads `E/jax/` (the `jax.export` function, its parameters, the
vocabulary) and returns a callable from encoded images to captions. No TensorFlow, orbax or capjax model code: the
function is the StableHLO that `capjax.export.build` serialized, and images go through capjax's own loader and
resize (`capjax.image.io`, `capjax.data.preprocess`), as `--mode=caption` reads them.

`Served` is the two halves of that callable (pixels of one image; one decode of a batch of pixels), which
`capjax.serve` calls apart: it reads images in its request threads and decodes them in batches in one worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from capjax.data import preprocess
from capjax.data.vocab import Vocabulary
from capjax.image import io as image_io

MANIFEST, JAX_DIR, JAX_FUNCTION, JAX_PARAMS = "export.json", "jax", "decode.jaxexport", "params.npz"

Captions = tuple[list[list[str]], np.ndarray]


@dataclasses.dataclass(frozen=True)
class Served:
  """An exported decode ready to call: `exported` (a `jax.export.Exported` of (params, uint8 pixels (B, S, S, 3)),
  any batch size), its parameter leaves on the device, the vocabulary and the picture size S."""
  exported: Any
  params: list[jax.Array]
  vocab: Vocabulary
  image_size: int

  def pixels(self, image: bytes | str | os.PathLike[str]) -> np.ndarray:
    """One image's (S, S, 3) uint8 pixels; `capjax.image.io.ImageError` for bytes that are no usable image."""
    return preprocess.resize(image_io.load_rgb(image), self.image_size)

  def decode(self, pixels: np.ndarray) -> Captions:
    """Captions and scores of a (B, S, S, 3) batch: B lists of k strings, best first; float32 (B, k)."""
    (args, kwargs) = jax.tree.unflatten(self.exported.in_tree, [*self.params, pixels])
    tokens, scores = self.exported.call(*args, **kwargs)
    return [[self.vocab.decode(row) for row in rows] for rows in np.asarray(tokens)], np.asarray(scores, np.float32)


def load(export_dir: str | os.PathLike[str]) -> Served:
  """`E/jax/` of export `export_dir`, deserialized, its parameters on the device."""
  export_dir = os.fspath(export_dir)
  folder = os.path.join(export_dir, JAX_DIR)
  with open(os.path.join(export_dir, MANIFEST), encoding="utf-8") as f:
    size = int(json.load(f)["image_size"])
  with open(os.path.join(folder, JAX_FUNCTION), "rb") as f:
    exported = jax.export.deserialize(bytearray(f.read()))
  with np.load(os.path.join(folder, JAX_PARAMS), allow_pickle=False) as stored:
    leaves = [stored[name] for name in sorted(stored.files)]
  return Served(exported, jax.device_put(leaves), Vocabulary.load(folder), size)


def load_jax(export_dir: str | os.PathLike[str]) -> Callable[[Sequence[bytes | str | os.PathLike[str]]], Captions]:
  """A callable from images (encoded JPEG/PNG bytes, or paths) to (captions: one list of k strings per image, best
  first; scores: float32 (batch, k)), decoding as the export's `serving_default` does."""
  served = load(export_dir)

  def caption(images: Sequence[bytes | str | os.PathLike[str]]) -> Captions:
    return served.decode(np.stack([served.pixels(image) for image in images]))

  return caption
