"""Specification of capjax.image.labels: the 1,000 ImageNet classes of the Inception-ResNet-v2 head as WordNet
synsets, and the index <-> wnid mapping with and without TF-slim's background class."""

from __future__ import annotations

import pytest

from capjax.image import labels


def test_imagenet_classes_are_1000_distinct_wnids_in_keras_order():
  wnids = labels.WNIDS
  assert len(set(wnids)) == len(wnids) == labels.NUM_CLASSES
  assert list(wnids) == sorted(wnids)
  assert (wnids[0], wnids[1], wnids[999]) == ("n01440764", "n01443537", "n15075141")  # tench, goldfish, toilet tissue


def test_every_imagenet_wnid_resolves_in_wordnet():
  for wnid in labels.WNIDS:
    synset = labels.synset(wnid)
    assert (synset.pos(), synset.offset()) == ("n", labels.wordnet_offset(wnid))
  assert labels.lemma_names("n01440764") == ["tench", "Tinca_tinca"]


def test_class_index_and_wnid_round_trip_with_and_without_background_class():
  assert labels.class_index_of("n01443537") == 1
  assert labels.wnid_of(1) == "n01443537"
  assert labels.wnid_of(2, label_offset=labels.BACKGROUND_OFFSET) == "n01443537"
  assert labels.wnid_of(0, label_offset=labels.BACKGROUND_OFFSET) is None
  with pytest.raises(IndexError):
    labels.wnid_of(1000)
