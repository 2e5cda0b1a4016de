"""The TensorFlow side of an export: a `tf.Module` whose `serving_default` decodes and resizes encoded images with TF
ops, runs the jax2tf-converted decode on them, and turns ids into caption strings, so that a server needs TensorFlow
and the SavedModel, nothing of capjax or JAX.

Resizing follows `capjax.data.preprocess.resize` (Pillow's BILINEAR: a triangle filter widened by the scale factor
when shrinking, pixel centres aligned), which `tf.image.resize(..., antialias=True)` computes in float; Pillow rounds
in fixed point, so a pixel may differ by one level. An image already at the model's size is passed as it is, as
capjax does. EXIF orientation is not applied (capjax's loader applies it): send upright images.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import tensorflow as tf
from jax.experimental import jax2tf

from capjax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID, is_style_tag


def decode_image(data: tf.Tensor, size: int) -> tf.Tensor:
  """Encoded JPEG/PNG (GIF: its first frame) bytes -> uint8 (size, size, 3), as capjax's loader and resize give."""
  image = tf.io.decode_image(data, channels=3, dtype=tf.uint8, expand_animations=False)
  image.set_shape([None, None, 3])
  shape = tf.shape(image)

  def resized():
    pixels = tf.image.resize(tf.cast(image, tf.float32), [size, size], method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(pixels), 0.0, 255.0), tf.uint8)

  same = tf.logical_and(tf.equal(shape[0], size), tf.equal(shape[1], size))
  return tf.ensure_shape(tf.cond(same, lambda: image, resized), [size, size, 3])


def captions(tokens: tf.Tensor, words: tf.Tensor, dropped: tf.Tensor) -> tf.Tensor:
  """(B, k, L) ids -> (B, k) strings as `Vocabulary.decode` reads them: words up to the first EOS, joined by spaces,
  PAD, BOS and style tags (`dropped`) left out, an id beyond the vocabulary read as <UNK>."""
  size = tf.shape(words)[0]
  safe = tf.where((tokens >= 0) & (tokens < size), tokens, UNK_ID)
  before_eos = tf.cumsum(tf.cast(tf.equal(tokens, EOS_ID), tf.int32), axis=-1) == 0
  keep = before_eos & tf.logical_not(tf.gather(dropped, safe))
  return tf.strings.reduce_join(tf.ragged.boolean_mask(tf.gather(words, safe), keep), axis=-1, separator=" ")


class Captioner(tf.Module):
  """The served model: the decode's parameters as variables (as T5X's export_lib holds them), the vocabulary as
  constants."""

  def __init__(self, fn: Callable[[Any, Any], Any], params: Any, words: Sequence[str], image_size: int):
    super().__init__(name="capjax_captioner")
    leaves, self._tree = jax.tree.flatten(params)  # a flat list: TF's tracking wraps dicts into types jax cannot read
    self.variables_ = [tf.Variable(leaf, trainable=False) for leaf in leaves]
    self.words = tf.constant(list(words), tf.string)
    self.dropped = tf.constant([i in (PAD_ID, BOS_ID) or is_style_tag(w) for i, w in enumerate(words)], tf.bool)
    self.image_size = image_size
    self._decode = jax2tf.convert(fn, polymorphic_shapes=[None, "(b, ...)"], with_gradient=False)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")], autograph=False)
  def serve(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
    size = self.image_size
    pixels = tf.map_fn(lambda data: decode_image(data, size), images,
                       fn_output_signature=tf.TensorSpec([size, size, 3], tf.uint8))
    tokens, scores = self._decode(jax.tree.unflatten(self._tree, list(self.variables_)), pixels)
    return {"captions": captions(tokens, self.words, self.dropped), "scores": tf.cast(scores, tf.float32)}


def save(fn: Callable[[Any, Any], Any], params: Any, words: Sequence[str], image_size: int, folder: str) -> None:
  """Writes the SavedModel of `fn` (jax2tf, native serialization, any batch size) to `folder`."""
  module = Captioner(fn, params, words, image_size)
  tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
