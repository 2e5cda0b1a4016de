"""Evaluation of a captioner on a split: decode, score (CIDEr-D and friends, grounded metrics where the data
carries objects), and write the metrics JSON, COCO-format predictions, a gallery PNG and a loss curve.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from typing import TYPE_CHECKING, Any

import jax
import ml_collections
import numpy as np
from absl import logging

from capjax import sharding
from capjax.data import pipeline, sources
from capjax.data.vocab import Vocabulary
from capjax.strings import as_str

if TYPE_CHECKING:
  from capjax.metrics.meteor import Meteor


@dataclasses.dataclass
class EvalResult:
  metrics: dict[str, float]
  predictions: list[str]
  references: list[list[str]]
  indices: list[int]
  objects: list[list[dict[str, Any]]] | None
  baseline: dict[str, Any] | None = None


def record_objects(record: dict[str, Any]) -> list[dict[str, Any]] | None:
  """The ground-truth object list of a synthetic-scenes record, or None for datasets without one."""
  objects = record.get("objects")
  if objects is None:
    return None
  n = len(objects["shape"])
  return [{k: (as_str(v[i]) if k in ("shape", "colour", "size") else float(v[i])) for k, v in objects.items()}
          for i in range(n)]


def decode_split(setup, params, source, vocab: Vocabulary, config: ml_collections.ConfigDict,
                 num_examples: int | None = None) -> tuple[list[int], list[str]]:
  """Captions for the first `num_examples` examples of `source` (all by default), in order, by the search that
  `config.decode` names (greedy or beam) and `setup.decode` compiled."""
  indices, captions = [], []
  for batch in pipeline.eval_batches(source, config.dataset.image_size, config.eval.batch_size, num_examples,
                                      setup.inputs.key):
    index = batch.pop("index")
    tokens = setup.decode(params, sharding.host_to_global(batch, setup.mesh)["image"])
    tokens = sharding.global_batch_to_host(tokens)
    all_index = sharding.global_batch_to_host(
        sharding.host_to_global({"i": index}, setup.mesh)["i"])
    for i, row in zip(all_index, tokens):
      if i >= 0:
        indices.append(int(i))
        captions.append(vocab.decode(row))
  return indices, captions


def meteor_scorer(full: bool) -> contextlib.AbstractContextManager:
  """A running METEOR for the full scores of one evaluation (the model's and the constant caption's), or None
  without `full` or without Java: its JVM takes ~6 s to load the paraphrase tables, the scoring itself well under
  one."""
  if not full or not shutil.which("java"):
    return contextlib.nullcontext()
  from capjax.metrics.meteor import Meteor  # noqa: PLC0415
  return Meteor()


def score(predictions: list[str], references: list[list[str]], objects: list | None,
          full: bool, meteor: Meteor | None = None) -> dict[str, float]:
  """CIDEr-D always; with `full`, BLEU-1..4, ROUGE-L and METEOR (when Java runs) too; grounded metrics. `meteor`
  (from `meteor_scorer`) is a running METEOR to use; without one, one is started when needed."""
  from capjax.metrics import coco  # noqa: PLC0415
  refs = {i: r for i, r in enumerate(references)}
  preds = {i: p for i, p in enumerate(predictions)}
  metrics: dict[str, float] = {}
  if full:
    names = ["Bleu", "ROUGE_L", "CIDEr"] + (["METEOR"] if meteor is not None or shutil.which("java") else [])
    coco_metrics = coco.evaluate(refs, preds, metrics=tuple(names), meteor=meteor)
    metrics.update({k: float(v) for k, v in coco_metrics.items()})
    if "METEOR" not in metrics:
      logging.warning("METEOR skipped: it needs Java (e.g. `apt-get install default-jre`).")
    metrics["cider_d"] = metrics.pop("CIDEr")
  else:
    metrics["cider_d"] = float(coco.cider_d(refs, preds))
  if objects is not None:
    from capjax.metrics import grounded  # noqa: PLC0415
    metrics.update({k: float(v) for k, v in grounded.grounded_metrics(predictions, objects).items()})
  return metrics


def evaluate_split(setup, params, source, vocab: Vocabulary, config: ml_collections.ConfigDict,
                   num_examples: int | None = None, judges: StyleJudges | None = None) -> EvalResult:
  """Decodes the split (its first `num_examples`: CIDEr-D only) and scores it; a full evaluation of a stylized
  config adds the stylized metrics, judged by `judges` (built here from the config when not given)."""
  start = time.time()
  indices, predictions = decode_split(setup, params, source, vocab, config, num_examples)
  records = [source[i] for i in indices]
  references = [[as_str(c) for c in r["captions"]] for r in records]
  objects = [record_objects(r) for r in records]
  objects = None if any(o is None for o in objects) else objects
  full = num_examples is None
  with meteor_scorer(full) as meteor:
    metrics = score(predictions, references, objects, full=full, meteor=meteor)
    if full and config.dataset.get("style"):
      metrics.update(stylized_metrics(predictions, references, config, judges))
    baseline = None
    if full:
      caption = constant_caption(references)
      baseline = {"caption": caption,
                  "metrics": score([caption] * len(references), references, objects, full=True, meteor=meteor)}
  logging.info("Decoded and scored %d examples in %.1fs", len(indices), time.time() - start)
  return EvalResult(metrics, predictions, references, indices, objects, baseline)


class StyleJudges:
  """The stylized metrics' models for `config.dataset.style`: the style classifier of `eval.style_model` (None
  without one: no cls) and the trigram LM of `eval.style_lm`, or one trained on the training split's captions of
  the style. Loaded before training, so that a wrong path fails at once rather than after the run."""

  def __init__(self, config: ml_collections.ConfigDict):
    from capjax.config_util import ConfigError  # noqa: PLC0415
    from capjax.metrics import stylized, stylized_lm  # noqa: PLC0415
    self.style = config.dataset.style
    try:
      stylized.check_style(self.style)
    except ValueError as error:
      raise ConfigError(f"dataset.style: {error}") from error
    self.classifier = None
    if config.eval.get("style_model"):
      from capjax.text_models import style_model as style_classifier  # noqa: PLC0415
      try:
        self.classifier = style_classifier.StyleClassifier.load(config.eval.style_model)
      except style_classifier.StyleModelError as error:
        raise ConfigError(f"eval.style_model={config.eval.style_model}: {error}") from error
      if self.style not in self.classifier.labels:
        raise ConfigError(f"eval.style_model={config.eval.style_model} knows {', '.join(self.classifier.labels)}, "
                          f"not {self.style} — train it on {self.style} sentences")
    if config.eval.get("style_lm"):
      try:
        self.lm = stylized_lm.StyleLanguageModel.load(config.eval.style_lm)
      except (OSError, ValueError) as error:
        raise ConfigError(f"eval.style_lm={config.eval.style_lm}: {error}") from error
      if self.lm.style and self.lm.style != self.style:
        raise ConfigError(f"eval.style_lm={config.eval.style_lm} is a {self.lm.style} model, not a {self.style} one "
                          f"— give a {self.style} LM (`python -m capjax.metrics.stylized_lm --style={self.style}`)")
    else:
      train = sources.data_source(config.dataset, config.dataset.train_split)
      self.lm = stylized_lm.StyleLanguageModel.train(
          [as_str(c) for i in range(len(train)) for c in train[i]["captions"]], self.style)

  def predict(self, captions: list[str]) -> list[str] | None:
    """The classifier's style per caption ("" for an empty one, which has no words: not in the style)."""
    if self.classifier is None:
      return None
    words = [c for c in captions if c.strip()]
    predicted = iter(self.classifier.predict(words) if words else [])
    return [next(predicted) if c.strip() else "" for c in captions]


def stylized_metrics(predictions: list[str], references: list[list[str]], config: ml_collections.ConfigDict,
                     judges: StyleJudges | None = None) -> dict[str, float]:
  """`ppl` (with `ppl_oov`, the words the LM skipped) and, with a style classifier, `cls` (capjax.metrics.stylized):
  the ERG paper's stylized metrics beside the COCO ones."""
  from capjax.metrics import stylized  # noqa: PLC0415
  judges = judges or StyleJudges(config)
  refs = {i: r for i, r in enumerate(references)}
  preds = {i: p for i, p in enumerate(predictions)}
  scores = stylized.stylized_scores(refs, preds, judges.style, judges.lm, judges.predict(predictions),
                                    with_meteor=False)
  return {k: float(scores[k]) for k in ("cls", "ppl", "ppl_oov") if k in scores}


def constant_caption(references: list[list[str]]) -> str:
  """The most frequent reference caption: the best a model that ignores the image could say verbatim."""
  counts: dict[str, int] = {}
  for refs in references:
    for r in refs:
      counts[r] = counts.get(r, 0) + 1
  return max(sorted(counts), key=lambda c: counts[c])


def report(result: EvalResult, split: str, step: int, config: ml_collections.ConfigDict) -> None:
  """Prints the metrics beside the constant-caption baseline's, so readers see what was learned."""
  if jax.process_index() != 0:
    return
  base = result.baseline["metrics"] if result.baseline else {}
  print(f"\n{split} split: {len(result.predictions)} images, checkpoint of step {step}, "
        f"decode={config.decode.method}")
  width = max(len(k) for k in result.metrics)
  print(f"{'metric':<{width}}  {'model':>8}  {'constant':>8}")
  for k, v in result.metrics.items():
    b = f"{base[k]:8.4f}" if k in base else f"{'':8}"
    print(f"{k:<{width}}  {v:8.4f}  {b}")
  if result.baseline:
    print(f"constant caption: {result.baseline['caption']!r}")


def pictures(config: ml_collections.ConfigDict, split: str, indices: list[int]) -> list[np.ndarray] | None:
  """The pictures of `split`'s examples `indices`; for a feature variant, from its source dataset (None when
  that is not built here)."""
  source = sources.data_source(config.dataset, split)
  if not config.dataset.get("features"):
    return [np.asarray(source[i]["image"]) for i in indices]
  pixels = sources.pixel_source(config.dataset, split)
  if pixels is None:
    return None
  return [np.asarray(pixels[int(source[i]["source_index"])]["image"]) for i in indices]


def write_outputs(result: EvalResult, workdir: str, split: str, step: int, config: ml_collections.ConfigDict,
                  history_path: str | None = None, suffix: str = "",
                  extra: dict[str, Any] | None = None) -> dict[str, str]:
  """metrics JSON (with `extra`'s entries), COCO results JSON, gallery PNG and loss curve PNG in
  `eval/<split>_step<step><suffix>`; returns {kind: path}."""
  if jax.process_index() != 0:
    return {}
  from capjax import gallery  # noqa: PLC0415
  out_dir = os.path.join(workdir, "eval", f"{split}_step{step}{suffix}")
  os.makedirs(out_dir, exist_ok=True)
  paths = {
      "metrics": os.path.join(out_dir, "metrics.json"),
      "predictions": os.path.join(out_dir, "predictions.json"),
      "gallery": os.path.join(out_dir, "gallery.png"),
  }
  with open(paths["metrics"], "w", encoding="utf-8") as f:
    json.dump({"split": split, "step": step, "examples": len(result.predictions),
               "metrics": result.metrics, "constant_caption_baseline": result.baseline, **(extra or {})}, f,
              indent=2)
  with open(paths["predictions"], "w", encoding="utf-8") as f:
    json.dump([{"image_id": i, "caption": c} for i, c in zip(result.indices, result.predictions)], f, indent=1)
  n = min(max(config.eval.gallery_size, config.eval.rating_sheet_size), len(result.predictions))
  images = pictures(config, split, result.indices[:n])
  if images is None:  # features without their pixel dataset here: metrics and predictions only
    n = 0
  g = min(config.eval.gallery_size, n)
  if g:
    gallery.write_gallery(paths["gallery"], images[:g], result.predictions[:g], result.references[:g],
                          result.objects[:g] if result.objects else None)
  else:
    del paths["gallery"]
  r = min(config.eval.rating_sheet_size, n)
  if r:
    from capjax.metrics import human_eval  # noqa: PLC0415
    paths["rating_sheet"] = os.path.join(out_dir, "rating_sheet.html")
    with open(paths["rating_sheet"], "w", encoding="utf-8") as f:
      f.write(human_eval.rating_sheet(result.indices[:r], images[:r], result.predictions[:r],
                                      title=f"{split} captions, step {step}"))
  if history_path and os.path.exists(history_path):
    paths["loss_curve"] = os.path.join(out_dir, "loss_curve.png")
    gallery.write_loss_curve(paths["loss_curve"], history_path)
  return paths
