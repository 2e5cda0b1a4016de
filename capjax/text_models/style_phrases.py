"""The ERG paper's style-phrase extractor (its section 3.1) over a fine-tuned `style_classifier`.

usage: python -m capjax.text_models.style_phrases --model=DIR --output=OUT.jsonl [--html=OUT.html]
         [--sentences=FILE --style=STYLE [--heldout=FILE] | --pairs=FILE.tsv [--heldout=FILE --style=STYLE]]
         [--epsilon=0.25] [--phrase=minimal|epsilon]
Without --sentences or --pairs it extracts from the embedded `stylized_scenes` test split (both styles) and chooses
the head on its validation split. With --sentences (one UTF-8 sentence per line, all of --style) the head is chosen
on --heldout (default: the sentences themselves). With --pairs (a UTF-8 TSV, `STYLE<TAB>sentence` a line, a first
line `style<TAB>sentence` read as a header; each line its own style) the head is chosen on --heldout of --style, or
by default on the `stylized_scenes` validation split (the embedded classifier's own); a sentence of a style the
classifier has no label for is shaded under that head with no phrase. Each JSONL line: style, sentence,
style_phrase, content (the sentence without the phrase), layer, head (0-based), spans ([start, end) word indices of
the phrase), scores (the classifier's probability of each label for the whole sentence). --html writes the chosen
head's [CLS] attention over each sentence's words, shaded, like the paper's Table 4, with the scores.

The method: a word's importance under layer l, head h is the [CLS] row of that head's attention summed over the
word's WordPiece pieces ([CLS] and [SEP] ignored). For every (l, h), the top-ε words (ε·n rounded, at least one) are
deleted from each held-out sentence and the classifier's probability of the sentence's style is measured again; the
head whose deletions lower it most on average is chosen. The phrase is that head's top words, kept in sentence order
as contiguous spans: `--phrase=epsilon` takes the top-ε words as the paper; `--phrase=minimal` (the default)
deletes the head's top word, recomputes the attention on what remains, and repeats until the classifier no longer
chooses the style: the deleted words are the phrase (the top-ε words if it still chooses the style with one word
left). A fixed fraction cuts a 4-word phrase in an 8-word sentence and pads a 2-word one in a 16-word one, and a
head that puts all its weight on one word ranks the rest of the phrase no higher than the content.
Words are the tokenizer's (`WordPiece.words`: lowercased for an uncased model, punctuation apart).
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
from absl import flags

from capjax import cli, files
from capjax.text.lines import split_lines
from capjax.text_models import tokenizers

if TYPE_CHECKING:
  from capjax.text_models import style_model as sc
# The classifier (jax, Flax) is imported by the functions that use it: --help answers without it (1.4 s).

EPSILON = 0.25
PHRASE_MODES = ("minimal", "epsilon")


@dataclasses.dataclass(frozen=True)
class Extraction:
  style: str
  sentence: str
  words: list[str]
  spans: list[tuple[int, int]]   # [start, end) word indices of the style phrase, in sentence order
  layer: int
  head: int
  weights: list[float]           # the chosen head's [CLS] attention on each word
  scores: dict[str, float] = dataclasses.field(default_factory=dict)  # label -> probability, whole sentence

  @property
  def phrase_words(self) -> list[int]:
    return [i for start, end in self.spans for i in range(start, end)]

  @property
  def style_phrase(self) -> str:
    return " ".join(" ".join(self.words[s:e]) for s, e in self.spans)

  @property
  def content(self) -> str:
    keep = set(range(len(self.words))) - set(self.phrase_words)
    return " ".join(w for i, w in enumerate(self.words) if i in keep)

  def record(self) -> dict[str, object]:
    return {"style": self.style, "sentence": self.sentence, "style_phrase": self.style_phrase,
            "content": self.content, "layer": self.layer, "head": self.head, "spans": [list(s) for s in self.spans],
            "scores": self.scores}


def spans(indices: Sequence[int]) -> list[tuple[int, int]]:
  """Sorted word indices as contiguous [start, end) runs."""
  runs: list[tuple[int, int]] = []
  for i in sorted(indices):
    if runs and runs[-1][1] == i:
      runs[-1] = (runs[-1][0], i + 1)
    else:
      runs.append((i, i + 1))
  return runs


def top_count(num_words: int, epsilon: float) -> int:
  return max(1, min(num_words, int(epsilon * num_words + 0.5)))


class Extractor:
  """Word importances per (layer, head), the head choice on held-out sentences and the phrases."""

  def __init__(self, classifier: sc.StyleClassifier, epsilon: float = EPSILON, phrase: str = "minimal"):
    if not 0 < epsilon < 1:
      raise ValueError(f"epsilon={epsilon} is not between 0 and 1 — the paper's is {EPSILON}")
    if phrase not in PHRASE_MODES:
      raise ValueError(f"unknown phrase mode {phrase!r} — choose one of {', '.join(PHRASE_MODES)}")
    self.classifier, self.epsilon, self.phrase = classifier, epsilon, phrase
    self.head: tuple[int, int] | None = None
    self.head_drops: np.ndarray | None = None  # (layers, heads): mean drop of the style's probability

  def _check(self, sentences: Sequence[str], styles: Sequence[str], any_style: bool = False) -> list[list[str]]:
    from capjax.text_models import style_model as sc  # noqa: PLC0415
    if not sentences:
      raise sc.StyleModelError("no sentences — give at least one stylized sentence")
    for style in set(styles) if not any_style else ():
      if style not in self.classifier.labels or style == sc.FACTUAL:
        raise sc.StyleModelError(f"unknown style {style!r} for this classifier — choose one of "
                                 f"{', '.join(s for s in self.classifier.labels if s != sc.FACTUAL)}")
    words = [self.classifier.tokenizer.words(s) for s in sentences]
    if (empty := next((i for i, w in enumerate(words) if not w), None)) is not None:
      raise sc.StyleModelError(f"sentence {empty + 1} is empty — give a sentence with words")
    return words

  def importances(self, words: Sequence[Sequence[str]]) -> tuple[np.ndarray, list[np.ndarray]]:
    """(probabilities (B, labels), per sentence (layers, heads, words): [CLS] attention summed over each word's
    pieces; a word past the model's length (cut) gets 0)."""
    from capjax.text_models import style_model as sc  # noqa: PLC0415
    tok = self.classifier.tokenizer
    flat = [w for ws in words for w in ws]
    pieces = iter(tok.tokenize(flat))
    limit = min(sc.MAX_LENGTH, self.classifier.config.max_position_embeddings) - 1  # room for [SEP]
    rows, owners = [], []
    for ws in words:
      ids, owner = [tok.cls_id], [-1]
      for w in range(len(ws)):
        for piece in next(pieces):
          if len(ids) < limit:
            ids.append(piece)
            owner.append(w)
      rows.append(ids + [tok.sep_id])
      owners.append(owner + [-1])
    ids, mask, _ = tokenizers.pad(rows, limit + 1, tok.pad_id, tok.sep_id)
    probs, att = self.classifier.run(ids, mask)
    result = []
    for b, (ws, owner) in enumerate(zip(words, owners)):
      cls_row = att[:, b, :, 0, :len(owner)]  # (layers, heads, tokens)
      per_word = np.zeros(cls_row.shape[:2] + (len(ws),), np.float32)
      for t, w in enumerate(owner):
        if w >= 0:
          per_word[:, :, w] += cls_row[:, :, t]
      result.append(per_word)
    return probs, result

  def choose_head(self, sentences: Sequence[str], styles: Sequence[str]) -> tuple[int, int]:
    """The (layer, head) whose top-ε deletions lower the classifier's probability of each sentence's style most,
    on average over the held-out `sentences`."""
    words = self._check(sentences, styles)
    probs, weights = self.importances(words)
    target = np.asarray([self.classifier.labels.index(s) for s in styles])
    layers, heads = weights[0].shape[:2]
    deleted = []
    for ws, w in zip(words, weights):
      k = top_count(len(ws), self.epsilon)
      for layer in range(layers):
        for head in range(heads):
          drop = set(np.argsort(-w[layer, head], kind="stable")[:k].tolist())
          deleted.append([x for i, x in enumerate(ws) if i not in drop] or ["[UNK]"])
    after, _ = self.importances(deleted)
    after = after.reshape(len(words), layers, heads, -1)
    before = probs[np.arange(len(words)), target]
    after_target = np.take_along_axis(after, target[:, None, None, None], axis=-1)[..., 0]
    self.head_drops = (before[:, None, None] - after_target).mean(0)
    self.head = tuple(int(i) for i in np.unravel_index(self.head_drops.argmax(), self.head_drops.shape))
    return self.head

  def extract(self, sentences: Sequence[str], styles: Sequence[str]) -> list[Extraction]:
    """The style phrase of each sentence under the chosen head (`choose_head` first)."""
    if self.head is None:
      raise ValueError("no head chosen yet — call choose_head on held-out sentences first")
    layer, head = self.head
    words = self._check(sentences, styles)
    probs, weights = self.importances(words)
    ranks = [np.argsort(-w[layer, head], kind="stable") for w in weights]
    counts = [top_count(len(ws), self.epsilon) for ws in words]
    if self.phrase == "minimal":
      counts = self._minimal_counts(words, styles, ranks, counts)
    return [Extraction(style, sentence, list(ws), spans(rank[:k].tolist()), layer, head, w[layer, head].tolist(),
                       self._scores(p))
            for style, sentence, ws, rank, k, w, p in zip(styles, sentences, words, ranks, counts, weights, probs)]

  def shade(self, sentences: Sequence[str], styles: Sequence[str]) -> list[Extraction]:
    """The chosen head's weights and the classifier's scores of sentences of any style (one it has no label for
    too), with no phrase: the extraction needs the classifier to know the style."""
    if self.head is None:
      raise ValueError("no head chosen yet — call choose_head on held-out sentences first")
    layer, head = self.head
    words = self._check(sentences, styles, any_style=True)
    probs, weights = self.importances(words)
    return [Extraction(style, sentence, list(ws), [], layer, head, w[layer, head].tolist(), self._scores(p))
            for style, sentence, ws, w, p in zip(styles, sentences, words, weights, probs)]

  def _scores(self, probs: np.ndarray) -> dict[str, float]:
    return {label: round(float(p), 4) for label, p in zip(self.classifier.labels, probs)}

  def _minimal_counts(self, words, styles, ranks, fallback) -> list[int]:
    """Per sentence, the number of words deleted one at a time, each the chosen head's top word of what remains
    (the attention recomputed after each deletion), until the classifier no longer chooses the style; the top-ε
    count where it still does with one word left. Those words replace the first ranks of `ranks` in place."""
    layer, head = self.head
    counts, removed = list(fallback), [[] for _ in words]
    active = list(range(len(words)))
    while active:
      remaining = [[i for i in range(len(words[b])) if i not in removed[b]] for b in active]
      _, weights = self.importances([[words[b][i] for i in kept] for b, kept in zip(active, remaining)])
      for b, kept, w in zip(active, remaining, weights):
        removed[b].append(kept[int(np.argmax(w[layer, head]))])
      left = [[i for i in range(len(words[b])) if i not in removed[b]] for b in active]
      still = [b for b, kept in zip(active, left) if kept]
      if still:
        probs, _ = self.importances([[words[b][i] for i in kept] for b, kept in zip(active, left) if kept])
        chosen = {b: self.classifier.labels[int(p.argmax())] for b, p in zip(still, probs)}
      else:
        chosen = {}
      next_active = []
      for b in active:
        if b in chosen and chosen[b] == styles[b]:
          if len(removed[b]) < len(words[b]) - 1:
            next_active.append(b)
        elif b in chosen:
          counts[b] = len(removed[b])
          ranks[b] = np.asarray(removed[b] + [i for i in ranks[b].tolist() if i not in removed[b]])
      active = next_active
    return counts


def heatmap_html(extractions: Sequence[Extraction], title: str = "Style phrases") -> str:
  """The chosen head's [CLS] attention over each sentence's words (darker: more), the phrase underlined."""
  rows = []
  for e in extractions:
    top = max(e.weights) or 1.0
    phrase = set(e.phrase_words)
    underline = "; text-decoration: underline"
    cells = " ".join(
        f'<span style="background: rgba(220, 40, 40, {w / top:.3f}){underline if i in phrase else ""}"'
        f' title="{w:.4f}">{html.escape(word)}</span>' for i, (word, w) in enumerate(zip(e.words, e.weights)))
    scores = ", ".join(f"{label} {p:.2f}" for label, p in e.scores.items())
    rows.append(f"<tr><td>{html.escape(e.style)}</td><td>{cells}</td><td>{html.escape(e.style_phrase)}</td>"
                f"<td>{e.layer}, {e.head}</td><td>{html.escape(scores)}</td></tr>")
  return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(title) + "</title></head><body>"
          f"<h1>{html.escape(title)}</h1><p>The [CLS] attention of the chosen head (layer, head; 0-based) on each "
          "word, darker for more; the extracted style phrase is underlined; the classifier's scores of the whole "
          "sentence.</p>\n<table border=\"1\" cellpadding=\"4\"><tr><th>style</th><th>sentence</th>"
          "<th>style phrase</th><th>layer, head</th><th>scores</th></tr>\n"
          + "\n".join(rows) + "\n</table></body></html>\n")


def stylized_scenes_pairs(split_index: int, num_images: int) -> tuple[list[str], list[str], list[tuple[int, int]]]:
  """(sentences, styles, planted [start, end) spans) of the stylized captions of a `stylized_scenes` split."""
  from capjax.scenes import stylized as scenes_stylized  # noqa: PLC0415
  sentences, styles, planted = [], [], []
  for i in range(num_images):
    for caption in scenes_stylized.split_texts(0, split_index, i)[1]:
      sentences.append(caption.caption)
      styles.append(caption.style)
      planted.append((caption.start, caption.end))
  return sentences, styles, planted


FLAGS = flags.FlagValues()
_MODEL = flags.DEFINE_string("model", None, "a style classifier directory (python -m "
                             "capjax.text_models.style_classifier)", flag_values=FLAGS, required=True)
_OUTPUT = flags.DEFINE_string("output", None, "JSONL file to write", flag_values=FLAGS, required=True)
_HTML = flags.DEFINE_string("html", "", "HTML heatmap page to write", flag_values=FLAGS)
_SENTENCES = flags.DEFINE_string("sentences", "", "stylized sentences, one per line (default: stylized_scenes test)",
                                 flag_values=FLAGS)
_STYLE = flags.DEFINE_string("style", "", "the style of --sentences (or of --heldout with --pairs)",
                             flag_values=FLAGS)
_PAIRS = flags.DEFINE_string("pairs", "", "a TSV of STYLE<TAB>sentence lines, each its own style (instead of "
                             "--sentences)", flag_values=FLAGS)
_HELDOUT = flags.DEFINE_string("heldout", "", "sentences of --style to choose the head on (default: --sentences; "
                               "with --pairs, the stylized_scenes validation split)", flag_values=FLAGS)
_EPS = flags.DEFINE_float("epsilon", EPSILON, "the share of words deleted per head", flag_values=FLAGS)
_PHRASE = flags.DEFINE_enum("phrase", "minimal", PHRASE_MODES, "how many top words make the phrase",
                            flag_values=FLAGS)


def _lines(path: str, flag: str) -> list[str]:
  lines = split_lines(files.read_text(path, flag, "a text file with one sentence per line"))
  if (blank := next((i for i, line in enumerate(lines) if not line.strip()), None)) is not None:
    cli.fail(f"{flag}={path}: line {blank + 1} is empty — write one sentence on every line")
  if not lines:
    cli.fail(f"{flag}={path} has no sentences — give at least one")
  return lines


def read_pairs(text: str, path: str = "", flag: str = "--pairs") -> tuple[list[str], list[str]]:
  """(sentences, styles) of a TSV's `STYLE<TAB>sentence` lines; a first line `style<TAB>sentence` is a header."""
  from capjax.text_models import style_model as sc  # noqa: PLC0415
  lines = split_lines(text)
  first = 1 if lines and lines[0].strip().lower().split("\t") == ["style", "sentence"] else 0
  sentences, styles = [], []
  for number, line in enumerate(lines[first:], first + 1):
    style, tab, sentence = line.partition("\t")
    if not tab or not sentence.strip():
      raise sc.StyleModelError(f"{flag}={path}: line {number} is not STYLE<TAB>sentence — write e.g. "
                               "'romantic<TAB>a dog in love'")
    if style not in sc.STYLES:
      raise sc.StyleModelError(f"{flag}={path}: line {number}: unknown style {style!r} — choose one of "
                               f"{', '.join(sc.STYLES)}")
    sentences.append(sentence.strip())
    styles.append(style)
  if not sentences:
    raise sc.StyleModelError(f"{flag}={path} has no sentences — give at least one STYLE<TAB>sentence line")
  return sentences, styles


def _extract_pairs(extractor: Extractor, sentences: Sequence[str], styles: Sequence[str]) -> list[Extraction]:
  """Each sentence's extraction if the classifier knows its style, else its shading with no phrase; input order."""
  from capjax.text_models import style_model as sc  # noqa: PLC0415
  known = [i for i, s in enumerate(styles) if s in extractor.classifier.labels and s != sc.FACTUAL]
  other = [i for i in range(len(sentences)) if i not in set(known)]
  found: dict[int, Extraction] = {}
  for indices, method in ((known, extractor.extract), (other, extractor.shade)):
    if indices:
      found.update(zip(indices, method([sentences[i] for i in indices], [styles[i] for i in indices])))
  return [found[i] for i in range(len(sentences))]


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  from capjax.text_models import style_model as sc  # noqa: PLC0415
  # Every input is checked before the model loads and before anything is written.
  if _PAIRS.value and _SENTENCES.value:
    cli.fail("--pairs and --sentences are two ways to give sentences — give one of them")
  if _PAIRS.value and bool(_HELDOUT.value) != bool(_STYLE.value):
    cli.fail("with --pairs, --heldout and --style go together — give both, or neither for the stylized_scenes "
             "validation split")
  if not _PAIRS.value and bool(_SENTENCES.value) != bool(_STYLE.value):
    cli.fail("--sentences and --style go together — give both, or neither for stylized_scenes")
  if _HELDOUT.value and not (_SENTENCES.value or _PAIRS.value):
    cli.fail("--heldout goes with --sentences and --style — give them, or drop --heldout")
  if _STYLE.value and _STYLE.value not in sc.STYLES:
    cli.fail(f"unknown style {_STYLE.value!r} — choose one of {', '.join(sc.STYLES)}")
  if not 0 < _EPS.value < 1:
    cli.fail(f"--epsilon={_EPS.value} is not between 0 and 1 — the paper's is {EPSILON}")
  inputs = {"--sentences": _SENTENCES.value, "--pairs": _PAIRS.value, "--heldout": _HELDOUT.value,
            "--model": _MODEL.value}
  files.output_file(_OUTPUT.value, inputs=inputs, example="phrases.jsonl")
  if _HTML.value:
    files.output_file(_HTML.value, "--html", inputs={**inputs, "--output": _OUTPUT.value}, example="phrases.html")
  if _PAIRS.value:
    try:
      sentences, styles = read_pairs(files.read_text(_PAIRS.value, "--pairs", "a TSV of STYLE<TAB>sentence lines"),
                                     _PAIRS.value)
    except sc.StyleModelError as error:
      cli.fail(str(error))
    if _HELDOUT.value:
      heldout = _lines(_HELDOUT.value, "--heldout")
      held_styles = [_STYLE.value] * len(heldout)
    else:
      heldout, held_styles, _ = stylized_scenes_pairs(1, 100)
  elif _SENTENCES.value:
    sentences = _lines(_SENTENCES.value, "--sentences")
    heldout = _lines(_HELDOUT.value, "--heldout") if _HELDOUT.value else sentences
    styles, held_styles = [_STYLE.value] * len(sentences), [_STYLE.value] * len(heldout)
  else:
    sentences, styles, _ = stylized_scenes_pairs(2, 100)
    heldout, held_styles, _ = stylized_scenes_pairs(1, 100)
  try:
    extractor = Extractor(sc.StyleClassifier.load(_MODEL.value), _EPS.value, _PHRASE.value)
    extractor.choose_head(heldout, held_styles)
    extractions = (_extract_pairs if _PAIRS.value else Extractor.extract)(extractor, sentences, styles)
  except (sc.StyleModelError, ValueError) as error:
    cli.fail(str(error))
  with files.writing(_OUTPUT.value) as f:
    for e in extractions:
      f.write(json.dumps(e.record()) + "\n")
  if _HTML.value:
    with files.writing(_HTML.value, flag="--html") as f:
      f.write(heatmap_html(extractions))
  layer, head = extractor.head
  print(f"wrote {len(extractions)} style phrases (layer {layer}, head {head}) to {_OUTPUT.value}")


if __name__ == "__main__":
  cli.run(main)
