"""alt_text_captions' cross stage (c): the image's labels (a CC3M image-labels TSV, or the IRv2 labeler's) against
the caption's tokens, a label matching when each of its words shares a form (word, lemma, Porter stem) with one.

Builders and Beam workers import this module by its package name (see tfds_builders/img2dataset/).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence

from capjax import files


def read_labels_file(path: str) -> dict[str, tuple[str, ...]]:
  """url → labels of a CC3M image-labels TSV (caption, url, labels, mids, confidences; labels comma-separated)."""
  labels: dict[str, tuple[str, ...]] = {}
  with io.TextIOWrapper(files.open_regular(path), encoding="utf-8", errors="replace") as f:
    for line in f:
      fields = line.rstrip("\r\n").split("\t")
      if len(fields) >= 3 and fields[1]:
        labels.setdefault(fields[1], tuple(name.strip() for name in fields[2].split(",") if name.strip()))
  return labels


@functools.lru_cache(maxsize=1)
def _stemmer():
  from nltk.stem.porter import PorterStemmer  # noqa: PLC0415
  return PorterStemmer()


def word_forms(word: str, lemma: str) -> set[str]:
  """The forms a label and a caption token may share: lowercase word, lemma, Porter stem of either."""
  word, lemma = word.lower(), lemma.lower()
  stem = _stemmer().stem
  return {word, lemma, stem(word), stem(lemma)}


def annotation_forms(annotation) -> set[str]:
  """Every form (word_forms) of an annotated caption's tokens."""
  forms: set[str] = set()
  for token, lemma in zip(annotation.tokens, annotation.lemmas):
    forms |= word_forms(token, lemma)
  return forms


def cross_filter(labels: Sequence[str], caption_forms: set[str], annotator) -> str | None:
  """None when some label matches the caption (every word of the label, by word, lemma or stem); else the
  reason: no_labels (the labeler gave the image none) or no_label_overlap."""
  if not labels:
    return "no_labels"
  for label in labels:
    words = label.lower().replace("_", " ").split()
    if words and all(word_forms(w, annotator.lemma(w, "NOUN")) & caption_forms for w in words):
      return None
  return "no_label_overlap"
