"""The ERG paper's style classifier, the library: BERT with a linear head on [CLS] (the pooler's output when the
checkpoint has one), fine-tuned with AdamW to tell the styles and factual sentences apart. It is the extractor's model
(`style_phrases`) and the `cls` metric of `python -m capjax.metrics --style_model=DIR`; its command, and the
training defaults, are in `capjax.text_models.style_classifier`.

A saved classifier's directory holds the BERT directory (config.json, vocab.txt, variables/) plus
`style_classifier.json` (the labels and the training settings) and `head/`: it is self-contained for
--style_model=DIR.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow (the WordPiece tables) quietly

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from capjax import files, model_io, small_trainer
from capjax.scenes import stylized as scenes_stylized
from capjax.text.lines import split_lines
from capjax.text_models import bert as bert_lib
from capjax.text_models import checkpoint, tokenizers

FACTUAL = "factual"
STYLES: tuple[str, ...] = ("romantic", "humorous", "positive", "negative")  # capjax.metrics.stylized's
META_FILE, HEAD_DIR = "style_classifier.json", "head"
MAX_LENGTH = 64  # tokens; captions are far shorter, and a longer sentence is cut keeping [SEP]


@dataclasses.dataclass(frozen=True)
class Settings:
  """Fine-tuning settings; `paper_settings` gives the paper's per style family."""
  batch_size: int
  learning_rate: float
  epochs: int
  weight_decay: float = 0.01
  word_dropout: float = 0.0  # the share of word pieces hidden from each training sentence (masked out)
  seed: int = 0


def paper_settings(styles: Sequence[str]) -> Settings:
  """The paper's: "mini-batch size of 32 for romantic and humor styles and 64 for positive and negative", learning
  rates 1e-5 / 2e-5 (read here as romantic/humorous / positive/negative), 3 epochs."""
  sentiment = any(style in ("positive", "negative") for style in styles)
  return Settings(64, 2e-5, 3) if sentiment else Settings(32, 1e-5, 3)


# From random weights: the paper's 1e-5 for 3 epochs barely moves a randomly initialised BERT; 1e-3 for 6 epochs
# reaches 100% held-out accuracy on stylized_scenes (docs/erg.md, "Style classifier"). Word dropout makes every word
# of a style phrase a sign of its style on its own (without it the tiny model keys on one word, "like", and calls
# "laughing hyenas" factual), which the extractor needs to find whole phrases.
RANDOM_INIT_SETTINGS = Settings(32, 1e-3, 6, word_dropout=0.2)
TINY_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                 max_position_embeddings=MAX_LENGTH, dropout_rate=0.1, attention_dropout_rate=0.0)


class StyleModelError(ValueError):
  """A directory that is not a style classifier, or training data it cannot use: the message says what to do."""


def check_labels(labels: Sequence[str]) -> tuple[str, ...]:
  unknown = [label for label in labels if label not in (*STYLES, FACTUAL)]
  if unknown:
    raise StyleModelError(f"unknown style {unknown[0]!r} — choose from {', '.join((*STYLES, FACTUAL))}")
  if len(set(labels)) < 2:
    raise StyleModelError(f"{len(set(labels))} class(es) ({', '.join(labels)}) — give sentences of at least two, "
                          "e.g. a style and factual")
  return tuple(labels)


class Classifier(nn.Module):
  """BERT, then dropout and a dense layer on the pooled [CLS] output (h[CLS] itself without a pooler)."""
  config: bert_lib.BertConfig
  num_labels: int

  @nn.compact
  def __call__(self, ids, mask, deterministic: bool = True, return_attentions: bool = False):
    out = bert_lib.Bert(self.config, name="bert")(ids, mask, deterministic=deterministic,
                                                  return_attentions=return_attentions)
    cls = out.pooled if out.pooled is not None else out.last_hidden_state[:, 0]
    cls = nn.Dropout(self.config.dropout_rate)(cls, deterministic=deterministic)
    return nn.Dense(self.num_labels, name="head")(cls), out.attentions


def stylized_scenes_sentences(split_index: int, num_images: int, seed: int = 0) -> dict[str, list[str]]:
  """{romantic, humorous, factual: sentences} of `stylized_scenes` (its default seed): the stylized captions of
  images 0 .. num_images - 1 of the split (train 0, validation 1, test 2) and, as many, factual captions of its
  factual split (images i, caption i % 4: the canonical wording and the paraphrases)."""
  data: dict[str, list[str]] = {style: [] for style in scenes_stylized.STYLES}
  data[FACTUAL] = []
  factual_index = 3
  for i in range(num_images):
    _, captions = scenes_stylized.split_texts(seed, split_index, i)
    for caption in captions:
      data[caption.style].append(caption.caption)
    # Disjoint factual images per split: train, validation and test each take their own block.
    factual, _ = scenes_stylized.split_texts(seed, factual_index, split_index * 100_000 + i)
    data[FACTUAL].append(factual[i % len(factual)])
  return data


def word_vocabulary(sentences: Sequence[str]) -> list[str]:
  """A WordPiece vocabulary for a random-initialised BERT: the specials, every lowercased training word, and the
  single characters (alone and as ## continuations) so that an unseen word is spelled out rather than [UNK]."""
  words = sorted({w for s in sentences for w in tokenizers.basic_split(s, True)})
  chars = sorted({c for w in words for c in w} | set("abcdefghijklmnopqrstuvwxyz0123456789"))
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  return list(dict.fromkeys(vocab + words + chars + [f"##{c}" for c in chars]))


class StyleClassifier:
  """A fine-tuned classifier with its tokenizer: `predict` gives a style (or factual) per sentence."""

  def __init__(self, config: bert_lib.BertConfig, params: Mapping[str, Any], labels: Sequence[str],
               tokenizer: tokenizers.WordPiece, settings: Settings | None = None):
    self.config, self.params, self.labels, self.tokenizer = config, params, tuple(labels), tokenizer
    self.settings = settings
    self.module = Classifier(config, len(self.labels))
    self._forward = jax.jit(lambda p, ids, mask: self.module.apply({"params": p}, ids, mask, return_attentions=True))

  def encode(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    if not sentences:
      raise StyleModelError("no sentences — give at least one")
    ids, mask, _ = tokenizers.pad(self.tokenizer.encode(list(sentences)), min(MAX_LENGTH, self.config.
                                  max_position_embeddings), self.tokenizer.pad_id, self.tokenizer.sep_id)
    return ids, mask

  def run(self, ids: np.ndarray, mask: np.ndarray, batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities (B, labels), attentions (layers, B, heads, T, T)) of encoded sentences."""
    probs, atts = [], []
    for start in range(0, len(ids), batch_size):
      logits, att = self._forward(self.params, jnp.asarray(ids[start:start + batch_size]),
                                  jnp.asarray(mask[start:start + batch_size]))
      probs.append(np.asarray(jax.nn.softmax(logits, axis=-1)))
      atts.append(np.asarray(att))
    return np.concatenate(probs), np.concatenate(atts, axis=1)

  def probabilities(self, sentences: Sequence[str]) -> np.ndarray:
    return self.run(*self.encode(sentences))[0]

  def predict(self, sentences: Sequence[str]) -> list[str]:
    """The most probable label of each sentence."""
    return [self.labels[i] for i in self.probabilities(sentences).argmax(-1)]

  def accuracy(self, data: Mapping[str, Sequence[str]]) -> float:
    sentences, labels = _flatten(data, self.labels)
    return float(np.mean(self.probabilities(sentences).argmax(-1) == labels))

  def save(self, directory: str | os.PathLike[str]) -> pathlib.Path:
    params = jax.tree.map(np.asarray, dict(self.params))
    meta = {"format": "capjax.style_classifier", "labels": list(self.labels),
            "settings": dataclasses.asdict(self.settings) if self.settings else None}
    return checkpoint.save(directory, "bert", self.config, params["bert"], {"source": "style_classifier"},
                           self.tokenizer_dir, more_trees={HEAD_DIR: params["head"]},
                           more_texts={META_FILE: json.dumps(meta, indent=2) + "\n"})

  @classmethod
  def load(cls, directory: str | os.PathLike[str]) -> StyleClassifier:
    """The classifier saved in `directory`; anything else is a StyleModelError saying what to do."""
    directory = pathlib.Path(directory)
    train = "train one with `python -m capjax.text_models.style_classifier --output=DIR`"
    if not (directory / META_FILE).is_file():
      raise StyleModelError(f"{directory} is not a style classifier (no {META_FILE}) — {train}")
    try:
      meta = checkpoint.read_json(directory / META_FILE)
      labels = check_labels(meta.get("labels") or [])
      model = checkpoint.load(directory, "bert")
      target = {"kernel": np.zeros((model.config.hidden_size, len(labels)), np.float32),
                "bias": np.zeros((len(labels),), np.float32)}
      try:
        head = model_io.restore(directory / HEAD_DIR, target)
      except model_io.ShapeError as error:
        raise StyleModelError(f"{directory / HEAD_DIR} does not fit {len(labels)} labels") from error
      tokenizer = tokenizers.WordPiece(directory / "vocab.txt", model.config.do_lower_case)
    except (checkpoint.WeightsError, tokenizers.TokenizerError, StyleModelError) as error:
      raise StyleModelError(f"{directory} is not a whole style classifier ({str(error).split(' — ')[0]}) — "
                            f"{train}") from error
    except Exception as error:  # a missing or foreign head (model_io.RestoreError), a description of other types
      cause = error.cause if isinstance(error, model_io.RestoreError) else error
      raise StyleModelError(f"{directory / HEAD_DIR} is not a classifier head ({type(cause).__name__}) — {train}") \
          from error
    settings = Settings(**meta["settings"]) if isinstance(meta.get("settings"), dict) else None
    classifier = cls(model.config, {"bert": model.params, "head": head}, labels, tokenizer, settings)
    classifier.tokenizer_dir = directory
    return classifier


def _flatten(data: Mapping[str, Sequence[str]], labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
  sentences = [s for label in labels for s in data.get(label, ())]
  ids = np.asarray([i for i, label in enumerate(labels) for _ in data.get(label, ())], np.int32)
  return sentences, ids


def train(data: Mapping[str, Sequence[str]], init: str | os.PathLike[str] | checkpoint.TextModel | None = None,
          settings: Settings | None = None, log=None) -> StyleClassifier:
  """Fine-tunes a classifier on {label: sentences}: from the converted BERT in `init` (a directory, or loaded),
  or a tiny random one."""
  labels = check_labels(sorted(data, key=lambda s: (s != FACTUAL, s)))
  for label in labels:
    if not data[label]:
      raise StyleModelError(f"no {label} sentences — give at least one per class")
    if (bad := next((i for i, s in enumerate(data[label]) if not s.strip()), None)) is not None:
      raise StyleModelError(f"{label} sentence {bad + 1} is empty — remove empty lines")
  sentences, targets = _flatten(data, labels)
  tmp = tempfile.TemporaryDirectory()
  if init:
    model = init if isinstance(init, checkpoint.TextModel) else checkpoint.load(init, "bert")
    config, tokenizer_dir = model.config, model.directory
    settings = settings or paper_settings(labels)
  else:
    tokenizer_dir = pathlib.Path(tmp.name)
    vocab = word_vocabulary(sentences)
    (tokenizer_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = bert_lib.BertConfig(vocab_size=len(vocab), **TINY_BERT)
    settings = settings or RANDOM_INIT_SETTINGS
  tokenizer = tokenizers.WordPiece(tokenizer_dir / "vocab.txt", config.do_lower_case)
  classifier = StyleClassifier(config, {}, labels, tokenizer, settings)
  classifier.tokenizer_dir = tokenizer_dir
  classifier.temporary_vocab = tmp  # the random model's vocab.txt lives until the classifier is saved and dropped
  ids, mask = classifier.encode(sentences)
  key = jax.random.key(settings.seed)
  params = small_trainer.jitted_init(classifier.module)(key, jnp.asarray(ids[:1]), jnp.asarray(mask[:1]))
  if init:
    params = {**params, "bert": model.params}
  optimizer = optax.adamw(settings.learning_rate, weight_decay=settings.weight_decay)

  def loss_fn(p, batch, rng, frozen):
    del frozen  # every parameter trains
    ids, mask, y = batch
    rng, hide = jax.random.split(rng)
    if settings.word_dropout:  # never [CLS] (column 0) nor padding
      keep = jax.random.bernoulli(hide, 1 - settings.word_dropout, mask.shape).at[:, 0].set(True)
      mask = mask * keep.astype(mask.dtype)
    logits, _ = classifier.module.apply({"params": p}, ids, mask, deterministic=False, rngs={"dropout": rng})
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

  batch_size = min(settings.batch_size, len(sentences))
  batches = ((epoch, (jnp.asarray(ids[take]), jnp.asarray(mask[take]), jnp.asarray(targets[take])))  # whole batches
             for epoch, take in small_trainer.epoch_batches(len(sentences), batch_size, settings.epochs,
                                                            settings.seed))
  params, _ = small_trainer.fit(loss_fn, optimizer, params, batches, rng=key, epochs=settings.epochs, log=log)
  classifier.params = params
  return classifier


def read_training(spec: str) -> dict[str, list[str]]:
  """--train: `stylized_scenes` (its 1,000 train images) or STYLE=FILE,... (one sentence per line)."""
  if spec == "stylized_scenes":
    return stylized_scenes_sentences(0, 1_000)
  data, paths = {}, {}
  for item in spec.split(","):
    label, sep, path = item.partition("=")
    if not sep or not path:
      raise StyleModelError(f"--train entry {item!r} is not STYLE=FILE — write e.g. romantic=rom.txt,factual=f.txt")
    check_labels([label, FACTUAL if label != FACTUAL else STYLES[0]])
    if label in paths:  # a dict would keep the last file and drop the first without a word
      raise StyleModelError(f"--train names {label} twice ({paths[label]} and {path}) — give one file per style "
                            "(concatenate the two first)")
    paths[label] = path
    lines = split_lines(files.read_text(path, f"--train={label}", "a text file, one sentence per line"))
    data[label] = [line for line in lines if line.strip()]
  return data
