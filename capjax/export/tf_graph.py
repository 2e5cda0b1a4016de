"""The TensorFlow side of an export: a `tf.Module` whose `serving_default` decodes and resizes encoded images with TF
ops, runs the jax2tf-converted decode on them, and turns ids into caption strings, so that a server needs TensorFlow
and the SavedModel, nothing of capjax or JAX.

Its pixels are those of capjax's loader and `capjax.data.preprocess.resize` (Pillow's BILINEAR), exactly: JPEGs are
decoded with libjpeg's accurate integer IDCT, as Pillow decodes them (TensorFlow's default, the fast IDCT, put pixels
up to 11 levels off), and resizing is computed as Pillow computes it: weights in double precision rounded to 22-bit
fixed point, two integer passes (across, then down) each rounded to 8 bits (`tf.image.resize(..., antialias=True)`,
the same filter in float, put up to one pixel in five a level off). An Inception-ResNet-v2 in front of a feature
model carries any such difference into the features. An image already at the model's size is passed as it is, as
capjax does. EXIF orientation and transparency are not applied (capjax's loader turns pictures upright and puts
transparent ones on white): send upright, opaque images.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import tensorflow as tf
from jax.experimental import jax2tf

from capjax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID, is_style_tag


# Pillow's fixed point for 8-bit images (libImaging/Resample.c): weights are integers of 2^-22, sums start at half.
_PRECISION_BITS = 22


def _pillow_weights(in_size: tf.Tensor, out_size: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(first (out_size,) int32, weights (out_size, taps) int32): output pixel i is the fixed-point weighted sum of
  input pixels first[i] + t, as Pillow's `precompute_coeffs` and `normalize_coeffs_8bpc` give them for BILINEAR (a
  triangle widened by the scale factor when shrinking), operation for operation in float64 so that every weight
  rounds as Pillow's does. Taps past an output pixel's window weigh 0."""
  f64 = tf.float64
  scale = tf.cast(in_size, f64) / out_size
  support = tf.maximum(scale, 1.0)  # the filter's support, 1, times the filter scale
  inv_filterscale = 1.0 / support
  centers = (tf.range(out_size, dtype=f64) + 0.5) * scale
  first = tf.maximum(tf.cast(centers - support + 0.5, tf.int32), 0)  # a cast truncates towards zero, as C's (int)
  count = tf.minimum(tf.cast(centers + support + 0.5, tf.int32), in_size) - first
  taps = tf.cast(tf.math.ceil(support), tf.int32) * 2 + 1
  offsets = tf.range(taps)
  distance = ((tf.cast(first[:, None] + offsets[None, :], f64) - centers[:, None]) + 0.5) * inv_filterscale
  inside = offsets[None, :] < count[:, None]
  w = tf.where(inside & (tf.abs(distance) < 1.0), 1.0 - tf.abs(distance), tf.zeros_like(distance))
  # Pillow adds the weights left to right: a sum in another order may differ in the last bit, and a weight with it.
  total = tf.foldl(lambda acc, column: acc + column, tf.transpose(w), initializer=tf.zeros([out_size], f64))
  w = tf.where(total[:, None] != 0.0, w / total[:, None], w)
  return first, tf.cast(tf.math.floor(w * float(1 << _PRECISION_BITS) + 0.5), tf.int32)  # (int)(0.5 + w·2^22), w ≥ 0


def _resample_rows(image: tf.Tensor, size: int) -> tf.Tensor:
  """uint8 (H, W, C) -> (size, W, C): Pillow's vertical 8-bit pass, summed in int32 as Pillow sums (a window's weights
  add up to about 2^22, so 255 times them fits), shifted back and clipped to [0, 255]."""
  height = tf.shape(image)[0]
  first, weights = _pillow_weights(height, size)

  def add_tap(t, total):
    rows = tf.gather(image, tf.minimum(first + t, height - 1))  # a clipped row is past its window: weight 0
    return t + 1, total + tf.cast(rows, tf.int32) * weights[:, t][:, None, None]

  start = tf.fill(tf.concat([[size], tf.shape(image)[1:]], 0), 1 << (_PRECISION_BITS - 1))
  _, total = tf.while_loop(lambda t, _: t < tf.shape(weights)[1], add_tap, (tf.constant(0), start))
  return tf.cast(tf.clip_by_value(tf.bitwise.right_shift(total, _PRECISION_BITS), 0, 255), tf.uint8)


def _resample_columns(image: tf.Tensor, size: int) -> tf.Tensor:
  """uint8 (H, W, C) -> (H, size, C): Pillow's horizontal pass."""
  return tf.transpose(_resample_rows(tf.transpose(image, [1, 0, 2]), size), [1, 0, 2])


def pillow_resize(image: tf.Tensor, size: int) -> tf.Tensor:
  """uint8 (H, W, 3) -> (size, size, 3), equal to `Image.resize((size, size), Image.BILINEAR)`: across, then down
  (down first for a picture over 100 times taller than wide, as Pillow does), each pass rounded to 8 bits."""
  shape = tf.shape(image)
  tall = tf.logical_and(shape[0] > 100 * shape[1], size < shape[0])
  return tf.cond(tall, lambda: _resample_columns(_resample_rows(image, size), size),
                 lambda: _resample_rows(_resample_columns(image, size), size))


def decode_image(data: tf.Tensor, size: int) -> tf.Tensor:
  """Encoded JPEG/PNG (GIF: its first frame) bytes -> uint8 (size, size, 3), as capjax's loader and resize give.
  JPEGs are decoded with libjpeg's accurate integer IDCT, Pillow's: TensorFlow's default, the fast one, puts pixels
  up to 11 levels off."""
  image = tf.cond(tf.io.is_jpeg(data), lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
                  lambda: tf.io.decode_image(data, channels=3, dtype=tf.uint8, expand_animations=False))
  image.set_shape([None, None, 3])
  shape = tf.shape(image)
  same = tf.logical_and(tf.equal(shape[0], size), tf.equal(shape[1], size))
  return tf.ensure_shape(tf.cond(same, lambda: image, lambda: pillow_resize(image, size)), [size, size, 3])


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
