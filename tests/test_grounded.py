"""Specification of the grounded metrics: hand-made scenes and captions with exact expected values, and
perfect scores for the dataset's own reference captions."""

import numpy as np
import pytest

from capjax.scenes import grammar, sample
from capjax.metrics.grounded import annotate_caption, grounded_metrics

# A small red circle left of a large blue square (dx = 0.5, dy = -0.05).
PAIR = [
    {"shape": "circle", "colour": "red", "size": "small", "x": 0.2, "y": 0.5},
    {"shape": "square", "colour": "blue", "size": "large", "x": 0.7, "y": 0.45},
]
# Two red circles (small upper left, large lower middle) and a large green triangle upper right.
TRIO = [
    {"shape": "circle", "colour": "red", "size": "small", "x": 0.2, "y": 0.3},
    {"shape": "circle", "colour": "red", "size": "large", "x": 0.5, "y": 0.75},
    {"shape": "triangle", "colour": "green", "size": "large", "x": 0.8, "y": 0.3},
]
SINGLE = [{"shape": "diamond", "colour": "yellow", "size": "large", "x": 0.5, "y": 0.5}]


def metrics(**values: float) -> dict[str, float]:
  defaults = dict(object_precision=1.0, object_recall=1.0, relation_accuracy=1.0, exact_match=1.0, chair_i=0.0,
                  chair_s=0.0)
  return defaults | values


def test_perfect_caption():
  caption = "a small red circle to the left of a large blue square"
  assert grounded_metrics([caption], [PAIR]) == metrics()


def test_unstated_attributes_match_anything():
  assert grounded_metrics(["a circle to the left of a square"], [PAIR]) == metrics()


def test_hallucinated_object():
  caption = "a small red circle to the left of a large green triangle"
  assert grounded_metrics([caption], [PAIR]) == metrics(
      object_precision=0.5, object_recall=0.5, relation_accuracy=0.0, exact_match=0.0, chair_i=0.5, chair_s=1.0)


def test_wrong_colour_is_a_hallucination():
  caption = "a small green circle to the left of a large blue square"
  assert grounded_metrics([caption], [PAIR]) == metrics(
      object_precision=0.5, object_recall=0.5, relation_accuracy=0.0, exact_match=0.0, chair_i=0.5, chair_s=1.0)


def test_wrong_relation():
  for caption in ["a small red circle to the right of a large blue square",
                  "a small red circle above a large blue square",
                  "the large blue square is to the left of the small red circle"]:
    assert grounded_metrics([caption], [PAIR]) == metrics(relation_accuracy=0.0, exact_match=0.0), caption


def test_relation_of_a_stacked_pair():
  assert grounded_metrics(["a small red circle above a large red circle"], [TRIO]) == metrics(
      object_recall=2 / 3, exact_match=0.0)
  assert grounded_metrics(["a large red circle below a small red circle"], [TRIO])["relation_accuracy"] == 1.0
  assert grounded_metrics(["a large red circle to the right of a small red circle"],
                          [TRIO])["relation_accuracy"] == 0.0


def test_right_count():
  assert grounded_metrics(["two red circles and a large green triangle"], [TRIO]) == metrics()


def test_wrong_count_over_mentions_without_hallucinating():
  # Three red circles: the third has no image object left to pair with, but red circles exist.
  assert grounded_metrics(["three red circles and a large green triangle"], [TRIO]) == metrics(
      object_precision=0.75, relation_accuracy=0.0, exact_match=0.0)


def test_a_count_must_be_exact():
  assert grounded_metrics(["two red circles"], [PAIR]) == metrics(
      object_precision=0.5, object_recall=0.5, relation_accuracy=0.0, exact_match=0.0)


def test_one_image_object_pairs_with_one_mention():
  assert grounded_metrics(["a small red circle and a small red circle"], [PAIR]) == metrics(
      object_precision=0.5, object_recall=0.5, relation_accuracy=0.0, exact_match=0.0)


def test_missing_object_lowers_recall_only():
  assert grounded_metrics(["a large blue square"], [PAIR]) == metrics(
      object_recall=0.5, relation_accuracy=0.0, exact_match=0.0)


def test_unparsed_words_only_break_the_exact_match():
  caption = "a small red circle to the left of a large blue square <unk>"
  assert grounded_metrics([caption], [PAIR]) == metrics(exact_match=0.0)


def test_constant_caption_over_three_scenes():
  # Mentions: 3, paired 2 (PAIR, TRIO); image objects 2 + 3 + 1; no statements; SINGLE's is hallucinated.
  assert grounded_metrics(["a small red circle"] * 3, [PAIR, TRIO, SINGLE]) == metrics(
      object_precision=2 / 3, object_recall=2 / 6, relation_accuracy=0.0, exact_match=0.0, chair_i=1 / 3,
      chair_s=1 / 3)


def test_metrics_are_pooled_over_captions():
  predictions = ["a small red circle to the left of a large blue square",
                 "a small red circle to the right of a large blue square",
                 "two red circles and a large green triangle",
                 "a small yellow diamond"]
  assert grounded_metrics(predictions, [PAIR, PAIR, TRIO, SINGLE]) == metrics(
      object_precision=7 / 8, object_recall=7 / 8, relation_accuracy=2 / 3, exact_match=2 / 4, chair_i=1 / 8,
      chair_s=1 / 4)


def test_no_mentions_and_no_statements_score_zero():
  assert grounded_metrics(["", "<UNK> <UNK>"], [PAIR, SINGLE]) == metrics(
      object_precision=0.0, object_recall=0.0, relation_accuracy=0.0, exact_match=0.0)
  assert grounded_metrics([], []) == metrics(
      object_precision=0.0, object_recall=0.0, relation_accuracy=0.0, exact_match=0.0)


def test_ground_truth_as_tfds_columns_and_bytes():
  columns = {"shape": [b"circle", b"square"], "colour": [b"red", b"blue"], "size": [b"small", b"large"],
             "x": [np.float32(0.2), np.float32(0.7)], "y": [np.float32(0.5), np.float32(0.45)]}
  caption = b"a small red circle to the left of a large blue square"
  assert grounded_metrics([caption], [columns]) == metrics()


def test_one_prediction_per_scene():
  with pytest.raises(ValueError, match="one caption per scene"):
    grounded_metrics(["a red circle"], [PAIR, PAIR])


def test_annotate_marks_the_wrong_relation():
  assert annotate_caption("the large blue square is to the left of the small red circle", PAIR) == [
      ("the large blue square", True), ("is to the left of", False), ("the small red circle", True)]


def test_annotate_marks_the_hallucinated_object_and_its_relation():
  assert annotate_caption("there is a small red circle to the left of a large green triangle", PAIR) == [
      ("there is", True), ("a small red circle", True), ("to the left of", False),
      ("a large green triangle", False)]


def test_annotate_marks_a_wrong_count_and_unparsed_words():
  assert annotate_caption("three red circles and a large green triangle <UNK>", TRIO) == [
      ("three red circles", False), ("and", True), ("a large green triangle", True), ("<unk>", False)]


def test_annotate_marks_the_second_mention_of_a_single_object():
  assert annotate_caption("a small red circle , a small red circle", PAIR) == [
      ("a small red circle", True), (",", True), ("a small red circle", False)]


def test_every_reference_caption_of_the_dataset_is_exact():
  predictions, objects = [], []
  for index in range(300):
    rng = np.random.default_rng([0, 1, index])
    s = sample.sample_scene(rng)
    for caption in grammar.captions(s, rng):
      predictions.append(caption)
      objects.append([o.as_dict() for o in s.objects])
  result = grounded_metrics(predictions, objects)
  assert result == metrics()
