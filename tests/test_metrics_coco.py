"""`evaluate` and `cider_d` check their inputs and pick metrics; the command line reads COCO files, prints one JSON
object and reports bad input on stderr with a non-zero exit. (The runs with METEOR are in test_metrics_meteor.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import capjax.metrics
from capjax.metrics import __main__ as cli
from capjax.metrics.cider import CiderD, DocumentFrequency
from capjax.metrics.coco import cider_d, evaluate

REFS = {"a": ["A dog runs on the grass.", "A brown dog running."], "b": ["Two cats (asleep) on a sofa!"],
        "c": ["A red car parked on the street.", "Cars on a city street.", "A street."]}
PREDS = {"a": "a dog running on grass", "b": "two cats sleep", "c": "a car on the street"}


def test_missing_images_are_named():
  with pytest.raises(ValueError, match=r"1 image\(s\) with no prediction: 'c'; 1 image\(s\) with no references: 'z'"):
    evaluate(REFS, {"a": "x", "b": "y", "z": "w"}, metrics=["CIDEr"])


def test_an_image_without_references_is_named():
  with pytest.raises(ValueError, match=r"1 image\(s\) with an empty reference list.*: 'b'"):
    evaluate({"a": ["x"], "b": []}, {"a": "x", "b": "y"}, metrics=["CIDEr"])


def test_nothing_to_evaluate_is_an_error():
  with pytest.raises(ValueError, match="nothing to evaluate: no images"):
    evaluate({}, {})


def test_unknown_metric_lists_the_known_ones():
  with pytest.raises(ValueError, match="unknown metrics \\['BLEU'\\] — choose from"):
    evaluate(REFS, PREDS, metrics=["BLEU"])


def test_only_the_asked_metrics_are_computed_in_cocoevalcap_order():
  scores = evaluate(REFS, PREDS, metrics=["CIDEr", "ROUGE_L", "Bleu"])
  assert list(scores) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr"]


def test_untokenized_evaluation_scores_the_captions_as_given():
  tokenized = {"a": ["a dog runs on the grass"], "b": ["two cats -lrb- asleep -rrb- on a sofa"]}
  preds = {"a": "a dog running on grass", "b": "two cats asleep"}
  assert evaluate(tokenized, preds, ["CIDEr"], tokenize=False) == evaluate(
      {"a": ["A dog runs on the grass."], "b": ["Two cats (asleep) on a sofa!"]}, preds, ["CIDEr"])


def test_cider_d_helper_is_ciderd_on_pretokenized_captions():
  refs = {image: [r.lower().rstrip(".!") for r in captions] for image, captions in REFS.items()}
  expected = CiderD().compute_score(refs, {image: [p] for image, p in PREDS.items()})[0]
  assert cider_d(refs, PREDS) == pytest.approx(expected, abs=1e-12)
  table = DocumentFrequency.from_references(refs.values())
  assert cider_d(refs, PREDS, df=table) == pytest.approx(expected, abs=1e-12)
  assert cider_d({}, {}) == 0.0


def test_cider_d_helper_handles_a_thousand_images(cc3m_validation_tsv):
  captions = [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()]
  refs = {i: captions[5 * i:5 * i + 5] for i in range(1000)}
  preds = {i: captions[5 * i + 1] for i in range(1000)}
  per_image = CiderD().scores([preds[i] for i in refs], [refs[i] for i in refs])
  assert cider_d(refs, preds) == pytest.approx(float(np.mean(per_image)), abs=1e-12)
  assert cider_d(refs, preds) > 0


def test_the_package_imports_cheaply_and_exposes_the_entry_points():
  heavy = ("jax", "tensorflow", "capjax.metrics.tokenizer", "capjax.metrics.cider", "capjax.metrics.meteor")
  code = f"import sys, capjax.metrics; print([m for m in {heavy} if m in sys.modules])"
  run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert run.stdout.strip() == "[]"
  assert capjax.metrics.evaluate is evaluate and capjax.metrics.cider_d is cider_d


def _write_coco(tmp_path, preds: list[dict]) -> tuple[str, str]:
  images = [{"id": i} for i in (1, 2)]
  annotations = [{"image_id": 1, "id": 1, "caption": "A dog on the grass."},
                 {"image_id": 2, "id": 2, "caption": "A cat on a sofa."},
                 {"image_id": 5, "id": 3, "caption": "An image outside the listed images."}]
  refs_path, preds_path = tmp_path / "refs.json", tmp_path / "preds.json"
  refs_path.write_text(json.dumps({"images": images, "annotations": annotations}))
  preds_path.write_text(json.dumps(preds))
  return str(refs_path), str(preds_path)


def _run(*args: str) -> subprocess.CompletedProcess:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return subprocess.run([sys.executable, "-m", "capjax.metrics", *args], capture_output=True, text=True,
                        timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": root})


def test_command_line_prints_the_asked_metrics_as_one_json_object(tmp_path):
  refs, preds = _write_coco(tmp_path, [{"image_id": 1, "caption": "a dog\non grass"}, {"image_id": 2, "caption": ""}])
  run = _run(refs, preds, "--metrics=ROUGE_L,CIDEr")
  assert run.returncode == 0, run.stderr
  scores = json.loads(run.stdout)
  assert list(scores) == ["ROUGE_L", "CIDEr"]
  assert scores == pytest.approx(evaluate({1: ["A dog on the grass."], 2: ["A cat on a sofa."]},
                                          {1: "a dog on grass", 2: ""}, ["ROUGE_L", "CIDEr"]), abs=1e-12)


def test_command_line_reports_a_missing_image_on_stderr(tmp_path):
  refs, preds = _write_coco(tmp_path, [{"image_id": 1, "caption": "a dog"}])
  run = _run(refs, preds)
  assert run.returncode == 2 and run.stdout == ""
  assert run.stderr.strip() == ("error: 1 image(s) with no prediction: 2 — give one prediction for each image of the "
                                "references, and at least one reference caption for each")


def test_command_line_rejects_two_captions_for_one_image(tmp_path):
  refs, preds = _write_coco(tmp_path, [{"image_id": 1, "caption": "a"}, {"image_id": 1, "caption": "b"},
                                       {"image_id": 2, "caption": "c"}])
  run = _run(refs, preds, "--metrics=CIDEr")
  assert run.returncode == 2 and run.stdout == ""
  assert run.stderr.strip() == f"error: {preds}: image 1 has more than one predicted caption — give one per image"


@pytest.mark.parametrize("args,message", [
    (("--metrics=CIDEr,Meteor",), "error: unknown metrics ['Meteor'] — choose from Bleu,METEOR,ROUGE_L,CIDEr,SPICE"),
    (("--tokenise",), "error: Unknown command line flag 'tokenise'. Did you mean: tokenize ? — see --help"),
    (("extra.json",), "error: expected two files, REFS.json PREDS.json, got 3 argument(s) — see --help"),
])
def test_command_line_rejects_bad_arguments_in_one_line(tmp_path, args, message):
  refs, preds = _write_coco(tmp_path, [])
  run = _run(refs, preds, *args)
  assert (run.returncode, run.stdout, run.stderr) == (2, "", message + "\n")


def test_command_line_names_a_file_it_cannot_read(tmp_path):
  refs, _ = _write_coco(tmp_path, [])
  missing = tmp_path / "missing.json"
  run = _run(refs, str(missing))
  assert (run.returncode, run.stderr) == (2, f"error: {missing} does not exist — give the path of COCO results, a "
                                             'JSON list of {"image_id", "caption"} objects\n')


def test_command_line_help_shows_the_usage():
  run = _run("--help")
  assert "Usage: python -m capjax.metrics REFS.json PREDS.json" in run.stdout
  assert "--metrics" in run.stdout and "--[no]tokenize" in run.stdout


def test_references_follow_the_images_list_and_ignore_other_annotations(tmp_path):
  refs, _ = _write_coco(tmp_path, [])
  assert cli.load_references(refs) == {1: ["A dog on the grass."], 2: ["A cat on a sofa."]}


_REFS = {"images": [{"id": 1}, {"id": 2}], "annotations": [{"image_id": 1, "caption": "A dog on the grass."},
                                                           {"image_id": 2, "caption": "A cat on a sofa."}]}
_PREDS = [{"image_id": 1, "caption": "a dog"}, {"image_id": 2, "caption": "a cat"}]


@pytest.mark.parametrize("refs,preds,message", [
    (_REFS, b'[{"image_id": 1, "caption": "a dog"},',
     "{preds} is not JSON (Expecting value: line 1 column 38) — give COCO results, a JSON list of "
     "{{\"image_id\", \"caption\"}} objects"),
    (_REFS, b'\xff[]', "{preds}: byte 1 is not UTF-8 — save the file as UTF-8 JSON"),
    (b"", _PREDS, "{refs} is not JSON (Expecting value: line 1 column 1) — give COCO caption annotations, a JSON "
     "object with \"annotations\""),
    ([], _PREDS, "{refs}: expected COCO caption annotations, a JSON object with \"annotations\" (a list) — give the "
     "annotations file, e.g. captions_val2014.json"),
    ({"annotations": {}}, _PREDS, "{refs}: expected COCO caption annotations, a JSON object with \"annotations\" (a "
     "list) — give the annotations file, e.g. captions_val2014.json"),
    ({"images": {}, "annotations": []}, _PREDS,
     "{refs}: \"images\" is not a list — give a list of {{\"id\": ...}} objects, or leave it out"),
    ({"images": [1], "annotations": []}, _PREDS,
     "{refs}: image 0 is 1, not an object with \"id\" — give each image's id"),
    ({"annotations": [{"image_id": 1}]}, _PREDS, "{refs}: annotation 0 is {{\"image_id\": 1}}, not an object with "
     "\"image_id\" and \"caption\" — give one per caption"),
    ({"annotations": [{"image_id": [1], "caption": "x"}]}, _PREDS,
     "{refs}: annotation 0: the image id is [1], not an integer or a string — give each image's id"),
    ({"annotations": [{"image_id": 1, "caption": " \n"}]}, _PREDS,
     "{refs}: annotation 0 (image 1) has an empty caption — remove the annotation or give its text"),
    ({"annotations": [{"image_id": 1, "caption": None}]}, _PREDS,
     "{refs}: annotation 0 (image 1): the caption is a JSON null, not a string — give the caption's text"),
    (_REFS, {"1": "a dog"}, "{preds}: expected COCO results, a JSON list of {{\"image_id\", \"caption\"}} objects, "
     "got a JSON object — give the results file"),
    (_REFS, [["a dog"]], "{preds}: result 0 is [\"a dog\"], not an object with \"image_id\" and \"caption\" — give "
     "one per caption"),
    (_REFS, [{"image_id": 1, "caption": ["a", "dog"]}], "{preds}: result 0 (image 1): the caption is a JSON array, "
     "not a string — give the caption's text"),
    (_REFS, [{"image_id": 1.0, "caption": "a dog"}],
     "{preds}: result 0: the image id is 1.0, not an integer or a string — give each image's id"),
    (_REFS, [{"image_id": "1", "caption": "a"}, {"image_id": "2", "caption": "b"}], "{preds} writes image \"1\" as a "
     "JSON string, {refs} as a number (1) — write the ids the same way in both files"),
    (_REFS, [*_PREDS, {"image_id": 3, "caption": "a bird"}, {"image_id": "x", "caption": "a bird"}],
     "2 image(s) with no references: 3, 'x' — give one prediction for each image of the references, and at least "
     "one reference caption for each"),
])
def test_command_line_names_what_is_wrong_with_the_files(tmp_path, capsys, refs, preds, message):
  paths = {}
  for name, content in (("refs", refs), ("preds", preds)):
    paths[name] = tmp_path / f"{name}.json"
    paths[name].write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
  with pytest.raises(SystemExit) as exit_:
    cli.main(["capjax.metrics", str(paths["refs"]), str(paths["preds"]), "--metrics=CIDEr"])
  captured = capsys.readouterr()
  assert (exit_.value.code, captured.out, captured.err) == (2, "", f"error: {message.format(**paths)}\n")


def test_command_line_scores_an_empty_prediction_and_reads_a_byte_order_mark(tmp_path, capsys):
  refs, preds = tmp_path / "refs.json", tmp_path / "preds.json"
  refs.write_bytes(b"\xef\xbb\xbf" + json.dumps(_REFS).encode())
  preds.write_text(json.dumps([{"image_id": 1, "caption": "a dog on the grass"}, {"image_id": 2, "caption": ""}]))
  assert cli.main(["capjax.metrics", str(refs), str(preds), "--metrics=Bleu,ROUGE_L"]) == 0
  scores = json.loads(capsys.readouterr().out)
  assert scores == pytest.approx(evaluate({1: ["A dog on the grass."], 2: ["A cat on a sofa."]},
                                          {1: "a dog on the grass", 2: ""}, ["Bleu", "ROUGE_L"]), abs=1e-12)
  assert scores["ROUGE_L"] == pytest.approx(0.5, abs=1e-12)  # the empty caption scores 0, the exact one 1
