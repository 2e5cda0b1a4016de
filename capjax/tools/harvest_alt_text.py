"""Harvests alt-text candidates from web pages: every <img> with a non-empty alt in HTML files or WARC response
records, its src resolved against the page url and <base href>, deduplicated on (url, alt), written as a TSV.

`python -m capjax.tools.harvest_alt_text --input=GLOB [--input=GLOB ...] --output=candidates.tsv
    [--max_record_bytes=16777216]`

A page is read as a stream and only up to --max_record_bytes (16 MiB, far above a page's HTML): a WARC
record whose decompressed HTTP body is larger (a small .warc.gz can inflate to gigabytes), or an HTML file that is,
is skipped and counted as `record_too_large`, its rest read through in blocks and dropped, so memory stays bounded
by the cap whatever the input.

The TSV's header is `url<TAB>caption<TAB>page_url`, what img2dataset reads with
`--input_format=tsv --url_col=url --caption_col=caption --save_additional_columns='["page_url"]'`.
"""

from __future__ import annotations

import collections
import glob
import hashlib
import json
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

from absl import flags
from selectolax.lexbor import LexborHTMLParser

from capjax import cli, files

HEADER = ("url", "caption", "page_url")
HTML_SUFFIXES = (".html", ".htm")
WARC_SUFFIXES = (".warc", ".warc.gz")
# Longer alt-texts are keyword dumps or pasted articles; the text stage would drop them at 1,000 characters anyway.
MAX_ALT_CHARS = 10_000
# The largest page body read, decompressed: hundreds of times a typical page's HTML (tens of KB).
MAX_RECORD_BYTES = 16 << 20
_WHITESPACE = re.compile(r"\s+")
# Characters that would break a TSV row or that the URL parser removes (WHATWG: tab and newlines).
_URL_STRIP = re.compile(r"[\t\r\n]")
_CHARSET = re.compile(rb"charset=[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)

# Counts the harvest prints, in this order.
COUNT_KEYS = ("files", "pages", "records_skipped", "truncated_records", "record_too_large", "invalid_utf8_pages",
              "images", "no_alt", "no_src", "data_uri", "not_http", "alt_too_long", "duplicates", "candidates")


class HarvestError(ValueError):
  """Input the harvest cannot start on (no file matches, unknown file type, unwritable output)."""


def clean_alt(alt: str) -> str:
  """The alt text on one line: whitespace runs (tabs and newlines too) become one space."""
  return _WHITESPACE.sub(" ", alt).strip()


def decode_page(body: bytes, content_type: bytes = b"") -> tuple[str, bool]:
  """(text, was_valid): the declared charset (HTTP header, then <meta> in the first 2 KB), else UTF-8; bytes that
  do not decode become U+FFFD rather than failing the page."""
  match = _CHARSET.search(content_type) or _CHARSET.search(body[:2048])
  encoding = match.group(1).decode("ascii").lower() if match else "utf-8"
  try:
    "".encode(encoding)
  except LookupError:
    encoding = "utf-8"
  try:
    return body.decode(encoding), True
  except UnicodeDecodeError:
    return body.decode(encoding, errors="replace"), False


def page_candidates(html: str, page_url: str, counts: collections.Counter,
                    max_alt_chars: int = MAX_ALT_CHARS) -> Iterator[tuple[str, str]]:
  """(image url, alt) of every <img> with a non-empty alt in one page, in document order."""
  tree = LexborHTMLParser(html)
  base = page_url
  # The document's base url is the first <base> with an href (HTML spec), wherever the <img> stands.
  for node in tree.css("base[href]"):
    href = _URL_STRIP.sub("", node.attributes.get("href") or "").strip()
    if href:
      base = urllib.parse.urljoin(page_url, href)
      break
  for node in tree.css("img"):
    counts["images"] += 1
    attributes = node.attributes
    alt = clean_alt(attributes.get("alt") or "")
    if not alt:
      counts["no_alt"] += 1
      continue
    src = _URL_STRIP.sub("", attributes.get("src") or "").strip()
    if not src:
      counts["no_src"] += 1
      continue
    if src[:5].lower() == "data:":
      counts["data_uri"] += 1
      continue
    url = urllib.parse.urljoin(base, src)
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
      counts["not_http"] += 1  # javascript:, blob:, or a relative src in a saved page with no web address
      continue
    if len(alt) > max_alt_chars:
      counts["alt_too_long"] += 1
      continue
    yield url, alt


def html_file_pages(path: str, counts: collections.Counter,
                    max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[tuple[str, bytes, bytes]]:
  """(page url, body, content type) of one saved page; its url is a <link rel=canonical> if it names one (saved
  pages often do), else the file's own file:// url. A file over `max_record_bytes` is counted, not read."""
  with files.open_input(path, "--input", "an .html/.htm or .warc/.warc.gz file") as f:
    body = f.read(max_record_bytes + 1)
  if len(body) > max_record_bytes:
    counts["record_too_large"] += 1
    return
  match = re.search(rb"<link[^>]+rel=[\"']?canonical[\"']?[^>]*>", body[:65536], re.IGNORECASE)
  href = re.search(rb"href=[\"']?([^\"' >]+)", match.group(0), re.IGNORECASE) if match else None
  url = href.group(1).decode("utf-8", "replace") if href else file_uri(path)
  yield url, body, b""


def file_uri(path: str) -> str:
  return "file://" + urllib.parse.quote(os.path.abspath(path))


def warc_pages(stream: BinaryIO, counts: collections.Counter,
               max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[tuple[str, bytes, bytes]]:
  """(target url, body, content type) of every HTML response record; other records are counted and skipped. A
  truncated or corrupt record ends the file (a WARC cannot be resynchronized), counted as truncated_records. A
  body that decompresses (WARC gzip member, then HTTP Content-Encoding) to more than `max_record_bytes` is counted
  as record_too_large: at most that much plus one is read from it, and warcio reads the rest through in blocks."""
  from warcio.archiveiterator import ArchiveIterator  # noqa: PLC0415
  from warcio.exceptions import ArchiveLoadFailed  # noqa: PLC0415
  import zlib  # noqa: PLC0415
  records = iter(ArchiveIterator(stream))
  while True:
    try:
      record = next(records)
      if record.rec_type != "response" or record.http_headers is None:
        counts["records_skipped"] += 1
        continue
      content_type = (record.http_headers.get_header("Content-Type") or "").encode("latin-1", "replace")
      if b"html" not in content_type.lower():
        counts["records_skipped"] += 1
        continue
      url = record.rec_headers.get_header("WARC-Target-URI") or ""
      body = record.content_stream().read(max_record_bytes + 1)
    except StopIteration:
      return
    except (ArchiveLoadFailed, EOFError, OSError, ValueError, zlib.error):
      counts["truncated_records"] += 1
      return
    if len(body) > max_record_bytes:
      counts["record_too_large"] += 1
      continue
    # warcio reads a cut-off block silently: its LimitReader still expects bytes the file no longer has.
    if getattr(record.raw_stream, "limit", 0) > 0:
      counts["truncated_records"] += 1
      continue  # half a page: its <img> list is incomplete and its last tag may be cut
    yield url, body, content_type


def expand_inputs(patterns: Iterable[str]) -> list[str]:
  """The files the globs match, sorted, each an HTML or WARC file; raises HarvestError otherwise."""
  paths: list[str] = []
  for pattern in patterns:
    found = sorted(p for p in glob.glob(pattern, recursive=True) if not os.path.isdir(p))
    for path in found:  # a FIFO or a device would hang the read: refused, naming it
      files.input_file(path, "--input", "an .html/.htm or .warc/.warc.gz file")
    if not found:
      raise HarvestError(f"--input={pattern} matches no file — give a glob of .html/.htm or .warc/.warc.gz files")
    paths.extend(found)
  for path in paths:
    if not path.lower().endswith(HTML_SUFFIXES + WARC_SUFFIXES):
      raise HarvestError(f"{path} is neither HTML (.html/.htm) nor WARC (.warc/.warc.gz) — narrow the --input glob")
  return list(dict.fromkeys(paths))


def file_pages(path: str, counts: collections.Counter,
               max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[tuple[str, bytes, bytes]]:
  if path.lower().endswith(HTML_SUFFIXES):
    yield from html_file_pages(path, counts, max_record_bytes)
    return
  with files.open_input(path, "--input") as f:
    yield from warc_pages(f, counts, max_record_bytes)


def harvest(paths: Iterable[str], counts: collections.Counter, max_alt_chars: int = MAX_ALT_CHARS,
            max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[tuple[str, str, str]]:
  """(url, caption, page url) rows, each (url, alt) pair once. The pairs seen are held as 8-byte hashes (about
  60 bytes a pair in a Python set): shard the inputs for crawls beyond a few hundred million pairs."""
  seen: set[bytes] = set()
  for path in paths:
    counts["files"] += 1
    for page_url, body, content_type in file_pages(path, counts, max_record_bytes):
      counts["pages"] += 1
      text, valid = decode_page(body, content_type)
      counts["invalid_utf8_pages"] += not valid
      page_url = _URL_STRIP.sub("", page_url)
      for url, alt in page_candidates(text, page_url, counts, max_alt_chars):
        digest = hashlib.blake2b(f"{url}\t{alt}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
        if digest in seen:
          counts["duplicates"] += 1
          continue
        seen.add(digest)
        counts["candidates"] += 1
        yield url, alt, page_url


def write_tsv(rows: Iterable[tuple[str, str, str]], output: str) -> None:
  """Writes a temporary file renamed to `output` when complete (`capjax.files.writing`): an interrupted harvest
  leaves no TSV that looks whole to img2dataset, and a failed one (an input it cannot read, a full disk) removes
  it (a killed one leaves it)."""
  with files.writing(output, errors="replace", newline="\n") as f:
    f.write("\t".join(HEADER) + "\n")
    for row in rows:
      f.write("\t".join(row) + "\n")


FLAGS = flags.FlagValues()
_INPUT = flags.DEFINE_multi_string("input", None, "glob of .html/.htm or .warc/.warc.gz files; repeatable",
                                   flag_values=FLAGS, required=True)
_OUTPUT = flags.DEFINE_string("output", None, "the candidates TSV to write (url, caption, page_url)",
                              flag_values=FLAGS, required=True)
_MAX_ALT_CHARS = flags.DEFINE_integer("max_alt_chars", MAX_ALT_CHARS, "longer alt-texts are counted and skipped",
                                      lower_bound=1, flag_values=FLAGS)
_MAX_RECORD_BYTES = flags.DEFINE_integer("max_record_bytes", MAX_RECORD_BYTES, "a page body (a WARC record's, "
                                         "decompressed, or an HTML file) over this many bytes is counted as "
                                         "record_too_large and skipped", lower_bound=1, flag_values=FLAGS)


def run(patterns: list[str], output: str, max_alt_chars: int = MAX_ALT_CHARS,
        max_record_bytes: int = MAX_RECORD_BYTES) -> dict[str, int]:
  """Harvests into `output`; returns the counts. Raises HarvestError on input it cannot start on."""
  paths = expand_inputs(patterns)
  files.output_file(output, inputs={"--input": paths}, example="candidates.tsv")
  counts: collections.Counter = collections.Counter()
  write_tsv(harvest(paths, counts, max_alt_chars, max_record_bytes), output)
  return {k: counts[k] for k in COUNT_KEYS}


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  start = time.time()
  try:
    counts = run(_INPUT.value, _OUTPUT.value, _MAX_ALT_CHARS.value, _MAX_RECORD_BYTES.value)
  except HarvestError as e:
    cli.fail(str(e))
  except OSError as e:
    cli.fail(f"cannot read or write {e.filename} ({e.strerror}) — check the path and its permissions")
  print(json.dumps(counts), file=sys.stderr)
  print(f"{counts['candidates']:,} candidates from {counts['pages']:,} pages in {time.time() - start:.1f} s "
        f"→ {_OUTPUT.value}", file=sys.stderr)


if __name__ == "__main__":
  cli.run(main)
