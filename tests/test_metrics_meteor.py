"""METEOR equals pycocoevalcap's (1e-6) and never desyncs or hangs; the whole COCO evaluation and its command line
equal pycocoevalcap's pipeline. The tests that need a METEOR JVM live here, to share one of each side.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import stat
import subprocess
import sys

import pytest

from capjax.metrics.coco import evaluate
from capjax.metrics.meteor import Meteor, score_line
from capjax.metrics.tokenizer import tokenize

KEYS = ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]


@pytest.fixture(scope="module")
def raw_sets(cc3m_validation_tsv: pathlib.Path) -> tuple[dict, dict]:
  """250 images, 1-5 raw references each (capitals, punctuation, brackets, quotes) and one raw candidate."""
  captions = [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()]
  rng = random.Random(3)
  endings = ["", ".", "!", " (again).", ", isn't it?", " - a \"classic\"", "..."]
  refs, preds = {}, {}
  for image in range(250):
    picked = rng.sample(captions, rng.randint(1, 5))
    refs[image] = [c.capitalize() + rng.choice(endings) for c in picked]
    words = [w for w in picked[0].split() if rng.random() > 0.2]
    preds[image] = " ".join(words) + rng.choice(endings)
  preds[0] = ""
  return refs, preds


@pytest.fixture(scope="module")
def meteor():
  with Meteor() as scorer:
    yield scorer


@pytest.fixture(scope="module")
def pycocoevalcap_meteor():
  from pycocoevalcap.meteor.meteor import Meteor as ReferenceMeteor

  scorer = ReferenceMeteor()
  yield scorer
  scorer.meteor_p.kill()
  scorer.meteor_p.wait()


@pytest.fixture(scope="module")
def pycocoevalcap_scores(raw_sets, pycocoevalcap_meteor) -> dict[str, float]:
  """COCOEvalCap's steps, Spice aside: PTBTokenizer on refs, then on preds, then each scorer."""
  from pycocoevalcap.bleu.bleu import Bleu
  from pycocoevalcap.cider.cider import Cider
  from pycocoevalcap.rouge.rouge import Rouge
  from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

  refs, preds = raw_sets
  gts = PTBTokenizer().tokenize({i: [{"caption": c} for c in r] for i, r in refs.items()})
  res = PTBTokenizer().tokenize({i: [{"caption": preds[i]}] for i in refs})
  bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
  scores = {f"Bleu_{k + 1}": b for k, b in enumerate(bleu)}
  scores["METEOR"] = pycocoevalcap_meteor.compute_score(gts, res)[0]
  scores["ROUGE_L"] = Rouge().compute_score(gts, res)[0]
  scores["CIDEr"] = Cider().compute_score(gts, res)[0]
  return {k: float(v) for k, v in scores.items()}


def test_meteor_equals_pycocoevalcap_corpus_and_per_image(raw_sets, meteor, pycocoevalcap_meteor):
  refs, preds = raw_sets
  gts, res = tokenize(refs), tokenize({i: [p] for i, p in preds.items()})
  theirs, their_images = pycocoevalcap_meteor.compute_score(gts, res)
  ours, our_images = meteor.compute_score(gts, res)
  assert ours == pytest.approx(theirs, abs=1e-6)
  assert our_images == pytest.approx(their_images, abs=1e-6)


def test_the_corpus_score_is_meteors_aggregate_not_the_mean_of_images(meteor):
  corpus, images = meteor.compute_score({1: ["a dog runs on the grass"], 2: ["two cats sleep"]},
                                        {1: ["a dog runs on grass"], 2: ["a cat"]})
  assert corpus != pytest.approx(sum(images) / 2, abs=1e-4)


def test_a_line_break_in_a_caption_is_a_space(meteor):
  broken = meteor.compute_score({1: ["a dog\non the\r\ngrass"], 2: ["a cat"]}, {1: ["a dog\nruns"], 2: ["cat"]})
  plain = meteor.compute_score({1: ["a dog on the grass"], 2: ["a cat"]}, {1: ["a dog runs"], 2: ["cat"]})
  assert broken == plain


def test_an_empty_hypothesis_scores_zero_and_the_next_image_is_unaffected(meteor):
  corpus, images = meteor.compute_score({1: ["a dog"], 2: ["a cat"]}, {1: [""], 2: ["a cat"]})
  assert images[0] == 0.0 and images[1] == pytest.approx(meteor.compute_score({2: ["a cat"]}, {2: ["a cat"]})[0])


def test_field_separators_inside_captions_cannot_add_references():
  assert score_line("a ||| dog", ["a cat ||| x", "b"]) == "SCORE ||| a cat  x ||| b ||| a dog"


def _fake_java(tmp_path: pathlib.Path, body: str) -> str:
  path = tmp_path / "java"
  path.write_text(f"#!/bin/sh\n{body}\n")
  path.chmod(path.stat().st_mode | stat.S_IEXEC)
  return str(path)


def test_a_jvm_that_dies_is_a_clear_error(tmp_path):
  java = _fake_java(tmp_path, "echo 'Error: could not open meteor-1.5.jar' >&2\nexit 3")
  scorer = Meteor(java=java, timeout=30)
  with pytest.raises(RuntimeError, match=r"exit code 3\): Error: could not open meteor-1.5.jar"):
    scorer.compute_score({1: ["a dog"]}, {1: ["a dog"]})


def test_a_request_without_answer_times_out_and_stops_the_process(tmp_path):
  scorer = Meteor(java=_fake_java(tmp_path, "exec sleep 60"), timeout=0.5)
  process = scorer._process
  with pytest.raises(TimeoutError, match="no answer within 0.5 s"):
    scorer.compute_score({1: ["a dog"]}, {1: ["a dog"]})
  assert process.poll() is not None


def test_missing_java_says_what_to_install():
  with pytest.raises(RuntimeError, match="apt-get install default-jre"):
    Meteor(java="no-such-java-binary")


def test_a_closed_meteor_refuses_work(tmp_path):
  with Meteor(java=_fake_java(tmp_path, "exec cat > /dev/null")) as scorer:
    pass
  with pytest.raises(RuntimeError, match="closed"):
    scorer.compute_score({1: ["a"]}, {1: ["a"]})


def test_evaluate_equals_pycocoevalcaps_pipeline(raw_sets, meteor, pycocoevalcap_scores):
  refs, preds = raw_sets
  ours = evaluate(refs, preds, meteor=meteor)
  assert list(ours) == KEYS
  for key in KEYS:
    assert ours[key] == pytest.approx(pycocoevalcap_scores[key], abs=1e-6 if key == "METEOR" else 1e-9), key


def test_command_line_scores_coco_files_with_a_newline_and_an_empty_caption(tmp_path, repo_root, meteor):
  images = [{"id": 7}, {"id": 8}, {"id": 9}]
  annotations = [{"image_id": 7, "id": 1, "caption": "A dog runs on the grass."},
                 {"image_id": 7, "id": 2, "caption": "A brown dog\nrunning."},
                 {"image_id": 8, "id": 3, "caption": "Two people (a man and a woman) at the beach."},
                 {"image_id": 9, "id": 4, "caption": "A red car parked on the street."}]
  results = [{"image_id": 7, "caption": "a dog\nrunning on grass"}, {"image_id": 8, "caption": ""},
             {"image_id": 9, "caption": "a car on the street"}]
  refs_path, preds_path = tmp_path / "refs.json", tmp_path / "preds.json"
  refs_path.write_text(json.dumps({"images": images, "annotations": annotations}))
  preds_path.write_text(json.dumps(results))
  run = subprocess.run([sys.executable, "-m", "capjax.metrics", str(refs_path), str(preds_path)], cwd=repo_root,
                       capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(repo_root)})
  assert run.returncode == 0, run.stderr
  scores = json.loads(run.stdout)
  assert list(scores) == KEYS
  expected = evaluate({7: [a["caption"] for a in annotations[:2]], 8: [annotations[2]["caption"]],
                       9: [annotations[3]["caption"]]}, {r["image_id"]: r["caption"] for r in results}, meteor=meteor)
  assert scores == pytest.approx(expected, abs=1e-12)


def test_an_evaluation_scores_the_model_and_the_constant_caption_with_one_jvm(raw_sets, monkeypatch):
  """capjax.evaluate's full scores of a split (the model's captions, then the constant caption's) share one METEOR
  process: each start loads the paraphrase tables (~6 s), and scoring a split takes well under a second."""
  from capjax import evaluate as evaluate_lib
  from capjax.metrics import meteor as meteor_lib
  starts = []

  class CountedMeteor(meteor_lib.Meteor):

    def __init__(self, *args, **kwargs):
      starts.append(1)
      super().__init__(*args, **kwargs)

  monkeypatch.setattr(meteor_lib, "Meteor", CountedMeteor)
  refs, preds = raw_sets
  references, predictions = [refs[i] for i in range(50)], [preds[i] for i in range(50)]
  constant = [evaluate_lib.constant_caption(references)] * 50
  with evaluate_lib.meteor_scorer(full=False) as none:
    assert none is None  # CIDEr-D only: no JVM
  with evaluate_lib.meteor_scorer(full=True) as meteor:
    model = evaluate_lib.score(predictions, references, None, full=True, meteor=meteor)
    baseline = evaluate_lib.score(constant, references, None, full=True, meteor=meteor)
  assert len(starts) == 1
  # The same scores as with a JVM of its own for each.
  assert model == evaluate_lib.score(predictions, references, None, full=True)
  assert baseline == evaluate_lib.score(constant, references, None, full=True)
  assert len(starts) == 3 and 0 < baseline["METEOR"] < model["METEOR"] < 1
