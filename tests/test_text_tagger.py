"""Tagger accuracy on NLTK's Penn Treebank sample: it bounds the determiner/noun/preposition rule."""

from capjax.text import resources
from capjax.text.tagger import PerceptronTagger, evaluate


def test_accuracy_on_the_treebank_sample_and_agreement_of_the_syntactic_rule():
  tagger = PerceptronTagger(*resources.perceptron_weights())
  report = evaluate(tagger, resources.treebank_tagged_sents(), resources.universal_tag_map())
  assert report == {
      "sentences": 3914,
      "tokens": 94084,
      "penn_accuracy": 0.9625,
      "universal_accuracy": 0.9721,
      "rule_agreement": 0.9931,
  }


def test_evaluate_counts_a_perfect_and_a_wrong_tagging():
  class Fixed:
    def __init__(self, tags):
      self.tags = tags

    def tag(self, words):
      return self.tags[: len(words)]

  gold = [(("The", "DT"), ("dog", "NN"), ("*T*-1", "-NONE-"), ("in", "IN"), ("parks", "NNS"))]
  universal = resources.universal_tag_map()
  assert evaluate(Fixed(["DT", "NN", "IN", "NNS"]), gold, universal)["penn_accuracy"] == 1.0
  wrong = evaluate(Fixed(["DT", "NN", "RB", "NN"]), gold, universal)
  assert (wrong["penn_accuracy"], wrong["universal_accuracy"], wrong["rule_agreement"]) == (0.5, 0.75, 0.0)
