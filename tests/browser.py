"""A headless Chromium for the page tests, driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
JSON messages ended by NUL on file descriptors 3 and 4). No driver and no websocket library: only the browser,
which `make test` installs from apt (Debian's `chromium`) when it runs as root."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MISSING = "no Chromium on PATH: the browser tests skip — apt-get install chromium (make test does it as root)"


def find() -> str | None:
  """The Chromium binary: $CAPJAX_CHROMIUM, else the first of NAMES on PATH."""
  return os.environ.get("CAPJAX_CHROMIUM") or next(filter(None, map(shutil.which, NAMES)), None)


class BrowserError(RuntimeError):
  """Chromium exited, did not answer in time, or answered a DevTools command with an error."""


class Browser:
  """One headless Chromium with one page. Downloads go to `downloads`."""

  def __init__(self, binary: str, downloads: pathlib.Path, timeout: float = 30.0, size: tuple[int, int] = (1000, 800)):
    self.timeout = timeout
    self._profile = tempfile.mkdtemp(prefix="capjax-chromium-")
    to_browser_r, self._to_browser = os.pipe()
    self._from_browser, from_browser_w = os.pipe()

    def pipes() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes the answers
      os.dup2(to_browser_r, 3)
      os.dup2(from_browser_w, 4)

    args = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
            "--disable-dev-shm-usage",  # containers' small /dev/shm crashes renderers
            f"--user-data-dir={self._profile}", f"--window-size={size[0]},{size[1]}", "about:blank"]
    if os.geteuid() == 0:
      args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox (containers, CI)
    self._process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, pass_fds=(3, 4), preexec_fn=pipes)
    os.close(to_browser_r)
    os.close(from_browser_w)
    self._buffer = b""
    self._next_id = 0
    self.events: list[dict[str, Any]] = []
    try:
      self.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": os.fspath(downloads),
                                                "eventsEnabled": True})
      target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
      self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
      self.send("Page.enable", session=True)
      self.send("Runtime.enable", session=True)
    except BaseException:
      self.close()
      raise

  # --- the protocol -------------------------------------------------------------------------------------------
  def _read(self, deadline: float) -> dict[str, Any]:
    while b"\0" not in self._buffer:
      left = deadline - time.monotonic()
      if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
        raise BrowserError("Chromium did not answer in time")
      chunk = os.read(self._from_browser, 1 << 20)
      if not chunk:
        raise BrowserError(f"Chromium exited: {self._process.stderr.read().decode(errors='replace')[-2000:]}")
      self._buffer += chunk
    message, _, self._buffer = self._buffer.partition(b"\0")
    return json.loads(message)

  def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
    """Sends one command and returns its result; events that arrive meanwhile are kept in `events`."""
    self._next_id += 1
    message = {"id": self._next_id, "method": method, "params": params or {}}
    if session:
      message["sessionId"] = self._session
    os.write(self._to_browser, json.dumps(message).encode() + b"\0")
    deadline = time.monotonic() + self.timeout
    while True:
      answer = self._read(deadline)
      if answer.get("id") == self._next_id:
        if "error" in answer:
          raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})
      self.events.append(answer)

  def wait_for(self, method: str, predicate=lambda params: True) -> dict[str, Any]:
    """The params of the first event `method` (kept or still to come) that `predicate` accepts; it is consumed."""
    deadline = time.monotonic() + self.timeout
    while True:
      for n, event in enumerate(self.events):
        if event.get("method") == method and predicate(event.get("params", {})):
          return self.events.pop(n)["params"]
      self.events.append(self._read(deadline))

  # --- what the tests do ----------------------------------------------------------------------------------------
  def open(self, path: os.PathLike[str] | str) -> None:
    """Loads a local file and waits for its load event (images and scripts done)."""
    self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
    self.send("Page.navigate", {"url": pathlib.Path(path).resolve().as_uri()}, session=True)
    self.wait_for("Page.loadEventFired")

  def evaluate(self, expression: str) -> Any:
    """The value of a JavaScript expression in the page (promises awaited)."""
    result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                       session=True)
    if "exceptionDetails" in result:
      raise BrowserError(f"{expression!r}: {result['exceptionDetails'].get('exception', {}).get('description')}")
    return result["result"].get("value")

  def click(self, selector: str) -> None:
    """A left click with the mouse at the middle of the element, scrolled into view first, as a person clicks."""
    box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
        if (!e) return null; e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
        return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
    if box is None:
      raise BrowserError(f"nothing matches {selector}")
    for kind in ("mousePressed", "mouseReleased"):
      self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                             "clickCount": 1}, session=True)

  def wait_for_download(self) -> None:
    """Waits until a download the page started has been written."""
    self.wait_for("Browser.downloadProgress", lambda p: p.get("state") == "completed")

  def screenshot(self, path: os.PathLike[str] | str, width: int, height: int) -> None:
    """A PNG of the top `width` × `height` CSS pixels of the page."""
    self.evaluate("window.scrollTo(0, 0)")
    data = self.send("Page.captureScreenshot", {"format": "png", "clip": {"x": 0, "y": 0, "width": width,
                                                                          "height": height, "scale": 1}},
                     session=True)["data"]
    pathlib.Path(path).write_bytes(base64.b64decode(data))

  def close(self) -> None:
    try:
      os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
      self._process.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
      self._process.kill()
      self._process.wait()
    for fd in (self._to_browser, self._from_browser):
      with contextlib.suppress(OSError):  # already closed with the process
        os.close(fd)
    self._process.stderr.close()
    shutil.rmtree(self._profile, ignore_errors=True)
