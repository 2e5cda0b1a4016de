"""The TFDS features every builder over img2dataset shards writes."""

from __future__ import annotations

import tensorflow_datasets as tfds


def image_features(image_doc: str = "The JPEG bytes as downloaded, never re-encoded.",
                   ) -> dict[str, tfds.features.FeatureConnector]:
  """The image fields every builder over img2dataset shards writes: the JPEG bytes, the url and the key."""
  return {
      "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg", doc=image_doc),
      "url": tfds.features.Text(),
      "key": tfds.features.Text(doc="img2dataset's key of the image."),
  }


def image_caption_features(caption_doc: str) -> dict[str, tfds.features.FeatureConnector]:
  """`image_features` plus the caption and `captions`, the one-element references list the trainer reads."""
  features = image_features()
  return {
      "image": features.pop("image"),
      "caption": tfds.features.Text(doc=caption_doc),
      "captions": tfds.features.Sequence(tfds.features.Text(), doc="[caption]: the references field."),
      **features,
  }
