"""The endpoints, on the standard library's `ThreadingHTTPServer`: `POST /caption` (an image's bytes, raw or as the
`image` field of a multipart form) → `{"captions": [{"text", "score"}, ...]}`, k best, best first; `GET /` the page;
`GET /healthz` → `{"ok": true, ...}` with the batcher's counters.

Every answer is JSON (the page aside), errors too: `{"error": ...}` with 400 (no image: not one, truncated, empty,
too many pixels), 411 (no Content-Length), 413 (over `max_bytes`, said from Content-Length before any of the body is
read), 404, 405, and 500 only for a failure of our own, logged in one line. A request thread never lets an exception
reach the server, which would print a traceback to stderr and drop the connection.
"""

from __future__ import annotations

import email.parser
import email.policy
import http.server
import json
import socket
import threading
from typing import Any

from absl import logging

from capjax.image import io as image_io
from capjax.serve import page
from capjax.serve.batcher import Batcher, DecodeError

REQUEST_TIMEOUT_S = 30  # a client that stops sending mid-body frees its thread (and a stopping server) after this


_NO_IMAGE = {"truncated": "the image is cut short (truncated) — send the whole file",
             "undecodable": "the bytes are no image this server can read — send a JPEG, PNG, GIF, WebP, BMP or TIFF"}


class BadRequest(Exception):
  def __init__(self, status: int, message: str):
    super().__init__(message)
    self.status = status


def image_of_form(content_type: str, body: bytes) -> bytes:
  """The bytes of the multipart form's `image` field."""
  message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
      f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + body)
  if not message.is_multipart():
    raise BadRequest(400, "the multipart body has no parts — send the image as the form's `image` field")
  for part in message.iter_parts():
    if part.get_param("name", header="content-disposition") == "image":
      return part.get_payload(decode=True) or b""
  raise BadRequest(400, "the form has no `image` field — send the picture as `image`")


class Handler(http.server.BaseHTTPRequestHandler):
  """One request. The server object carries `batcher`, `served` (pixels of one image) and `max_bytes`."""

  server_version = "capjax-serve"
  timeout = REQUEST_TIMEOUT_S

  def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
    logging.info("%s %s", self.address_string(), format % args)

  def _send(self, status: int, body: bytes, content_type: str, close: bool = False) -> None:
    self.send_response(status)
    self.send_header("Content-Type", content_type)
    self.send_header("Content-Length", str(len(body)))
    self.send_header("Cache-Control", "no-store")
    if close:
      self.send_header("Connection", "close")
      self.close_connection = True
    self.end_headers()
    if self.command != "HEAD":
      self.wfile.write(body)

  def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
    """The base class's answer to a request it cannot parse (a bad request line, headers too long, a method without
    a do_ method), as JSON like every other error rather than its HTML page."""
    del explain
    logging.info("%s: %d %s", self.address_string(), code, message)
    self._json(code, {"error": message or self.responses.get(code, ("error",))[0]}, close=True)

  def _json(self, status: int, value: dict, close: bool = False) -> None:
    self._send(status, json.dumps(value).encode(), "application/json", close)

  def _guarded(self, work) -> None:
    try:
      work()
    except BadRequest as error:
      self._json(error.status, {"error": str(error)}, close=error.status in (411, 413))
    except (ConnectionError, socket.timeout) as error:  # the client went away: no one to answer
      logging.info("%s: connection lost: %s", self.address_string(), error)
      self.close_connection = True
    except Exception as error:  # noqa: BLE001 (a bug of ours: one line in the log, a 500 to the client)
      logging.error("%s %s failed: %s: %s", self.command, self.path, type(error).__name__, error)
      try:
        self._json(500, {"error": "internal error — the server logged it"}, close=True)
      except OSError:
        self.close_connection = True

  def do_GET(self) -> None:
    self._guarded(self._get)

  def do_HEAD(self) -> None:
    self._guarded(self._get)

  def do_POST(self) -> None:
    self._guarded(self._post)

  def _get(self) -> None:
    path = self.path.split("?", 1)[0]
    if path == "/":
      self._send(200, page.HTML.encode(), "text/html; charset=utf-8")
    elif path == "/healthz":
      self._json(200, {"ok": True, "k": self.server.k, "max_batch": self.server.batcher.max_batch,
                       "batch_sizes_warmed": self.server.batcher.sizes, **self.server.batcher.stats()})
    elif path == "/caption":
      raise BadRequest(405, "POST an image to /caption")
    else:
      raise BadRequest(404, f"no {path} here — POST /caption, GET / or GET /healthz")

  def _body(self) -> bytes:
    """The request's body, after its declared length was checked against `max_bytes` (nothing read if over)."""
    length = self.headers.get("Content-Length")
    if length is None:
      raise BadRequest(411, "no Content-Length — send the image's bytes with their length")
    try:
      length = int(length)
    except ValueError:
      raise BadRequest(400, f"Content-Length {length!r} is not a number") from None
    if length < 0:
      raise BadRequest(400, f"Content-Length {length} is negative")
    if length > self.server.max_bytes:
      raise BadRequest(413, f"the body is {length:,} bytes, over this server's --max_bytes={self.server.max_bytes:,}")
    body = self.rfile.read(length)
    if len(body) < length:
      raise BadRequest(400, f"the body ended after {len(body):,} of its {length:,} bytes")
    return body

  def _post(self) -> None:
    if self.path.split("?", 1)[0] != "/caption":
      raise BadRequest(404, f"no POST {self.path} here — POST the image to /caption")
    content_type = self.headers.get("Content-Type", "")
    body = self._body()
    if content_type.lower().startswith("multipart/form-data"):
      body = image_of_form(content_type, body)
    if not body:
      raise BadRequest(400, "the image is empty (0 bytes)")
    try:
      pixels = self.server.served.pixels(body)
    except image_io.ImageError as error:  # Pillow's own words name a BytesIO object: the reason is what a client needs
      raise BadRequest(400, _NO_IMAGE.get(error.reason, str(error))) from None
    try:
      best = self.server.batcher.caption(pixels)
    except DecodeError as error:
      raise RuntimeError(f"decode failed: {error}") from None
    self._json(200, {"captions": [{"text": text, "score": score} for text, score in best]})


class Server(http.server.ThreadingHTTPServer):
  """The HTTP server with what its handlers need. Binding happens in the constructor (a port in use is an OSError
  before the model loads); `drain` waits for the requests in flight."""

  daemon_threads = True
  request_queue_size = 128  # the listen backlog (socketserver's 5 drops 32 clients' connects: a 1 s retry, or an error)
  block_on_close = False  # `drain` waits instead, with a deadline: a client that stalls cannot hold the exit

  def __init__(self, host: str, port: int, max_bytes: int):
    super().__init__((host, port), Handler)
    self.max_bytes = max_bytes
    self.served = self.batcher = None
    self.k = 0
    self._active = 0
    self._idle = threading.Condition()

  def process_request(self, request, client_address) -> None:
    with self._idle:  # counted here, in the accepting thread: a request accepted is in flight before its thread runs
      self._active += 1
    super().process_request(request, client_address)

  def process_request_thread(self, request, client_address) -> None:
    try:
      super().process_request_thread(request, client_address)
    finally:
      with self._idle:
        self._active -= 1
        self._idle.notify_all()

  def drain(self, timeout: float) -> int:
    """Waits until no request is in flight, or `timeout` seconds; the number still in flight."""
    with self._idle:
      self._idle.wait_for(lambda: self._active == 0, timeout)
      return self._active

  def attach(self, served, batcher: Batcher, k: int) -> None:
    self.served, self.batcher, self.k = served, batcher, k
