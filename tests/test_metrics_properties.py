"""BLEU, ROUGE-L and CIDEr-D on arbitrary unicode (any code point, lone surrogates too: JSON's "\\ud800" reads as
one): they never raise, stay in their ranges and give the same numbers twice. (METEOR and SPICE need Java.)"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from capjax.metrics import tokenizer
from capjax.metrics.coco import cider_d, evaluate

PROPERTY = settings(max_examples=200, deadline=None, database=None)
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=30)
# Shared words give n-gram matches; arbitrary text around them gives everything else.
WORDS = ["a", "A", "dog", "on", "the", "grass", ".", ",", "(", ")", "'s", "n't", "--", "ça", "狗", "\u00a0", "\u2028"]
CAPTION = st.lists(st.one_of(st.sampled_from(WORDS), ANY_TEXT), max_size=12).map(" ".join)
IMAGES = st.dictionaries(st.integers(0, 9), st.lists(CAPTION, min_size=1, max_size=3), min_size=1, max_size=4)
REFS_AND_PREDS = IMAGES.flatmap(
    lambda refs: st.tuples(st.just(refs), st.fixed_dictionaries({i: CAPTION for i in refs})))
METRICS = ["Bleu", "ROUGE_L", "CIDEr"]


def _check_ranges(scores: dict[str, float]) -> None:
  assert list(scores) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr"]
  assert all(isinstance(v, float) and math.isfinite(v) for v in scores.values()), scores
  assert all(0.0 <= scores[k] <= 1.0 + 1e-12 for k in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L")), scores
  assert 0.0 <= scores["CIDEr"] <= 10.0 + 1e-9, scores  # CIDEr-D: 10 x a clipped cosine, times a length penalty


@PROPERTY
@given(refs_and_preds=REFS_AND_PREDS, tokenize=st.booleans())
def test_scores_of_any_unicode_are_in_range_and_deterministic(refs_and_preds, tokenize):
  refs, preds = refs_and_preds
  scores = evaluate(refs, preds, METRICS, tokenize=tokenize)
  event(f"CIDEr {'> 0' if scores['CIDEr'] > 0 else '= 0'}, Bleu_2 {'> 0.01' if scores['Bleu_2'] > 0.01 else '<= 0.01'}")
  _check_ranges(scores)
  assert evaluate(refs, preds, METRICS, tokenize=tokenize) == scores


@PROPERTY
@given(refs=IMAGES, tokenize=st.booleans())
def test_a_caption_scored_against_itself_is_perfect(refs, tokenize):
  refs = {image: captions[:1] for image, captions in refs.items()}
  words = tokenizer.tokenize(refs) if tokenize else refs
  assume(all(captions[0].split() for captions in words.values()))
  scores = evaluate(refs, {image: captions[0] for image, captions in refs.items()}, METRICS, tokenize=tokenize)
  _check_ranges(scores)
  assert (scores["Bleu_1"], scores["ROUGE_L"]) == (pytest.approx(1.0, abs=1e-6), pytest.approx(1.0, abs=1e-12))


@PROPERTY
@given(refs_and_preds=REFS_AND_PREDS)
def test_the_trainers_cider_d_is_the_evaluations_on_any_unicode(refs_and_preds):
  refs, preds = refs_and_preds
  value = cider_d(refs, preds)
  assert math.isfinite(value) and 0.0 <= value <= 10.0 + 1e-9
  assert value == pytest.approx(evaluate(refs, preds, ["CIDEr"], tokenize=False)["CIDEr"], abs=1e-12)
  assert cider_d(refs, preds) == value
