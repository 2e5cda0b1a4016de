"""The annotation layer: normalization, Treebank-style tokens, the tagger, lemmas, entity spans, caches."""

import nltk
import pytest
from nltk.tokenize import TreebankWordTokenizer

from capjax.text import resources
from capjax.text.annotate import Annotator, normalize_text, tokenize
from capjax.text.tagger import PerceptronTagger


@pytest.fixture(scope="module")
def annotator():
  return Annotator()


def spans(annotation):
  return [" ".join(annotation.tokens[s.start:s.end]) for s in annotation.entities]


def test_tokenize_splits_clitics_final_period_and_keeps_numbers_and_abbreviations():
  assert tokenize("Harrison Ford's new movie doesn't disappoint, can't wait!") == (
      "Harrison", "Ford", "'s", "new", "movie", "does", "n't", "disappoint", ",", "ca", "n't", "wait", "!")
  assert tokenize("The U.S. team wins 3.5 million $ at 10:30 on September 23, 2017.") == (
      "The", "U.S.", "team", "wins", "3.5", "million", "$", "at", "10:30", "on", "September", "23", ",", "2017", ".")


def test_tokenize_turns_double_quotes_into_treebank_quotes():
  assert tokenize('He said "hello" to Mr. Smith.') == ("He", "said", "``", "hello", "''", "to", "Mr.", "Smith", ".")


def test_tokenize_agrees_with_nltk_treebank_on_cc3m_captions(cc3m_validation_tsv):
  treebank = TreebankWordTokenizer()
  captions = [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()]
  differ = [c for c in captions if list(tokenize(c)) != treebank.tokenize(c)]
  assert len(captions) == 15833
  assert len(differ) == 3  # ":3" and two "'." sequences


def test_normalize_text_unescapes_html_and_drops_control_characters_and_emoji():
  assert normalize_text("Caf&eacute; &amp;amp; bar\x00\x07 in Z\u00fcrich \U0001F305\U0001F389 \u200bnow") == (
      "Café & bar in Zürich now")
  assert normalize_text("  \t\n ") == ""


def test_fast_tagger_gives_nltk_perceptron_tags_on_the_treebank_sample():
  fast = PerceptronTagger(*resources.perceptron_weights())
  reference = nltk.tag.PerceptronTagger()
  sentences = [[w for w, t in s if t != "-NONE-"] for s in resources.treebank_tagged_sents()[:600]]
  assert [fast.tag(s) for s in sentences] == [[t for _, t in reference.tag(s)] for s in sentences]


def test_annotation_layers_for_the_papers_example(annotator):
  a = annotator.annotate("Harrison Ford and Calista Flockhart attend the premiere at Hollywood")
  assert a.penn == ("NNP", "NNP", "CC", "NNP", "NNP", "VBP", "DT", "NN", "IN", "NNP")
  assert a.upos == ("NOUN", "NOUN", "CONJ", "NOUN", "NOUN", "VERB", "DET", "NOUN", "ADP", "NOUN")
  assert a.lemmas[5] == "attend"
  assert spans(a) == ["Harrison Ford", "Calista Flockhart", "Hollywood"]


def test_entity_spans_take_capitalized_modifiers_and_leave_dates_out(annotator):
  a = annotator.annotate(
      "A British Airways Airbus A319 aircraft takes off from Heathrow Airport on September 23, 2017.")
  assert spans(a) == ["British Airways Airbus A319", "Heathrow Airport"]
  assert spans(annotator.annotate("The Bank of America building in Charlotte.")) == ["Bank of America", "Charlotte"]


def test_a_lone_capitalized_common_noun_opening_the_sentence_is_not_an_entity(annotator):
  assert spans(annotator.annotate("Woman walking on the beach at sunset")) == []
  assert spans(annotator.annotate("Paris at night from the top of the tower")) == ["Paris"]


def test_lemmas_use_wordnet_morphy_per_part_of_speech(annotator):
  assert annotator.lemma("children", "NOUN") == "child"
  assert annotator.lemma("attends", "VERB") == "attend"
  assert annotator.lemma("the", "DET") == "the"


def test_word_lookups_are_cached_once_per_word(annotator):
  annotator.lemma.cache_clear()
  for _ in range(5):
    annotator.lemma("premieres", "NOUN")
  info = annotator.lemma.cache_info()
  assert (info.misses, info.hits) == (1, 4)


def test_wordnet_hypernyms_nearest_first(annotator):
  assert annotator.hypernyms("actor")[:3] == ("performer", "entertainer", "person")


def test_missing_resource_error_says_how_to_get_it():
  with pytest.raises(resources.MissingNltkResource, match=r"python -m capjax.setup_nltk.*NLTK_DATA"):
    resources.find("corpora/no_such_corpus")


def test_caption_tokens_split_each_sentence_final_period():
  from capjax.text.annotate import caption_tokens
  assert caption_tokens("The bus is red.\nIt is parked by the U.S. embassy.  ") == (
      "The", "bus", "is", "red", ".", "It", "is", "parked", "by", "the", "U.S.", "embassy", ".")
  assert caption_tokens('A sign reads "Open". 3 dogs run!') == (
      "A", "sign", "reads", "``", "Open", "''", ".", "3", "dogs", "run", "!")
