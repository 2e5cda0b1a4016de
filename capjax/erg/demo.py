r"""ERG end to end on the embedded stylized_scenes, the shape of the paper's Table 2: a captioner trained on the
original stylized captions of one style, and the same captioner trained on them plus ERG's augmented pairs, scored
on the same stylized test split.

usage: python -m capjax.erg.demo [--workdir=workdir/erg_demo] [--style=romantic] [--captioner=t2t|rnn]
           [--dataset_config=default|tiny] [--steps=N] [--variants=debug] [--factual_examples=N] [--seed=N]
           [--configs=configs] ...

Stages (each kept in --workdir; a rerun with the same flags skips the finished ones and resumes the others;
--style_model, --generator and --retriever give pieces trained before, and --text_encoder=minilm puts the minilm
extra's all-MiniLM-L6-v2 in the retriever as its locked text tower):
  1. build stylized_scenes (no download) into --data_dir (default WORKDIR/data);
  2. train the style classifier (`capjax.text_models.style_classifier`, a tiny BERT: the augmentation's style
     filter and the `cls` metric) and the style's trigram LM on the training captions (the `ppl` filter and metric);
  3. train the generator (`capjax.erg.generate`, a tiny GPT-2 from scratch);
  4. augment (`capjax.erg.augment`): retrieve a scene of the style for each of the first --factual_examples
     factual images (--mode), generate, filter (the paper's three filters, and the content filter at
     --min_content), write the TFDS dataset `stylized_scenes_<style>_erg`;
  5. train the captioner (`configs/<captioner>.py:stylized`, in WORKDIR/<captioner>/original) on the original
     captions of the first --original_images train images, then (6., in .../augmented) on original + augmented,
     with the same config, steps and seed. Both are style-conditioned and also train on the factual captions of
     the first --factual_captions factual images, as multi-style captioners do (0: the style's captions alone).
     Each is evaluated on the style's test captions with BLEU-1/3, METEOR, CIDEr, cls and ppl.
--configs is the folder of the repository's config files (t2t.py, rnn.py), read from the working directory as
`capjax.main --config=configs/t2t.py` reads its file: run the demo from the repository's root, or give the folder.
It prints both rows and their deltas (augmented - original) as a table, writes results.json and samples.html
(test images with both captioners' captions) in --workdir, and prints as its last line one JSON object
{"original": {...}, "augmented": {...}} with the keys Bleu_1, Bleu_3, METEOR, CIDEr, cls and ppl.

This module drives training (`capjax.train`), so it is an entry point (layer 5 in ARCHITECTURE.md), not part of
the erg library layer it sits beside.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

KEYS: tuple[str, ...] = ("Bleu_1", "Bleu_3", "METEOR", "CIDEr", "cls", "ppl")  # the paper's Table 2 columns
ROWS: tuple[str, ...] = ("original", "augmented")
RESULTS, SAMPLES, ROW_FILE = "results.json", "samples.html", "row.json"
STAGES = 6


@dataclasses.dataclass(frozen=True)
class Options:
  """The demo's sizes; the defaults are the full run (docs/erg.md, "ERG demo")."""
  workdir: str = "workdir/erg_demo"
  data_dir: str = ""                 # "" -> WORKDIR/data
  style: str = "romantic"
  captioner: str = "t2t"             # configs/<captioner>.py:stylized
  configs: str = "configs"           # the folder of the config files, relative to the working directory
  variants: str = ""                 # extra config variants and values, e.g. "debug" or "batch=32"
  dataset_config: str = "default"    # stylized_scenes config: default (1,000 train images) or tiny (64)
  # The small stylized set: the first N train images (0: all of them). 100 stylized against 4,000 factual images
  # (2.5%) sits between SentiCap's share of COCO (~1%) and FlickrStyle10K's (~6%).
  original_images: int = 100
  factual_captions: int = 4000        # both captioners also train on N factual images' captions, style-conditioned
  steps: int = 0                     # captioner steps (0: the config's)
  classifier_images: int = 500       # stylized_scenes train images the style classifier learns from
  classifier_epochs: int = 0         # 0: the classifier's default for a random BERT
  generator_images: int = 500        # train images (two captions each) the generator learns from
  generator_epochs: int = 100        # on 100 images' 200 pairs: with 20 it changes the content of 97% of captions
  factual_examples: int = 4000       # factual images augmented
  mode: str = "i2i"                  # retrieval: query side 2 bank side
  retriever_steps: int = 200
  retriever_pairs: int = 1024
  min_content: float = 1.0           # the content filter: a generated caption keeps all its factual caption's words
  text_encoder: str = ""             # the retriever's text tower: "" (trained here), a converted BERT dir, or minilm
  style_model: str = ""              # pieces trained elsewhere, used instead of stages 2-4's training ("": train)
  generator: str = ""
  retriever: str = ""
  # Every stage's training seed: the classifier's, the generator's, the retriever's and both captioners' (the data
  # are the same for every seed). 0 gives docs/erg.md's rows; --seed=1, 2 show how far a row moves with the seed.
  seed: int = 0


def _log(message: str) -> None:
  print(message, file=sys.stderr, flush=True)


class Stage:
  """`[k/N] what ... done in Xs` progress lines."""

  def __init__(self):
    self.number, self.start = 0, time.perf_counter()

  def __call__(self, what: str) -> None:
    self.number += 1
    _log(f"[{self.number}/{STAGES}] {what} ({time.perf_counter() - self.start:.0f}s elapsed)")


def row_of(metrics: dict[str, float]) -> dict[str, float | None]:
  """A Table 2 row from a captioner's test metrics (capjax.evaluate names CIDEr `cider_d`); METEOR is None when
  Java was not found."""
  names = {"CIDEr": "cider_d"}
  return {key: (float(metrics[names.get(key, key)]) if names.get(key, key) in metrics else None) for key in KEYS}


def deltas(rows: dict[str, dict[str, float | None]]) -> dict[str, float | None]:
  """augmented - original per column (None where either is missing)."""
  a, o = rows["augmented"], rows["original"]
  return {k: (a[k] - o[k] if a[k] is not None and o[k] is not None else None) for k in KEYS}


def table(rows: dict[str, dict[str, float | None]]) -> str:
  """Both rows and the deltas, 4 decimals (ppl 2)."""
  def cell(key: str, value: float | None, signed: bool = False) -> str:
    if value is None:
      return f"{'-':>9}"
    digits = 2 if key == "ppl" else 4
    return f"{value:>+9.{digits}f}" if signed else f"{value:>9.{digits}f}"
  lines = [f"{'':<10}" + "".join(f"{k:>9}" for k in KEYS)]
  for name in ROWS:
    lines.append(f"{name:<10}" + "".join(cell(k, rows[name][k]) for k in KEYS))
  d = deltas(rows)
  lines.append(f"{'delta':<10}" + "".join(cell(k, d[k], signed=True) for k in KEYS))
  return "\n".join(lines)


def _png_data_url(image) -> str:
  from PIL import Image  # noqa: PLC0415
  buffer = io.BytesIO()
  Image.fromarray(image).resize((128, 128), Image.NEAREST).save(buffer, format="PNG")
  return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def samples_html(images, references: Sequence[Sequence[str]], captions: dict[str, Sequence[str]], style: str,
                 rows: dict[str, dict[str, float | None]]) -> str:
  """A page of test images with their references and both captioners' captions, the table above them."""
  head = "".join(f"<th>{html.escape(k)}</th>" for k in ("", *KEYS))
  body = "".join(
      f"<tr><th>{name}</th>" + "".join(f"<td>{'-' if rows[name][k] is None else f'{rows[name][k]:.4f}'}</td>"
                                       for k in KEYS) + "</tr>" for name in ROWS)
  items = []
  for i, image in enumerate(images):
    refs = "<br>".join(html.escape(r) for r in references[i])
    items.append(f"<tr><td><img src='{_png_data_url(image)}' width=128 height=128></td><td>{refs}</td>"
                 + "".join(f"<td>{html.escape(captions[name][i])}</td>" for name in ROWS) + "</tr>")
  return (f"<!doctype html><meta charset='utf-8'><title>ERG demo: {style}</title>"
          "<style>body{font-family:sans-serif} td,th{border:1px solid #ccc;padding:4px;vertical-align:top}"
          "table{border-collapse:collapse;margin-bottom:1em}</style>"
          f"<h1>ERG on stylized_scenes: {html.escape(style)} captioners</h1><table><tr>{head}</tr>{body}</table>"
          "<table><tr><th>test image</th><th>reference</th><th>original</th><th>original + augmented</th></tr>"
          + "".join(items) + "</table>")


def captioner_config(options: Options, data_dir: str, style_model: str, lm: str, augmented: str = ""):
  """`configs/<captioner>.py:stylized` (of --configs) with the demo's data, judges and sizes; `augmented` names the
  ERG dataset."""
  from capjax import config_util  # noqa: PLC0415
  factual = f"factual={options.factual_captions}" if options.factual_captions else ""
  arg = ",".join(p for p in ("stylized", f"style={options.style}", factual, options.variants) if p)
  config = config_util.load(f"{_config_file(options)}:{arg}")
  config.dataset.builder_config = options.dataset_config
  config.dataset.data_dir = data_dir
  config.eval.style_model = style_model
  config.eval.style_lm = lm
  if augmented:
    config.dataset.augmented = augmented
    config.dataset.augmented_data_dir = data_dir
  config.seed = options.seed
  if options.steps:
    config.num_train_steps = options.steps
  if options.original_images:
    config.dataset.train_split = f"train[:{options.original_images}]"
  return config


def _config_file(options: Options) -> pathlib.Path:
  """The captioner's config file in --configs (no check: `check_options` says when it is not there)."""
  return pathlib.Path(options.configs).expanduser() / f"{options.captioner}.py"


def _train_captioner(name: str, config, run_dir: pathlib.Path) -> dict[str, Any]:
  """Trains and tests one captioner in run_dir (resumable); its row and predictions are kept in row.json.

  A run_dir holding a run of another config (other variants or data) is refused, and a kept row is reported
  only for the config that wrote it: with more --steps the run resumes and is tested again.
  """
  from capjax import train  # noqa: PLC0415
  from capjax import workdir as workdir_lib  # noqa: PLC0415
  workdir_lib.prepare(str(run_dir), config)
  saved = run_dir / ROW_FILE
  current = workdir_lib.as_json_dict(config)
  kept = json.loads(saved.read_text()) if saved.exists() else {}
  if kept.get("config") == current:
    _log(f"  {name}: already trained and tested ({saved})")
    return kept
  result = train.train_and_evaluate(config, str(run_dir))
  if "interrupted_at" in result:
    raise KeyboardInterrupt(f"interrupted at step {result['interrupted_at']}")
  predictions = json.loads(pathlib.Path(result["outputs"]["predictions"]).read_text())
  out = {"row": row_of(result["metrics"]), "metrics": result["metrics"], "config": current,
         "predictions": {int(p["image_id"]): p["caption"] for p in predictions}}
  saved.write_text(json.dumps(out, indent=1))
  return json.loads(saved.read_text())  # the same form as a rerun reads (keys as strings)


def _text_encoder(spec: str, workdir: pathlib.Path) -> str:
  """--text_encoder as augment takes it: "minilm" is the minilm extra's all-MiniLM-L6-v2, converted once into
  WORKDIR/minilm; anything else is a converted checkpoint directory (or "")."""
  if spec != "minilm":
    return spec
  import subprocess  # noqa: PLC0415
  from capjax.erg.augment import AugmentError  # noqa: PLC0415
  from capjax.text_models import minilm  # noqa: PLC0415
  converted = workdir / "minilm"
  if not (converted / "config.json").exists():
    try:
      source = minilm.model_dir()
    except minilm.MissingError as error:
      raise AugmentError(f"--text_encoder=minilm: {error}") from error
    # The conversion command, as a user runs it (the tools sit above every module, this one included).
    done = subprocess.run([sys.executable, "-m", "capjax.tools.convert_weights", "--format=hf_bert",
                           f"--input={source}", f"--output={converted}"], capture_output=True, text=True, check=False)
    if done.returncode:
      raise AugmentError(f"--text_encoder=minilm: converting {source} failed ({done.stderr.strip()[-300:]}) — "
                         f"reinstall it: {minilm.INSTALL}")
  return str(converted)


def _paths(options: Options) -> tuple[pathlib.Path, str]:
  """(the workdir, the TFDS data dir) of `options`, absolute."""
  workdir = pathlib.Path(options.workdir).expanduser().resolve()
  return workdir, str(pathlib.Path(options.data_dir or workdir / "data").expanduser().resolve())


def check_options(options: Options) -> None:
  """Before any stage (they take minutes): the captioner's config loads (--variants) and its values are possible,
  and the image counts fit the splits of --dataset_config (TFDS refuses a slice beyond a split). A ConfigError
  says which flag to change. Nothing is written."""
  from capjax import config_util  # noqa: PLC0415
  from capjax.data import sources  # noqa: PLC0415
  data_dir = _paths(options)[1]
  if os.path.exists(data_dir) and not os.path.isdir(data_dir):  # the demo's flag, not the config field it sets
    raise config_util.ConfigError(f"--data_dir={options.data_dir or data_dir} is a file, not a directory — give the "
                                  "TFDS data dir to build stylized_scenes in (default: WORKDIR/data)")
  if not _config_file(options).is_file():  # e.g. the demo run outside the repository, whose configs/ it reads
    raise config_util.ConfigError(
        f"--configs={options.configs} has no {options.captioner}.py — run the demo from the repository's root (where "
        "configs/ is), or give --configs=DIR, the folder of the repository's t2t.py and rnn.py")
  try:
    config = captioner_config(options, data_dir, "", "")
  except (FileNotFoundError, ValueError) as error:  # an unknown variant, a value that is not a number
    if isinstance(error, config_util.ConfigError):
      raise
    raise config_util.ConfigError(f"--variants={options.variants}: {error}") from error
  config_util.validate(config)
  sizes = sources.builder_config(config.dataset)
  for flag, value, split in (("--original_images", options.original_images, "train"),
                             ("--factual_examples", options.factual_examples, "factual"),
                             ("--factual_captions", options.factual_captions, "factual")):
    if value > sizes.split_size(split):
      raise config_util.ConfigError(
          f"{flag}={value} is more than the {sizes.split_size(split):,} {split} images of stylized_scenes/"
          f"{options.dataset_config} — set {flag} to at most {sizes.split_size(split)}"
          f"{' (0: all)' if flag == '--original_images' else ''}, or use a larger --dataset_config")


def run_demo(options: Options, log: Callable[[str], None] = _log) -> dict[str, Any]:
  """Runs (or resumes) every stage and returns {"rows", "deltas", "funnel", "seconds", "outputs"}."""
  import ml_collections  # noqa: PLC0415
  from capjax.data import sources  # noqa: PLC0415
  from capjax.erg import augment, generate  # noqa: PLC0415
  from capjax.metrics import stylized_lm  # noqa: PLC0415
  from capjax.text_models import style_model as sc  # noqa: PLC0415

  from capjax.erg import dual_encoder  # noqa: PLC0415
  given = (("--style_model", options.style_model, sc.META_FILE), ("--generator", options.generator,
           generate.GENERATOR_FILE), ("--retriever", options.retriever, dual_encoder.RETRIEVER_FILE))
  for flag, directory, marker in given:  # before any stage: a wrong path must not cost the stages before its own
    if directory and not (pathlib.Path(directory) / marker).is_file():
      raise augment.AugmentError(f"{flag}={directory} has no {marker} — give a directory that the command making it "
                                 f"wrote, or drop {flag} to train one here")
  check_options(options)
  workdir, data_dir = _paths(options)
  start = time.perf_counter()
  stage = Stage()
  workdir.mkdir(parents=True, exist_ok=True)
  spec = f"stylized_scenes/{options.dataset_config}"

  stage(f"dataset {spec} in {data_dir}")
  dataset = ml_collections.ConfigDict({"name": "stylized_scenes", "builder_config": options.dataset_config,
                                       "data_dir": data_dir, "features": "", "auto_build": True})
  builder = sources.prepare(dataset)
  num_train = builder.info.splits["train"].num_examples
  if options.original_images:  # the stylized set every stage learns from: the first N train images
    num_train = min(num_train, options.original_images)
  seed = builder.builder_config.seed

  stage("style classifier and the style's language model")
  style_dir = pathlib.Path(options.style_model or workdir / "style_classifier")
  lm_path = workdir / f"lm_{options.style}.json"
  if not options.style_model and not (style_dir / sc.META_FILE).exists():
    settings = dataclasses.replace(sc.RANDOM_INIT_SETTINGS, seed=options.seed)
    if options.classifier_epochs:
      settings = dataclasses.replace(settings, epochs=options.classifier_epochs)
    classifier = sc.train(sc.stylized_scenes_sentences(0, min(options.classifier_images, num_train), seed),
                          settings=settings, log=lambda line: log(f"  classifier {line}"))
    classifier.save(style_dir)
  if not lm_path.exists():
    sentences = sc.stylized_scenes_sentences(0, num_train, seed)[options.style]  # the train split's captions
    stylized_lm.StyleLanguageModel.train(sentences, options.style).save(lm_path)

  stage("generator")
  generator_dir = pathlib.Path(options.generator or workdir / "generator")
  if not options.generator and not (generator_dir / generate.GENERATOR_FILE).exists():
    settings = dataclasses.replace(generate.SCRATCH, epochs=options.generator_epochs, seed=options.seed)
    generator = generate.train(generate.scene_pairs(min(options.generator_images, num_train), seed), settings, log=True)
    generate.save(generator, generator_dir)

  stage(f"augmentation of {options.factual_examples} factual images ({options.mode})")
  name = f"stylized_scenes_{options.style}_erg"
  out_dir, funnel = augment.augment_dataset(augment.Options(
      stylized=spec, factual=spec, style=options.style, output_dataset=name, generator_dir=str(generator_dir),
      style_model_dir=str(style_dir), lm_path=str(lm_path), mode=options.mode, data_dir=data_dir,
      output_data_dir=data_dir, stylized_split=f"train[:{num_train}]" if options.original_images else "train",
      factual_split=f"factual[:{options.factual_examples}]",
      retriever_steps=options.retriever_steps, retriever_pairs=options.retriever_pairs,
      retriever_dir=options.retriever, text_encoder=_text_encoder(options.text_encoder, workdir),
      min_content=options.min_content, seed=options.seed), log=lambda line: log(f"  augment {line}"))
  for line in funnel.lines():
    log(f"  {line}")

  results = {}
  for row, augmented in (("original", ""), ("augmented", name)):
    stage(f"captioner on {'original + augmented' if augmented else 'original'} {options.style} captions")
    config = captioner_config(options, data_dir, str(style_dir), str(lm_path), augmented)
    results[row] = _train_captioner(row, config, workdir / options.captioner / row)

  rows = {row: results[row]["row"] for row in ROWS}
  test = sources.data_source(captioner_config(options, data_dir, "", str(lm_path)).dataset, "test")
  shown = sorted(int(i) for i in results["original"]["predictions"])[:12]
  records = [test[i] for i in shown]
  page = samples_html([r["image"] for r in records], [r["captions"] for r in records],
                      {row: [results[row]["predictions"][str(i)] for i in shown] for row in ROWS}, options.style, rows)
  (workdir / SAMPLES).write_text(page, encoding="utf-8")
  summary = {"rows": rows, "deltas": deltas(rows), "funnel": funnel.to_json(), "augmented_dataset": str(out_dir),
             "seconds": round(time.perf_counter() - start, 1), "options": dataclasses.asdict(options),
             "outputs": {"results": str(workdir / RESULTS), "samples": str(workdir / SAMPLES)}}
  (workdir / RESULTS).write_text(json.dumps(summary, indent=1), encoding="utf-8")
  return summary


# ----------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------
def _flags():
  from absl import flags  # noqa: PLC0415
  values = flags.FlagValues()
  d = Options()
  flags.DEFINE_string("workdir", d.workdir, "where every stage's output goes (a rerun resumes)", flag_values=values)
  flags.DEFINE_string("data_dir", d.data_dir, "TFDS data dir of stylized_scenes and the augmented dataset ('' -> "
                      "WORKDIR/data)", flag_values=values)
  flags.DEFINE_enum("style", d.style, ["romantic", "humorous"], "the style of the captioners", flag_values=values)
  flags.DEFINE_enum("captioner", d.captioner, ["t2t", "rnn"], "configs/<captioner>.py:stylized", flag_values=values)
  flags.DEFINE_string("configs", d.configs, "the folder of the config files t2t.py and rnn.py (relative to the "
                      "working directory: the repository's configs/ when run from its root)", flag_values=values)
  flags.DEFINE_string("variants", d.variants, "more config variants/values, e.g. debug or batch=32",
                      flag_values=values)
  flags.DEFINE_enum("dataset_config", d.dataset_config, ["default", "tiny"], "the stylized_scenes config",
                    flag_values=values)
  flags.DEFINE_integer("original_images", d.original_images, "the original stylized set: the first N train images "
                       "(0: all); the classifier, LM, generator, retrieval bank and original captioner see only these",
                       lower_bound=0, flag_values=values)
  flags.DEFINE_integer("factual_captions", d.factual_captions, "both captioners are style-conditioned and also "
                       "train on the factual captions of the first N factual images (0: on the style's captions alone)",
                       lower_bound=0, flag_values=values)
  flags.DEFINE_integer("steps", d.steps, "captioner training steps (0: the config's)", lower_bound=0,
                       flag_values=values)
  flags.DEFINE_integer("classifier_images", d.classifier_images, "train images for the style classifier",
                       lower_bound=1, flag_values=values)
  flags.DEFINE_integer("classifier_epochs", d.classifier_epochs, "style classifier epochs (0: its default)",
                       lower_bound=0, flag_values=values)
  flags.DEFINE_integer("generator_images", d.generator_images, "train images for the generator", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_integer("generator_epochs", d.generator_epochs, "generator epochs", lower_bound=1, flag_values=values)
  flags.DEFINE_integer("factual_examples", d.factual_examples, "factual images to augment", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_enum("mode", d.mode, ["i2i", "i2t", "t2i", "t2t"], "retrieval: query side 2 bank side",
                    flag_values=values)
  flags.DEFINE_integer("retriever_steps", d.retriever_steps, "training steps of the retriever's dual encoder",
                       lower_bound=1, flag_values=values)
  flags.DEFINE_integer("retriever_pairs", d.retriever_pairs, "factual pairs the retriever trains on", lower_bound=2,
                       flag_values=values)
  flags.DEFINE_float("min_content", d.min_content, "augment's content filter: the share of its factual caption's "
                     "words a generated caption must keep in order (0: off, the paper's three filters only)",
                     flag_values=values)
  flags.DEFINE_string("text_encoder", d.text_encoder, "the retriever's locked text tower: minilm (the minilm extra) "
                      "or a converted BERT-family directory ('': a small Transformer trained here)", flag_values=values)
  flags.DEFINE_string("style_model", d.style_model, "a trained style classifier to use instead of training one",
                      flag_values=values)
  flags.DEFINE_string("generator", d.generator, "a trained generator to use instead of training one",
                      flag_values=values)
  flags.DEFINE_string("retriever", d.retriever, "a saved retriever (augment --save_retriever) to use instead of "
                      "training one", flag_values=values)
  flags.DEFINE_integer("seed", d.seed, "every stage's training seed: the style classifier's, the generator's, the "
                       "retriever's and both captioners' (0: docs/erg.md's rows)", lower_bound=0, flag_values=values)
  return values


def main(argv: Sequence[str]) -> None:
  from capjax import cli  # noqa: PLC0415
  from capjax.config_util import ConfigError  # noqa: PLC0415
  values = _flags()
  cli.parse(values, argv, __doc__)
  options = Options(**{f.name: values[f.name].value for f in dataclasses.fields(Options)})
  from capjax.erg.augment import check_filter_flags  # noqa: PLC0415
  check_filter_flags(values)
  try:  # the flags' values before any work, and before anything is written
    check_options(options)
  except ConfigError as error:
    cli.fail(str(error))
  cli.writable_dir(options.workdir, "--workdir")
  cli.quiet_library_logs()  # the captioners' step and validation logs, without orbax's and grain's
  from capjax.data.sources import DatasetNotBuiltError  # noqa: PLC0415
  from capjax.erg.augment import AugmentError  # noqa: PLC0415
  try:  # what the stages raise for input they cannot use, each with a message that says what to do
    summary = run_demo(options)
  except (AugmentError, ConfigError, DatasetNotBuiltError) as error:
    cli.fail(str(error))
  rows = summary["rows"]
  print(f"\nERG on stylized_scenes ({options.style}, {options.captioner}): the same captioner trained on the "
        f"original captions and on original + augmented ({summary['funnel']['kept']} pairs), test split")
  print(table(rows))
  for kind, path in summary["outputs"].items():
    print(f"{kind}: {path}")
  print(f"total: {summary['seconds']:.0f}s")
  print(json.dumps({row: rows[row] for row in ROWS}, allow_nan=False), flush=True)


if __name__ == "__main__":
  from capjax import cli
  cli.run(main)
