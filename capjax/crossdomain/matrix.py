"""The cross-domain matrix: every trained workdir's best checkpoint decoded on every test set, scored as
`python -m capjax.metrics` scores (COCO metrics, SPICE where its Java runs, the grounded CHAIR where the test set
carries objects), with one constant-caption row per training set; each cell's references and predictions are kept
as COCO files so that any figure can be checked.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import ml_collections

from capjax import evaluate as evaluate_lib
from capjax import files
from capjax import inference
from capjax.config_util import ConfigError
from capjax.crossdomain import paper
from capjax.data import integrity, sources
from capjax.data.captions import all_captions, captions_of
from capjax.data.vocab import VOCAB_FILENAME

CONFIG_FILENAME = "config.json"  # what capjax.workdir writes at a run's start
# (our metric key, its column name): the paper's three metrics and SPICE, then the grounded hallucination rates.
COLUMNS = (("cider_d", "CIDEr"), ("ROUGE_L", "ROUGE-L"), ("METEOR", "METEOR"), ("SPICE", "SPICE"),
           ("chair_i", "CHAIR-i"), ("chair_s", "CHAIR-s"))


class MatrixInputError(ValueError):
  """A workdir, test set or dataset name the matrix cannot use; the message says what to do."""


FLAGS = ("--workdirs", "--test", "--output", "--data_dir", "--num_examples")  # the command's, for its remedies


def own_remedy(error: Exception, what: str, remedy: str) -> MatrixInputError:
  """`error` from the library said as this command's: `what` (the workdir or test set) before its message, and
  `remedy` in place of its own when that names a flag the command does not take (training's --config.dataset.*,
  `--mode=eval`'s --step)."""
  wrong, _, theirs = str(error).partition(" — ")
  if not theirs or any(flag not in FLAGS for flag in re.findall(r"--[\w.]+", theirs)):
    theirs = remedy
  return MatrixInputError(f"{what}: {wrong} — {theirs}")


@dataclasses.dataclass(frozen=True)
class TestSet:
  """One column group: `dataset` ("karpathy/coco", "cc3m") and `split`, as `--test` spells them."""

  dataset: str
  split: str

  @property
  def spec(self) -> str:
    return f"{self.dataset}:{self.split}"

  @property
  def name(self) -> str:
    return integrity.split_dataset(self.dataset)[0]

  @property
  def builder_config(self) -> str:
    return integrity.split_dataset(self.dataset)[1]

  @property
  def paper_key(self) -> str | None:
    return paper.test_set_key(self.dataset, self.split)


def parse_test_sets(specs: Sequence[str]) -> list[TestSet]:
  """`name[/config]:split` each; a MatrixInputError for one without its split or with an unsafe name."""
  test_sets = []
  for spec in specs:
    dataset, _, split = spec.strip().partition(":")
    if not dataset or not split:
      raise MatrixInputError(f"--test={spec} names no split — write each test set as DATASET:SPLIT, e.g. "
                             "karpathy/coco:test or cc3m:validation")
    if not re.fullmatch(r"[\w-]+(/[\w.-]+)?", dataset) or not re.fullmatch(r"[\w\[\]:%+-]+", split):
      raise MatrixInputError(f"--test={spec}: {dataset!r} or {split!r} is not a dataset and split name — write "
                             "DATASET[/CONFIG]:SPLIT, e.g. karpathy/flickr30k:test")
    test_sets.append(TestSet(dataset, split))
  if len({t.spec for t in test_sets}) != len(test_sets):
    raise MatrixInputError(f"--test names a test set twice ({', '.join(t.spec for t in test_sets)}) — name each once")
  return test_sets


def builder_class(name: str, flag: str):
  """The TFDS builder class of dataset `name` (capjax's builders imported first); a MatrixInputError naming the
  datasets capjax builds when there is none."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  if name in sources.KNOWN_BUILDERS:
    importlib.import_module(sources.KNOWN_BUILDERS[name][0])
  try:
    return tfds.builder_cls(name)
  except tfds.core.registered.DatasetNotFoundError:
    raise MatrixInputError(f"{flag}: unknown dataset {name!r} — choose one capjax builds "
                           f"({', '.join(sorted(sources.KNOWN_BUILDERS))}) or a TFDS dataset name") from None


def resolve(test_set: TestSet) -> TestSet:
  """`test_set` with its builder config checked, and named when the spec left the builder's default to TFDS (a
  feature variant is found by its config's name)."""
  cls = builder_class(test_set.name, f"--test={test_set.spec}")
  configs = [c.name for c in getattr(cls, "BUILDER_CONFIGS", None) or []]
  config = test_set.builder_config
  if config and config not in configs:
    raise MatrixInputError(f"--test={test_set.spec}: {test_set.name} has no config {config!r} — choose one of "
                           f"{', '.join(configs) or '(none: write the name alone)'}")
  if not config and configs:
    config = getattr(cls, "DEFAULT_CONFIG_NAME", None) or configs[0]
  return test_set if config == test_set.builder_config else TestSet(f"{test_set.name}/{config}", test_set.split)


def _tuples(value: Any) -> Any:
  """config.json's lists as the tuples the config files wrote (feature_shape, encoder widths)."""
  if isinstance(value, dict):
    return {k: _tuples(v) for k, v in value.items()}
  return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def checkpoint_steps(workdir: str) -> list[int]:
  """The saved steps in `workdir/checkpoints` (orbax names each folder by its step), without opening them."""
  folder = os.path.join(workdir, "checkpoints")
  names = os.listdir(folder) if os.path.isdir(folder) else []
  return sorted(int(n) for n in names if n.isdigit() and os.path.isdir(os.path.join(folder, n)))


def load_workdir_config(workdir: str, flag: str = "--workdirs") -> ml_collections.ConfigDict:
  """The config a workdir's run was trained with (its config.json), after checking that the workdir holds a trained
  model: a MatrixInputError that says what to do otherwise. `flag` is the command's (`capjax.recaption` takes one
  --workdir, which it cannot leave out)."""
  leave = ", or leave it out" if flag == "--workdirs" else ""
  flag = f"{flag}: {workdir}" if flag == "--workdirs" else f"{flag}={workdir}"
  if not os.path.isdir(workdir):
    what = "is a file, not a directory" if os.path.exists(workdir) else "does not exist"
    raise MatrixInputError(f"{flag} {what} — give the workdir of a training run (`python -m capjax.main "
                           "--workdir=DIR`)")
  if not os.path.exists(os.path.join(workdir, VOCAB_FILENAME)):
    raise MatrixInputError(f"{flag} has no {VOCAB_FILENAME}, so it holds no trained model — train it first "
                           f"(`python -m capjax.main --config=... --workdir={workdir}`){leave}")
  path = os.path.join(workdir, CONFIG_FILENAME)
  try:
    with open(path, encoding="utf-8") as f:
      saved = json.load(f)
    if not isinstance(saved, dict):
      raise ValueError("not a JSON object")
  except FileNotFoundError:
    raise MatrixInputError(f"{flag} has no {CONFIG_FILENAME} — give the workdir of a capjax training run, which "
                           "writes the config it trains with there") from None
  except (UnicodeDecodeError, ValueError) as error:
    raise MatrixInputError(f"{path} is damaged ({' '.join(str(error).split())[:120]}) — resume the run once "
                           "(`python -m capjax.main --config=... --workdir=...`), which writes it again") from None
  if not checkpoint_steps(workdir):
    raise MatrixInputError(f"{flag} has no checkpoint in {os.path.join(workdir, 'checkpoints')} — train it until it "
                           f"saves one (`python -m capjax.main --config=... --workdir={workdir}`){leave}")
  try:
    return ml_collections.ConfigDict(_tuples(saved))
  except (TypeError, ValueError, KeyError) as error:
    raise MatrixInputError(f"{path} is not a capjax config ({error}) — give the workdir of a capjax training run") \
        from None


def dataset_name(dataset: ml_collections.ConfigDict) -> str:
  return integrity.join_dataset(dataset.name, dataset.get("builder_config", ""))


@dataclasses.dataclass
class Model:
  """One row: a trained workdir, its config and what the table calls it."""

  workdir: str
  config: ml_collections.ConfigDict

  @property
  def training(self) -> str:
    """Its training data: `dataset:split` ("karpathy/coco:train+restval")."""
    return f"{dataset_name(self.config.dataset)}:{self.config.dataset.train_split}"

  @property
  def label(self) -> str:
    m = self.config.model
    name = {"t2t": "T2T", "rnn": "RNN"}.get(m.name, m.name)
    encoder = m.encoder.name
    if encoder not in ("features", "irv2"):
      return f"{name} ({encoder} encoder)"
    label = f"{name} {m.get('grid', '')}".strip()
    if paper.model_key(m) is None:  # not the paper's size (a :debug run): said, so no one takes it for the paper's
      layers = f", {m.encoder_layers}+{m.decoder_layers} layers" if "encoder_layers" in m else ""
      label += f" (d={m.d_model}{layers})"
    return label

  def paper_keys(self) -> tuple[str | None, str | None]:
    return paper.model_key(self.config.model), paper.training_key(dataset_name(self.config.dataset))


def embedded(name: str) -> bool:
  """A dataset built with nothing to download (the synthetic scenes): built on first use as training does."""
  return sources.KNOWN_BUILDERS.get(name, ("", ""))[1].startswith("nothing to download")


def test_dataset(model: ml_collections.ConfigDict, test_set: TestSet, data_dir: str) -> ml_collections.ConfigDict:
  """The model's dataset config pointed at `test_set`: the same input (pixels at its size, or its feature variant),
  the test set's own reference `captions`."""
  d = ml_collections.ConfigDict(model.dataset.to_dict())
  d.name, d.builder_config = test_set.name, test_set.builder_config
  for field in ("caption_field", "style", "augmented", "factual_split"):
    if field in d:
      d[field] = ""
  d.auto_build = embedded(test_set.name)
  if data_dir:
    d.data_dir = data_dir
  return d


def with_dataset(config: ml_collections.ConfigDict, dataset: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict(config.to_dict())
  c.dataset = dataset
  return c


def training_captions(dataset: ml_collections.ConfigDict) -> list[str]:
  """Every reference caption of the training split, read without decoding an image (the pixel dataset, when it is
  built beside the model's; otherwise the records the model trained on), from the model's own data dir: --data_dir
  is the test sets'."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  d = ml_collections.ConfigDict(dataset.to_dict())
  if not d.get("style") and not d.get("augmented") and not d.get("factual_split"):
    pixels = ml_collections.ConfigDict(d.to_dict())
    pixels.features, pixels.auto_build = "", embedded(d.name)
    try:
      builder = sources.prepare(pixels)
    except sources.DatasetNotBuiltError:
      builder = None
    if builder is not None:
      skip = {k: tfds.decode.SkipDecoding() for k, f in builder.info.features.items()
              if isinstance(f, tfds.features.Image)}
      source = builder.as_data_source(split=d.train_split, decoders=skip or None)
      if d.get("caption_field"):
        source = sources.caption_field_view(source, d.caption_field)
      return list(all_captions(source))
  source = sources.train_source(d)
  return list(all_captions(source))


def spice_unavailable() -> str | None:
  """Why SPICE cannot run here (its CoreNLP jars, Java 8/11), or None when it can."""
  from capjax.metrics import java, spice  # noqa: PLC0415
  try:
    java.find_java()
    spice.check_installation()
  except RuntimeError as error:
    return " ".join(str(error).split())
  return None


@dataclasses.dataclass
class Cell:
  """One row's scores on one test set, and the files they were computed from."""

  metrics: dict[str, float]
  predictions: str
  paper: dict[str, float]


@dataclasses.dataclass
class Spice:
  """Whether SPICE runs here: `reason` is None until it cannot (not installed, or its Java fails on first use)."""

  reason: str | None

  def add(self, metrics: dict[str, float], predictions: list[str], references: list[list[str]]) -> None:
    if self.reason is not None:
      return
    from capjax.metrics import coco  # noqa: PLC0415
    try:
      value = coco.evaluate(dict(enumerate(references)), dict(enumerate(predictions)), metrics=("SPICE",))["SPICE"]
    except RuntimeError as error:  # SPICE 1.0 on a Java it does not run on: the matrix goes on without it
      self.reason = " ".join(str(error).split())
      return
    metrics["SPICE"] = float(value)


def score(predictions: list[str], references: list[list[str]], objects: list | None, meteor, spice: Spice
          ) -> dict[str, float]:
  """evaluate.score's COCO and grounded metrics (what `python -m capjax.metrics` computes on the same files), and
  SPICE when it runs here."""
  metrics = evaluate_lib.score(predictions, references, objects, full=True, meteor=meteor)
  spice.add(metrics, predictions, references)
  return metrics


def coco_references(references: list[list[str]]) -> dict[str, Any]:
  """COCO caption annotations of a test set's references, image ids its record indices (the predictions' ids)."""
  annotations = [{"image_id": i, "id": k, "caption": c}
                 for k, (i, c) in enumerate((i, c) for i, refs in enumerate(references) for c in refs)]
  return {"images": [{"id": i} for i in range(len(references))], "annotations": annotations}


def coco_predictions(predictions: list[str]) -> list[dict[str, Any]]:
  return [{"image_id": i, "caption": c} for i, c in enumerate(predictions)]


def _slug(text: str) -> str:
  return re.sub(r"[^\w.-]+", "_", text).strip("_") or "x"


def file_names(test_sets: Sequence[TestSet]) -> dict[str, str]:
  """Each test set's COCO file name (without .json), one per spec: numbered in --test's order, since two slices of
  one split (test[:10], test[10:]) have the same slug."""
  return {t.spec: f"{k:02d}_{_slug(t.spec)}" for k, t in enumerate(test_sets)}


def _write_json(path: str, value: Any) -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with files.writing(path, flag="--output") as f:
    json.dump(value, f, indent=1)
  return path


def compute(workdirs: Sequence[str], test_sets: Sequence[TestSet], output: str, data_dir: str = "",
            num_examples: int | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
  """The matrix as a JSON-ready dict (see `capjax.crossdomain.report` for its layout), its COCO files written under
  `output`. Every input is checked before any decoding: a MatrixInputError, ConfigError or DatasetNotBuiltError
  says what is wrong."""
  test_sets = [resolve(t) for t in test_sets]
  names = file_names(test_sets)
  models = [Model(w, load_workdir_config(w)) for w in workdirs]
  # Every cell's source opened first: a test set that is not built, or not the model's input, fails in a second.
  cell_sources = {}
  for i, model in enumerate(models):
    for t in test_sets:
      dataset = test_dataset(model.config, t, data_dir)
      try:
        cell_sources[i, t.spec] = (dataset, sources.data_source(dataset, t.split))
      except sources.DatasetNotBuiltError as error:
        raise type(error)(f"test set {t.spec} for {model.workdir}: {error}") from None
      except ConfigError as error:
        raise own_remedy(error, f"test set {t.spec} for {model.workdir}",
                         f"give a split or slice of {t.dataset} that holds examples in --test") from None
  # The constant-caption row of each training set, read from its model's own dataset before any decoding.
  constants = {}
  for model in models:
    if model.training not in constants:
      try:
        constants[model.training] = evaluate_lib.constant_caption([training_captions(model.config.dataset)])
      except sources.DatasetNotBuiltError as error:
        raise type(error)(f"training set {model.training} of {model.workdir} (its constant-caption row): "
                          f"{error}") from None
      except ConfigError as error:
        raise own_remedy(error, f"training set {model.training} of {model.workdir} (its constant-caption row)",
                         f"leave {model.workdir} out of --workdirs") from None
  spice = Spice(spice_unavailable())
  references: dict[str, list[list[str]]] = {}
  objects: dict[str, list | None] = {}
  rows: list[dict[str, Any]] = []
  with evaluate_lib.meteor_scorer(True) as meteor:
    for i, model in enumerate(models):
      start = time.time()
      try:
        setup, params, vocab, step = inference.load_trained(model.config, model.workdir)
      except (ConfigError, FileNotFoundError) as error:
        raise own_remedy(error, f"--workdirs: {model.workdir}",
                         f"resume its training (`python -m capjax.main --config=... --workdir={model.workdir}`), "
                         "which sets damaged checkpoints aside, or leave it out of --workdirs") from None
      row_id = f"{i:02d}_{_slug(os.path.basename(os.path.normpath(model.workdir)))}"
      p_model, p_training = model.paper_keys()
      cells = {}
      for t in test_sets:
        dataset, source = cell_sources[i, t.spec]
        config = with_dataset(model.config, dataset)
        indices, predictions = evaluate_lib.decode_split(setup, params, source, vocab, config, num_examples)
        if t.spec not in references:
          records = [source[j] for j in indices]
          references[t.spec] = [captions_of(r) for r in records]
          found = [evaluate_lib.record_objects(r) for r in records]
          objects[t.spec] = None if any(o is None for o in found) else found
          _write_json(os.path.join(output, "references", f"{names[t.spec]}.json"), coco_references(references[t.spec]))
        if len(predictions) != len(references[t.spec]):
          raise ConfigError(f"{model.workdir} decoded {len(predictions)} images of {t.spec}, another model "
                            f"{len(references[t.spec])} — run the matrix on one process count for all models")
        path = _write_json(os.path.join(output, "predictions", row_id, f"{names[t.spec]}.json"),
                           coco_predictions(predictions))
        metrics = score(predictions, references[t.spec], objects[t.spec], meteor, spice)
        cells[t.spec] = Cell(metrics, path, paper.figures(t.paper_key, p_model, p_training))
        log(f"{model.label} ({model.training}) on {t.spec}: CIDEr {metrics['cider_d']:.3f}")
      rows.append({"kind": "model", "model": model.label, "training": model.training, "workdir": model.workdir,
                   "step": step, "paper_model": p_model, "paper_training": p_training,
                   "seconds": round(time.time() - start, 1),
                   "cells": {k: dataclasses.asdict(c) for k, c in cells.items()}})
    # The constant-caption baseline: per training set, its most frequent training caption said of every image.
    for training, caption in constants.items():
      row_id = f"constant_{_slug(training)}"
      cells = {}
      for t in test_sets:
        predictions = [caption] * len(references[t.spec])
        path = _write_json(os.path.join(output, "predictions", row_id, f"{names[t.spec]}.json"),
                           coco_predictions(predictions))
        cells[t.spec] = Cell(score(predictions, references[t.spec], objects[t.spec], meteor, spice),
                             path, {})
      rows.append({"kind": "constant_caption", "model": "constant caption", "training": training, "caption": caption,
                   "cells": {k: dataclasses.asdict(c) for k, c in cells.items()}})
  return {
      "test_sets": [{"spec": t.spec, "dataset": t.dataset, "split": t.split, "examples": len(references[t.spec]),
                     "references": os.path.join(output, "references", f"{names[t.spec]}.json"),
                     "paper_table": _paper_table(t)} for t in test_sets],
      "columns": {t.spec: [k for k, _ in COLUMNS if all(k in r["cells"][t.spec]["metrics"] for r in rows)]
                  for t in test_sets},
      "rows": rows,
      "spice": "computed" if spice.reason is None else f"not computed: {spice.reason}",
      "paper": paper.CITATION,
  }


def _paper_table(test_set: TestSet) -> dict[str, Any] | None:
  table = paper.TABLES.get(test_set.paper_key or "")
  if table is None:
    return None
  return {"table": table.number, "test_set": table.test_set, "differs": table.differs, "metrics": list(table.metrics)}

