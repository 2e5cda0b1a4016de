"""BLEU, ROUGE-L and CIDEr-D equal pycocoevalcap's to 1e-9 on the same tokenized captions; CIDEr-D with a fixed
document-frequency table follows the same formula with that table's counts.
"""

from __future__ import annotations

import json
import math
import pathlib
import random
from collections import Counter

import numpy as np
import pytest
from pycocoevalcap.bleu.bleu import Bleu as ReferenceBleu
from pycocoevalcap.cider.cider import Cider as ReferenceCider
from pycocoevalcap.rouge.rouge import Rouge as ReferenceRouge

from capjax.metrics.bleu import Bleu
from capjax.metrics.cider import CiderD, DocumentFrequency
from capjax.metrics.rouge import Rouge, lcs_length, rouge_l
from capjax.metrics.tokenizer import tokenize

DECORATIONS = ["", "", ".", "!", " (left)", " [sic]", ", it's", " - well-known", " don't", " \"quoted\"", "..."]


def caption_sets(captions: list[str], num_images: int, seed: int) -> tuple[dict, dict]:
  """Raw {image: refs (1-5)}, {image: [candidate]} from CC3M captions with punctuation, brackets and quotes."""
  rng = random.Random(seed)
  vocabulary = sorted({w for c in captions[:2000] for w in c.split()})
  refs, preds = {}, {}
  for image in range(num_images):
    source = rng.choice(captions)
    refs[f"img{image}"] = [source.capitalize() + rng.choice(DECORATIONS)]
    for _ in range(rng.randint(0, 4)):
      words = [w if rng.random() > 0.2 else rng.choice(vocabulary) for w in source.split()]
      refs[f"img{image}"].append(" ".join(words) + rng.choice(DECORATIONS))
    words = [w for w in source.split() if rng.random() > 0.15]
    if len(words) > 2 and rng.random() < 0.3:
      words[0], words[1] = words[1], words[0]
    preds[f"img{image}"] = [" ".join(words) + rng.choice(DECORATIONS)]
  preds["img0"] = [""]  # an empty candidate scores, it does not break anything
  return refs, preds


@pytest.fixture(scope="module")
def captions(cc3m_validation_tsv: pathlib.Path) -> list[str]:
  return [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module", params=[0, 1])
def tokenized(request, captions) -> tuple[dict, dict]:
  refs, preds = caption_sets(captions, 400, seed=request.param)
  return tokenize(refs), tokenize(preds)


def test_caption_sets_hold_what_the_parity_tests_claim(tokenized):
  gts, res = tokenized
  all_refs = [r for refs in gts.values() for r in refs]
  assert len(gts) == 400 and {len(r) for r in gts.values()} == {1, 2, 3, 4, 5}
  assert res["img0"] == [""]
  assert any("-lrb-" in r for r in all_refs) and any("'s" in r for r in all_refs)
  assert any("n't" in r for r in all_refs) and any("well-known" in r for r in all_refs)


def test_bleu_equals_pycocoevalcap(tokenized):
  gts, res = tokenized
  theirs, their_images = ReferenceBleu(4).compute_score(gts, res, verbose=0)
  ours, our_images = Bleu(4).compute_score(gts, res)
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
  np.testing.assert_allclose(our_images, their_images, rtol=0, atol=1e-9)


def test_rouge_l_equals_pycocoevalcap(tokenized):
  gts, res = tokenized
  theirs, their_images = ReferenceRouge().compute_score(gts, res)
  ours, our_images = Rouge().compute_score(gts, res)
  assert ours == pytest.approx(theirs, abs=1e-9)
  np.testing.assert_allclose(our_images, their_images, rtol=0, atol=1e-9)


def test_cider_d_equals_pycocoevalcap(tokenized):
  gts, res = tokenized
  theirs, their_images = ReferenceCider().compute_score(gts, res)
  ours, our_images = CiderD().compute_score(gts, res)
  assert ours == pytest.approx(theirs, abs=1e-9)
  np.testing.assert_allclose(our_images, their_images, rtol=0, atol=1e-9)


def test_bleu_of_a_hypothesis_equal_to_its_reference_is_one_up_to_the_smoothing():
  scores, _ = Bleu(4).compute_score({1: ["a b c d e"]}, {1: ["a b c d e"]})
  assert scores == pytest.approx([1.0] * 4, abs=1e-9)


def test_bleu_takes_the_closest_reference_length_and_the_shorter_on_ties():
  # hypothesis of 4 words, references of 3 and 5 words: both 1 away, so the brevity penalty uses 3 (none)
  scores, _ = Bleu(1).compute_score({1: ["a b c", "a b c d e"]}, {1: ["a b c x"]})
  assert scores[0] == pytest.approx(3 / 4, abs=1e-9)
  # references of 6 words only: ratio 4/6, penalty exp(1 - 6/4)
  scores, _ = Bleu(1).compute_score({1: ["a b c d e f"]}, {1: ["a b c d"]})
  assert scores[0] == pytest.approx(math.exp(1 - 6 / 4), abs=1e-9)


def test_bleu_clips_repeated_words_by_the_most_any_one_reference_has():
  scores, _ = Bleu(1).compute_score({1: ["the cat", "the the dog"]}, {1: ["the the the"]})
  assert scores[0] == pytest.approx(2 / 3, abs=1e-9)


def test_rouge_l_is_the_beta_weighted_lcs_f_measure_of_best_precision_and_recall():
  assert lcs_length("a b c d".split(), "a c d x".split()) == 3
  precision, recall = 2 / 3, 1.0  # "a b c" against "a c": LCS 2
  assert rouge_l("a b c", ["a c"]) == pytest.approx(2.44 * precision * recall / (recall + 1.44 * precision))
  assert rouge_l("x y", ["a b"]) == 0.0


def test_cider_d_of_a_single_image_is_zero_as_every_ngram_is_in_every_document():
  score, per_image = CiderD().compute_score({1: ["a dog runs", "a dog"]}, {1: ["a dog runs"]})
  assert score == 0.0 and per_image.tolist() == [0.0]


def reference_cider_d(gts: dict, res: dict, df: dict[str, int], num_documents: int) -> np.ndarray:
  """The CIDEr-D formula written out with dictionaries, for any df table (an oracle independent of numpy code)."""
  def vector(caption: str) -> tuple[list[dict], list[float], int]:
    words = caption.split()
    grams = [Counter(" ".join(words[i:i + n]) for i in range(len(words) - n + 1)) for n in range(1, 5)]
    vec = [{g: tf * (math.log(num_documents) - math.log(max(1.0, df.get(g, 0)))) for g, tf in c.items()}
           for c in grams]
    return vec, [math.sqrt(sum(v * v for v in d.values())) for d in vec], max(len(words) - 1, 0)

  scores = []
  for image, references in gts.items():
    hyp, hyp_norm, hyp_length = vector(res[image][0])
    total = np.zeros(4)
    for reference in references:
      ref, ref_norm, ref_length = vector(reference)
      for n in range(4):
        value = sum(min(w, ref[n].get(g, 0.0)) * ref[n].get(g, 0.0) for g, w in hyp[n].items())
        if hyp_norm[n] and ref_norm[n]:
          value /= hyp_norm[n] * ref_norm[n]
        total[n] += value * math.exp(-((hyp_length - ref_length) ** 2) / (2 * 6.0 ** 2))
    scores.append(total.mean() / len(references) * 10)
  return np.array(scores)


def test_reference_formula_agrees_with_pycocoevalcap_on_corpus_document_frequency(tokenized):
  gts, res = tokenized
  table = DocumentFrequency.from_references(gts.values())
  _, theirs = ReferenceCider().compute_score(gts, res)
  np.testing.assert_allclose(reference_cider_d(gts, res, dict(table.counts), len(gts)), theirs, atol=1e-9)


def test_a_table_of_the_evaluated_references_reproduces_the_default(tokenized):
  gts, res = tokenized
  table = DocumentFrequency.from_references(gts.values())
  assert table.num_documents == 400
  np.testing.assert_allclose(CiderD(table).compute_score(gts, res)[1], CiderD().compute_score(gts, res)[1],
                             rtol=0, atol=1e-12)


def test_fixed_table_from_a_training_split_scores_single_reference_data(captions, tmp_path):
  train_refs, _ = caption_sets(captions, 600, seed=7)
  table = DocumentFrequency.from_references(tokenize(train_refs).values())
  path = tmp_path / "df.json"
  table.save(path)
  loaded = DocumentFrequency.load(path)
  assert loaded == table and json.loads(path.read_text())["num_documents"] == 600
  refs, preds = caption_sets(captions, 200, seed=8)
  gts = {image: r[:1] for image, r in tokenize(refs).items()}  # one reference per image
  res = tokenize(preds)
  ours = CiderD(loaded).compute_score(gts, res)[1]
  np.testing.assert_allclose(ours, reference_cider_d(gts, res, dict(table.counts), 600), rtol=0, atol=1e-9)
  assert not np.allclose(ours, CiderD().compute_score(gts, res)[1])


def test_loading_a_file_that_is_not_a_table_says_so(tmp_path):
  path = tmp_path / "other.json"
  path.write_text(json.dumps({"a": 1}))
  with pytest.raises(ValueError, match="not a CIDEr-D document-frequency table"):
    DocumentFrequency.load(path)


def test_scorers_reject_mismatched_images_and_hypothesis_lists():
  with pytest.raises(ValueError, match="different images"):
    CiderD().compute_score({1: ["a"]}, {2: ["a"]})
  with pytest.raises(ValueError, match="exactly one hypothesis"):
    Bleu().compute_score({1: ["a"]}, {1: ["a", "b"]})
  with pytest.raises(ValueError, match="exactly one hypothesis"):
    Rouge().compute_score({1: ["a"]}, {1: "a"})
