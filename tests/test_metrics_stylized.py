"""The stylized metrics: `ppl` is nltk.lm's interpolated Kneser–Ney trigram model (checked by hand and against an
unmodified nltk model), scored as SRILM reports perplexity; its JSON file round-trips and refuses broken files;
`python -m capjax.metrics --style=...` prints BLEU-1/3, METEOR, CIDEr and ppl, and bad flags are one error line.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from nltk.lm import KneserNeyInterpolated
from nltk.lm.preprocessing import padded_everygram_pipeline

from capjax.metrics import __main__ as metrics_cli
from capjax.metrics import stylized_lm
from capjax.metrics.coco import evaluate
from capjax.metrics.stylized import STYLES, check_style, cls_share, stylized_scores
from capjax.metrics.stylized_lm import StyleLanguageModel, tokens

CORPUS = ["A dog runs on the grass.", "The dog sleeps on the sofa.", "A cat runs on the sofa!",
          "Two dogs play with a ball on the grass."]


def _nltk_reference(sentences, discount=0.75) -> KneserNeyInterpolated:
  """An unmodified nltk.lm KneserNeyInterpolated trained the way nltk's documentation does it."""
  train, vocabulary = padded_everygram_pipeline(3, [tokens(s) for s in sentences])
  model = KneserNeyInterpolated(3, discount=discount)
  model.fit(train, vocabulary)
  return model


def test_tokens_are_the_captions_treebank_tokens_lowercased():
  assert tokens("A Dog's ball, in the U.S. park.") == ["a", "dog", "'s", "ball", ",", "in", "the", "u.s.", "park", "."]


def test_a_trigram_probability_computed_by_hand():
  # Corpus "a b", "a c" padded as <s> <s> a b </s> </s>. P(b | <s> a) with discount D = 3/4:
  #   trigram:  c(<s> a b) = 1 of c(<s> a ·) = 2, two word types: (1 - D)/2 + D*2/2 * P2(b | a)
  #   bigram:   continuations of (a b): 1 of 2 types (<s> a b, <s> a c): (1 - D)/2 + D*2/2 * P1(b)
  #   unigram:  N1+(· b) = 1 of 7 bigram types
  # = 1/8 + 3/4 * (1/8 + 3/4 * 1/7) = 67/224
  model = StyleLanguageModel.train(["a b", "a c"])
  assert model.nltk_model.score("b", ("<s>", "a")) == pytest.approx(67 / 224, rel=1e-12)
  assert _nltk_reference(["a b", "a c"]).score("b", ("<s>", "a")) == pytest.approx(67 / 224, rel=1e-12)


def test_every_probability_equals_an_unmodified_nltk_model():
  model, reference = StyleLanguageModel.train(CORPUS).nltk_model, _nltk_reference(CORPUS)
  words = sorted(set(reference.vocab)) + ["zebra"]
  contexts = [(), ("the",), ("zebra",)] + list(itertools.product(["<s>", "the", "on", "dog", "zebra"], repeat=2))
  checked = 0
  for word, context in itertools.product(words, contexts):
    assert model.score(word, context) == reference.score(word, context), (word, context)
    checked += 1
  assert checked == len(words) * 28


def test_perplexity_is_srilms_pooled_over_sentences_with_oovs_skipped():
  model, reference = StyleLanguageModel.train(CORPUS), _nltk_reference(CORPUS)
  result = model.perplexity(["A dog sleeps on the grass.", "a zebra runs"])
  logs = [math.log(reference.score(w, c)) for w, c in [
      ("a", ("<s>", "<s>")), ("dog", ("<s>", "a")), ("sleeps", ("a", "dog")), ("on", ("dog", "sleeps")),
      ("the", ("sleeps", "on")), ("grass", ("on", "the")), (".", ("the", "grass")), ("</s>", ("grass", ".")),
      ("a", ("<s>", "<s>")), ("runs", ("a", "zebra")), ("</s>", ("zebra", "runs"))]]  # "zebra" is skipped
  assert (result.tokens, result.oov, result.sentences) == (11, 1, 2)
  assert result.value == pytest.approx(math.exp(-sum(logs) / 11), rel=1e-12)


def test_an_empty_caption_scores_its_end_of_sentence_and_nothing_is_an_error():
  model, reference = StyleLanguageModel.train(CORPUS), _nltk_reference(CORPUS)
  result = model.perplexity([""])
  assert (result.tokens, result.oov) == (1, 0)
  assert result.value == pytest.approx(1 / reference.score("</s>", ("<s>", "<s>")), rel=1e-12)
  with pytest.raises(ValueError, match="no sentences to score"):
    model.perplexity([])


def test_a_ten_thousand_token_caption_is_scored():
  result = StyleLanguageModel.train(CORPUS).perplexity(["the dog runs on the grass " * 2000])
  assert (result.tokens, result.oov) == (12_001, 0) and math.isfinite(result.value)


def test_the_file_round_trips_to_the_same_model(tmp_path):
  model = StyleLanguageModel.train(CORPUS, style="romantic", discount=0.5)
  model.save(tmp_path / "lm.json")
  data = json.loads((tmp_path / "lm.json").read_text())
  assert (data["format"], data["order"], data["discount"], data["style"], data["sentences"]) == \
      ("capjax.kneser_ney_lm", 3, 0.5, "romantic", 4)
  assert data["counts"]["1"]["dog"] == 2 and data["counts"]["3"]["<s> <s> a"] == 2
  loaded = StyleLanguageModel.load(tmp_path / "lm.json")
  assert loaded == model
  assert loaded.perplexity(CORPUS) == model.perplexity(CORPUS)


_GOOD = StyleLanguageModel.train(["a b"]).to_json()


@pytest.mark.parametrize("content,message", [
    (b"{", "is not JSON (Expecting property name enclosed in double quotes: line 1)"),
    (b"\xff", "byte 1 is not UTF-8"),
    (json.dumps([1]).encode(), "is not a capjax language model"),
    (json.dumps({**_GOOD, "version": 2}).encode(), "has version 2, this capjax reads version 1"),
    (json.dumps({**_GOOD, "discount": 1.5}).encode(), "\"discount\" is 1.5, not a number between 0 and 1"),
    (json.dumps({**_GOOD, "order": "3"}).encode(), "\"order\" is '3', not an integer from 1 to 9"),
    (json.dumps({**_GOOD, "tokenization": "split"}).encode(), "was tokenized by 'split'"),
    (json.dumps({**_GOOD, "counts": {"1": {}}}).encode(), "\"counts\" is not an object with the keys \"1\" to \"3\""),
    (json.dumps({**_GOOD, "counts": {**_GOOD["counts"], "2": {"a": 1}}}).encode(),
     "'a' in counts[\"2\"] is not 2 tokens joined by single spaces"),
    (json.dumps({**_GOOD, "counts": {**_GOOD["counts"], "1": {"a": -1}}}).encode(),
     "the count of 'a' is -1, not a positive integer"),
    (json.dumps({**_GOOD, "counts": {"1": {}, "2": {}, "3": {}}}).encode(), "the language model has no counts"),
])
def test_a_broken_file_is_a_clear_error(tmp_path, content, message):
  path = tmp_path / "lm.json"
  path.write_bytes(content)
  with pytest.raises(ValueError) as error:
    StyleLanguageModel.load(path)
  assert message in str(error.value) and " — " in str(error.value)


def test_the_training_command_writes_the_model_and_skips_blank_lines(tmp_path, capsys):
  sentences = tmp_path / "romantic.txt"
  sentences.write_bytes("\n".join(CORPUS[:2] + ["", "  "] + CORPUS[2:]).encode() + b"\r\n")
  output = tmp_path / "out" / "lm.json"
  assert stylized_lm.main(["stylized_lm", f"--sentences={sentences}", f"--output={output}", "--style=romantic"]) == 0
  assert capsys.readouterr().out.startswith(f"wrote {output}: order 3, discount 0.75, 4 sentences (2 blank lines "
                                            "skipped), ")
  assert StyleLanguageModel.load(output) == StyleLanguageModel.train(CORPUS, style="romantic")


@pytest.mark.parametrize("content,flags,message", [
    (b"", (), "{sentences}: no sentence with a word to train on — give the style's sentences, one per line"),
    (b"a dog\n\xe9t\xe9\n", (), "{sentences}: line 2, byte 1 (0xe9) is not UTF-8 — save the sentences as UTF-8"),
    (b"a dog\n", ("--discount=1",), "--discount=1.0 is not between 0 and 1 (exclusive) — give e.g. 0.75"),
])
def test_the_training_command_reports_bad_input_in_one_line(tmp_path, capsys, content, flags, message):
  sentences = tmp_path / "s.txt"
  sentences.write_bytes(content)
  with pytest.raises(SystemExit) as exit_:
    stylized_lm.main(["stylized_lm", f"--sentences={sentences}", f"--output={tmp_path / 'lm.json'}", *flags])
  assert (exit_.value.code, capsys.readouterr().err) == (2, f"error: {message.format(sentences=sentences)}\n")
  assert not (tmp_path / "lm.json").exists()


def test_styles_and_cls():
  assert STYLES == ("romantic", "humorous", "positive", "negative") and check_style("humorous") == "humorous"
  with pytest.raises(ValueError, match="unknown style 'sarcastic' — choose one of romantic, humorous, positive"):
    check_style("sarcastic")
  assert cls_share(["romantic", "factual", "romantic", "humorous"], "romantic") == 0.5


# --- the metrics command with --style

REFS = {"images": [{"id": 1}, {"id": 2}],
        "annotations": [{"image_id": 1, "caption": "A dog runs on the grass to meet his love."},
                        {"image_id": 1, "caption": "A dog runs happily on the grass."},
                        {"image_id": 2, "caption": "A cat sleeps on the sofa, dreaming of love."}]}
PREDS = [{"image_id": 1, "caption": "a dog runs on the grass"}, {"image_id": 2, "caption": "a cat sleeps on a sofa"}]


@pytest.fixture
def files(tmp_path):
  (tmp_path / "refs.json").write_text(json.dumps(REFS))
  (tmp_path / "preds.json").write_text(json.dumps(PREDS))
  StyleLanguageModel.train(CORPUS, style="romantic").save(tmp_path / "lm.json")
  return tmp_path


def test_the_command_prints_the_stylized_metrics(files, capsys):
  lm = files / "lm.json"
  assert metrics_cli.main(["m", str(files / "refs.json"), str(files / "preds.json"), "--style=romantic",
                           f"--lm={lm}"]) == 0
  scores = json.loads(capsys.readouterr().out)
  assert list(scores) == ["Bleu_1", "Bleu_3", "METEOR", "CIDEr", "ppl", "ppl_tokens", "ppl_oov"]
  refs = {1: [a["caption"] for a in REFS["annotations"][:2]], 2: [REFS["annotations"][2]["caption"]]}
  preds = {1: PREDS[0]["caption"], 2: PREDS[1]["caption"]}
  coco = evaluate(refs, preds, ["Bleu", "METEOR", "CIDEr"])
  perplexity = StyleLanguageModel.load(lm).perplexity(preds.values())
  assert scores == pytest.approx({**{k: coco[k] for k in ("Bleu_1", "Bleu_3", "METEOR", "CIDEr")},
                                  "ppl": perplexity.value, "ppl_tokens": 14, "ppl_oov": 0}, rel=1e-12)


@pytest.mark.parametrize("flags,message", [
    (("--style=sarcastic", "--lm=x"), "unknown style 'sarcastic' — choose one of romantic, humorous, positive, "
     "negative"),
    (("--style=romantic",), "--style needs --lm=FILE, the romantic language model for ppl — write one with `python -m "
     "capjax.metrics.stylized_lm --sentences=ROMANTIC_SENTENCES.txt --output=LM.json --style=romantic`"),
    (("--lm={lm}",), "--lm go with --style — add --style=romantic|humorous|positive|negative, or drop them"),
    (("--style=romantic", "--lm={lm}", "--metrics=CIDEr"), "--metrics does not go with --style: the stylized "
     "metrics are Bleu_1, Bleu_3, METEOR, CIDEr, ppl and cls — drop one of the two"),
    (("--style=romantic", "--lm={lm}", "--style_model={dir}"), "--style_model={dir}: {dir} is not a style "
     "classifier (no style_classifier.json) — train one with `python -m capjax.text_models.style_classifier "
     "--output=DIR`"),
    (("--style=humorous", "--lm={lm}"), "the language model was trained on romantic sentences, not humorous ones — "
     "give the humorous model, or train one with `python -m capjax.metrics.stylized_lm --style=humorous`"),
    (("--style=romantic", "--lm={dir}/missing.json"), "--lm={dir}/missing.json does not exist — give the path of a "
     "language model (a file written by `python -m capjax.metrics.stylized_lm --sentences=FILE --output=LM.json`)"),
    (("--style=romantic", "--lm={dir}/refs.json"), "{dir}/refs.json is not a capjax language model (no \"format\": "
     "\"capjax.kneser_ney_lm\") — give a file written by `python -m capjax.metrics.stylized_lm --sentences=FILE "
     "--output=LM.json`"),
])
def test_the_command_reports_bad_style_flags_in_one_line(files, capsys, flags, message):
  paths = {"lm": files / "lm.json", "dir": files}
  with pytest.raises(SystemExit) as exit_:
    metrics_cli.main(["m", str(files / "refs.json"), str(files / "preds.json"), *(f.format(**paths) for f in flags)])
  captured = capsys.readouterr()
  assert (exit_.value.code, captured.out, captured.err) == (2, "", f"error: {message.format(**paths)}\n")


def test_stylized_scores_adds_cls_from_the_classifiers_predictions():
  refs, preds = {1: ["a dog on the grass"], 2: ["a cat on the sofa"]}, {1: "a dog on grass", 2: "a cat"}
  lm = StyleLanguageModel.train(CORPUS)
  scores = stylized_scores(refs, preds, "romantic", lm, predicted_styles=["romantic", "humorous"], with_meteor=False)
  assert list(scores) == ["Bleu_1", "Bleu_3", "CIDEr", "ppl", "ppl_tokens", "ppl_oov", "cls"]
  assert scores["cls"] == 0.5 and scores["ppl"] == lm.perplexity(["a dog on grass", "a cat"]).value
  with pytest.raises(ValueError, match="1 predicted styles for 2 captions"):
    stylized_scores(refs, preds, "romantic", lm, predicted_styles=["romantic"], with_meteor=False)
