"""The CLIP score of image–caption pairs, for filtering caption data: the cosine similarity of the pair's
L2-normalized CLIP embeddings (`Scorer`, on a checkpoint converted by `python -m capjax.tools.convert_weights
--format=hf_clip`), CLIP's image preprocessing (`preprocess`, as Hugging Face's CLIPImageProcessor), and the
published cut-offs as named settings (`THRESHOLDS`, read by `parse_threshold`; `keep` applies one to a pool's
scores).

Scores are the raw cosine, in [-1, 1], as DataComp's `clip_b32_similarity_score` / `clip_l14_similarity_score`
columns and LAION's filter use them (not CLIP's logits, which multiply it by exp(logit_scale) = 100).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from capjax.image import io as image_io
from capjax.text_models import checkpoint, tokenizers
from capjax.text_models.clip import CLIPConfig

REASON = "clip_below_threshold"  # a filter stage's reason for a pair below the cut-off


@dataclasses.dataclass(frozen=True)
class Threshold:
  """A cut-off on the CLIP score: an absolute `minimum`, or the `top_fraction` of a pool (DataComp's rule: the score
  at rank int(n * fraction) of the pool sorted high to low is the minimum, so ties at it are all kept)."""

  name: str
  minimum: float | None = None
  top_fraction: float | None = None
  model: str = "any"  # the CLIP whose scores the figure was set on
  source: str = ""


THRESHOLDS = {t.name: t for t in (
    Threshold("datacomp_b32", minimum=0.25, model="ViT-B/32",
              source="CLIP ViT-B/32 score >= 0.25, the DataComp threshold issue 33 names"),
    Threshold("laion", minimum=0.28, model="ViT-B/32",
              source="LAION-2B's English cut-off, ViT-B/32 score >= 0.28 (DataComp's `laion` baseline)"),
    Threshold("datacomp_l14_top30", top_fraction=0.3, model="ViT-L/14",
              source="the pool's top 30% by ViT-L/14 score (DataComp's clip_score_l14_30_percent baseline)"),
)}


def parse_threshold(text: str) -> Threshold:
  """A named setting (THRESHOLDS), `min=X` (X in [-1, 1]) or `top=F` (F in (0, 1]); a ValueError says what is wrong."""
  if text in THRESHOLDS:
    return THRESHOLDS[text]
  kind, _, value = text.partition("=")
  try:
    number = float(value)
  except ValueError:
    number = math.nan
  if kind == "min" and -1 <= number <= 1:
    return Threshold(text, minimum=number)
  if kind == "top" and 0 < number <= 1:
    return Threshold(text, top_fraction=number)
  raise ValueError(f"CLIP threshold {text!r} is not one of {', '.join(THRESHOLDS)}, min=X with X a cosine in "
                   "[-1, 1], or top=F with F a fraction in (0, 1]")


def cutoff(scores: np.ndarray, threshold: Threshold) -> float:
  """The minimum score `threshold` keeps in this pool (for a `top_fraction`, the pool is every score given)."""
  if threshold.minimum is not None:
    return threshold.minimum
  ranked = np.sort(np.asarray(scores, np.float64))[::-1]
  if not len(ranked):
    return math.inf
  return float(ranked[min(int(len(ranked) * threshold.top_fraction), len(ranked) - 1)])


def keep(scores: np.ndarray, threshold: Threshold) -> np.ndarray:
  """Which pairs of the pool `threshold` keeps: a bool per score (score >= the cut-off)."""
  scores = np.asarray(scores, np.float64)
  return scores >= cutoff(scores, threshold)


def pair_scores(image_embeds: np.ndarray, text_embeds: np.ndarray) -> np.ndarray:
  """The cosine similarity of each image with the text of the same row (the embeddings need not be normalized)."""
  image = np.asarray(image_embeds, np.float64)
  text = np.asarray(text_embeds, np.float64)
  return np.sum(image * text, axis=-1) / (np.linalg.norm(image, axis=-1) * np.linalg.norm(text, axis=-1))


def preprocess(image: np.ndarray, config: CLIPConfig) -> np.ndarray:
  """An (h, w, 3) uint8 RGB image -> (S, S, 3) float32 model input, as Hugging Face's CLIPImageProcessor makes it
  with PIL: the short side resized to S = image_size (bicubic; the long side to int(S * long / short)), the centre
  S x S cut out (offsets rounded down), values / 255, then the config's mean and std."""
  image = np.asarray(image)
  if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or not min(image.shape[:2]):
    raise ValueError(f"an image to score is an (h, w, 3) uint8 RGB array, got {image.dtype} {image.shape} — decode "
                     "it with capjax.image.io.load_rgb")
  size = config.vision.image_size
  height, width = image.shape[:2]
  short, long = sorted((height, width))
  scaled = (size, int(size * long / short))
  new_height, new_width = scaled if height <= width else scaled[::-1]
  resized = np.asarray(Image.fromarray(image).resize((new_width, new_height), Image.Resampling.BICUBIC))
  top, left = (new_height - size) // 2, (new_width - size) // 2
  crop = (resized[top:top + size, left:left + size].astype(np.float64) * (1 / 255)).astype(np.float32)
  return (crop - np.asarray(config.image_mean, np.float32)) / np.asarray(config.image_std, np.float32)


class Scorer:
  """A converted CLIP with its tokenizer: normalized embeddings of images and captions, and pairs' CLIP scores.
  Batches are padded to `batch_size` rows (and captions to a multiple of 8 tokens) so that the jitted towers compile
  for a few shapes only. With `fixed_length`, every caption is padded to max_position_embeddings tokens (as open_clip,
  which DataComp scored with, pads): a pair's score then does not depend on the other captions of its batch, to the
  last bit (a shorter padding changes the summation order), which a share cut-off over two build paths needs."""

  def __init__(self, model: checkpoint.TextModel, batch_size: int = 32, fixed_length: bool = False):
    if model.kind != "clip":
      raise checkpoint.WeightsError(f"{model.directory} holds a {model.kind} model — the CLIP score needs a CLIP "
                                    "checkpoint (--format=hf_clip)")
    self.model, self.config, self.batch_size, self.fixed_length = model, model.config, batch_size, fixed_length
    self.tokenizer = tokenizers.CLIPTokenizer(model.directory / "vocab.json", model.directory / "merges.txt")

  @classmethod
  def load(cls, directory: str | os.PathLike[str], batch_size: int = 32, fixed_length: bool = False) -> Scorer:
    return cls(checkpoint.load(pathlib.Path(directory), "clip"), batch_size, fixed_length)

  @functools.cached_property
  def _towers(self) -> tuple[Any, Any]:
    import jax  # noqa: PLC0415 (JAX only once something is embedded)
    from capjax.text_models import clip  # noqa: PLC0415
    module, variables = self.model.module(), {"params": self.model.params}  # an argument, not a baked constant
    text = jax.jit(lambda v, ids, mask: clip.normalize(module.apply(v, ids, mask, method="embed_text")))
    image = jax.jit(lambda v, pixels: clip.normalize(module.apply(v, pixels, method="embed_image")))
    return functools.partial(text, variables), functools.partial(image, variables)

  def _batched(self, fn, rows: np.ndarray, *more: np.ndarray) -> np.ndarray:
    out = []
    for start in range(0, len(rows), self.batch_size):
      chunk = [a[start:start + self.batch_size] for a in (rows, *more)]
      short = self.batch_size - len(chunk[0])
      chunk = [np.concatenate([a, np.repeat(a[-1:], short, axis=0)]) if short else a for a in chunk]
      out.append(np.asarray(fn(*chunk))[:self.batch_size - short])
    return np.concatenate(out) if out else np.zeros((0, self.config.projection_dim), np.float32)

  def embed_texts(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
    """(L2-normalized embeddings (N, projection_dim) float32, indices of the texts cut to max_position_embeddings
    tokens, <|endoftext|> kept last as Hugging Face's truncation keeps it)."""
    eos, length = self.tokenizer.eos_id, self.config.text.max_position_embeddings
    ids, mask, cut = tokenizers.pad([self.tokenizer.encode(t) for t in texts], length, pad_id=eos, end_id=eos,
                                    multiple=length if self.fixed_length else 8)
    return self._batched(self._towers[0], ids, mask), cut

  def embed_images(self, images: Sequence[np.ndarray | bytes | str | os.PathLike[str]]) -> np.ndarray:
    """L2-normalized embeddings (N, projection_dim) float32 of RGB uint8 arrays, or of encoded images (bytes or
    paths, read by `capjax.image.io.load_rgb`: an undecodable one raises its ImageError)."""
    pixels = [preprocess(image if isinstance(image, np.ndarray) else image_io.load_rgb(image), self.config)
              for image in images]
    size, channels = self.config.vision.image_size, self.config.vision.num_channels
    return self._batched(self._towers[1], np.stack(pixels) if pixels else np.zeros((0, size, size, channels)))

  def score(self, images: Sequence[Any], captions: Sequence[str]) -> np.ndarray:
    """The CLIP score (cosine) of each image with the caption of the same index."""
    if len(images) != len(captions):
      raise ValueError(f"{len(images)} images but {len(captions)} captions: give one caption per image")
    return pair_scores(self.embed_images(images), self.embed_texts(captions)[0])
