"""The pipeline end to end: the command line, the funnel, concept pruning and hostile inputs."""

import json
import time

import pytest

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
      "8": (False, "empty", None, []),
  }

  funnel = json.loads((tmp_path / "out.funnel.json").read_text(encoding="utf-8"))
  assert json.loads(capsys.readouterr().out) == funnel
  assert (funnel["input"], funnel["kept"]) == (8, 3)
  stages = {s["stage"]: (s["in"], s["out"], s["reasons"]) for s in funnel["stages"]}
  assert stages == {
      "input": (8, 5, {"empty": 2, "boilerplate_only": 1}),
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
