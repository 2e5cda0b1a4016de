"""Fetches the NLTK resources capjax uses, skipping those already on `nltk.data.path`.

Run by `make demo`/`make test` set-up. Offline machines point `NLTK_DATA` at a prepared folder instead.
"""

from __future__ import annotations

import os
import sys

import nltk

# (resource path as nltk.data.find sees it, package id for nltk.download)
RESOURCES: tuple[tuple[str, str], ...] = (
    ("taggers/averaged_perceptron_tagger_eng", "averaged_perceptron_tagger_eng"),
    ("taggers/universal_tagset", "universal_tagset"),
    ("corpora/wordnet", "wordnet"),
    ("corpora/words", "words"),
    ("corpora/stopwords", "stopwords"),
    ("corpora/names", "names"),
    ("corpora/gazetteers", "gazetteers"),
    ("corpora/treebank", "treebank"),
    ("corpora/conll2000", "conll2000"),
    ("sentiment/vader_lexicon", "vader_lexicon"),
)


def missing_resources() -> list[str]:
  """Package ids of the resources not found on the NLTK path (zipped or unzipped)."""
  missing = []
  for path, package in RESOURCES:
    try:
      nltk.data.find(path)
    except LookupError:
      try:
        nltk.data.find(path + ".zip")
      except LookupError:
        missing.append(package)
  return missing


def main() -> int:
  missing = missing_resources()
  if not missing:
    print(f"NLTK resources: all {len(RESOURCES)} present.")
    return 0
  target = os.environ.get("NLTK_DATA", "").split(os.pathsep)[0] or os.path.expanduser("~/nltk_data")
  print(f"NLTK resources: downloading {', '.join(missing)} into {target}")
  failed = [p for p in missing if not nltk.download(p, download_dir=target, quiet=True, raise_on_error=False)]
  if failed:
    # Training and evaluation do not need NLTK; the text pipeline does and will name what is missing.
    print(
        f"WARNING: could not download NLTK resources {failed}. The text pipeline needs them: run "
        f"`python -m capjax.setup_nltk` with network access, or set NLTK_DATA to a folder that has them.",
        file=sys.stderr,
    )
  return 0


if __name__ == "__main__":
  sys.exit(main())
