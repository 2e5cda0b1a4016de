"""The IRv2 labeler of the cross filter: classes mapped through the wnid table to WordNet names and hypernyms,
top-k above a threshold, and the alt_text_captions cross stage reading its labels."""

from __future__ import annotations

import os

import helpers
import numpy as np
import pytest

from capjax import features
from capjax.image import labels as imagenet_labels
from capjax.models import inception_resnet_v2 as irv2
from tfds_builders import img2dataset as i2d
from tfds_builders.alt_text_captions import cross as cross_lib
from tfds_builders.alt_text_captions import make_dummy_data as dummy
from tfds_builders.alt_text_captions import stages as stages_lib


def test_class_labels_are_names_and_hypernyms_below_the_root():
  labels = imagenet_labels.class_labels("n02099601", 6)  # golden retriever
  assert labels[:2] == ("golden retriever", "retriever")
  assert {"dog", "canine", "animal", "mammal"} <= set(labels)
  assert not {"entity", "object", "whole", "organism", "living thing"} & set(labels)
  assert "car" in imagenet_labels.class_labels("n04285008", 6)  # sports car


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
  directory = tmp_path_factory.mktemp("irv2")
  irv2.save_converted(directory, helpers.random_irv2_variables(1000, seed=3),
                      {"model": "inception_resnet_v2", "format": "keras", "num_classes": 1000})
  return os.fspath(directory)


def test_labeler_top_k_threshold_and_cross_stage(weights):
  labeler = features.Irv2Labeler(weights, top_k=3, threshold=0.0)
  images = [dummy.jpeg(0, 640, 480), dummy.jpeg(2, mode="L")]
  found = [labeler.classes([image])[0] for image in images]  # batches of one, as the builder labels: one compile
  # The same probabilities from the model called directly (not jitted) on the labeler's pixels.
  model = irv2.InceptionResNetV2(num_classes=1000)
  pixels = np.stack([labeler.pixels(b) for b in images])
  logits = np.asarray(model.apply(labeler.variables, irv2.preprocess(pixels))["logits"], np.float64)
  probabilities = np.exp(logits - logits.max(-1, keepdims=True))
  probabilities /= probabilities.sum(-1, keepdims=True)
  for row, classes in zip(probabilities, found):
    top = np.argsort(-row)[:3]
    assert [w for w, _ in classes] == [imagenet_labels.wnid_of(int(i)) for i in top]
    np.testing.assert_allclose([p for _, p in classes], row[top], rtol=1e-3)
  labeler.threshold = float(probabilities.max()) + 1e-3  # no class reaches it (same compiled model)
  assert labeler.classes(images[:1]) == [[]]
  labeler.threshold = 0.0
  names = labeler.labels(images[0])
  want = [n for wnid, _ in found[0] for n in imagenet_labels.class_labels(wnid, 6)]
  assert names == tuple(dict.fromkeys(want))

  # The builder's cross stage with cross_filter=irv2: labels recorded, reasons from the overlap with the caption.
  settings = stages_lib.parse_settings(["cross_filter=irv2", f"labeler_weights={weights}", "labeler_threshold=0"])
  stages = stages_lib.Stages(settings, "", weights)
  sample = i2d.Candidate("k", "http://x/k.jpg", "A dog runs along the beach.", images[0], {})
  outcome = stages(sample)
  forms = stages.caption_forms(sample.caption)
  assert outcome.stage in (None, "cross")
  expected = cross_lib.cross_filter(stages.labeler.labels(images[0]), forms, stages.text.annotator)
  assert (outcome.reason if outcome.stage == "cross" else None) == expected
  if outcome.stage is None:
    assert outcome.labels == stages.labeler.labels(images[0])
