"""What the Java scorers (METEOR, SPICE) share: finding a java executable, and finding the jars pycocoevalcap
ships; each says what to install when it is missing.
"""

from __future__ import annotations

import importlib.util
import shutil

JAVA_INSTALL_HINT = ("install a Java runtime and put `java` on PATH, e.g. `apt-get install default-jre` "
                     "(Debian/Ubuntu), `brew install openjdk` (macOS) or `conda install -c conda-forge openjdk`")


def find_java(java: str | None = None) -> str:
  """The java executable to use, or a RuntimeError that says how to install one."""
  path = shutil.which(java or "java")
  if path is None:
    raise RuntimeError(f"METEOR and SPICE run on Java, and `{java or 'java'}` was not found — {JAVA_INSTALL_HINT}")
  return path


def pycocoevalcap_dir() -> str:
  """Where pycocoevalcap (which ships the METEOR and SPICE jars) is installed."""
  spec = importlib.util.find_spec("pycocoevalcap")
  if spec is None or not spec.submodule_search_locations:
    raise RuntimeError("the METEOR and SPICE jars ship with pycocoevalcap, which is not installed — "
                       "`pip install pycocoevalcap==1.2`")
  return list(spec.submodule_search_locations)[0]
