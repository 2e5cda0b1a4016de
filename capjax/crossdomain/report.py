"""The matrix as the paper lays it out: rows model × training data, one column group per test set, the paper's
figures beside ours where it has them; written as Markdown, JSON and an HTML page.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

from capjax import files
from capjax.crossdomain.matrix import COLUMNS

NAMES = dict(COLUMNS)


def _figure(value: float | None) -> str:
  return "–" if value is None else f"{value:.3f}"


def cell_text(cell: dict[str, Any], metric: str) -> str:
  """Our figure, and the paper's beside it where it has one: `0.412 (paper 1.032)`."""
  ours = _figure(cell["metrics"].get(metric))
  theirs = cell["paper"].get(metric)
  return ours if theirs is None else f"{ours} (paper {theirs:.3f})"


def row_name(row: dict[str, Any]) -> str:
  if row["kind"] == "constant_caption":
    return f"constant caption “{row['caption']}”"
  return row["model"]


def _images(n: int) -> str:
  return f"{n:,} image" + ("" if n == 1 else "s")


def notes(matrix: dict[str, Any]) -> list[str]:
  """What the reader must know to read the figures: where the paper's come from, what each test set is, what the
  constant caption is, what was not computed."""
  lines = [f"CIDEr is CIDEr-D (what pycocoevalcap and the paper call CIDEr); every CIDEr, ROUGE-L, METEOR and SPICE of "
           f"ours equals `python -m capjax.metrics REFERENCES PREDICTIONS` on the files listed in matrix.json. Figures "
           f"marked “paper” are the published ones of {matrix['paper']}, copied from its tables, never computed here."]
  for t in matrix["test_sets"]:
    table = t["paper_table"]
    if t["dataset"].startswith("cc3m") and t["split"] == "validation":
      lines.append(f"{t['spec']}: Conceptual Captions' test split is not public, so this column scores its "
                   f"validation split ({_images(t['examples'])}).")
    if table:
      lines.append(f"{t['spec']} ({_images(t['examples'])}): the paper's figures are its Table {table['table']}, "
                   f"{table['test_set']}: {table['differs']}.")
    else:
      lines.append(f"{t['spec']} ({_images(t['examples'])}): the paper has no figures for this test set.")
  lines.append("Constant caption: every image of a test set gets one caption, the most frequent reference caption of "
               "the training split named in its row (all references counted; ties alphabetical): what a model that "
               "ignores the image could say.")
  lines.append("CHAIR-i / CHAIR-s (capjax's grounded hallucination rates: hallucinated object mentions, captions with "
               "one) are shown only for test sets whose records carry their objects (the synthetic scenes).")
  lines.append(f"SPICE: {matrix['spice']}.")
  return lines


def markdown(matrix: dict[str, Any]) -> str:
  """A GitHub Markdown table: the column group is each column's `test set · metric` heading."""
  heads = ["model", "training data"]
  keys = []
  for t in matrix["test_sets"]:
    for metric in matrix["columns"][t["spec"]]:
      heads.append(f"{t['spec']} · {NAMES[metric]}")
      keys.append((t["spec"], metric))
  lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * 2 + "---:|" * len(keys)]
  for row in matrix["rows"]:
    values = [row_name(row), row["training"]] + [cell_text(row["cells"][spec], metric) for spec, metric in keys]
    lines.append("| " + " | ".join(v.replace("|", "\\|") for v in values) + " |")
  return "\n".join(["# Cross-domain matrix", "", *lines, "", *(f"- {n}" for n in notes(matrix)), ""])


def html_page(matrix: dict[str, Any]) -> str:
  """One self-contained page: the test sets as column groups over their metrics, the paper's figures in grey."""
  e = html.escape
  groups = "".join(f'<th colspan="{len(matrix["columns"][t["spec"]])}">{e(t["spec"])}</th>'
                   for t in matrix["test_sets"])
  metrics = "".join(f"<th>{e(NAMES[m])}</th>" for t in matrix["test_sets"] for m in matrix["columns"][t["spec"]])
  body = []
  for row in matrix["rows"]:
    cells = []
    for t in matrix["test_sets"]:
      cell = row["cells"][t["spec"]]
      for m in matrix["columns"][t["spec"]]:
        theirs = cell["paper"].get(m)
        extra = f'<br><span class="paper">paper {theirs:.3f}</span>' if theirs is not None else ""
        cells.append(f"<td>{_figure(cell['metrics'].get(m))}{extra}</td>")
    cls = ' class="baseline"' if row["kind"] == "constant_caption" else ""
    body.append(f"<tr{cls}><th>{e(row_name(row))}</th><td>{e(row['training'])}</td>{''.join(cells)}</tr>")
  note_items = "".join(f"<li>{e(n)}</li>" for n in notes(matrix))
  return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Cross-domain matrix</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }} tbody th {{ text-align: left; }}
.paper {{ color: #888; font-size: 85%; }} tr.baseline {{ background: #f4f4f4; }}
</style></head><body>
<h1>Cross-domain matrix</h1>
<table>
<thead><tr><th rowspan="2">model</th><th rowspan="2">training data</th>{groups}</tr><tr>{metrics}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table>
<ul>{note_items}</ul>
</body></html>
"""


def write(matrix: dict[str, Any], output: str) -> dict[str, str]:
  """matrix.md, matrix.json and matrix.html in `output`; returns {kind: path}."""
  paths = {"markdown": os.path.join(output, "matrix.md"), "json": os.path.join(output, "matrix.json"),
           "html": os.path.join(output, "matrix.html")}
  texts = {"markdown": markdown(matrix), "json": json.dumps({**matrix, "notes": notes(matrix)}, indent=1),
           "html": html_page(matrix)}
  for kind, path in paths.items():
    with files.writing(path, flag="--output") as f:
      f.write(texts[kind])
  return paths
