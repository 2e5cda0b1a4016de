"""The cross filter's image labeler: Inception-ResNet-v2's ImageNet head (converted weights) → top-k classes above
a threshold → their WordNet lemma names and hypernyms, the words a caption must share with its image.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from capjax.image import io as image_io
from capjax.models import imagenet_synsets

IMAGE_SIZE = 299


@functools.lru_cache(maxsize=4096)
def class_labels(wnid: str, min_depth: int) -> tuple[str, ...]:
  """The class's lemma names and those of its hypernyms at WordNet depth ≥ `min_depth` ("entity", "object",
  "whole" sit near the root and would match any caption), lowercase with spaces, nearest first."""
  synset = imagenet_synsets.synset(wnid)
  names: list[str] = []
  frontier, seen = [synset], set()
  while frontier:  # breadth first: the class, its parents, their parents
    following = []
    for s in frontier:
      if s.name() in seen or s.min_depth() < min_depth:
        continue
      seen.add(s.name())
      names.extend(n.replace("_", " ").lower() for n in s.lemma_names())
      following.extend(s.hypernyms())
    frontier = following
  return tuple(dict.fromkeys(names))


@functools.cache
def _probabilities_fn(num_classes: int):
  """One jitted forward pass per head size, shared by every labeler in the process (one compilation per shape)."""
  import jax  # pylint: disable=g-import-not-at-top
  from capjax.models import inception_resnet_v2 as irv2  # pylint: disable=g-import-not-at-top
  model = irv2.InceptionResNetV2(num_classes=num_classes)

  @jax.jit
  def probabilities(variables, pixels):
    logits = model.apply(variables, irv2.preprocess(pixels))["logits"]
    return jax.nn.softmax(logits.astype("float32"), axis=-1)

  return probabilities


class Irv2Labeler:
  """Labels one JPEG at a time: `labels(image_bytes)` → tuple of words. Loads weights and compiles once."""

  def __init__(self, weights: str, top_k: int = 5, threshold: float = 0.1, min_depth: int = 6):
    from capjax.models import inception_resnet_v2 as irv2  # pylint: disable=g-import-not-at-top
    metadata = irv2.read_metadata(weights)
    num_classes = metadata.get("num_classes")
    if num_classes not in (1000, 1001):
      raise ValueError(f"{weights} holds no ImageNet head (num_classes={num_classes}): convert weights with one")
    self.label_offset = num_classes - imagenet_synsets.NUM_CLASSES  # 1001-way heads: index 0 is background
    self.variables = irv2.load_converted(weights)
    self.top_k, self.threshold, self.min_depth = top_k, threshold, min_depth
    self._probabilities = _probabilities_fn(num_classes)

  @staticmethod
  def pixels(image: bytes) -> np.ndarray:
    """(299, 299, 3) uint8: decoded at the smallest JPEG scale still ≥ 299 (draft), then resized."""
    from PIL import Image  # pylint: disable=g-import-not-at-top
    import io  # pylint: disable=g-import-not-at-top
    with Image.open(io.BytesIO(image)) as picture:
      picture.draft("RGB", (IMAGE_SIZE, IMAGE_SIZE))
      rgb = image_io.to_rgb(picture).resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
      return np.asarray(rgb, np.uint8)

  def classes(self, images: Sequence[bytes]) -> list[list[tuple[str, float]]]:
    """Per image, (wnid, probability) of the top-k classes at or above the threshold, most likely first."""
    batch = np.stack([self.pixels(b) for b in images])
    probabilities = np.asarray(self._probabilities(self.variables, batch))
    out = []
    for row in probabilities:
      order = np.argsort(-row, kind="stable")[:self.top_k]
      found = []
      for index in order:
        wnid = imagenet_synsets.wnid_of(int(index), self.label_offset)
        if wnid is not None and row[index] >= self.threshold:
          found.append((wnid, float(row[index])))
      out.append(found)
    return out

  def labels(self, image: bytes) -> tuple[str, ...]:
    names: list[str] = []
    for wnid, _ in self.classes([image])[0]:
      names.extend(class_labels(wnid, self.min_depth))
    return tuple(dict.fromkeys(names))
