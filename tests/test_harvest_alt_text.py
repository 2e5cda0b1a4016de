"""Tests of the alt-text harvester: HTML and WARC input, url resolution, dedupe, and hostile input."""

from __future__ import annotations

import collections
import gzip
import io
import json
import os
import subprocess
import sys

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from capjax.tools import harvest_alt_text as harvest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAGE = b"""<!doctype html><html><head><title>t</title></head><body>
<p>A page <img src="/img/dog.jpg" alt="A dog runs on the beach."></p>
<img src="cat.jpg" alt="  A cat\tsleeps
 on a sofa. ">
<img src="https://cdn.example.org/x.jpg" alt="">
<img src="nothing.jpg">
<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline image">
<img src="javascript:void(0)" alt="script">
<img alt="no source">
<img src="/img/dog.jpg" alt="A dog runs on the beach.">
<IMG SRC="../up.jpg" ALT="Upper &amp; case tags">
</body></html>"""


def write_warc(path, records, gzip_=False):
  with open(path, "wb") as f:
    writer = WARCWriter(f, gzip=gzip_)
    for url, body, content_type, kind in records:
      if kind == "response":
        headers = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
        record = writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers)
      else:
        record = writer.create_warc_record(url, kind, payload=io.BytesIO(body))
      writer.write_record(record)


def read_rows(path):
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n")
  assert lines[0] == "url\tcaption\tpage_url" and lines[-1] == ""
  return [tuple(line.split("\t")) for line in lines[1:-1]]


def test_page_resolution_and_skips():
  counts = collections.Counter()
  rows = list(harvest.page_candidates(PAGE.decode(), "https://example.com/a/page.html", counts))
  assert rows == [
      ("https://example.com/img/dog.jpg", "A dog runs on the beach."),
      ("https://example.com/a/cat.jpg", "A cat sleeps on a sofa."),
      ("https://example.com/img/dog.jpg", "A dog runs on the beach."),  # dedupe happens across pages in harvest()
      ("https://example.com/up.jpg", "Upper & case tags"),
  ]
  assert counts == {"images": 9, "no_alt": 2, "data_uri": 1, "not_http": 1, "no_src": 1}


def test_base_href_applies_to_every_img_and_resolves_against_page():
  html = '<img src="a.jpg" alt="first one here"><head><base href="/static/v2/"></head><img src="b.jpg" alt="b b b">'
  rows = list(harvest.page_candidates(html, "http://site.org/x/y.html", collections.Counter()))
  assert rows == [("http://site.org/static/v2/a.jpg", "first one here"), ("http://site.org/static/v2/b.jpg", "b b b")]


def test_warc_html_and_dedupe(tmp_path):
  other = (b'<html><img src="http://other.net/p.jpg" alt="A red car.">'
           b'<img src="/img/dog.jpg" alt="A dog runs on the beach."></html>')
  write_warc(tmp_path / "crawl.warc.gz", [
      ("https://example.com/a/page.html", PAGE, "text/html; charset=utf-8", "response"),
      ("https://example.com/robots.txt", b"User-agent: *", "text/plain", "response"),
      ("https://example.com/a/page.html", b"GET / HTTP/1.1\r\n\r\n", "", "request"),
      ("https://example.com/b.html", other, "text/html", "response"),
  ], gzip_=True)
  (tmp_path / "saved.html").write_bytes(
      b'<html><head><link rel="canonical" href="https://saved.example/page"></head>'
      b'<img src="pic.jpg" alt="A saved picture.">'
      b'<img src="https://example.com/img/dog.jpg" alt="A dog runs on the beach."></html>')
  out = tmp_path / "candidates.tsv"
  counts = harvest.run([str(tmp_path / "*.warc.gz"), str(tmp_path / "*.html")], str(out))
  assert read_rows(out) == [
      ("https://example.com/img/dog.jpg", "A dog runs on the beach.", "https://example.com/a/page.html"),
      ("https://example.com/a/cat.jpg", "A cat sleeps on a sofa.", "https://example.com/a/page.html"),
      ("https://example.com/up.jpg", "Upper & case tags", "https://example.com/a/page.html"),
      ("http://other.net/p.jpg", "A red car.", "https://example.com/b.html"),
      ("https://saved.example/pic.jpg", "A saved picture.", "https://saved.example/page"),
  ]
  assert counts["files"] == 2 and counts["pages"] == 3 and counts["records_skipped"] == 2
  assert counts["duplicates"] == 3 and counts["candidates"] == 5


def test_bad_input_is_counted(tmp_path):
  huge = b'<img src="/big.jpg" alt="' + b"word " * 20_000 + b'">'  # 100k characters of alt-text
  invalid = b'<html><img src="/u.jpg" alt="caf\xe9 \xff\xfe on the terrace"></html>'  # not UTF-8, no charset
  no_img = b"<html><body><p>No pictures here at all.</p></body></html>"
  good = b'<html><img src="/ok.jpg" alt="An intact record."></html>'
  cut = b'<html><img src="/cut.jpg" alt="A cut record.">' + os.urandom(4000).hex().encode() + b"</html>"
  warc = tmp_path / "bad.warc"
  write_warc(warc, [(f"http://h.org/{i}", body, "text/html", "response")
                    for i, body in enumerate([huge, invalid, no_img, good, cut])])
  data = warc.read_bytes()
  warc.write_bytes(data[:len(data) - 3000])  # the last record loses its end
  (tmp_path / "empty.htm").write_bytes(b"")
  out = tmp_path / "c.tsv"
  counts = harvest.run([str(warc), str(tmp_path / "empty.htm")], str(out))
  assert read_rows(out) == [
      ("http://h.org/u.jpg", "caf\ufffd \ufffd\ufffd on the terrace", "http://h.org/1"),
      ("http://h.org/ok.jpg", "An intact record.", "http://h.org/3"),
  ]
  assert counts["alt_too_long"] == 1 and counts["invalid_utf8_pages"] == 1 and counts["truncated_records"] == 1
  assert counts["pages"] == 5 and counts["images"] == 3 and counts["candidates"] == 2


def test_declared_charset_is_used():
  text, valid = harvest.decode_page('<meta charset="windows-1252"><img alt="caf\xe9">'.encode("cp1252"))
  assert valid and "café" in text
  text, valid = harvest.decode_page("é".encode("latin-1"), b"text/html; charset=ISO-8859-1")
  assert valid and text == "é"


def test_gzip_warc_cut_inside_a_member_is_counted(tmp_path):
  warc = tmp_path / "cut.warc.gz"
  body = b'<img src="/a.jpg" alt="A first page.">'
  write_warc(warc, [("http://a.org/1", body, "text/html", "response"),
                    ("http://a.org/2", body + os.urandom(6000).hex().encode(), "text/html", "response")], gzip_=True)
  data = warc.read_bytes()
  warc.write_bytes(data[:len(data) - 2000])
  counts = harvest.run([str(warc)], str(tmp_path / "o.tsv"))
  assert counts["candidates"] == 1 and counts["truncated_records"] == 1
  gzip.decompress(data)  # the uncut file was a valid gzip stream


def _big_page(size: int) -> bytes:
  """An HTML page of `size` bytes that deflate shrinks about a thousandfold (an inflation bomb's shape)."""
  head = b'<html><img src="/big.jpg" alt="A page far too large.">'
  return head + b" " * (size - len(head) - 7) + b"</html>"


def test_a_body_that_inflates_past_the_cap_is_counted_and_never_read_whole(tmp_path, monkeypatch):
  """A gzip WARC member and a gzip HTTP body, each inflating to 1 MiB from about 1 KB, against a 64 KiB cap: both
  are counted as record_too_large and the pages around them are harvested. Streaming, not memory, is what is
  checked: every read of a record's body asks for at most the cap plus one byte (one such read per page, then
  warcio's own 16 KiB blocks that read the rest through), so the memory a body takes is bounded by the cap, not by
  the record."""
  from warcio.recordloader import ArcWarcRecord
  cap, size = 64 << 10, 1 << 20
  requested = []
  content_stream = ArcWarcRecord.content_stream

  def recording_content_stream(record):
    stream = content_stream(record)
    read = stream.read

    def bounded_read(length=None):
      requested.append(length)
      return read(length)
    stream.read = bounded_read
    return stream
  monkeypatch.setattr(ArcWarcRecord, "content_stream", recording_content_stream)
  warc = tmp_path / "bomb.warc.gz"
  with open(warc, "wb") as f:
    writer = WARCWriter(f, gzip=True)
    pages = [("http://a.org/1", b'<img src="/a.jpg" alt="A page before.">', []),
             ("http://a.org/2", _big_page(size), []),
             ("http://a.org/3", gzip.compress(_big_page(size)), [("Content-Encoding", "gzip")]),
             ("http://a.org/4", b'<img src="/b.jpg" alt="A page after.">', [])]
    for url, body, extra in pages:
      headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), *extra], protocol="HTTP/1.1")
      writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
  assert warc.stat().st_size < 16_000  # two pages of 1 MiB each in a few KB
  out = tmp_path / "c.tsv"
  counts = harvest.run([str(warc)], str(out), max_record_bytes=cap)
  assert read_rows(out) == [("http://a.org/a.jpg", "A page before.", "http://a.org/1"),
                            ("http://a.org/b.jpg", "A page after.", "http://a.org/4")]
  assert counts["record_too_large"] == 2 and counts["pages"] == 2 and counts["truncated_records"] == 0
  assert requested.count(cap + 1) == 4 and None not in requested and max(requested) == cap + 1


def test_an_html_file_over_the_cap_is_counted_not_read(tmp_path):
  (tmp_path / "big.html").write_bytes(_big_page(4096))
  (tmp_path / "small.html").write_bytes(b'<link rel="canonical" href="http://s.org/p"><img src="/s.jpg" alt="A cat.">')
  counts = harvest.run([str(tmp_path / "*.html")], str(tmp_path / "c.tsv"), max_record_bytes=4095)
  assert (counts["record_too_large"], counts["pages"], counts["candidates"]) == (1, 1, 1)
  assert harvest.run([str(tmp_path / "big.html")], str(tmp_path / "c.tsv"), max_record_bytes=4096)["pages"] == 1


def run_cli(*args):
  env = dict(os.environ, PYTHONPATH=ROOT)
  return subprocess.run([sys.executable, "-m", "capjax.tools.harvest_alt_text", *args], capture_output=True,
                        text=True, env=env, cwd=ROOT, timeout=120)


def test_cli(tmp_path):
  (tmp_path / "p.html").write_bytes(PAGE)
  (tmp_path / "notes.txt").write_text("x")
  result = run_cli(f"--input={tmp_path}/*.html", f"--output={tmp_path}/c.tsv")
  assert result.returncode == 0, result.stderr
  # A saved page without a canonical link or <base> has a file:// address: its relative srcs are not web urls.
  assert read_rows(tmp_path / "c.tsv") == []
  assert json.loads(result.stderr.splitlines()[0])["not_http"] == 5  # 4 relative srcs and a javascript: one
  bad = [run_cli(f"--input={tmp_path}/*.warc", f"--output={tmp_path}/c.tsv"),
         run_cli(f"--input={tmp_path}/*", f"--output={tmp_path}/c.tsv"),
         run_cli(f"--input={tmp_path}/p.html", f"--output={tmp_path}/missing/c.tsv"),
         run_cli(f"--input={tmp_path}/p.html")]
  for result in bad:
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and " — " in lines[0], result.stderr
  assert "--input" in run_cli("--help").stdout
