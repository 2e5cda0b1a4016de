"""The text pipeline end to end: alt-text -> boilerplate -> filters -> hypernymization -> concept pruning.

usage: python -m capjax.text.pipeline --input=IN.tsv --output=OUT.jsonl [--min_concept_count=100]
           [--vocabulary=WORDS.txt] [--entities=KG.tsv] [--no_seed_entities]
Writes one JSON line per input row and the per-stage funnel beside it (OUT.funnel.json), and prints the funnel.

IN.tsv: rows `id<TAB>alt_text`, no header, UTF-8 (a byte-order mark is dropped), lines ending in "\\n", "\\r\\n"
or "\\r". A row that cannot be a candidate is still one output line, rejected at the input stage with its line
number in "detail": `invalid_utf8` (bad bytes are never replaced by U+FFFD: the alt_text shows them as
\\xNN escapes), `no_tab` (a blank line too), `empty_id`, and `extra_columns` for more than one tab: a tab inside
an alt-text cannot be told from a third column, and either guess (join, or drop the rest) would corrupt
captions without a word, so the row is counted, not guessed at. An alt-text with control characters (terminal
escape sequences such as "\\x1b[31m", other C0 and C1 controls but tab) is rejected as `control_characters`, its
detail naming the first ("U+001B at character 7"): see `capjax.text.filters.control_characters`.
OUT.jsonl appears only when the run is done (it is written under a temporary name, then renamed).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from absl import flags

from capjax import cli, files
from capjax.text import concepts as concepts_lib
from capjax.text import lines as lines_lib
from capjax.text.annotate import Annotation, Annotator, normalize_text
from capjax.text.boilerplate import strip_boilerplate
from capjax.text.config import FilterConfig, HypernymConfig, PipelineConfig
from capjax.text.filters import (STAGES, FilterChain, Reason, control_characters, first_control_character, raw_text,
                                 text_filters)
from capjax.text.hypernymize import Hypernymizer
from capjax.text.resolvers import EntityResolver


@dataclasses.dataclass(frozen=True)
class Record:
  """One output line: the alt-text, whether it is kept, why not, and the caption with its concepts."""

  id: str
  alt_text: str
  kept: bool
  reason: str | None
  caption: str | None
  concepts: tuple[str, ...]
  detail: str | None = None  # what the reason is about: the unresolved name, the input line of an input-row reason

  def to_json(self) -> str:
    row = {"id": self.id, "alt_text": self.alt_text, "kept": self.kept, "reason": self.reason,
           "caption": self.caption, "concepts": list(self.concepts)}
    if self.detail is not None:
      row["detail"] = self.detail
    line = json.dumps(row, ensure_ascii=False)
    try:
      line.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be written as UTF-8: escape everything instead
      line = json.dumps(row)
    return line

  @classmethod
  def from_json(cls, line: str) -> Record:
    d = json.loads(line)
    return cls(d["id"], d["alt_text"], d["kept"], d["reason"], d["caption"], tuple(d["concepts"]), d.get("detail"))


@dataclasses.dataclass
class Funnel:
  """Counts of candidates dropped per reason; `summary()` turns them into per-stage in/out counts."""

  total: int = 0
  reasons: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

  def add(self, reason: str | None) -> None:
    self.total += 1
    if reason is not None:
      self.reasons[reason] += 1

  def drop_later(self, reason: str) -> None:
    """A candidate counted as kept is dropped by a later (dataset-level) stage."""
    self.reasons[reason] += 1

  def summary(self) -> dict[str, Any]:
    remaining = self.total
    stages = []
    for stage, stage_reasons in STAGES.items():
      counts = {str(r): self.reasons[r] for r in stage_reasons if self.reasons.get(r)}
      dropped = sum(counts.values())
      stages.append({"stage": stage, "in": remaining, "dropped": dropped, "out": remaining - dropped,
                     "reasons": counts})
      remaining -= dropped
    return {"input": self.total, "kept": remaining, "stages": stages}


class TextPipeline:
  """Filters and hypernymization for one candidate at a time; holds the loaded resources and caches."""

  def __init__(
      self, config: PipelineConfig = PipelineConfig(), annotator: Annotator | None = None,
      resolver: EntityResolver | None = None,
  ):
    self.config = config
    self.annotator = annotator or Annotator()
    self.chain = FilterChain(text_filters(config.filters, self.annotator.lemma))
    self.hypernymizer = Hypernymizer(config.hypernyms, self.annotator, resolver)
    self.funnel = Funnel()

  def process(self, id_: str, alt_text: str) -> Record:
    """One candidate through every per-example stage (concept pruning needs the whole dataset)."""
    record = self._process(id_, alt_text)
    self.funnel.add(record.reason)
    return record

  def _process(self, id_: str, alt_text: str) -> Record:
    dropped, annotation = self.filter(id_, alt_text)
    return dropped if dropped is not None else self.hypernymize(id_, alt_text, annotation)

  def filter(self, id_: str, alt_text: str) -> tuple[Record | None, Annotation | None]:
    """The text filters alone: a dropped Record, or None and the annotated, boilerplate-stripped text.
    (Split from hypernymization so the alt-text builder can run the image-text filter between the two.)"""
    def drop(reason: Reason) -> tuple[Record, None]:
      return Record(id_, alt_text, False, str(reason), None, (), None), None

    reason = raw_text(alt_text, self.config.filters.max_chars)
    if reason is not None:
      return drop(reason)
    if control_characters(alt_text) is not None:  # before normalizing, which would turn them into spaces
      return Record(id_, alt_text, False, str(Reason.CONTROL_CHARACTERS), None, (),
                    first_control_character(alt_text)), None
    text = normalize_text(alt_text)
    if not text:
      return drop(Reason.EMPTY)
    stripped = strip_boilerplate(text)
    if not stripped:
      return drop(Reason.BOILERPLATE_ONLY)
    annotation = self.annotator.annotate(stripped)
    reason = self.chain(annotation)
    if reason is not None:
      return drop(reason)
    return None, annotation

  def hypernymize(self, id_: str, alt_text: str, annotation: Annotation) -> Record:
    """Hypernymization of text the filters passed: the caption and its concepts, or a dropped Record."""
    result = self.hypernymizer(annotation)
    if result.reason is not None:
      return Record(id_, alt_text, False, str(result.reason), None, tuple(result.concepts), result.unresolved)
    return Record(id_, alt_text, True, None, result.caption, result.concepts)


def prune_records(records: Iterable[Record], counts: dict[str, int], min_count: int,
                  funnel: Funnel) -> Iterator[Record]:
  """Drops kept records whose concepts are rare in `counts`; others pass unchanged."""
  for record in records:
    if record.kept:
      reason = concepts_lib.prune(record.concepts, counts, min_count)
      if reason is not None:
        funnel.drop_later(str(reason))
        record = dataclasses.replace(record, kept=False, reason=str(reason), caption=None)
    yield record


@dataclasses.dataclass(frozen=True)
class Row:
  """One input line: a candidate (`reason` None), or why the line is not one and where (`detail`)."""

  id: str
  alt_text: str
  reason: Reason | None = None
  detail: str | None = None


def parse_row(line: bytes, number: int) -> Row:
  """Line `number` (from 1) of the input, without its line ending: `id<TAB>alt_text`, decoded on its own."""
  try:
    text = line.decode("utf-8")
  except UnicodeDecodeError as error:
    id_, _, alt_text = line.decode("utf-8", errors="backslashreplace").partition("\t")
    return Row(id_, alt_text, Reason.INVALID_UTF8, f"line {number}: {lines_lib.undecodable(line, error)} is not UTF-8")
  fields = text.split("\t")
  if len(fields) == 1:
    return Row(text, "", Reason.NO_TAB, f"line {number}" + ("" if text.strip() else ": blank"))
  id_, alt_text = fields[0], "\t".join(fields[1:])
  if not id_.strip():
    return Row(id_, alt_text, Reason.EMPTY_ID, f"line {number}")
  if len(fields) > 2:
    return Row(id_, alt_text, Reason.EXTRA_COLUMNS, f"line {number}: {len(fields)} columns")
  return Row(id_, alt_text)


def read_tsv(path: str | os.PathLike) -> Iterator[Row]:
  """Every line of the input as a `Row` (see the module docstring for what is rejected and why)."""
  for number, line in enumerate(lines_lib.read_lines(path), 1):
    yield parse_row(line, number)


def funnel_path(output: str) -> pathlib.Path:
  """OUT.jsonl -> OUT.funnel.json, beside the output."""
  path = pathlib.Path(output)
  return path.with_name(path.name.removesuffix(".jsonl") + ".funnel.json")


def run(input_path: str, output_path: str, config: PipelineConfig, log_every: int = 10_000,
        pipeline: TextPipeline | None = None) -> dict[str, Any]:
  """Two passes: per-example stages into a temporary file with concept counts, then concept pruning into a
  second one, renamed to `output_path` (after the funnel) only when everything is written (`capjax.files`). An
  interrupted run removes its `*.partial` files (a killed one leaves them) and never leaves a short output that
  looks complete; a full disk is one `error:` line. (An output that is a symbolic link is written through: its
  target is replaced.)"""
  funnel = funnel_path(output_path)
  with files.scratch(output_path) as first_pass:
    with open(first_pass, "x", encoding="utf-8") as out:  # before loading anything: an unwritable place fails now
      pipeline = pipeline or TextPipeline(config)
      counter = concepts_lib.ConceptCounts()
      accumulator = counter.create_accumulator()
      start = time.time()
      for n, row in enumerate(read_tsv(input_path), 1):
        if row.reason is None:
          record = pipeline.process(row.id, row.alt_text)
        else:
          record = Record(row.id, row.alt_text, False, str(row.reason), None, (), row.detail)
          pipeline.funnel.add(record.reason)
        if record.kept:
          accumulator = counter.add_input(accumulator, record.concepts)
        out.write(record.to_json() + "\n")
        if log_every and n % log_every == 0:
          print(f"{n} candidates, {n / (time.time() - start):.0f}/s", file=sys.stderr)
    counts = counter.extract_output(accumulator)
    with open(first_pass, encoding="utf-8") as f, files.writing(output_path) as out:
      records = (Record.from_json(line) for line in f)
      for record in prune_records(records, counts, config.min_concept_count, pipeline.funnel):
        out.write(record.to_json() + "\n")
      summary = pipeline.funnel.summary()
      summary["concepts"] = {"distinct": len(counts),
                             "rare": len(concepts_lib.rare_concepts(counts, config.min_concept_count)),
                             "min_concept_count": config.min_concept_count}
      summary["seconds"] = round(time.time() - start, 2)
      with files.writing(funnel, flag="--output's funnel") as out_funnel:  # renamed first: the output last
        out_funnel.write(json.dumps(summary, indent=2) + "\n")
  return summary


FLAGS = flags.FlagValues()
_INPUT = flags.DEFINE_string("input", None, "TSV of id<TAB>alt_text, no header", flag_values=FLAGS, required=True)
_OUTPUT = flags.DEFINE_string("output", None, "JSONL, one line per input row", flag_values=FLAGS, required=True)
_MIN_CONCEPT_COUNT = flags.DEFINE_integer(
    "min_concept_count", PipelineConfig.min_concept_count,
    "drop pairs with a concept seen this many times or fewer", lower_bound=0, flag_values=FLAGS)
_VOCABULARY = flags.DEFINE_string("vocabulary", None, "vocabulary file (one word a line, or word<TAB>count)",
                                  flag_values=FLAGS)
_ENTITIES = flags.DEFINE_string("entities", None, "extra entity<TAB>hypernym table, checked first", flag_values=FLAGS)
_NO_SEED_ENTITIES = flags.DEFINE_boolean("no_seed_entities", False, "do not use the shipped seed table",
                                         flag_values=FLAGS)


def check_paths(input_path: str, output_path: str, *tables: str | None) -> None:
  """Refuses, before any work, paths the run would fail on or that would destroy the input."""
  files.text_input(input_path, "--input", "an id<TAB>alt_text TSV")  # before the pipeline loads (seconds)
  files.output_file(output_path, inputs={"--input": input_path}, example="out.jsonl")
  funnel = str(funnel_path(output_path))
  if files.same_file(funnel, input_path):
    cli.fail(f"--output={output_path} would overwrite --input={input_path} (its funnel, {funnel}) — write the "
             "output to another file")
  files.output_file(funnel, "--output's funnel", example="out.funnel.json")
  for flag, path in zip(("--vocabulary", "--entities"), tables):
    if path is None:
      continue
    if not os.path.isfile(path):
      cli.fail(f"{flag}={path} is not a file — give the path of the table, or leave the flag out")
    entries = 0
    for number, line in enumerate(lines_lib.read_lines(path), 1):  # small tables: read twice, to name the line
      try:
        text = line.decode("utf-8")
      except UnicodeDecodeError as error:
        cli.fail(f"{flag}={path} line {number}: {lines_lib.undecodable(line, error)} is not UTF-8 — "
                 "save the table as UTF-8")
      if not text.strip() or (flag == "--entities" and text.startswith("#")):  # blank, or a comment line
        continue
      entity, tab, hypernym = text.partition("\t")
      if flag == "--entities" and not (tab and entity.strip() and hypernym.strip()):  # the loader would skip it
        cli.fail(f"{flag}={path} line {number} is not entity<TAB>hypernym — give one entity and its hypernym a "
                 "line, separated by a tab")
      entries += 1
    if not entries:  # an empty vocabulary would reject every caption without a word
      cli.fail(f"{flag}={path} has no entries — give one "
               f"{'word' if flag == '--vocabulary' else 'entity<TAB>hypernym'} a line, or leave the flag out")


def main(argv: Sequence[str]) -> int:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  check_paths(_INPUT.value, _OUTPUT.value, _VOCABULARY.value, _ENTITIES.value)
  config = PipelineConfig(
      filters=FilterConfig(vocabulary_path=_VOCABULARY.value),
      hypernyms=HypernymConfig(entities_path=_ENTITIES.value, use_seed_entities=not _NO_SEED_ENTITIES.value),
      min_concept_count=_MIN_CONCEPT_COUNT.value,
  )
  try:
    summary = run(_INPUT.value, _OUTPUT.value, config)
  except OSError as error:
    cli.fail(f"cannot read or write {error.filename}: {error.strerror} — check the path and its permissions")
  print(json.dumps(summary, indent=2))
  print(f"funnel written to {funnel_path(_OUTPUT.value)}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  cli.run(main)
