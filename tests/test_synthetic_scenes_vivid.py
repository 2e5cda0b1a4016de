"""Specification of synthetic_scenes' second domain, `vivid` (configs `vivid` and `vivid_tiny`): the records of the
plain domain's format, drawn from their own seeds, another scene distribution, and a caption style whose words and
n-grams overlap the plain domain's only in part; the configs and the data registry select it by name."""

import itertools

import numpy as np
import pytest
import tensorflow_datasets as tfds

import tfds_builders.synthetic_scenes  # noqa: F401  (registers the builder)
from capjax import config_util, scenes
from capjax.data import sources
from capjax.metrics.grounded import grounded_metrics
from capjax.scenes import grammar, render, sample, vivid
from tfds_builders.synthetic_scenes import synthetic_scenes_dataset_builder as builder_module

SIZES = {"train": 512, "validation": 64, "test": 64}
SHARED_WORDS = {",", "a", "and", "two", "three", "left", "right", "of", *sample.COLOURS, *sample.SHAPES,
                *grammar.PLURALS.values()}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("tfds")
  tfds.builder("synthetic_scenes/vivid_tiny", data_dir=directory).download_and_prepare(file_format="array_record")
  return directory


@pytest.fixture(scope="module")
def sources_by_split(data_dir):
  return {split: tfds.data_source("synthetic_scenes/vivid_tiny", split=split, data_dir=data_dir) for split in SIZES}


@pytest.fixture(scope="module")
def both_domains() -> dict[str, list[scenes.Example]]:
  """500 validation examples of each domain, as the builder draws them."""
  return {domain: scenes.make_examples(0, 1, 0, 500, domain=domain) for domain in sample.DOMAINS}


def captions_of(examples):
  return [c for e in examples for c in e.captions]


def test_vivid_configs_and_split_sizes(data_dir, sources_by_split):
  configs = {c.name: (c.num_train, c.num_validation, c.num_test, c.domain)
             for c in builder_module.Builder.BUILDER_CONFIGS}
  assert configs["vivid"] == (20_000, 1_000, 1_000, "vivid") and configs["vivid_tiny"] == (512, 64, 64, "vivid")
  assert {split: len(source) for split, source in sources_by_split.items()} == SIZES
  info = tfds.builder("synthetic_scenes/vivid_tiny", data_dir=data_dir).info
  assert {split: info.splits[split].num_examples for split in SIZES} == SIZES


def test_features_are_the_plain_domains(data_dir):
  vivid_info = tfds.builder("synthetic_scenes/vivid_tiny", data_dir=data_dir).info
  plain_info = tfds.builder("synthetic_scenes/tiny", data_dir=data_dir).info  # not built: its info alone
  assert vivid_info.features.to_json() == plain_info.features.to_json()


def test_record_i_is_vivid_example_i_of_its_split(sources_by_split):
  for split, split_index in (("train", 0), ("validation", 1), ("test", 2)):
    for index in (0, SIZES[split] - 1):
      record, expected = sources_by_split[split][index], scenes.make_example(0, split_index, index, domain="vivid")
      assert record["id"] == index and expected.scene.domain == "vivid"
      np.testing.assert_array_equal(record["image"], render.render(expected.scene))
      assert [c.decode() for c in record["captions"]] == expected.captions
      assert record["background"].decode() == expected.scene.background.description
      np.testing.assert_array_equal(record["objects"]["y"], np.float32([o.y for o in expected.scene.objects]))


def test_generation_is_deterministic_and_independent_of_the_plain_domain():
  config = builder_module.SyntheticScenesConfig(name="check", num_validation=40, domain="vivid")
  first, second = (list(builder_module.generate_split(config, "validation")) for _ in range(2))
  assert [(i, r["image"], r["captions"]) for i, r in first] == [(i, r["image"], r["captions"]) for i, r in second]
  assert scenes.rng_key(0, 1, 7, "vivid") == [0, 1, 7, 1] and scenes.rng_key(0, 1, 7) == [0, 1, 7]
  with pytest.raises(ValueError, match="unknown scene domain 'dark'"):
    scenes.make_example(0, 1, 7, domain="dark")


def test_vivid_scenes_follow_their_own_distribution(both_domains):
  examples = both_domains["vivid"]
  counts = np.bincount([len(e.scene.objects) for e in examples], minlength=4)
  assert counts[0] == 0 and abs(counts[1] / 500 - 1 / 3) < 0.06 and abs(counts[3] / 500 - 1 / 6) < 0.05
  assert {e.scene.background.description for e in examples} == {
      f"{tint} {kind}" for tint in sample.TINTS for kind in ("solid", "stripes")}
  radius = sample.RADII["vivid"]
  for e in examples:
    assert sample.is_unambiguous_layout(e.scene.objects, radius)
    for a, b in itertools.combinations(e.scene.objects, 2):
      assert np.hypot(a.x - b.x, a.y - b.y) >= radius[a.size] + radius[b.size] + sample.OBJECT_GAP


def test_a_vivid_corner_pixel_is_its_tinted_background(sources_by_split):
  for record in sources_by_split["validation"]:
    tint = record["background"].decode().split()[0]
    assert np.abs(record["image"][0, 0].astype(int) - sample.TINTS[tint]).max() <= 6


def test_the_two_caption_styles_overlap_only_in_part(both_domains):
  vivid_captions, plain_captions = (captions_of(both_domains[d]) for d in ("vivid", "plain"))
  vivid_words = {w for c in vivid_captions for w in c.split()}
  plain_words = {w for c in plain_captions for w in c.split()}
  assert vivid_words == set(vivid.VOCABULARY) and plain_words == set(grammar.VOCABULARY)
  assert vivid_words & plain_words == SHARED_WORDS
  assert len(SHARED_WORDS) / len(vivid_words | plain_words) == 22 / 49  # word Jaccard 0.45
  plain_4grams = {tuple(c.split()[i:i + 4]) for c in plain_captions for i in range(len(c.split()) - 3)}
  vivid_4grams = [tuple(c.split()[i:i + 4]) for c in vivid_captions for i in range(len(c.split()) - 3)]
  assert sum(g in plain_4grams for g in vivid_4grams) / len(vivid_4grams) < 0.001
  assert not set(vivid_captions) & set(plain_captions)
  assert max(len(c.split()) for c in vivid_captions + plain_captions) == 15  # configs cut captions at 15 words
  assert vivid.canonical_caption(both_domains["vivid"][0].scene) == both_domains["vivid"][0].captions[0]


def test_vivid_captions_parse_back_to_the_stored_objects(sources_by_split):
  predictions, objects = [], []
  for record in sources_by_split["test"]:
    predictions += record["captions"]
    objects += [record["objects"]] * len(record["captions"])
  assert grounded_metrics(predictions, objects)["exact_match"] == 1.0
  parsed = grammar.parse_caption("little red circle over big blue square on pink stripes")
  assert parsed.unparsed == () and parsed.relations == (grammar.Relation(
      grammar.Mention("circle", "red", "small"), sample.ABOVE, grammar.Mention("square", "blue", "large")),)


def test_the_shapes_config_selects_the_domain_and_the_registry_reads_it(data_dir):
  config = config_util.load("configs/t2t.py:shapes,domain=vivid")
  assert (config.dataset.name, config.dataset.builder_config) == ("synthetic_scenes", "vivid")
  assert config_util.load("configs/t2t.py:shapes,domain=plain").dataset.builder_config == ""
  assert config_util.load("configs/rnn.py:shapes,domain=vivid").dataset.builder_config == "vivid"
  with pytest.raises(ValueError, match="domain=dark: synthetic_scenes has the domains plain, vivid"):
    config_util.load("configs/t2t.py:shapes,domain=dark")
  with pytest.raises(ValueError, match="add shapes"):
    config_util.load("configs/t2t.py:domain=vivid")
  config.dataset.builder_config, config.dataset.data_dir = "vivid_tiny", str(data_dir)
  assert len(sources.data_source(config.dataset, "test")) == SIZES["test"]
