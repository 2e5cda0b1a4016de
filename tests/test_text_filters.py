"""Every text filter on realistic alt-texts: what it drops, with which reason, and what it keeps."""

import pytest

from capjax.text import resources
from capjax.text.annotate import Annotator, normalize_text
from capjax.text.boilerplate import strip_boilerplate
from capjax.text.config import FilterConfig
from capjax.text.filters import (
    STAGE_OF, STAGES, FilterChain, Reason, control_characters, first_control_character, normalize_valence, raw_text,
    sentiment_bound, text_filters)


@pytest.fixture(scope="module")
def annotator():
  return Annotator()


@pytest.fixture(scope="module")
def filters(annotator):
  return {f.name: f for f in text_filters(FilterConfig(), annotator.lemma)}


def check(filters, annotator, name, text):
  return filters[name](annotator.annotate(normalize_text(text)))


KEEPERS = [
    "Harrison Ford and Calista Flockhart attend the premiere at Hollywood",
    "A British Airways Airbus A319 aircraft takes off from Heathrow Airport on September 23, 2017.",
    "Portrait of an old man with a hat",
    "A well-known actor at the festival in the city",
    "Anna and Peter in the park in May 2018",
]


@pytest.mark.parametrize("text", KEEPERS)
def test_realistic_captions_pass_every_filter(filters, annotator, text):
  a = annotator.annotate(normalize_text(text))
  assert {name: f(a) for name, f in filters.items()} == {name: None for name in filters}


@pytest.mark.parametrize("text, expected", [
    ("Young woman on the beach - stock photo", "Young woman on the beach"),
    ("Stock Photo - Young woman on the beach", "Young woman on the beach"),
    ("A dog in the park, click to enlarge picture", "A dog in the park"),
    ("Embedded image permalink", ""),
    ("John Smith's profile photo", ""),
    ("IMG_1234.jpg", ""),
    ("DSC00123 A boat on the lake", "A boat on the lake"),
    ("https://t.co/abc A dog at the beach www.example.com", "A dog at the beach"),
    ("A cat on a mat (Photo: Getty Images)", "A cat on a mat"),
    ("A cat on the mat. Photo by John Smith", "A cat on the mat"),
    ("Image may contain: 2 people, people smiling", "2 people, people smiling"),
    ("Copyright 2017 John Smith", ""),
    # Words that only frame an alt-text when punctuation sets them apart stay inside sentences.
    ("Image of a cat on a mat", "Image of a cat on a mat"),
    ("A picture of the house", "A picture of the house"),
])
def test_boilerplate_is_stripped_first(text, expected):
  assert strip_boilerplate(text) == expected


def test_boilerplate_stripping_never_empties_a_released_cc3m_caption(cc3m_validation_tsv):
  captions = [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()]
  stripped = [strip_boilerplate(c) for c in captions]
  assert all(stripped)
  assert sum(s != c for s, c in zip(stripped, captions)) == 276  # "... stock photo", "image may contain : ..."


def test_raw_text_rejects_empty_and_overlong_input_before_tokenizing():
  assert raw_text("", 1000) == Reason.EMPTY
  assert raw_text(" \t ", 1000) == Reason.EMPTY
  assert raw_text("A dog " * 400, 1000) == Reason.TOO_MANY_CHARACTERS
  assert raw_text("A dog in the park", 1000) is None


@pytest.mark.parametrize("text, where", [
    ("A dog \x1b[31mruns\x1b[0m on the grass", "U+001B at character 7"),  # an ANSI colour (CSI) sequence
    ("A dog\x9b31mruns on the grass", "U+009B at character 6"),  # the 8-bit CSI, a C1 control
    ("A dog runs\x07 on the grass", "U+0007 at character 11"),  # BEL
    ("\x00A dog runs on the grass", "U+0000 at character 1"),
    ("A dog runs on the grass\x7f", "U+007F at character 24"),  # DEL
    ("A dog runs\x0con the grass", "U+000C at character 11"),  # form feed
])
def test_control_characters_and_escape_sequences_are_rejected_with_where(text, where):
  assert control_characters(text) == Reason.CONTROL_CHARACTERS
  assert first_control_character(text) == where
  assert STAGE_OF[Reason.CONTROL_CHARACTERS] == "input"


@pytest.mark.parametrize("text", ["A dog runs on the grass", "A dog\truns on\r\nthe grass",
                                  "Café crème \u2014 naïve", "A dog \u200b runs", "[31m is a room number"])
def test_tabs_line_ends_and_printable_text_are_not_control_characters(text):
  assert control_characters(text) is None and first_control_character(text) is None


def test_length_counts_words_not_punctuation(filters, annotator):
  assert check(filters, annotator, "length", "Dog !!!") == Reason.TOO_SHORT
  assert check(filters, annotator, "length", "A dog .") == Reason.TOO_SHORT
  assert check(filters, annotator, "length", "A dog runs") is None
  assert check(filters, annotator, "length", " ".join(["A dog runs in the park"] * 9)) == Reason.TOO_LONG


def test_profanity_uses_the_shipped_list_and_hyphenated_parts(filters, annotator):
  assert check(filters, annotator, "profanity", "A fucking mess in the kitchen") == Reason.PROFANITY
  assert check(filters, annotator, "profanity", "A bull-shit sign on the fence") == Reason.PROFANITY
  assert check(filters, annotator, "profanity", "A rooster and a donkey on the farm") is None
  assert "fuck" in resources.word_list("profanity.txt")


@pytest.mark.parametrize("text, reason", [
    ("a dog plays in the park", Reason.NOT_CAPITALIZED),
    ("2 dogs play in the park", Reason.NOT_CAPITALIZED),
    ("Beautiful Sunset Over Lake Tahoe", Reason.TOO_MANY_CAPITALS),
    ("SALE ON ALL SHOES IN THE STORE", Reason.ALL_CAPS),
    ("The Lord Of The Rings poster on the wall", Reason.TITLE_CASE),
    ("Harrison Ford And Calista Flockhart at the premiere", Reason.TITLE_CASE),
    ("A dog runs in the park with the NASA logo", None),
    ("Harrison Ford and Calista Flockhart attend the premiere at Hollywood", None),
])
def test_capitalization(filters, annotator, text, reason):
  assert check(filters, annotator, "capitalization", text) == reason


def test_repetition_counts_content_words_only(filters, annotator):
  assert check(filters, annotator, "repetition", "Cats cats cats and more cats on the sofa") == Reason.REPETITION
  assert check(filters, annotator, "repetition", "Sale sale shoes sale bags at the mall") == Reason.REPETITION
  assert check(filters, annotator, "repetition", "The view of the Thames from the top of the tower") is None


@pytest.mark.parametrize("text, reason", [
    ("Dogs play in the park", None),
    ("Dogs playing in parks", Reason.NO_DETERMINER),
    ("The dogs are playing happily", Reason.NO_PREPOSITION),
    ("This is all it is for us", Reason.NO_NOUN),
])
def test_determiner_noun_preposition(filters, annotator, text, reason):
  assert check(filters, annotator, "determiner_noun_preposition", text) == reason


def test_noun_ratio_counts_a_name_once_and_catches_keyword_lists(filters, annotator):
  assert check(filters, annotator, "noun_ratio", "The kitchen table chair lamp sofa rug decor for the home") == (
      Reason.NOUN_RATIO)
  assert check(filters, annotator, "noun_ratio", "Harrison Ford and Calista Flockhart attend the premiere") is None


def test_vocabulary_accepts_inflections_compounds_numbers_and_leaves_names_to_hypernymization(filters, annotator):
  assert check(filters, annotator, "vocabulary", "The children were attending 3 well-known premieres in 2017") is None
  assert check(filters, annotator, "vocabulary", "Harrison Ford and Calista Flockhart attend the premiere") is None
  assert check(filters, annotator, "vocabulary", "A dog plays with the balll in the park") == Reason.OUT_OF_VOCABULARY
  assert check(filters, annotator, "vocabulary", "A zxqv wrtp on the glorp of the table") == Reason.OUT_OF_VOCABULARY


@pytest.mark.parametrize("text", [
    "A young woman takes a selfie with her iPhone on the beach",
    "Man using a smartphone app in the cafe",
    "Friends record a podcast with a smartwatch and a laptop in the studio",
    "A hipster drinks coffee by the emoji on the wall of the cafe",
])
def test_the_default_vocabulary_knows_words_newer_than_wordnet(filters, annotator, text):
  a = annotator.annotate(text)
  assert check(filters, annotator, "vocabulary", text) is None
  # Checked token by token too, names included: these are words, not names left to hypernymization.
  vocab = resources.default_vocabulary(FilterConfig().vocabulary_min_zipf)
  assert {"selfie", "iphone", "smartphone", "app", "podcast", "smartwatch", "emoji"} <= vocab
  assert all(w.lower() in vocab or not w.isalpha() for w in a.tokens), a.tokens


def test_the_default_vocabulary_is_loaded_once_per_process():
  first = resources.default_vocabulary(1.0)
  assert resources.default_vocabulary(1.0) is first
  assert 300_000 < len(first) < 400_000
  assert "teh" in first  # a web-frequency list keeps common typos, as a Wikipedia count would


def test_a_user_vocabulary_file_replaces_the_default(annotator, tmp_path):
  path = tmp_path / "wiki_vocab.tsv"
  path.write_text("dog\t912\npark\t500\nplay\t77\nselfie\t12\n", encoding="utf-8")
  custom = {f.name: f for f in text_filters(FilterConfig(vocabulary_path=str(path)), annotator.lemma)}
  assert custom["vocabulary"](annotator.annotate("A dog plays in the park with a selfie")) is None
  assert custom["vocabulary"](annotator.annotate("A cat plays in the park")) == Reason.OUT_OF_VOCABULARY


def test_sentiment_drops_extremes_only(filters, annotator):
  assert check(filters, annotator, "sentiment", "The most beautiful happy wonderful amazing love of the best day") == (
      Reason.EXTREME_SENTIMENT)
  assert check(filters, annotator, "sentiment", "Terrible horrible awful disaster kills the worst victims in the war") \
      == Reason.EXTREME_SENTIMENT
  assert check(filters, annotator, "sentiment", "A happy dog plays in the park") is None


def test_the_bound_that_lets_captions_skip_vader_is_never_below_vader(cc3m_validation_tsv):
  vader = resources.vader()
  captions = [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()[:5000]]
  captions += [
      "Sunset :) at the beach", "A dog... with a ball!!!", "NOT the best day", "Kind of a mess :-(",
      "The most beautiful happy wonderful amazing love of the best day", "Never so GOOD good good good!!! ??",
      "Very very very happy but extremely sad", "The bomb is the shit, bad ass", "I love love LOVE this",
  ]
  bounds = [normalize_valence(sentiment_bound(c, vader)) for c in captions]
  scores = [abs(vader.polarity_scores(c)["compound"]) for c in captions]
  assert all(b >= s - 5e-5 for b, s in zip(bounds, scores))  # VADER rounds to 4 decimals
  assert sum(b < 0.9 for b in bounds) > 0.95 * len(captions)  # VADER is skipped for these


def test_chain_stops_at_the_first_reason_and_counts_it(filters, annotator):
  chain = FilterChain(filters.values())
  texts = ["a dog plays in the park", "Dogs playing in parks", "A dog in the park", "SALE ON ALL SHOES IN THE STORE"]
  reasons = [chain(annotator.annotate(t)) for t in texts]
  assert reasons == [Reason.NOT_CAPITALIZED, Reason.NO_DETERMINER, None, Reason.ALL_CAPS]
  assert chain.seen == 4
  assert dict(chain.counts) == {Reason.NOT_CAPITALIZED: 1, Reason.NO_DETERMINER: 1, Reason.ALL_CAPS: 1}


def test_every_reason_belongs_to_one_stage():
  assert set(STAGE_OF) == set(Reason)
  assert sum(len(r) for r in STAGES.values()) == len(Reason)
