"""The style classifier and the style-phrase extractor on the embedded stylized_scenes sentences: held-out accuracy,
recovery of the planted phrases, save/load, the commands and `cls` in `python -m capjax.metrics`, bad input.

One tiny BERT is trained once for the session (tests/trained_models.py, shared with test_erg_augment: 200 train
images, so 200 romantic, 200 humorous and 200 factual sentences, the random-init defaults; about 30 s on two cores
with TensorFlow's start).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from capjax.metrics import __main__ as metrics_cli
from capjax.metrics.stylized_lm import StyleLanguageModel
from capjax.scenes import stylized as scenes_stylized
from capjax.text_models import style_classifier as sc
from capjax.text_models import style_phrases as sp

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "text_models" / "bert"


@pytest.fixture(scope="module")
def classifier(style_classifier):
  return style_classifier


@pytest.fixture(scope="module")
def saved(style_classifier_dir):
  return style_classifier_dir


def test_the_training_sentences_are_the_datasets_records():
  data = sc.stylized_scenes_sentences(0, 2)
  for i in range(2):
    _, (romantic, humorous) = scenes_stylized.split_texts(0, 0, i)
    assert (data["romantic"][i], data["humorous"][i]) == (romantic.caption, humorous.caption)
    assert data["factual"][i] == scenes_stylized.split_texts(0, 3, i)[0][i]  # factual image i, caption i % 4
  assert {k: len(v) for k, v in data.items()} == {"romantic": 2, "humorous": 2, "factual": 2}


def test_paper_settings_per_style_family():
  assert sc.paper_settings(["factual", "romantic", "humorous"]) == sc.Settings(32, 1e-5, 3)
  assert sc.paper_settings(["factual", "positive", "negative"]) == sc.Settings(64, 2e-5, 3)


def test_held_out_accuracy_is_at_least_95_percent(classifier):
  test = sc.stylized_scenes_sentences(2, 100)  # the test split's 100 images: 300 sentences never trained on
  assert classifier.labels == ("factual", "humorous", "romantic")
  assert classifier.accuracy(test) >= 0.95


def test_the_extractor_recovers_the_planted_phrases(classifier):
  """"Recovers": the extracted spans are exactly one span, the planted words [start, end) of the caption."""
  extractor = sp.Extractor(classifier)
  heldout, held_styles, _ = sp.stylized_scenes_pairs(1, 50)
  layer, head = extractor.choose_head(heldout, held_styles)
  assert extractor.head_drops.shape == (2, 4) and extractor.head_drops[layer, head] == extractor.head_drops.max()
  sentences, styles, planted = sp.stylized_scenes_pairs(2, 100)
  extractions = extractor.extract(sentences, styles)
  recovered = [e.spans == [span] for e, span in zip(extractions, planted)]
  print(f"recovered {sum(recovered)}/{len(recovered)} planted phrases")
  assert np.mean(recovered) >= 0.8
  e = next(e for e, ok in zip(extractions, recovered) if ok)
  words = e.sentence.split()
  (start, end), = e.spans
  assert e.style_phrase == " ".join(words[start:end])
  assert e.content == " ".join(words[:start] + words[end:])
  assert set(e.record()) == {"style", "sentence", "style_phrase", "content", "layer", "head", "spans", "scores"}


def test_the_paper_epsilon_phrase_is_the_top_quarter_of_the_words(classifier):
  extractor = sp.Extractor(classifier, phrase="epsilon")
  extractor.choose_head(*sp.stylized_scenes_pairs(1, 10)[:2])
  sentence = "a small red circle to the left of a large blue square deeply in love"  # 15 words: 4 top words
  (e,) = extractor.extract([sentence], ["romantic"])
  assert len(e.phrase_words) == 4 and sum(end - start for start, end in e.spans) == 4
  assert e.phrase_words == sorted(np.argsort(-np.asarray(e.weights), kind="stable")[:4].tolist())


def test_word_importances_sum_the_pieces_and_skip_cls_and_sep(classifier):
  extractor = sp.Extractor(classifier)
  words = [["a", "zzq", "circle"]]  # "zzq" is not a training word: three ## pieces
  assert len(classifier.tokenizer.tokenize(["zzq"])[0]) == 3
  _, (w,) = extractor.importances(words)
  ids, mask = classifier.encode(["a zzq circle"])
  _, att = classifier.run(ids, mask)
  cls_row = att[:, 0, :, 0, :]
  np.testing.assert_allclose(w[..., 1], cls_row[..., 2:5].sum(-1), rtol=1e-6)
  np.testing.assert_allclose(w.sum(-1), 1 - cls_row[..., 0] - cls_row[..., 6], rtol=1e-5)


def test_save_and_load_give_the_same_predictions(classifier, saved):
  loaded = sc.StyleClassifier.load(saved)
  sentences = sc.stylized_scenes_sentences(2, 10)
  flat = [s for v in sentences.values() for s in v]
  assert loaded.labels == classifier.labels
  np.testing.assert_allclose(loaded.probabilities(flat), classifier.probabilities(flat), rtol=1e-5, atol=1e-6)
  assert json.loads((saved / sc.META_FILE).read_text())["settings"]["learning_rate"] == 1e-3


def test_html_shades_the_words_of_the_chosen_head(classifier):
  extractor = sp.Extractor(classifier)
  extractor.head = (0, 0)
  page = sp.heatmap_html(extractor.extract(["a red circle <b>in love"], ["romantic"]))
  # BERT's words: "<", "b" and ">" are three; each is escaped.
  assert "&lt;</span>" in page and "<b>" not in page and page.count("<span") == 8
  assert page.count("text-decoration: underline") == 2  # "in love"


def test_bad_input_is_one_clear_error(classifier, tmp_path):
  extractor = sp.Extractor(classifier)
  with pytest.raises(sc.StyleModelError, match="unknown style 'positive' for this classifier — choose one of "
                     "humorous, romantic"):
    extractor.choose_head(["a red circle in love"], ["positive"])
  with pytest.raises(sc.StyleModelError, match="no sentences — give at least one stylized sentence"):
    extractor.choose_head([], [])
  with pytest.raises(sc.StyleModelError, match="sentence 2 is empty"):
    extractor.choose_head(["a red circle in love", "  "], ["romantic", "romantic"])
  with pytest.raises(sc.StyleModelError, match="no sentences — give at least one"):
    classifier.predict([])
  with pytest.raises(sc.StyleModelError, match="no romantic sentences"):
    sc.train({"romantic": [], "factual": ["a red circle"]})
  with pytest.raises(sc.StyleModelError, match="unknown style 'sarcastic'"):
    sc.train({"sarcastic": ["a red circle"], "factual": ["a red circle"]})
  with pytest.raises(sc.StyleModelError, match=f"{tmp_path} is not a style classifier"):
    sc.StyleClassifier.load(tmp_path)
  (tmp_path / sc.META_FILE).write_text('{"labels": ["factual", "romantic"]}')
  with pytest.raises(sc.StyleModelError, match="is not a whole style classifier .*config.json is missing"):
    sc.StyleClassifier.load(tmp_path)


def test_a_long_sentence_is_cut_not_a_crash(classifier):
  sentence = "a red circle in love " + "and a blue square " * 2_500  # 10k words
  assert classifier.predict([sentence]) in (["romantic"], ["factual"], ["humorous"])


def _run(main, argv, capsys):
  with pytest.raises(SystemExit) as exit_:
    main(argv)
  return exit_.value.code, capsys.readouterr()


def test_the_metrics_command_prints_cls(saved, tmp_path, capsys):
  captions = ["a small red circle deeply in love", "a large blue square", "a red circle juggling pizzas",
              "a small green triangle with tender affection"]
  refs = {"images": [{"id": i} for i in range(4)],
          "annotations": [{"image_id": i, "caption": c} for i, c in enumerate(captions)]}
  (tmp_path / "refs.json").write_text(json.dumps(refs))
  (tmp_path / "preds.json").write_text(json.dumps([{"image_id": i, "caption": c} for i, c in enumerate(captions)]))
  StyleLanguageModel.train(captions, style="romantic").save(tmp_path / "lm.json")
  metrics_cli.main(["m", str(tmp_path / "refs.json"), str(tmp_path / "preds.json"), "--style=romantic",
                    f"--lm={tmp_path / 'lm.json'}", f"--style_model={saved}", "--notokenize"])
  scores = json.loads(capsys.readouterr().out)
  assert scores["cls"] == 0.5 and scores["Bleu_1"] == pytest.approx(1.0)
  code, out = _run(metrics_cli.main, ["m", str(tmp_path / "refs.json"), str(tmp_path / "preds.json"),
                                      "--style=positive", f"--lm={tmp_path / 'lm.json'}", f"--style_model={saved}"],
                   capsys)
  assert code == 2 and out.err.count("\n") == 1 and out.err.startswith("error: ")


def test_the_commands_train_and_extract(saved, tmp_path, capsys):
  (tmp_path / "rom.txt").write_text("a red circle in love\na blue square deeply in love\n")
  (tmp_path / "fact.txt").write_text("a red circle\na blue square\n")
  sc.main(["sc", "--train=romantic=" + str(tmp_path / "rom.txt") + ",factual=" + str(tmp_path / "fact.txt"),
           f"--output={tmp_path / 'model'}", "--epochs=1", "--batch_size=2"])
  assert sc.StyleClassifier.load(tmp_path / "model").labels == ("factual", "romantic")
  assert capsys.readouterr().out == f"wrote a factual/romantic classifier to {tmp_path / 'model'}\n"
  (tmp_path / "in.txt").write_text("a small red circle deeply in love\na large blue square with tender affection\n")
  sp.main(["sp", f"--model={saved}", f"--sentences={tmp_path / 'in.txt'}", "--style=romantic",
           f"--output={tmp_path / 'out.jsonl'}", f"--html={tmp_path / 'out.html'}"])
  records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert [r["style_phrase"] for r in records] == ["deeply in love", "with tender affection"]
  assert records[0]["content"] == "a small red circle"
  assert (tmp_path / "out.html").read_text().count("<tr>") == 3


def test_extraction_rows_match_the_input_lines_whatever_separators_a_sentence_holds(saved, tmp_path):
  """str.splitlines split a sentence at U+2028 or a form feed: the output had more rows than the input lines."""
  lines = ["a small red circle\u2028deeply in love", "a large blue square\x0cwith tender affection"]
  (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  sp.main(["sp", f"--model={saved}", f"--sentences={tmp_path / 'in.txt'}", "--style=romantic",
           f"--output={tmp_path / 'out.jsonl'}"])
  records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").split("\n") if line]
  assert [r["sentence"] for r in records] == lines


TABLE4 = pathlib.Path(sp.__file__).parents[1] / "erg" / "table4.tsv"


def test_pairs_are_style_tab_sentence_lines_after_an_optional_header():
  assert sp.read_pairs("style\tsentence\nromantic\ta dog in love\nnegative\t a bad cat \n") == (
      ["a dog in love", "a bad cat"], ["romantic", "negative"])
  assert sp.read_pairs("humorous\ta dog\tjuggling\n") == (["a dog\tjuggling"], ["humorous"])
  with pytest.raises(sc.StyleModelError, match="--pairs=p.tsv: line 2 is not STYLE<TAB>sentence"):
    sp.read_pairs("style\tsentence\nromantic a dog\n", "p.tsv")
  with pytest.raises(sc.StyleModelError, match="line 1: unknown style 'sarcastic' — choose one of romantic, "
                     "humorous, positive, negative"):
    sp.read_pairs("sarcastic\ta dog\n")
  with pytest.raises(sc.StyleModelError, match="has no sentences"):
    sp.read_pairs("style\tsentence\n")


def test_the_papers_table4_sentences_run_through_the_command(saved, tmp_path, capsys):
  """The ERG paper's Table 4 (ACM MM 2021), packaged beside the ERG code: the embedded classifier has romantic and
  humorous labels, so those two get a phrase; positive and negative are shaded with no phrase. Every row has the
  classifier's scores and one head, chosen here on 20 romantic validation sentences (the command's default, the
  whole validation split, takes longer)."""
  sentences, styles = sp.read_pairs(TABLE4.read_text(encoding="utf-8"))
  assert styles == ["humorous", "romantic", "positive", "negative"]
  assert sentences[0] == "a boy wearing an orange coat winks at the camera suspiciously"
  (tmp_path / "held.txt").write_text("\n".join(sc.stylized_scenes_sentences(1, 20)["romantic"]) + "\n")
  sp.main(["sp", f"--model={saved}", f"--pairs={TABLE4}", f"--heldout={tmp_path / 'held.txt'}", "--style=romantic",
           f"--output={tmp_path / 'out.jsonl'}", f"--html={tmp_path / 'out.html'}"])
  records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert [(r["style"], r["sentence"]) for r in records] == list(zip(styles, sentences))
  assert [bool(r["spans"]) for r in records] == [True, True, False, False]
  assert [r["content"] for r in records[2:]] == sentences[2:]
  assert all(set(r["scores"]) == {"factual", "humorous", "romantic"} for r in records)
  assert all(abs(sum(r["scores"].values()) - 1) < 1e-3 for r in records)
  assert len({(r["layer"], r["head"]) for r in records}) == 1
  page = (tmp_path / "out.html").read_text()
  assert page.count("<tr>") == 5 and page.count("text-decoration: underline") == sum(
      e - s for r in records for s, e in r["spans"])
  assert capsys.readouterr().out.startswith("wrote 4 style phrases (layer ")


@pytest.mark.parametrize("argv,message", [
    (["--pairs={t}", "--sentences={t}"], "error: --pairs and --sentences are two ways to give sentences"),
    (["--pairs={t}", "--heldout={t}"], "error: with --pairs, --heldout and --style go together"),
])
def test_pairs_flags_go_together(saved, tmp_path, capsys, argv, message):
  code, out = _run(sp.main, ["sp", f"--model={saved}", f"--output={tmp_path / 'o.jsonl'}",
                             *(a.format(t=TABLE4) for a in argv)], capsys)
  assert code == 2 and out.err.startswith(message) and not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("argv,message", [
    (["--train=sarcastic={f}", "--output={d}/m"], "error: unknown style 'sarcastic' — choose from romantic, "
     "humorous, positive, negative, factual\n"),
    (["--train=romantic", "--output={d}/m"], "error: --train entry 'romantic' is not STYLE=FILE — write e.g. "
     "romantic=rom.txt,factual=f.txt\n"),
])
def test_the_training_command_reports_bad_input(tmp_path, capsys, argv, message):
  (tmp_path / "f.txt").write_text("a red circle\n")
  code, out = _run(sc.main, ["sc", *(a.format(f=tmp_path / "f.txt", d=tmp_path) for a in argv)], capsys)
  assert (code, out.err) == (2, message)


def test_the_extraction_command_reports_a_directory_that_is_not_a_style_model(tmp_path, capsys):
  model = tmp_path / "not_a_model"
  model.mkdir()
  code, out = _run(sp.main, ["sp", f"--model={model}", f"--output={tmp_path / 'o.jsonl'}"], capsys)
  assert (code, out.err) == (2, f"error: {model} is not a style classifier (no style_classifier.json) — train "
                                "one with `python -m capjax.text_models.style_classifier --output=DIR`\n")


@pytest.mark.slow  # trains (conftest.py: the slow rule)
def test_training_from_a_converted_bert_uses_the_papers_settings(tmp_path, capsys):
  """--init: the converted checkpoint's config and vocabulary are kept, its weights fine-tuned, the paper's
  romantic/humorous settings (batch 32, 1e-5, 3 epochs) recorded."""
  from capjax.text_models import checkpoint
  from capjax.tools import convert_weights as cw
  cw.main(["convert_weights", "--format=hf_bert", f"--input={FIXTURES}", f"--output={tmp_path / 'bert'}"])
  (tmp_path / "rom.txt").write_text("\n".join(f"a dog {i} in love" for i in range(40)) + "\n")
  (tmp_path / "fact.txt").write_text("\n".join(f"a dog {i}" for i in range(40)) + "\n")
  sc.main(["sc", f"--train=romantic={tmp_path / 'rom.txt'},factual={tmp_path / 'fact.txt'}",
           f"--init={tmp_path / 'bert'}", f"--output={tmp_path / 'model'}"])
  capsys.readouterr()
  model = sc.StyleClassifier.load(tmp_path / "model")
  init = checkpoint.load(tmp_path / "bert", "bert")
  assert model.config == init.config and model.settings == sc.Settings(32, 1e-5, 3)
  assert (tmp_path / "model" / "vocab.txt").read_bytes() == (tmp_path / "bert" / "vocab.txt").read_bytes()
  kernel = ("layer_0", "attention", "query", "kernel")
  before, after = init.params, model.params["bert"]
  for key in kernel:
    before, after = before[key], after[key]
  assert not np.array_equal(before, after)  # fine-tuned: 80 sentences, 2 steps an epoch, 3 epochs


def test_training_files_keep_one_sentence_a_line_and_each_style_once(tmp_path):
  """Lines end at line endings only: a form feed or U+2028 inside a sentence no longer splits it in two. A style
  given twice was a dict key overwritten: its first file was dropped without a word."""
  rom, fact = tmp_path / "rom.txt", tmp_path / "fact.txt"
  rom.write_text("a red circle in love\u2028forever\na blue square\x0cin love\r\n", encoding="utf-8")
  fact.write_text("a red circle\n", encoding="utf-8")
  data = sc.read_training(f"romantic={rom},factual={fact}")
  assert data == {"romantic": ["a red circle in love\u2028forever", "a blue square\x0cin love"],
                  "factual": ["a red circle"]}
  with pytest.raises(sc.StyleModelError, match=f"--train names romantic twice \\({rom} and {fact}\\) — give one "
                     "file per style"):
    sc.read_training(f"romantic={rom},romantic={fact},factual={fact}")
