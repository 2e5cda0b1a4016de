"""Recaption cleaning for LLaVA-style captions: the dataset card's failures, loops and preambles."""

import pytest

from capjax.text.recaption import clean_recaption, cut_repeated_suffix, detect_failures, trim_prefix


def test_repeated_suffix_loop_is_cut_to_one_copy_with_a_partial_copy_dropped():
  text = "The image shows a red bus on a city street. The bus is parked. The bus is parked. The bus is"
  assert cut_repeated_suffix(text) == "The image shows a red bus on a city street. The bus is parked."
  assert cut_repeated_suffix("A beach at sunset, waves, waves, waves, waves") == "A beach at sunset, waves"


def test_short_natural_repetitions_are_kept():
  assert cut_repeated_suffix("A very very big dog") == "A very very big dog"
  assert cut_repeated_suffix("The dog says bye bye") == "The dog says bye bye"


@pytest.mark.parametrize("text, trimmed", [
    ("The image shows a red bus on a street.", "A red bus on a street."),
    ("In this image, we can see a dog on the grass.", "A dog on the grass."),
    ("This image depicts a kitchen with a table.", "A kitchen with a table."),
    ("The image is a photograph of a mountain lake.", "A photograph of a mountain lake."),
    ("A dog on the grass.", "A dog on the grass."),
])
def test_boilerplate_prefixes_are_trimmed(text, trimmed):
  assert trim_prefix(text) == trimmed


@pytest.mark.parametrize("text, failures", [
    ("A cat on a mat with no text visible.", ("mentions_no_text",)),
    ("A kitchen with a table and other objects around.", ("mentions_other_objects",)),
    ("A desk with a laptop and additional objects.", ("mentions_additional_objects",)),
    ("An empty room with no objects in it.", ("mentions_no_objects",)),
    ("A sign with the alt-text of the page.", ("mentions_alt_text",)),
    ("A dog on a red mat and a cat. A dog on a red mat and a cat. Then a dog on a red mat and a cat.",
     ("repeated_sequence",)),
    ("A dog on the grass.", ()),
])
def test_dataset_card_failures_are_detected(text, failures):
  assert detect_failures(text) == failures


def test_clean_recaption_repairs_then_flags():
  result = clean_recaption("The image shows a red bus. The bus is parked. The bus is parked. The bus is parked.")
  assert (result.text, result.repairs, result.failures, result.ok) == (
      "A red bus. The bus is parked.", ("cut_repeated_suffix", "trimmed_prefix"), (), True)
  flagged = clean_recaption("This image depicts a kitchen with other objects around.")
  assert (flagged.text, flagged.failures, flagged.ok) == (
      "A kitchen with other objects around.", ("mentions_other_objects",), False)


@pytest.mark.parametrize("text", ["An image", "an image.", "  An image  "])
def test_an_image_placeholder_is_flagged(text):
  assert clean_recaption(text).failures == ("placeholder",)


def test_hostile_recaptions_do_not_crash():
  for text in ["", "\x00\x07", "😀" * 50, "word " * 5000, "&lt;b&gt;An image&lt;/b&gt;"]:
    assert isinstance(clean_recaption(text).text, str)
