"""COCO caption metrics of a COCO results file against COCO caption annotations, printed as one JSON object.

Usage: python -m capjax.metrics REFS.json PREDS.json [--metrics=Bleu,METEOR,ROUGE_L,CIDEr[,SPICE]] [--notokenize]
       python -m capjax.metrics REFS.json PREDS.json --style=STYLE --lm=LM.json [--style_model=DIR]
  REFS.json   COCO caption annotations (a JSON object with "images" and "annotations")
  PREDS.json  COCO results (a JSON list of {"image_id", "caption"} objects, one per image)

With --style (romantic, humorous, positive, negative) it prints the stylized captioning metrics instead: Bleu_1,
Bleu_3, METEOR, CIDEr, ppl (perplexity under the style's Kneser-Ney trigram model LM.json, written by
`python -m capjax.metrics.stylized_lm`; ppl_tokens and ppl_oov say what it scored and skipped) and, with
--style_model, cls (the share of captions the style classifier in DIR assigns to the style).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from absl import flags

from capjax import cli, files
from capjax.metrics.coco import DEFAULT_METRICS, METRICS, evaluate
from capjax.metrics.stylized import STYLES, stylized_scores
from capjax.metrics.stylized_lm import StyleLanguageModel

_FLAGS = flags.FlagValues()
_METRICS = flags.DEFINE_list("metrics", list(DEFAULT_METRICS), f"Comma-separated subset of {','.join(METRICS)}.",
                             flag_values=_FLAGS)
_TOKENIZE = flags.DEFINE_bool("tokenize", True, "Run pycocoevalcap's PTB tokenization first (--notokenize: the "
                              "captions are already PTB-tokenized).", flag_values=_FLAGS)
_STYLE = flags.DEFINE_string("style", "", f"Print the stylized metrics of this style ({', '.join(STYLES)}) instead "
                             "of --metrics.", flag_values=_FLAGS)
_LM = flags.DEFINE_string("lm", "", "With --style: the style's language model for ppl (JSON, written by `python -m "
                          "capjax.metrics.stylized_lm`).", flag_values=_FLAGS)
_STYLE_MODEL = flags.DEFINE_string("style_model", "", "With --style: the style classifier's directory, for cls.",
                                   flag_values=_FLAGS)


def _load_json(path: str, what: str) -> Any:
  """The JSON value in the file at `path`; a ValueError that names the file and says what is wrong with it."""
  raw = files.read_bytes(path, what=what)  # a FIFO or a device: an `error:` line, not a read that never ends
  try:
    return json.loads(raw)  # bytes: UTF-8 (a byte-order mark too), UTF-16 or UTF-32, as RFC 8259 allows
  except UnicodeDecodeError as error:
    raise ValueError(f"{path}: byte {error.start + 1} is not UTF-8 — save the file as UTF-8 JSON") from error
  except json.JSONDecodeError as error:
    raise ValueError(f"{path} is not JSON ({error.msg}: line {error.lineno} column {error.colno}) — give {what}") \
        from error
  except RecursionError as error:  # arrays or objects nested thousands deep: no COCO file is
    raise ValueError(f"{path} is not the COCO format expected: its JSON is nested deeper than the parser follows "
                     f"— give {what}") from error


def _json_type(value: Any) -> str:
  """What JSON calls the type of a parsed value."""
  names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
  return "null" if value is None else names.get(type(value), type(value).__name__)


def _image_id(value: Any, where: str) -> Any:
  """A COCO image id: an integer (COCO's) or a string; anything else cannot be matched between the two files."""
  if isinstance(value, bool) or not isinstance(value, (int, str)):
    raise ValueError(f"{where}: the image id is {json.dumps(value)[:40]}, not an integer or a string — give "
                     "each image's id")
  return value


def _entry(value: Any, index: int, path: str, what: str) -> tuple[Any, Any]:
  """(image id, caption) of entry `index` of a COCO list, its keys checked; the caption is checked by the caller."""
  where = f"{path}: {what} {index}"
  if not isinstance(value, dict) or "image_id" not in value or "caption" not in value:
    raise ValueError(f"{where} is {json.dumps(value)[:60]}, not an object with \"image_id\" and \"caption\" — "
                     "give one per caption")
  image = _image_id(value["image_id"], where)
  caption = value["caption"]
  if not isinstance(caption, str):
    raise ValueError(f"{where} (image {image!r}): the caption is a JSON {_json_type(caption)}, not a string — "
                     "give the caption's text")
  return image, caption


def load_references(path: str) -> dict[Any, list[str]]:
  """COCO caption annotations -> {image id: [captions]}, images in the file's "images" order. An empty reference
  caption is an error (a broken annotation, which would lower every score it is in); an empty prediction is not."""
  what = "COCO caption annotations, a JSON object with \"annotations\""
  data = _load_json(path, what)
  if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
    raise ValueError(f"{path}: expected {what} (a list) — give the annotations file, e.g. captions_val2014.json")
  images = data.get("images", [])
  if not isinstance(images, list):
    raise ValueError(f"{path}: \"images\" is not a list — give a list of {{\"id\": ...}} objects, or leave it out")
  refs: dict[Any, list[str]] = {}
  for index, image in enumerate(images):
    if not isinstance(image, dict) or "id" not in image:
      raise ValueError(f"{path}: image {index} is {json.dumps(image)[:60]}, not an object with \"id\" — give "
                       "each image's id")
    refs[_image_id(image["id"], f"{path}: image {index}")] = []
  listed = bool(refs)
  for index, annotation in enumerate(data["annotations"]):
    image, caption = _entry(annotation, index, path, "annotation")
    if not caption.strip():
      raise ValueError(f"{path}: annotation {index} (image {image!r}) has an empty caption — remove the "
                       "annotation or give its text")
    if image in refs or not listed:
      refs.setdefault(image, []).append(caption)
  return refs


def load_predictions(path: str) -> dict[Any, str]:
  """COCO results ([{"image_id": .., "caption": ..}]) -> {image id: caption}; one caption per image (it may be
  empty: a model that says nothing scores 0)."""
  data = _load_json(path, "COCO results, a JSON list of {\"image_id\", \"caption\"} objects")
  if not isinstance(data, list):
    raise ValueError(f"{path}: expected COCO results, a JSON list of {{\"image_id\", \"caption\"}} objects, got a "
                     f"JSON {_json_type(data)} — give the results file")
  preds: dict[Any, str] = {}
  for index, result in enumerate(data):
    image, caption = _entry(result, index, path, "result")
    if image in preds:
      raise ValueError(f"{path}: image {image!r} has more than one predicted caption — give one per image")
    preds[image] = caption
  return preds


def check_id_types(refs: dict[Any, list[str]], preds: dict[Any, str], refs_path: str, preds_path: str) -> None:
  """A clearer error than "no prediction / no references" for the same ids written as numbers in one file and
  strings in the other (1 and "1")."""
  if set(refs) != set(preds) and {str(i) for i in refs} == {str(i) for i in preds}:
    pred = next(i for i in preds if i not in refs)
    ref = next(i for i in refs if str(i) == str(pred))
    raise ValueError(f"{preds_path} writes image {json.dumps(pred)} as a JSON {_json_type(pred)}, {refs_path} as a "
                     f"{_json_type(ref)} ({json.dumps(ref)}) — write the ids the same way in both files")


def parse_metrics(names: Sequence[str]) -> tuple[str, ...]:
  """The --metrics list without empty entries; a ValueError names any that is not a metric."""
  metrics = tuple(name for name in names if name)
  unknown = [name for name in metrics if name not in METRICS]
  if unknown:
    raise ValueError(f"unknown metrics {unknown} — choose from {','.join(METRICS)}")
  if not metrics:
    raise ValueError(f"no metrics in --metrics — choose from {','.join(METRICS)}")
  return metrics


def _check_style_flags() -> None:
  """--style, --lm and --style_model fit together (checked before any file is read)."""
  style = _STYLE.value
  if not style:
    given = [f"--{name}" for name in ("lm", "style_model") if _FLAGS[name].value]
    if given:
      cli.fail(f"{' and '.join(given)} go with --style — add --style={'|'.join(STYLES)}, or drop them")
    return
  if style not in STYLES:
    cli.fail(f"unknown style {style!r} — choose one of {', '.join(STYLES)}")
  if _FLAGS["metrics"].present:
    cli.fail("--metrics does not go with --style: the stylized metrics are Bleu_1, Bleu_3, METEOR, CIDEr, ppl and "
             "cls — drop one of the two")
  if not _LM.value:
    cli.fail(f"--style needs --lm=FILE, the {style} language model for ppl — write one with `python -m "
             f"capjax.metrics.stylized_lm --sentences={style.upper()}_SENTENCES.txt --output=LM.json --style={style}`")


def _style_classifier(model_dir: str) -> Callable[[list[str]], list[str]]:
  """The hook for `cls`: a function from captions to the style the classifier in `model_dir` gives each (a style
  classifier written by `python -m capjax.text_models.style_classifier`; anything else is one error line)."""
  from capjax.text_models import style_model as style_classifier  # noqa: PLC0415 (JAX, TensorFlow: for cls only)
  try:
    classifier = style_classifier.StyleClassifier.load(model_dir)
  except style_classifier.StyleModelError as error:
    cli.fail(f"--style_model={model_dir}: {error}")
  if _STYLE.value not in classifier.labels:
    cli.fail(f"--style_model={model_dir}: the style classifier knows {', '.join(classifier.labels)}, not "
             f"{_STYLE.value} — train one on {_STYLE.value} sentences")

  def classify(captions: list[str]) -> list[str]:
    # An empty caption has no words to classify: it is not in the style.
    words = [caption for caption in captions if caption.strip()]
    predicted = iter(classifier.predict(words) if words else [])
    return [next(predicted) if caption.strip() else "" for caption in captions]
  return classify


def _stylized(refs: dict[Any, list[str]], preds: dict[Any, str]) -> dict[str, float | int]:
  classify = _style_classifier(_STYLE_MODEL.value) if _STYLE_MODEL.value else None
  lm = StyleLanguageModel.load(_LM.value, "--lm")
  predicted = classify([preds[image] for image in refs if image in preds]) if classify else None
  return stylized_scores(refs, preds, _STYLE.value, lm, predicted, tokenize=_TOKENIZE.value)


def main(argv: Sequence[str]) -> int:
  paths = cli.parse(_FLAGS, argv, __doc__, positional=True)
  if len(paths) != 2:
    cli.fail(f"expected two files, REFS.json PREDS.json, got {len(paths)} argument(s) — see --help")
  _check_style_flags()
  try:
    metrics = parse_metrics(_METRICS.value)
    refs, preds = load_references(paths[0]), load_predictions(paths[1])
    check_id_types(refs, preds, paths[0], paths[1])
    if _STYLE.value:
      scores = _stylized(refs, preds)
    else:
      scores = evaluate(refs, preds, metrics, tokenize=_TOKENIZE.value)
  except OSError as error:
    cli.fail(f"cannot read {error.filename}: {error.strerror} — check the path and its permissions")
  except (ValueError, KeyError, RuntimeError, TimeoutError) as error:
    cli.fail(str(error))
  print(json.dumps(scores))
  return 0


if __name__ == "__main__":
  cli.run(main)
