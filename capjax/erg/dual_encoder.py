"""The retriever's own encoder: images and captions embedded in one space by two towers trained contrastively
(symmetric InfoNCE with a learned temperature, as CLIP) on factual (image, caption) pairs.

The image tower reads pixels through the conv encoder (`capjax.models.encoders`) or pre-extracted features (the
project's IRv2 grids or pooled vectors), mean-pooled and projected. The text tower is any Flax module mapping
token ids [B, L] and a mask [B, L] to vectors [B, W]; `TextTransformer`, a small Transformer encoder from
`capjax.models.layers` over the project's word vocabulary (`WordTokenizer`), is the default; a BERT encoder takes
its place with its own tokenizer (any callable texts -> ids, mask): `bert_model` builds that from a converted
BERT-family checkpoint (all-MiniLM-L6-v2 from the `minilm` extra, say), whose weights `train` locks by default
(LiT's locked tower: only the projection learns on the text side, so a small factual corpus cannot wear down
what the sentence encoder learned on a billion pairs).
`TrainedEncoder` is the `capjax.erg.retrieve.Encoder` the retriever calls; `save` and `load` keep the default
model (conv or features image tower, `TextTransformer`, `WordTokenizer`) or one from `bert_model` in a directory:
`retriever.json` (the towers' sizes or the BERT's config, the vocabulary, the image shape it reads, a checksum of
the parameters), `variables/` (orbax) and, for a BERT tower, its `vocab.txt`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from capjax import model_io, small_trainer
from capjax.data.vocab import Vocabulary, build_vocabulary
from capjax.models import encoders, layers
from capjax.text_models import bert as bert_lib
from capjax.text_models import checkpoint, tokenizers
from capjax.tokens import PAD_ID

RETRIEVER_FILE = "retriever.json"
BERT_VOCAB_FILE = "vocab.txt"  # a BertTower's WordPiece vocabulary, copied beside retriever.json
VARIABLES_DIR = "variables"
FORMAT = "capjax.dual_encoder"
SAVE_HINT = ("save one with `python -m capjax.erg.augment ... --save_retriever=DIR` (it trains the retriever and "
             "keeps it there)")
MAX_SCALE = 100.0  # CLIP's cap on the learned logit scale (1 / temperature): beyond it training turns unstable


class RetrieverError(ValueError):
  """A directory that is not a whole saved retriever, or an encoder that cannot be saved: the message says what is
  wrong and what to do."""


class TextTransformer(nn.Module):
  """Pre-LN Transformer encoder over word ids, masked mean pooling: ids [B, L], mask [B, L] -> [B, width]."""

  vocab_size: int
  width: int = 128
  num_layers: int = 2
  num_heads: int = 4
  mlp_dim: int = 256
  max_len: int = 32

  @nn.compact
  def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
    x = layers.word_embedding(self.vocab_size, self.width)(ids) * jnp.sqrt(self.width)
    x = x + layers.sinusoidal_positions(self.max_len, self.width)[None, :ids.shape[1]]
    bias = jnp.where(mask[:, None, None, :], 0.0, layers.NEG_INF)  # [B, heads, query, key]: padding is no key
    for i in range(self.num_layers):
      y = layers.layer_norm(f"ln_attn_{i}")(x)
      x = x + layers.MultiHeadAttention(self.num_heads, self.width // self.num_heads, name=f"attn_{i}")(
          y, y, bias, deterministic=True)
      x = x + layers.MLP(self.mlp_dim, name=f"mlp_{i}")(layers.layer_norm(f"ln_mlp_{i}")(x), deterministic=True)
    x = layers.layer_norm("ln_out")(x)
    weights = mask.astype(x.dtype)[..., None]
    return (x * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1.0)


class BertTower(nn.Module):
  """A BERT-family encoder, mean-pooled over the mask as sentence-transformers pools: ids, mask [B, L] -> [B, H]."""

  config: bert_lib.BertConfig

  @nn.compact
  def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return bert_lib.mean_pool(bert_lib.Bert(self.config, name="bert")(ids, mask).last_hidden_state, mask)


@dataclasses.dataclass(frozen=True)
class BertTokenizer:
  """Texts -> BERT's WordPiece ids [B, max_len] ([CLS] ... [SEP], cut keeping [SEP]) and their mask: one width,
  so the jitted towers compile once."""

  wordpiece: tokenizers.WordPiece
  max_len: int = 32
  vocab_file: str = ""  # the vocab.txt it was read from: `save` copies it beside the retriever

  def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    ids, mask, _ = tokenizers.pad(self.wordpiece.encode(list(texts)), self.max_len, self.wordpiece.pad_id,
                                  self.wordpiece.sep_id, multiple=self.max_len)
    return ids, mask.astype(bool)


class ImageTower(nn.Module):
  """Pixels through the conv encoder ("conv"), or feature grids / pooled features ("features"), mean-pooled."""

  encoder: str = "conv"
  widths: Sequence[int] = (32, 64, 128)
  out_features: int = 128

  @nn.compact
  def __call__(self, images: jax.Array) -> jax.Array:
    if self.encoder == "conv":
      grid = encoders.ConvGridEncoder(tuple(self.widths), self.out_features, name="conv")(images)
    elif self.encoder == "features":
      grid = encoders.FeatureGrid(name="features")(images)
    else:
      raise ValueError(f"image encoder {self.encoder!r} is unknown — choose 'conv' (pixels) or 'features'")
    return grid.mean(axis=(1, 2))


class DualEncoder(nn.Module):
  """Two towers, each projected to `embed_dim` and normalised, and the learned logit scale of their InfoNCE."""

  image_tower: nn.Module
  text_tower: nn.Module
  embed_dim: int = 128
  init_temperature: float = 0.07

  def setup(self):
    self.image_proj = nn.Dense(self.embed_dim, name="image_proj")
    self.text_proj = nn.Dense(self.embed_dim, name="text_proj")
    self.log_scale = self.param("log_scale", nn.initializers.constant(np.log(1 / self.init_temperature)), ())

  def embed_images(self, images: jax.Array) -> jax.Array:
    return _unit(self.image_proj(self.image_tower(images)))

  def embed_texts(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return _unit(self.text_proj(self.text_tower(ids, mask)))

  def __call__(self, images: jax.Array, ids: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    return self.embed_images(images), self.embed_texts(ids, mask), jnp.minimum(jnp.exp(self.log_scale), MAX_SCALE)


def _unit(x: jax.Array) -> jax.Array:
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-6)


def info_nce(image_emb: jax.Array, text_emb: jax.Array, scale: jax.Array) -> jax.Array:
  """Symmetric InfoNCE: pair i is the right answer for row i (image -> texts) and column i (text -> images)."""
  logits = scale * image_emb @ text_emb.T
  labels = jnp.arange(logits.shape[0])
  return 0.5 * (optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
                + optax.softmax_cross_entropy_with_integer_labels(logits.T, labels).mean())


@dataclasses.dataclass(frozen=True)
class WordTokenizer:
  """Texts -> word ids [B, max_len] (the project's vocabulary, truncated, PAD-padded) and their mask. A text tower
  with its own tokenizer (BERT's WordPiece) comes with its own callable of the same signature."""

  vocab: Vocabulary
  max_len: int = 32

  def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.full((len(texts), self.max_len), PAD_ID, np.int32)
    mask = np.zeros((len(texts), self.max_len), bool)
    for row, text in enumerate(texts):
      words = self.vocab.ids(text)[:self.max_len]
      ids[row, :len(words)] = words
      mask[row, :max(len(words), 1)] = True  # an empty text keeps one PAD as its only key
    return ids, mask


Tokenizer = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass
class TrainedEncoder:
  """A trained dual encoder as the retriever's `Encoder`: images and texts -> unit vectors [B, embed_dim]."""

  model: DualEncoder
  params: Any
  tokenizer: Tokenizer
  image_shape: tuple[int, ...] | None = None  # one image as the image tower reads it (pixels or features)
  image_dtype: str | None = None

  def __post_init__(self):
    self._images = jax.jit(lambda p, x: self.model.apply({"params": p}, x, method=DualEncoder.embed_images))
    self._texts = jax.jit(lambda p, i, m: self.model.apply({"params": p}, i, m, method=DualEncoder.embed_texts))

  def embed_images(self, batch: Any) -> np.ndarray:
    return np.asarray(self._images(self.params, np.asarray(batch)))

  def embed_texts(self, texts: list[str]) -> np.ndarray:
    return np.asarray(self._texts(self.params, *self.tokenizer(texts)))


def default_model(vocab_size: int, image_encoder: str = "conv", width: int = 128, embed_dim: int = 128,
                  max_len: int = 32, conv_widths: Sequence[int] = (32, 64, 128)) -> DualEncoder:
  """The conv (or features) image tower and a 2-layer Transformer text tower of `width` channels."""
  return DualEncoder(ImageTower(image_encoder, tuple(conv_widths), width),
                     TextTransformer(vocab_size, width, num_layers=2, num_heads=4, mlp_dim=2 * width, max_len=max_len),
                     embed_dim)


@dataclasses.dataclass(frozen=True)
class PretrainedText:
  """A text tower with weights to start from: the model, its tokenizer and the tower's parameters."""

  model: DualEncoder
  tokenizer: Tokenizer
  text_params: Any


def bert_model(text_model: checkpoint.TextModel | str | os.PathLike[str], image_encoder: str = "conv",
               width: int = 128, embed_dim: int = 128, max_len: int = 32,
               conv_widths: Sequence[int] = (32, 64, 128)) -> PretrainedText:
  """The `default_model` image tower beside a converted BERT-family encoder (a directory or a loaded model) as the
  text tower, with its WordPiece tokenizer (lowercasing from its config): give `train` all three."""
  if not isinstance(text_model, checkpoint.TextModel):
    text_model = checkpoint.load(text_model, "bert")
  if text_model.kind != "bert":
    raise checkpoint.WeightsError(f"{text_model.directory} holds a {text_model.kind} model — the text tower needs a "
                                  "BERT-family checkpoint (convert_weights --format=hf_bert)")
  max_len = min(max_len, text_model.config.max_position_embeddings)
  wordpiece = tokenizers.WordPiece(text_model.directory / "vocab.txt", text_model.config.do_lower_case)
  model = DualEncoder(ImageTower(image_encoder, tuple(conv_widths), width), BertTower(text_model.config), embed_dim)
  return PretrainedText(model, BertTokenizer(wordpiece, max_len, str(text_model.directory / "vocab.txt")),
                        {"bert": text_model.params})


def train(images: np.ndarray, captions: Sequence[Sequence[str]], *, model: DualEncoder | None = None,
          tokenizer: Tokenizer | None = None, steps: int = 300, batch_size: int = 64, learning_rate: float = 2e-3,
          max_len: int = 32, seed: int = 0, pretrained: PretrainedText | None = None, lock_text: bool = True
          ) -> tuple[TrainedEncoder, list[float]]:
  """Trains a dual encoder on (image, caption) pairs: each step draws `batch_size` distinct images and one of
  each image's captions (so no two rows of a batch are the same image: InfoNCE has no false negatives of that kind).

  Args:
    images: [N, ...] pixels (uint8) or features, what the model's image tower reads.
    captions: N lists of factual captions (one or more per image).
    model: default `default_model` over the tokenizer's vocabulary; any DualEncoder, e.g. with a BERT text tower.
    tokenizer: texts -> (ids, mask) for the text tower; default a `WordTokenizer` over the training captions'
      words (each seen at least once).
    pretrained: a text tower with weights (`bert_model`): its model and tokenizer replace `model` and `tokenizer`,
      and its parameters replace the text tower's initial ones.
    lock_text: with `pretrained`, keep the text tower's weights as they are (no gradient step, no weight decay).

  Returns:
    The trained encoder and the loss of every step.
  """
  if len(images) != len(captions) or len(images) < 2:
    raise ValueError(f"{len(images)} images and {len(captions)} caption lists — give at least two pairs, one caption "
                     "list per image")
  if any(len(c) == 0 for c in captions):
    raise ValueError("an image has no caption — give every image at least one")
  if pretrained is not None:
    model, tokenizer = pretrained.model, pretrained.tokenizer
  tokenizer = tokenizer or WordTokenizer(build_vocabulary((c for cs in captions for c in cs), min_count=1), max_len)
  if model is None:
    if not isinstance(tokenizer, WordTokenizer):
      raise ValueError("a custom tokenizer needs its own model — pass model= with a text tower for its ids")
    model = default_model(len(tokenizer.vocab), max_len=tokenizer.max_len)
  batch_size = min(batch_size, len(images))
  rng = np.random.default_rng(seed)
  ids0, mask0 = tokenizer([captions[0][0]] * batch_size)
  init = small_trainer.jitted_init(model)
  init_args = (jax.random.key(seed), np.asarray(images[:batch_size]), ids0, mask0)
  if pretrained is not None:  # shapes first: a mismatch is refused before anything compiles
    _check_text_params(jax.eval_shape(init, *init_args)["text_tower"], pretrained.text_params)
  params = init(*init_args)
  optimizer = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, learning_rate, max(steps // 10, 1), max(steps, 2)),
                          weight_decay=1e-4)
  locked = {}
  if pretrained is not None:
    params = {**params, "text_tower": jax.tree.map(jnp.asarray, pretrained.text_params)}
    if lock_text:  # outside the differentiated tree: no backward pass through it, no update, no decay
      locked = {"text_tower": params.pop("text_tower")}

  def loss_fn(p, batch, key, locked):  # locked: an argument, not constants baked into the HLO
    del key  # no dropout
    return info_nce(*model.apply({"params": {**p, **locked}}, *batch))

  def batches():  # each step: batch_size distinct images, one caption of each
    for _ in range(steps):
      rows = rng.choice(len(images), batch_size, replace=False)
      texts = [captions[r][int(rng.integers(len(captions[r])))] for r in rows]
      yield 0, (np.asarray(images[rows]), *tokenizer(texts))

  params, losses = small_trainer.fit(loss_fn, optimizer, params, batches(), frozen=locked)
  images = np.asarray(images)
  return TrainedEncoder(model, {**params, **locked}, tokenizer, tuple(images.shape[1:]), images.dtype.name), losses


def _check_text_params(expected: Any, given: Any) -> None:
  """Refuses pretrained text parameters whose structure or shapes differ from the text tower's."""
  if (jax.tree.structure(expected) != jax.tree.structure(given)
      or any(a.shape != np.shape(b) for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(given), strict=True))):
    raise ValueError("the pretrained text parameters do not match the text tower — build both with bert_model")


def recall_at_k(result_ids: np.ndarray, truth: np.ndarray, k: int = 1) -> float:
  """Share of queries whose true bank row is among their first k ids."""
  return float(np.mean((result_ids[:, :k] == np.asarray(truth)[:, None]).any(axis=1)))


# ----------------------------------------------------------------------------------------------------------
# Saving and loading
# ----------------------------------------------------------------------------------------------------------
def params_digest(params: Any) -> str:
  """sha256 over every parameter's path, dtype, shape and bytes: the identity of a trained retriever (a resumed
  augmentation must use the same one) and the check that `variables/` is the one `retriever.json` describes."""
  digest = hashlib.sha256()
  for path, leaf in sorted(jax.tree_util.tree_flatten_with_path(params)[0], key=lambda item: jax.tree_util.keystr(
      item[0])):
    value = np.ascontiguousarray(np.asarray(leaf))
    digest.update(f"{jax.tree_util.keystr(path)}|{value.dtype.name}|{value.shape}|".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()


def _description(encoder: TrainedEncoder) -> dict[str, Any]:
  model, tokenizer = encoder.model, encoder.tokenizer
  default_text = type(model.text_tower) is TextTransformer and isinstance(tokenizer, WordTokenizer)
  bert_text = type(model.text_tower) is BertTower and isinstance(tokenizer, BertTokenizer) and tokenizer.vocab_file
  if type(model) is not DualEncoder or type(model.image_tower) is not ImageTower or not (default_text or bert_text):
    raise RetrieverError("only the dual encoder of ImageTower and TextTransformer (WordTokenizer) or BertTower "
                         "(BertTokenizer, from bert_model) can be saved — keep a custom encoder with its own code")
  if encoder.image_shape is None or encoder.image_dtype is None:
    raise RetrieverError("this encoder does not record the image shape it reads — train it with "
                         "`capjax.erg.dual_encoder.train`, which records it")
  image, text = model.image_tower, model.text_tower
  if default_text:
    text_tower = {"vocab_size": text.vocab_size, "width": text.width, "num_layers": text.num_layers,
                  "num_heads": text.num_heads, "mlp_dim": text.mlp_dim, "max_len": text.max_len}
    vocab = list(tokenizer.vocab.words)
  else:  # the BERT's config; its vocabulary is the vocab.txt saved beside
    text_tower, vocab = {"bert": text.config.to_dict()}, []
  return {
      "format": FORMAT,
      "image_tower": {"encoder": image.encoder, "widths": list(image.widths), "out_features": image.out_features},
      "text_tower": text_tower,
      "embed_dim": model.embed_dim, "init_temperature": model.init_temperature,
      "image_shape": list(encoder.image_shape), "image_dtype": encoder.image_dtype,
      "tokenizer_max_len": tokenizer.max_len, "vocab": vocab,
  }


def save(encoder: TrainedEncoder, directory: str | pathlib.Path, training: dict[str, Any] | None = None
         ) -> pathlib.Path:
  """Writes `encoder` (the default model only: a RetrieverError otherwise) to `directory`; `training` (e.g. the
  data, steps and seed it was trained with) is kept in `retriever.json` for the reader."""
  meta = _description(encoder)
  params = jax.tree.map(np.asarray, nn.meta.unbox(encoder.params))
  meta["params_sha256"] = params_digest(params)
  meta["training"] = dict(training or {})
  copies = ({BERT_VOCAB_FILE: encoder.tokenizer.vocab_file} if isinstance(encoder.tokenizer, BertTokenizer) else {})
  # retriever.json is renamed into place last: a directory with it is whole
  return model_io.save(directory, {VARIABLES_DIR: params}, {RETRIEVER_FILE: json.dumps(meta, indent=2) + "\n"}, copies)


def load(directory: str | pathlib.Path) -> TrainedEncoder:
  """The retriever saved in `directory`; a RetrieverError when it is not a whole one (no or unreadable
  `retriever.json`, parameters of other shapes or another checksum than it describes)."""
  directory = pathlib.Path(directory).resolve()
  meta_path = directory / RETRIEVER_FILE
  if not meta_path.is_file():
    raise RetrieverError(f"{directory} is not a saved retriever (no {RETRIEVER_FILE}) — {SAVE_HINT}")
  try:
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
      raise ValueError(f'no "format": "{FORMAT}"')
    if "bert" in meta["text_tower"]:
      config = bert_lib.BertConfig.from_dict(meta["text_tower"]["bert"])
      text_tower = BertTower(config)
      vocab_file = directory / BERT_VOCAB_FILE
      tokenizer = BertTokenizer(tokenizers.WordPiece(vocab_file, config.do_lower_case),
                                int(meta["tokenizer_max_len"]), str(vocab_file))
    else:
      text_tower = TextTransformer(**{k: int(v) for k, v in meta["text_tower"].items()})
      tokenizer = WordTokenizer(Vocabulary(tuple(meta["vocab"])), int(meta["tokenizer_max_len"]))
      if len(tokenizer.vocab) != text_tower.vocab_size:
        raise ValueError(f"{len(tokenizer.vocab)} vocabulary words for a text tower of {text_tower.vocab_size}")
    model = DualEncoder(ImageTower(meta["image_tower"]["encoder"], tuple(meta["image_tower"]["widths"]),
                                   int(meta["image_tower"]["out_features"])),
                        text_tower, int(meta["embed_dim"]), float(meta["init_temperature"]))
    image_shape, image_dtype = tuple(int(d) for d in meta["image_shape"]), np.dtype(meta["image_dtype"]).name
    ids, mask = tokenizer(["a"])
    shapes = jax.eval_shape(lambda: nn.meta.unbox(model.init(
        jax.random.key(0), jnp.zeros((1, *image_shape), image_dtype), ids, mask)["params"]))
    expected_digest = str(meta["params_sha256"])
  except (ValueError, KeyError, TypeError, AttributeError) as error:  # not JSON, a field missing or of a wrong type
    raise RetrieverError(f"{meta_path} is not a readable retriever description ({type(error).__name__}: "
                         f"{' '.join(str(error).split())[:200]}) — {SAVE_HINT}") from error
  held = f"{directory / VARIABLES_DIR} does not hold the parameters {RETRIEVER_FILE} describes"
  try:
    params = model_io.restore(directory / VARIABLES_DIR, shapes)
  except model_io.RestoreError as error:
    raise RetrieverError(f"{held} ({type(error.cause).__name__}) — {SAVE_HINT}") from error
  except model_io.ShapeError as error:
    raise RetrieverError(f"{held} (their shapes or checksum differ) — {SAVE_HINT}") from error
  if params_digest(params) != expected_digest:
    raise RetrieverError(f"{held} (their shapes or checksum differ) — {SAVE_HINT}")
  return TrainedEncoder(model, params, tokenizer, image_shape, image_dtype)
