"""The pipeline end to end: the command line, the funnel, concept pruning and hostile inputs."""

import json
import os
import time

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from capjax.text import pipeline
from capjax.text.annotate import normalize_text
from capjax.text.config import FilterConfig, HypernymConfig, PipelineConfig
from capjax.text.filters import Reason, text_filters

HOSTILE = [
    "",
    " \t ",
    "\x00\x01\x02\x1b[31m",
    "\U0001F600\U0001F389\U0001F525",
    "&lt;script&gt;alert(1)&lt;/script&gt; &#x1F600; &#128512; &amp;amp;",
    "A dog in the park\u202e kcab",
    "\ud800 A lone surrogate in the park",
    "一只狗在公园里玩",
    "كلب في الحديقة",
    "A" * 10_000,
    "A dog runs in the park. " * 417,
    "... ,,, !!! ??? --- ((( )))",
    "'s n't 's",
    "1 2 3 4 5 6 7 8 9 10",
    "Ⅻ ﬁre in the ﬂat on Ｍonday",
]
PROPERTY = settings(max_examples=200, deadline=None, database=None)
# Any code point, lone surrogates included (Record.to_json escapes them).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)
WORDS = ["A", "a", "The", "Two", "dog", "dogs", "plays", "in", "the", "park", "Harrison", "Ford", "attend",
         "premiere", "at", "Paris", ",", ".", "!", "'s", "2017", "September", "23", "stock", "photo", "-", "&amp;",
         "IMG_1234.jpg", "http://example.org/a.jpg", "Musician", "performs", "festival", "(", ")", "\"", "and"]
# Sentence-like texts reach the tagger and the hypernymizer; arbitrary text mostly stops at the first filters.
SENTENCE_LIKE = st.lists(st.one_of(st.sampled_from(WORDS), ANY_TEXT.map(lambda t: t[:8])), min_size=1,
                         max_size=12).map(" ".join)
TEMPLATED = st.builds("{} {} {}".format, st.sampled_from(["A dog plays with", "Harrison Ford attends", "Two cats on"]),
                      SENTENCE_LIKE, st.sampled_from(["in the park.", "at the premiere in Paris, France.", ""]))


@pytest.fixture(scope="module")
def text_pipeline():
  return pipeline.TextPipeline()


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_inputs_never_crash_the_pipeline(text_pipeline, text):
  record = text_pipeline.process("h", text)
  assert record.kept is False or isinstance(record.caption, str)
  json.loads(record.to_json())


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_inputs_never_crash_any_filter_or_the_hypernymizer_called_directly(text_pipeline, text):
  annotator = text_pipeline.annotator
  a = annotator.annotate(normalize_text(text))
  for f in text_filters(FilterConfig(), annotator.lemma):
    f(a)
  start = time.process_time()
  text_pipeline.hypernymizer(a)
  assert time.process_time() - start < 5


def test_records_say_why_they_were_dropped(text_pipeline):
  assert text_pipeline.process("1", "Embedded image permalink").reason == "boilerplate_only"
  assert text_pipeline.process("2", "").reason == "empty"
  assert text_pipeline.process("3", "x" * 5000).reason == "too_many_characters"
  kept = text_pipeline.process("4", "Young woman on the beach in Miami - stock photo")
  assert (kept.kept, kept.reason, kept.caption, kept.concepts) == (True, None, "young woman on the beach", ())


def test_terminal_escape_residue_never_reaches_a_caption(text_pipeline):
  """The escape of an ANSI colour sequence was normalized into a space and "31m" became a word of a kept caption
  ("a dog 31mruns 0m on the grass"): the row is rejected at the input stage, its detail naming the character."""
  record = text_pipeline.process("e", "A dog \x1b[31mruns\x1b[0m on the grass")
  assert (record.kept, record.reason, record.caption, record.detail) == (
      False, "control_characters", None, "U+001B at character 7")
  assert text_pipeline.process("f", "A dog runs on the grass").kept


def test_control_characters_are_counted_in_the_input_stage_of_the_funnel(tmp_path, capsys):
  tsv = tmp_path / "alt.tsv"
  tsv.write_bytes(b"1\tA dog \x1b[31mruns\x1b[0m on the grass.\n2\tA dog runs on the grass.\n"
                  b"3\tA cat\xc2\x9b0m sleeps on a sofa.\n")
  out = tmp_path / "out.jsonl"
  pipeline.main(["pipeline", f"--input={tsv}", f"--output={out}", "--min_concept_count=0"])
  records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
  assert [(r["id"], r["reason"], r.get("detail")) for r in records] == [
      ("1", "control_characters", "U+001B at character 7"), ("2", None, None),
      ("3", "control_characters", "U+009B at character 6")]
  funnel = json.loads((tmp_path / "out.funnel.json").read_text())
  assert funnel["stages"][0]["reasons"] == {"control_characters": 2}
  capsys.readouterr()


def test_command_line_writes_one_line_per_row_and_the_funnel(tmp_path, capsys):
  rows = [
      ("1", "Harrison Ford and Calista Flockhart attend the premiere at Hollywood"),
      ("2", "Actor Tom Hanks arrives for the premiere of the film in London."),
      ("3", "A British Airways Airbus A319 aircraft at the gate of Heathrow Airport on September 23, 2017."),
      ("4", "Embedded image permalink"),
      ("5", "a dog plays in the park"),
      ("6", "Two dogs play with a ball in the park in Paris, France."),
      ("7", ""),
  ]
  source = tmp_path / "alt.tsv"
  source.write_text("".join(f"{i}\t{t}\n" for i, t in rows) + "8\n", encoding="utf-8")
  output = tmp_path / "out.jsonl"
  assert pipeline.main(["pipeline", f"--input={source}", f"--output={output}", "--min_concept_count=1"]) == 0

  lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
  assert [r["id"] for r in lines] == ["1", "2", "3", "4", "5", "6", "7", "8"]
  assert set(lines[0]) == {"id", "alt_text", "kept", "reason", "caption", "concepts"}
  summary = {r["id"]: (r["kept"], r["reason"], r["caption"], r["concepts"]) for r in lines}
  assert summary == {
      "1": (True, None, "actors attend the premiere", ["actor"]),
      "2": (True, None, "actor arrives for the premiere of the film .", ["actor"]),
      # "airport" is seen once: at or below --min_concept_count=1, so the pair is pruned.
      "3": (False, "rare_concept", None, ["airport"]),
      "4": (False, "boilerplate_only", None, []),
      "5": (False, "first_word_not_capitalized", None, []),
      "6": (True, None, "dogs play with a ball in the park .", []),
      "7": (False, "empty", None, []),
      "8": (False, "no_tab", None, []),  # a row without a tab is not read as an empty alt-text
  }

  funnel = json.loads((tmp_path / "out.funnel.json").read_text(encoding="utf-8"))
  assert json.loads(capsys.readouterr().out) == funnel
  assert (funnel["input"], funnel["kept"]) == (8, 3)
  stages = {s["stage"]: (s["in"], s["out"], s["reasons"]) for s in funnel["stages"]}
  assert stages == {
      "input": (8, 5, {"no_tab": 1, "empty": 1, "boilerplate_only": 1}),
      "lexical": (5, 4, {"first_word_not_capitalized": 1}),
      "syntactic": (4, 4, {}),
      "vocabulary": (4, 4, {}),
      "sentiment": (4, 4, {}),
      "hypernymization": (4, 4, {}),
      "concepts": (4, 3, {"rare_concept": 1}),
  }
  assert funnel["concepts"] == {"distinct": 2, "rare": 1, "min_concept_count": 1}


def test_an_entities_table_extends_the_seed(tmp_path):
  table = tmp_path / "kg.tsv"
  table.write_text("Zorblax Quenth\tastronaut\n", encoding="utf-8")
  config = PipelineConfig(hypernyms=HypernymConfig(entities_path=str(table)))
  record = pipeline.TextPipeline(config).process("1", "Fans greet Zorblax Quenth at the airport.")
  assert (record.caption, record.concepts) == ("fans greet astronaut at the airport .", ("astronaut",))
  dropped = pipeline.TextPipeline().process("1", "Fans greet Zorblax Quenth at the airport.")
  assert (dropped.reason, dropped.detail) == (Reason.UNRESOLVED_ENTITY, "Zorblax Quenth")
  assert json.loads(dropped.to_json())["detail"] == "Zorblax Quenth"
  assert pipeline.Record.from_json(dropped.to_json()) == dropped


@pytest.mark.parametrize("line,row", [
    (b"1\tA dog.", pipeline.Row("1", "A dog.")),
    (b"1\t", pipeline.Row("1", "")),
    (b"1", pipeline.Row("1", "", Reason.NO_TAB, "line 7")),
    (b"", pipeline.Row("", "", Reason.NO_TAB, "line 7: blank")),
    (b"  ", pipeline.Row("  ", "", Reason.NO_TAB, "line 7: blank")),
    (b"\tA dog.", pipeline.Row("", "A dog.", Reason.EMPTY_ID, "line 7")),
    (b" \tA dog.", pipeline.Row(" ", "A dog.", Reason.EMPTY_ID, "line 7")),
    (b"1\tA dog\tin the park.", pipeline.Row("1", "A dog\tin the park.", Reason.EXTRA_COLUMNS, "line 7: 3 columns")),
    (b"1\tA dog.\t", pipeline.Row("1", "A dog.\t", Reason.EXTRA_COLUMNS, "line 7: 3 columns")),
    (b"1\tCaf\xe9 au lait",
     pipeline.Row("1", "Caf\\xe9 au lait", Reason.INVALID_UTF8, "line 7: byte 6 (0xe9) is not UTF-8")),
    (b"\xff1\tA dog.", pipeline.Row("\\xff1", "A dog.", Reason.INVALID_UTF8, "line 7: byte 1 (0xff) is not UTF-8")),
    (b"1\t\xe2\x80", pipeline.Row("1", "\\xe2\\x80", Reason.INVALID_UTF8, "line 7: byte 3 (0xe2) is not UTF-8")),
])
def test_parse_row_says_why_a_line_is_not_a_candidate(line, row):
  assert pipeline.parse_row(line, 7) == row


def test_malformed_rows_are_counted_never_merged_nor_replaced(tmp_path, capsys):
  source = tmp_path / "alt.tsv"
  source.write_bytes(
      b"\xef\xbb\xbf1\tA dog plays with a ball in the park.\r"  # byte-order mark; a lone CR ends the row
      b"2\tTwo dogs play with a ball in the park.\r\n"
      b"3\tCaf\xe9 tables on the corner of the street.\n"  # Latin-1
      b"4\tA dog\tin the park.\n"
      b"5\n"
      b"\tA cat sleeps on the sofa.\n"
      b"\n"
      b"8\tA cat sleeps on the sofa in the room.")  # no line end at the end
  output = tmp_path / "out.jsonl"
  assert pipeline.main(["pipeline", f"--input={source}", f"--output={output}", "--min_concept_count=0"]) == 0
  text = output.read_text(encoding="utf-8")
  assert "\ufffd" not in text and "\ufeff" not in text
  rows = [(r["id"], r["alt_text"], r["reason"], r["caption"], r.get("detail"))
          for r in map(json.loads, text.splitlines())]
  assert rows == [
      ("1", "A dog plays with a ball in the park.", None, "a dog plays with a ball in the park .", None),
      ("2", "Two dogs play with a ball in the park.", None, "dogs play with a ball in the park .", None),
      ("3", "Caf\\xe9 tables on the corner of the street.", "invalid_utf8", None, "line 3: byte 6 (0xe9) is not UTF-8"),
      ("4", "A dog\tin the park.", "extra_columns", None, "line 4: 3 columns"),
      ("5", "", "no_tab", None, "line 5"),
      ("", "A cat sleeps on the sofa.", "empty_id", None, "line 6"),
      ("", "", "no_tab", None, "line 7: blank"),
      ("8", "A cat sleeps on the sofa in the room.", None, "a cat sleeps on the sofa in the room .", None),
  ]
  funnel = json.loads(capsys.readouterr().out)
  assert funnel["stages"][0] == {"stage": "input", "in": 8, "dropped": 5, "out": 3, "reasons": {
      "invalid_utf8": 1, "no_tab": 2, "empty_id": 1, "extra_columns": 1}}
  assert (funnel["input"], funnel["kept"]) == (8, 3)
  assert json.loads((tmp_path / "out.funnel.json").read_text(encoding="utf-8")) == funnel
  assert sorted(p.name for p in tmp_path.iterdir()) == ["alt.tsv", "out.funnel.json", "out.jsonl"]


def _refused(argv: list[str], capsys) -> str:
  """The one stderr line of a run that must stop before any work, with exit status 2."""
  with pytest.raises(SystemExit) as exit_:
    pipeline.main(["pipeline", *argv])
  captured = capsys.readouterr()
  assert (exit_.value.code, captured.out) == (2, "")
  return captured.err


def test_an_output_that_is_the_input_is_refused_before_writing(tmp_path, capsys):
  source = tmp_path / "alt.tsv"
  source.write_bytes(b"1\tA dog plays in the park.\n")
  (tmp_path / "link.jsonl").symlink_to(source)
  os.link(source, tmp_path / "hard.jsonl")
  (tmp_path / "sub").mkdir()
  for output in (source, tmp_path / "link.jsonl", tmp_path / "hard.jsonl", tmp_path / "sub" / ".." / "alt.tsv"):
    assert _refused([f"--input={source}", f"--output={output}"], capsys) == (
        f"error: --output={output} would overwrite --input={source} — write the output to another file\n")
  # OUT.funnel.json is written too: an input of that name is refused as well.
  funnel_named = tmp_path / "run.funnel.json"
  funnel_named.write_bytes(b"1\tA dog plays in the park.\n")
  output = tmp_path / "run.jsonl"
  assert _refused([f"--input={funnel_named}", f"--output={output}"], capsys) == (
      f"error: --output={output} would overwrite --input={funnel_named} (its funnel, {funnel_named}) — write the "
      "output to another file\n")
  assert source.read_bytes() == funnel_named.read_bytes() == b"1\tA dog plays in the park.\n"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["alt.tsv", "hard.jsonl", "link.jsonl", "run.funnel.json",
                                                         "sub"]


def test_paths_and_values_the_run_cannot_use_are_refused_in_one_line(tmp_path, capsys):
  source = tmp_path / "alt.tsv"
  source.write_bytes(b"1\tA dog plays in the park.\n")
  latin1 = tmp_path / "kg.tsv"
  latin1.write_bytes(b"Zorblax Quenth\tastronaut\nJos\xe9 Quenth\tastronaut\n")
  out = tmp_path / "out.jsonl"
  cases = [
      ([f"--input={tmp_path / 'none.tsv'}", f"--output={out}"],
       f"--input={tmp_path / 'none.tsv'} does not exist — give the path of an id<TAB>alt_text TSV"),
      ([f"--input={source}", f"--output={tmp_path / 'no' / 'out.jsonl'}"],
       f"--output={tmp_path / 'no' / 'out.jsonl'}: the folder {tmp_path / 'no'} does not exist — create it first"),
      ([f"--input={source}", f"--output={tmp_path}"],
       f"--output={tmp_path} is a directory — give a file name, e.g. {tmp_path / 'out.jsonl'}"),
      ([f"--input={source}", f"--output={out}", f"--vocabulary={tmp_path / 'words.txt'}"],
       f"--vocabulary={tmp_path / 'words.txt'} is not a file — give the path of the table, or leave the flag out"),
      ([f"--input={source}", f"--output={out}", f"--entities={latin1}"],
       f"--entities={latin1} line 2: byte 4 (0xe9) is not UTF-8 — save the table as UTF-8"),
      ([f"--input={source}", f"--output={out}", "--min_concept_count=-1"],
       "flag --min_concept_count=-1: -1 is not a non-negative integer — see --help"),
      ([f"--input={source}", f"--output={out}", "--min_concept_count=1.5"],
       "flag --min_concept_count=1.5: invalid literal for int() with base 10: '1.5' — see --help"),
      ([f"--input={source}"], "missing --output — see --help"),
  ]
  for argv, message in cases:
    assert _refused(argv, capsys) == f"error: {message}\n", argv
  assert sorted(p.name for p in tmp_path.iterdir()) == ["alt.tsv", "kg.tsv"]


def test_an_interrupted_run_leaves_the_old_output_and_no_partial_files(tmp_path, text_pipeline, monkeypatch):
  source = tmp_path / "alt.tsv"
  source.write_bytes(b"1\tA dog plays in the park.\n2\tA cat sleeps on the sofa.\n")
  output = tmp_path / "out.jsonl"
  output.write_text("the previous run's output\n", encoding="utf-8")
  calls = []

  def interrupted(id_: str, alt_text: str) -> pipeline.Record:
    calls.append(id_)
    if len(calls) == 2:
      raise KeyboardInterrupt
    return pipeline.TextPipeline.process(text_pipeline, id_, alt_text)

  monkeypatch.setattr(text_pipeline, "process", interrupted)
  with pytest.raises(KeyboardInterrupt):
    pipeline.run(str(source), str(output), PipelineConfig(), pipeline=text_pipeline)
  assert calls == ["1", "2"]
  assert output.read_text(encoding="utf-8") == "the previous run's output\n"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["alt.tsv", "out.jsonl"]


def test_an_output_through_a_symbolic_link_replaces_the_target(tmp_path, text_pipeline):
  source = tmp_path / "alt.tsv"
  source.write_bytes(b"1\tA dog plays with a ball in the park.\n")
  (tmp_path / "runs").mkdir()
  target = tmp_path / "runs" / "out.jsonl"
  target.write_text("old\n", encoding="utf-8")
  (tmp_path / "out.jsonl").symlink_to(target)
  pipeline.run(str(source), str(tmp_path / "out.jsonl"), PipelineConfig(min_concept_count=0), pipeline=text_pipeline)
  assert (tmp_path / "out.jsonl").is_symlink()
  assert json.loads(target.read_text(encoding="utf-8"))["caption"] == "a dog plays with a ball in the park ."
  assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["out.jsonl"]
  assert (tmp_path / "out.funnel.json").is_file()


@PROPERTY
@given(text=st.one_of(ANY_TEXT, SENTENCE_LIKE, TEMPLATED))
def test_any_unicode_text_gives_a_valid_record_and_the_same_one_twice(text_pipeline, text):
  before = text_pipeline.funnel.total
  record = text_pipeline.process("p", text)
  event(f"reason: {record.reason}")  # --hypothesis-show-statistics: how deep the examples go
  assert text_pipeline.funnel.total == before + 1
  assert (record.id, record.alt_text) == ("p", text)
  if record.kept:
    assert record.reason is None and isinstance(record.caption, str) and record.caption.strip()
  else:
    assert record.reason in {str(r) for r in Reason} and record.caption is None
  assert all(isinstance(c, str) and c for c in record.concepts)
  line = record.to_json()
  assert "\n" not in line
  assert pipeline.Record.from_json(line) == record
  assert text_pipeline.process("p", text) == record


_FIELD = st.characters(codec="utf-8", exclude_characters="\t\r\n\ufeff")  # no surrogates: they have no UTF-8


@PROPERTY
@given(rows=st.lists(st.tuples(st.text(_FIELD, min_size=1).filter(str.strip), st.text(_FIELD),
                               st.sampled_from(["\n", "\r\n", "\r"])), max_size=6),
       bom=st.booleans(), last_ended=st.booleans())
def test_rows_read_back_exactly_whatever_the_line_endings(tmp_path_factory, rows, bom, last_ended):
  data = "".join(f"{id_}\t{text}{end}" for id_, text, end in rows)
  if rows and not last_ended:
    data = data.removesuffix(rows[-1][2])
  path = tmp_path_factory.getbasetemp() / "rows.tsv"
  path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data.encode("utf-8"))
  assert list(pipeline.read_tsv(path)) == [pipeline.Row(id_, text) for id_, text, _ in rows]
