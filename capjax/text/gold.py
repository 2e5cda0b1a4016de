"""The gold set (`data/gold.tsv`) and its score: exact captions and keep/reject decisions of the text pipeline.

`python -m capjax.text.gold [--gold=FILE] [--category=NAME] [--nomisses]` prints the scores and lists the misses.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.resources
from collections.abc import Iterable, Sequence

from absl import flags

from capjax import cli, files
from capjax.text import lines as lines_lib

REJECT = "reject:"
COLUMNS = ("id", "source", "category", "alt_text", "expected", "note")


@dataclasses.dataclass(frozen=True)
class GoldRow:
  """One alt-text and what the paper's rules should make of it: a caption, or a rejection reason."""

  id: str
  source: str  # "paper" for the paper's own examples, "capjax" for the ones written for this project
  category: str
  alt_text: str
  caption: str | None  # expected caption in CC3M form; None when the row should be rejected
  reason: str | None  # expected `Reason` value when rejected
  note: str = ""

  @property
  def keep(self) -> bool:
    return self.caption is not None


@dataclasses.dataclass(frozen=True)
class Miss:
  row: GoldRow
  got: str  # the caption, or "reject:<reason>"


@dataclasses.dataclass(frozen=True)
class Score:
  """Exact: same caption (kept rows) or same reason (rejected rows). Decision: same keep/reject."""

  total: int
  exact: int
  decisions: int
  paper_total: int
  paper_exact: int
  by_category: dict[str, tuple[int, int]]  # category -> (exact, total)
  misses: tuple[Miss, ...]
  funnel: dict = dataclasses.field(default_factory=dict)  # `Funnel.summary()` of the rows: per stage in/out

  @property
  def exact_rate(self) -> float:
    return self.exact / self.total if self.total else 0.0

  @property
  def decision_rate(self) -> float:
    return self.decisions / self.total if self.total else 0.0


def parse(lines: Iterable[str]) -> list[GoldRow]:
  """Rows of a gold TSV (header `id source category alt_text expected note`; `#` lines are comments)."""
  rows: list[GoldRow] = []
  header: list[str] | None = None
  for number, line in enumerate(lines, 1):
    line = line.rstrip("\r\n")
    if not line.strip() or line.startswith("#"):
      continue
    cells = line.split("\t")
    if header is None:
      header = cells
      if tuple(header[:5]) != COLUMNS[:5]:
        raise ValueError(f"gold line {number}: header must start with {' '.join(COLUMNS[:5])}, got {line!r}")
      continue
    if len(cells) < 5:
      raise ValueError(f"gold line {number}: expected at least 5 tab-separated cells, got {len(cells)}")
    id_, source, category, alt_text, expected = cells[:5]
    note = cells[5] if len(cells) > 5 else ""
    if expected.startswith(REJECT):
      rows.append(GoldRow(id_, source, category, alt_text, None, expected.removeprefix(REJECT), note))
    else:
      rows.append(GoldRow(id_, source, category, alt_text, expected, None, note))
  return rows


def load(path: str | None = None) -> list[GoldRow]:
  """The gold set at `path`, or the one shipped in `capjax/text/data/gold.tsv`."""
  if path is None:
    text = importlib.resources.files("capjax.text").joinpath("data", "gold.tsv").read_text(encoding="utf-8")
  else:
    text = files.read_text(path, "--gold", "a gold TSV")  # a FIFO, a device, UTF-16: an `error:` line
  return parse(lines_lib.split_lines(text))


def score(rows: Sequence[GoldRow], pipeline=None) -> Score:
  """Runs each alt-text through `pipeline` (a `TextPipeline`; default configuration when None) and compares."""
  from capjax.text.pipeline import Funnel, TextPipeline  # noqa: PLC0415 (the pipeline loads only to score)

  if pipeline is None:
    pipeline = TextPipeline()
  funnel = Funnel()
  exact = decisions = paper_total = paper_exact = 0
  by_category: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  misses: list[Miss] = []
  for row in rows:
    record = pipeline.process(row.id, row.alt_text)
    funnel.add(record.reason)
    hit = record.caption == row.caption if row.keep else (not record.kept and record.reason == row.reason)
    exact += hit
    decisions += record.kept == row.keep
    by_category[row.category][0] += hit
    by_category[row.category][1] += 1
    if row.source == "paper":
      paper_total += 1
      paper_exact += hit
    if not hit:
      misses.append(Miss(row, record.caption if record.kept else REJECT + str(record.reason)))
  return Score(len(rows), exact, decisions, paper_total, paper_exact,
               {c: (e, t) for c, (e, t) in sorted(by_category.items())}, tuple(misses), funnel.summary())


def report(s: Score, show_misses: bool = True) -> str:
  """The scores, per category, then each miss as `id [category] alt-text / want / got`."""
  lines = [
      f"exact:     {s.exact}/{s.total} = {100 * s.exact_rate:.1f}%",
      f"decisions: {s.decisions}/{s.total} = {100 * s.decision_rate:.1f}%",
      f"paper:     {s.paper_exact}/{s.paper_total} exact",
      "by category (exact/total): " + ", ".join(f"{c} {e}/{t}" for c, (e, t) in s.by_category.items()),
  ]
  if s.funnel:
    lines.append("funnel: " + " -> ".join(
        f"{st['stage']} {st['out']}" + (f" ({', '.join(f'{r} {n}' for r, n in st['reasons'].items())})"
                                        if st["reasons"] else "") for st in s.funnel["stages"]))
  if show_misses and s.misses:
    lines.append(f"misses ({len(s.misses)}):")
    for m in s.misses:
      want = m.row.caption if m.row.keep else REJECT + str(m.row.reason)
      lines += [f"  {m.row.id} [{m.row.category}] {m.row.alt_text}", f"    want: {want}", f"    got:  {m.got}"]
  return "\n".join(lines)


FLAGS = flags.FlagValues()
_GOLD = flags.DEFINE_string("gold", None, "gold TSV (default: the shipped capjax/text/data/gold.tsv)",
                            flag_values=FLAGS)
_CATEGORY = flags.DEFINE_string("category", None, "score only the rows of this category", flag_values=FLAGS)
_MISSES = flags.DEFINE_bool("misses", True, "list the rows the pipeline gets wrong", flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  try:
    rows = load(_GOLD.value)
  except (OSError, ValueError) as e:
    cli.fail(f"cannot read the gold set: {e} — pass --gold=FILE with the columns of capjax/text/data/gold.tsv")
  if not rows:  # a score of 0/0 would read as a result
    cli.fail(f"no gold rows in {_GOLD.value} — give a gold TSV with a header and at least one row, as "
             "capjax/text/data/gold.tsv")
  if _CATEGORY.value:
    rows = [r for r in rows if r.category == _CATEGORY.value]
    if not rows:
      cli.fail(f"no gold rows in category {_CATEGORY.value!r} — see the category column of the gold set")
  print(report(score(rows), show_misses=_MISSES.value))


if __name__ == "__main__":
  cli.run(main)
