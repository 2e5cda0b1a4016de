"""Serving an export with JAX alone: `load_jax(E)` reads `E/jax/` (the `jax.export` function, its parameters, the
vocabulary) and returns a callable from encoded images to captions. No TensorFlow, orbax or capjax model code: the
function is the StableHLO that `capjax.export.build` serialized, and images go through capjax's own loader and
resize (`capjax.image.io`, `capjax.data.preprocess`), as `--mode=caption` reads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import jax
import numpy as np

from capjax.data import preprocess
from capjax.data.vocab import Vocabulary
from capjax.image import io as image_io

MANIFEST, JAX_DIR, JAX_FUNCTION, JAX_PARAMS = "export.json", "jax", "decode.jaxexport", "params.npz"

Captions = tuple[list[list[str]], np.ndarray]


def load_jax(export_dir: str | os.PathLike[str]) -> Callable[[Sequence[bytes | str | os.PathLike[str]]], Captions]:
  """A callable from images (encoded JPEG/PNG bytes, or paths) to (captions: one list of k strings per image, best
  first; scores: float32 (batch, k)), decoding as the export's `serving_default` does."""
  export_dir = os.fspath(export_dir)
  folder = os.path.join(export_dir, JAX_DIR)
  with open(os.path.join(export_dir, MANIFEST), encoding="utf-8") as f:
    size = int(json.load(f)["image_size"])
  with open(os.path.join(folder, JAX_FUNCTION), "rb") as f:
    exported = jax.export.deserialize(bytearray(f.read()))
  with np.load(os.path.join(folder, JAX_PARAMS), allow_pickle=False) as stored:
    leaves = [stored[name] for name in sorted(stored.files)]
  vocab = Vocabulary.load(folder)
  params = jax.device_put(leaves)

  def caption(images: Sequence[bytes | str | os.PathLike[str]]) -> Captions:
    pixels = np.stack([preprocess.resize(image_io.load_rgb(image), size) for image in images])
    (args, kwargs) = jax.tree.unflatten(exported.in_tree, [*params, pixels])
    tokens, scores = exported.call(*args, **kwargs)
    return [[vocab.decode(row) for row in rows] for rows in np.asarray(tokens)], np.asarray(scores, np.float32)

  return caption
