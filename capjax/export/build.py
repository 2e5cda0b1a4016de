"""A trained workdir as two servable artifacts: a TensorFlow SavedModel that takes encoded images and returns
captions (decoding, vocabulary and image preprocessing inside it), and the same decode as a `jax.export` function
with its parameters, for serving with JAX alone (`capjax.export.serving`).

The decode is the run's own (`config.decode`: greedy, or beam search's k best), traced once for any batch size
(a symbolic batch dimension) and converted by jax2tf's native serialization: the SavedModel runs the StableHLO that
JAX wrote, so TensorFlow cannot drift from JAX's numbers. Beam search's top-k is a sort (`capjax.decode.top_k`)
because TensorFlow 2.21 cannot run an exported `lax.top_k`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from capjax import cli
from capjax import decode as decode_lib
from capjax import inference
from capjax.config_util import ConfigError
from capjax.data import sources
from capjax.data.vocab import Vocabulary
from capjax.models import inception_resnet_v2 as irv2

MANIFEST = "export.json"  # written last: an output folder without it is no export (and --overwrite refuses it)
SAVED_MODEL_DIR = "saved_model"
JAX_DIR = "jax"
JAX_FUNCTION = "decode.jaxexport"
JAX_PARAMS = "params.npz"
FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Decoder:
  """What an export serves: `fn(params, images)`, uint8 (B, S, S, 3) pictures -> (tokens (B, k, L) int32, scores
  (B, k) float32); `params` its parameters (numpy, on the host); `k` captions per image, best first."""
  fn: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]
  params: Any
  vocab: Vocabulary
  image_size: int
  k: int
  max_len: int
  step: int
  settings: dict[str, Any]


def _weights_variables(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The Inception-ResNet-v2 that turns pictures into the features a feature model reads, without its head."""
  weights = config.model.encoder.get("weights")
  if not weights:
    raise ConfigError("this model reads pre-extracted Inception-ResNet-v2 features, so the export must hold the "
                      "network that extracts them — give --weights=DIR, the converted weights that extracted them "
                      "(the directory written by `python -m capjax.tools.convert_weights`)")
  variables = irv2.load_converted(weights)
  return {"params": {k: v for k, v in variables["params"].items() if k != irv2.HEAD_NAME},
          "batch_stats": variables["batch_stats"]}


def decoder(config: ml_collections.ConfigDict, workdir: str, step: int | None = None) -> Decoder:
  """The decode of checkpoint `step` of `workdir` (None: the best) with the run's `config.decode`, as one function
  of (params, pictures); for a feature model the Inception-ResNet-v2 of `model.encoder.weights` is inside it."""
  key = sources.input_spec(config).key
  features = _weights_variables(config) if key != "image" else None  # before the checkpoint: its error comes first
  setup, params, vocab, step = inference.load_trained(config, workdir, step)
  params = {"captioner": jax.device_get(params), **({"irv2": features} if features is not None else {})}
  params = jax.tree.map(np.asarray, params)
  model, start, max_len = setup.model, inference.train.decode_start(config, vocab), config.max_caption_tokens + 1
  method = config.decode.method
  k = config.decode.beam_size if method == "beam" else 1
  extractor = irv2.InceptionResNetV2(num_classes=None)

  def fn(params, images):
    inputs = images
    if features is not None:
      inputs = extractor.apply(params["irv2"], irv2.preprocess(images))[key].astype(jnp.float32)
    fns = decode_lib.cached_step(model, params["captioner"])
    if method == "beam":
      return decode_lib.beam_hypotheses(fns, inputs, max_len, k, config.decode.alpha, start)
    tokens, logp = decode_lib.greedy_search_scored(fns, inputs, max_len, start)  # log p of the chosen caption
    return tokens[:, None], logp[:, None]

  settings = {"method": method, "k": k, **({"alpha": float(config.decode.alpha)} if method == "beam" else {})}
  return Decoder(fn, params, vocab, config.dataset.image_size, k, max_len, step, settings)


# --- the artifacts -------------------------------------------------------------------------------------------------


def _flat(params: Any) -> dict[str, np.ndarray]:
  """The parameter leaves by position in jax's flattening order, which `serving` unflattens with the exported
  function's own tree: names that are numbers keep the order, and npz needs no pickle for them."""
  return {f"{i:05d}": np.asarray(leaf) for i, leaf in enumerate(jax.tree.leaves(params))}


def export_jax(dec: Decoder) -> jax.export.Exported:
  """`dec.fn` as a `jax.export` function of (params, pictures) for any batch size: what `write_jax` serializes, and
  what `capjax.serve --workdir` calls in memory, so that a served workdir runs the same function as its export."""
  (batch,) = jax.export.symbolic_shape("b")
  shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), dec.params)
  images = jax.ShapeDtypeStruct((batch, dec.image_size, dec.image_size, 3), jnp.uint8)
  return jax.export.export(jax.jit(dec.fn))(shapes, images)


def write_jax(dec: Decoder, folder: str) -> None:
  """`folder`/decode.jaxexport (the serialized function, any batch size), params.npz and vocab.txt."""
  os.makedirs(folder)
  exported = export_jax(dec)
  with open(os.path.join(folder, JAX_FUNCTION), "wb") as f:
    f.write(exported.serialize())
  np.savez(os.path.join(folder, JAX_PARAMS), **_flat(dec.params))
  dec.vocab.save(folder)


def write_saved_model(dec: Decoder, folder: str) -> None:
  """The SavedModel whose `serving_default` maps `images` (encoded JPEG/PNG bytes, any batch) to `captions` and
  `scores` (both [batch, k])."""
  with cli.quiet_native_startup():  # TensorFlow's start-up lines (oneDNN, CUDA probes) are no news to the user
    from capjax.export import tf_graph  # noqa: PLC0415 (TensorFlow loads only for the SavedModel)
  tf_graph.save(dec.fn, dec.params, dec.vocab.words, dec.image_size, folder)


def manifest(dec: Decoder, workdir: str) -> str:
  return json.dumps({"format": FORMAT, "workdir": os.path.abspath(workdir), "step": dec.step,
                     "image_size": dec.image_size, "max_len": dec.max_len, "decode": dec.settings,
                     "vocab_size": len(dec.vocab), "saved_model": SAVED_MODEL_DIR, "jax": JAX_DIR}, indent=1) + "\n"


def is_export(path: str) -> bool:
  return os.path.isfile(os.path.join(path, MANIFEST))


def write(dec: Decoder, workdir: str, output: str, overwrite: bool = False) -> str:
  """Both artifacts in a temporary folder beside `output`, renamed to `output` once whole (an export there before
  is replaced only with `overwrite`, and only after the new one is complete); the folder, absolute."""
  output = os.path.abspath(output)
  parent = os.path.dirname(output)
  os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=f".{os.path.basename(output)}.exporting-", dir=parent)
  try:
    write_saved_model(dec, os.path.join(staging, SAVED_MODEL_DIR))
    write_jax(dec, os.path.join(staging, JAX_DIR))
    with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
      f.write(manifest(dec, workdir))
    old = None
    if os.path.exists(output):
      if not overwrite:
        raise FileExistsError(output)
      old = tempfile.mkdtemp(prefix=f".{os.path.basename(output)}.replaced-", dir=parent)
      os.replace(output, os.path.join(old, "export"))
    os.replace(staging, output)
    if old:
      shutil.rmtree(old, ignore_errors=True)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  return output


def captions_of_ids(tokens: np.ndarray, vocab: Vocabulary) -> list[list[str]]:
  """(B, k, L) ids -> B lists of k captions, as `Vocabulary.decode` reads them (the tests' and `serving`'s)."""
  return [[vocab.decode(row) for row in rows] for rows in np.asarray(tokens)]

