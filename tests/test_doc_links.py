"""Every relative link of the docs resolves: README.md, docs/*.md, the builders' and capjax/text's READMEs and
ARCHITECTURE.md link to files that exist, and a `#anchor` names a heading of the page it points to (GitHub's
slugs: lowercased, punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats). Links inside code (fenced
blocks, `inline code`) and absolute urls are not checked."""

from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PAGES = ([REPO / "README.md", REPO / "ARCHITECTURE.md", REPO / "capjax" / "text" / "README.md"]
         + sorted(REPO.glob("docs/*.md")) + sorted(REPO.glob("tfds_builders/*/README.md")))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:


def prose(text: str) -> list[tuple[int, str]]:
  """(line number, line) outside fenced code blocks, with inline code spans blanked."""
  found, fence = [], None
  for number, line in enumerate(text.splitlines(), 1):
    marker = re.match(r"\s*(```+|~~~+)", line)
    if marker:
      if fence is None:
        fence = marker.group(1)[0] * 3
      elif marker.group(1).startswith(fence):
        fence = None
      continue
    if fence is None:
      found.append((number, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: " " * len(m.group(0)), line)))
  return found


def slug(heading: str) -> str:
  """GitHub's anchor for a heading's text."""
  text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
  text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
  return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
  found: set[str] = set()
  seen: dict[str, int] = {}
  for _, line in prose(page.read_text(encoding="utf-8")):
    heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
    if heading:
      base = slug(heading.group(1))
      found.add(f"{base}-{seen[base]}" if base in seen else base)
      seen[base] = seen.get(base, 0) + 1
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
  return found


def links(text: str) -> list[tuple[int, str]]:
  """(line number, target) of the relative links of a page's text."""
  return [(number, match.group(1)) for number, line in prose(text)
          for match in LINK.finditer(line) if not EXTERNAL.match(match.group(1))]


def test_the_parsers():
  assert slug("Beam ÷ plain, per core") == "beam--plain-per-core"
  assert slug("The blind human study (the paper's Table 4)") == "the-blind-human-study-the-papers-table-4"
  assert slug("Stylized captioning metrics") == "stylized-captioning-metrics"
  assert slug("`capjax.data.show` and [its page](x.md)") == "capjaxdatashow-and-its-page"
  text = "[a](x.md) `[b](y.md)`\n```sh\n[c](z.md)\n```\n![d](p.png \"title\") [e](https://example.com)\n"
  assert links(text) == [(1, "x.md"), (5, "p.png")]
  assert sum(len(links(page.read_text(encoding="utf-8"))) for page in PAGES) >= 40  # it still finds the docs' links


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_relative_links_resolve(page):
  broken = []
  for number, target in links(page.read_text(encoding="utf-8")):
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    where = f"{page.relative_to(REPO)}:{number}: {target}"
    if not resolved.exists():
      broken.append(f"{where} (no such file)")
    elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
      broken.append(f"{where} (no heading #{anchor} in {resolved.relative_to(REPO)})")
  assert not broken, "links that do not resolve:\n" + "\n".join(broken)
