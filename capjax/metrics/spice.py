"""SPICE through the SPICE 1.0 jar pycocoevalcap ships, run as pycocoevalcap runs it; it needs Stanford CoreNLP
3.6.0 (a ~384 MB download) and Java 8, and says exactly what to install where when they are missing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from capjax.metrics.java import find_java, pycocoevalcap_dir

K = TypeVar("K", bound=Hashable)
CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
CORENLP_URL = "http://nlp.stanford.edu/software/stanford-corenlp-full-2015-12-09.zip"


def spice_dir() -> str:
  return os.path.join(pycocoevalcap_dir(), "spice")


def check_installation(directory: str | None = None) -> str:
  """The SPICE directory if its jar and CoreNLP 3.6.0 are in place; otherwise a RuntimeError saying what to get."""
  directory = directory or spice_dir()
  jar = os.path.join(directory, "spice-1.0.jar")
  if not os.path.exists(jar):
    raise RuntimeError(f"SPICE's jar {jar} is missing — `pip install --force-reinstall pycocoevalcap==1.2` ships it")
  lib = os.path.join(directory, "lib")
  missing = [name for name in CORENLP_JARS if not os.path.exists(os.path.join(lib, name))]
  if missing:
    raise RuntimeError(
        f"SPICE needs Stanford CoreNLP 3.6.0 in {lib}, which lacks {', '.join(missing)} — either run "
        f"`python -m pycocoevalcap.spice.get_stanford_models` (downloads ~384 MB), or download {CORENLP_URL}, "
        f"unzip it and copy {' and '.join(CORENLP_JARS)} into {lib}; SPICE 1.0 wants Java 8 (or 11), or leave "
        "SPICE out of --metrics")
  return directory


class Spice:
  """pycocoevalcap's `Spice`: F-score of scene-graph tuples, mean over images ("All" F, NaN where undefined)."""

  def __init__(self, directory: str | None = None, java: str | None = None, cache_dir: str | None = None,
               max_heap: str = "8G", timeout: float | None = None):
    self.directory = check_installation(directory)
    self.java = find_java(java)
    self.cache_dir = cache_dir or os.path.join(tempfile.gettempdir(), "capjax-spice-cache")
    self.max_heap, self.timeout = max_heap, timeout

  def method(self) -> str:
    return "SPICE"

  def compute_score(self, gts: Mapping[K, Sequence[str]], res: Mapping[K, Sequence[str]]
                    ) -> tuple[float, list[dict[str, dict[str, float]]]]:
    """{image: [references]}, {image: [hypothesis]} -> (mean SPICE, per-image score tables), sorted by image."""
    if set(gts) != set(res):
      raise ValueError("references and hypotheses cover different images")
    images = sorted(gts)
    requests = []
    for image in images:
      if isinstance(res[image], str) or len(res[image]) != 1:
        raise ValueError(f"image {image!r}: expected a list of exactly one hypothesis, got {res[image]!r}")
      requests.append({"image_id": image, "test": res[image][0], "refs": list(gts[image])})
    os.makedirs(self.cache_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="capjax-spice-") as work:
      inputs, outputs = os.path.join(work, "input.json"), os.path.join(work, "output.json")
      with open(inputs, "w", encoding="utf-8") as f:
        json.dump(requests, f)
      command = [self.java, "-jar", f"-Xmx{self.max_heap}", "spice-1.0.jar", inputs, "-cache", self.cache_dir,
                 "-out", outputs, "-subset", "-silent"]
      run = subprocess.run(command, cwd=self.directory, capture_output=True, timeout=self.timeout)
      if run.returncode != 0 or not os.path.exists(outputs):
        tail = run.stderr.decode("utf-8", errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"SPICE failed (exit code {run.returncode}): {' | '.join(tail)} — SPICE 1.0 is known to "
                           "run on Java 8: put a Java 8 first on PATH if yours is newer, or leave SPICE out of "
                           "--metrics")
      with open(outputs, encoding="utf-8") as f:
        results = {item["image_id"]: item["scores"] for item in json.load(f)}
    tables = [{category: {k: _float(v) for k, v in values.items()} for category, values in results[image].items()}
              for image in images]
    scores = [table["All"]["f"] for table in tables]
    return (sum(scores) / len(scores) if scores else math.nan), tables


def _float(value: Any) -> float:
  try:
    return float(value)
  except (TypeError, ValueError):
    return math.nan
