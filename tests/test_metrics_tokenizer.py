"""The pure-Python PTB tokenizer gives what pycocoevalcap's PTBTokenizer (CoreNLP 3.4.1, one live JVM run) gives on
every CC3M validation caption and on hand-written hard cases, whose outputs are also pinned here.
"""

from __future__ import annotations

import pathlib

import pytest

from capjax.metrics.tokenizer import PUNCTUATIONS, ptb_tokenize, ptb_tokens, tokenize

# (caption, what pycocoevalcap makes of it), outputs taken from CoreNLP 3.4.1 through pycocoevalcap
HARD_CASES = [
    ("A man riding a wave on top of a surfboard.", "a man riding a wave on top of a surfboard"),
    ("Two dogs, one brown and one white, play in the park!", "two dogs one brown and one white play in the park"),
    ("I don't know what's going on; can't you see?", "i do n't know what 's going on ca n't you see"),
    ("They're here, we'll go, you've won, she'd stay, I'm done.",
     "they 're here we 'll go you 've won she 'd stay i 'm done"),
    ("The cat's toy and the dogs' bowls.", "the cat 's toy and the dogs bowls"),
    ("rock 'n' roll in the '90s", "rock 'n' roll in the '90s"),
    ("y'all said o'clock and ma'am", "y' all said o'clock and ma'am"),
    ("cannot gonna gotta wanna lemme gimme dunno", "can not gon na got ta wan na lem me gim me dunno"),
    ("'Tis the season, 'twas the night", "'t is the season 't was the night"),
    ('A sign reading "STOP" at the corner', "a sign reading stop at the corner"),
    ("He said 'hello' and left", "he said hello and left"),
    ("\u2018curly single\u2019 and \u201ccurly double\u201d quotes", "curly single and curly double quotes"),
    ("\u00ab guillemets \u00bb and \u201elow\u201c quotes", "guillemets and \u201e low quotes"),
    ("The (red) car [left] {right} <b>bold</b>",
     "the -lrb- red -rrb- car -lsb- left -rsb- -lcb- right -rcb- <b> bold </b>"),
    ("a well-known mother-in-law in a t-shirt", "a well-known mother-in-law in a t-shirt"),
    ("anti-war pro-choice pre- and post-war", "anti-war pro-choice pre and post-war"),
    ("an e-mail from x-ray co-op", "an e-mail from x-ray co-op"),
    ("wait... what.. ok . . . end", "wait what ok end"),
    ("em\u2014dash en\u2013dash double--dash triple---dash", "em dash en dash double dash triple dash"),
    ("A 1/2 inch pipe, 3 1/2 cups and \u00bd a lemon", "a 1/2 inch pipe 3\u00a01/2 cups and 1/2 a lemon"),
    ("costs $5, US$10, \u00a320, \u20ac30, \u00a540 and 50\u00a2",
     "costs $ 5 us$ 10 # 20 $ 30 \u00a5 40 and 50 cents"),
    ("1,000 people at 10:30 on 12/25/2014 paid 3.14", "1,000 people at 10:30 on 12/25/2014 paid 3.14"),
    ("call (555) 123-4567 or 555-123-4567", "call -lrb-555-rrb-\u00a0123-4567 or 555-123-4567"),
    ("visit http://www.example.com/path.html or www.foo.org today",
     "visit http://www.example.com/path.html or www.foo.org today"),
    ("mail me at john.doe@example.com!", "mail me at john.doe@example.com!"),
    ("follow @user and #hashtag", "follow @user and #hashtag"),
    ("The U.S. Army and the U.K. Navy", "the u.s. army and the u.k. navy"),
    ("Made in the U.S. The end", "made in the u.s. the end"),
    ("Mr. Smith met Dr. Jones at St. Paul's", "mr. smith met dr. jones at st. paul 's"),
    ("Apple Inc. The company", "apple inc. the company"),
    ("see fig. 3 and no. 5, etc.", "see fig. 3 and no. 5 etc."),
    ("e.g. a.m. and p.m. i.e. Ph.D.", "e.g. a.m. and p.m. i.e. ph.d."),
    (":) :( ;) :-) :D <3 ^_^", ":-rrb- :-lrb- ;-rrb- :--rrb- :d < 3 ^_^"),
    ("100% sure & 5+5=10 ~ a|b", "100 % sure & 5 +5 = 10 ~ a | b"),
    ("na\u00efve caf\u00e9 in Zo\u00eb's stra\u00dfe", "na\u00efve caf\u00e9 in zo\u00eb 's stra\u00dfe"),
    ("AT&T and R&D and S&P-500", "at&t and r&d and s&p-500"),
    ("1st 2nd 3rd 4th 1990s 24/7 9/11", "1st 2nd 3rd 4th 1990s 24/7 9/11"),
    ("photo.jpg and 2file.png", "photo.jpg and 2file.png"),
    ("-LRB- literal brackets -RRB-", "-lrb- literal brackets -rrb-"),
    ("It's 5 o'clock somewhere", "it 's 5 o'clock somewhere"),
    ("ALL CAPS CAPTION WITH DON'T", "all caps caption with do n't"),
    ("question? exclamation! both?!", "question exclamation both ?!"),
    ("tab\tseparated\tcaption", "tab separated caption"),
    ("non\u00a0breaking space", "non breaking space"),
    ("  leading and trailing spaces  ", "leading and trailing spaces"),
    ("", ""),
    ("...", ""),
    ("?!", "?!"),
    ("a caption with a newline\ninside it", "a caption with a newline inside it"),
    ("emoji \U0001f600 in the caption", "emoji in the caption"),
    ("number-hyphen 3-d 2x4 covid-19", "number-hyphen 3-d 2x4 covid-19"),
    ("and/or w/ a/b/c/d", "and/or w / a/b/c / d"),
    ("quotes ``latex'' style", "quotes latex style"),
    ("unicode ellipsis\u2026 and bullet \u2022", "unicode ellipsis and bullet \u2022"),
    ('the so-called "smart" phone', "the so-called smart phone"),
    ("James' car", "james car"),
    ("don't.", "do n't"),
    ("Inc.", "inc."),
    ("A.", "a."),
    ('<p a=b> and <p a="b"> tags', '< p a = b > and <p\u00a0a="b"> tags'),
    ("spaces \u00a0www.example.org here", "spaces www.example.org here"),
    ("www.site.com/a\u00a0b", "www.site.com/a\u00a0b"),
    ("\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3 \u03ca\u0384\u03a3",
     "\u03bf\u03b4\u03bf\u03c2 \u03c3\u03b1\u03c2 \u03ca\u0384\u03c3"),
    ("&amp; &quot;hi&quot; AT&amp;T", "& hi at&t"),
    ("a\u00adb \u00ad", "ab"),
    ("5\u00bd and \u215b", "5 1/2 and \u215b"),
]


@pytest.fixture(scope="module")
def cc3m_captions(cc3m_validation_tsv: pathlib.Path) -> list[str]:
  return [line.split("\t")[0] for line in cc3m_validation_tsv.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def corenlp(cc3m_captions: list[str]) -> list[str]:
  """pycocoevalcap's PTBTokenizer (one JVM run) on every CC3M caption, then every hard case, in that order."""
  from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

  captions = cc3m_captions + [caption for caption, _ in HARD_CASES]
  tokenized = PTBTokenizer().tokenize({i: [{"caption": caption}] for i, caption in enumerate(captions)})
  return [tokenized[i][0] for i in range(len(captions))]


def test_every_cc3m_validation_caption_is_tokenized_as_corenlp_does(cc3m_captions, corenlp):
  ours = ptb_tokenize(cc3m_captions + [caption for caption, _ in HARD_CASES])
  differences = [(caption, theirs, mine) for caption, theirs, mine in zip(cc3m_captions, corenlp, ours)
                 if theirs != mine]
  assert len(cc3m_captions) == 15833
  assert differences == []


def test_hard_cases_are_tokenized_as_corenlp_does_live(corenlp):
  theirs = corenlp[-len(HARD_CASES):]
  ours = ptb_tokenize([caption for caption, _ in HARD_CASES])
  assert ours == theirs


@pytest.mark.parametrize("caption, expected", HARD_CASES)
def test_hard_case(caption, expected):
  # as one caption of several, like each case in the live run (the last caption of a call sees the end of text)
  assert ptb_tokenize([caption, "next"]) == [expected, "next"]


def test_the_last_caption_of_a_call_ends_the_text_where_trailing_contexts_fail():
  # CoreNLP's smiley and file-name rules need a character after them; the last line has none
  assert ptb_tokenize(["ok :)"]) == ["ok -rrb-"]
  assert ptb_tokenize(["ok :)", "next"]) == ["ok :-rrb-", "next"]
  assert ptb_tokenize(["see 2file.png"]) == ["see 2file png"]


def test_corenlp_tokens_keep_case_and_bracket_names_before_pycocoevalcap_lowercases():
  assert ptb_tokens("The (U.S.) isn't \"big\".") == ["The", "-LRB-", "U.S.", "-RRB-", "is", "n't", "``", "big",
                                                      "''", "."]


def test_punctuation_list_is_pycocoevalcaps_with_uppercase_bracket_names():
  assert PUNCTUATIONS == {"''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-",
                          "--", "...", ";"}


def test_an_abbreviation_before_a_capitalized_next_caption_also_ends_a_sentence():
  # one text, one caption a line, as pycocoevalcap feeds CoreNLP: "I." before "The" is a letter and a period
  assert ptb_tokenize(["Plan I.", "The end"]) == ["plan i", "the end"]
  assert ptb_tokenize(["Plan I.", "the end"]) == ["plan i.", "the end"]


def test_line_breaks_inside_a_caption_become_spaces_and_keep_captions_apart():
  captions = ["first\nline", "carriage\rreturn", "line\u2028separator", "last"]
  assert ptb_tokenize(captions) == ["first line", "carriage return", "line separator", "last"]


def test_tokenize_keeps_pycocoevalcaps_image_grouping():
  refs = {"b": ["A dog.", "Two dogs!"], "a": ["A cat's toy."]}
  assert tokenize(refs) == {"b": ["a dog", "two dogs"], "a": ["a cat 's toy"]}


def test_no_captions_no_lines():
  assert ptb_tokenize([]) == []
