"""The paper's caption statistics (examples, unique tokens, tokens per caption: mean, std, median).

`python -m capjax.text.stats FILE.tsv [--column=N]` prints them as JSON; a .jsonl file reads kept "caption"s.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np


def caption_stats(captions: Iterable[str], tokenize: Callable[[str], Sequence[str]] = str.split) -> dict[str, float]:
  """Statistics over captions; the default whitespace tokens suit released (already tokenized) captions."""
  lengths: list[int] = []
  vocabulary: set[str] = set()
  for caption in captions:
    tokens = tokenize(caption)
    lengths.append(len(tokens))
    vocabulary.update(tokens)
  n = np.asarray(lengths, dtype=np.float64)
  return {
      "examples": len(lengths),
      "unique_tokens": len(vocabulary),
      "tokens_mean": round(float(n.mean()), 4) if len(n) else 0.0,
      "tokens_std": round(float(n.std()), 4) if len(n) else 0.0,
      "tokens_median": float(np.median(n)) if len(n) else 0.0,
  }


def read_column(path: str, column: int) -> Iterator[str]:
  """One TSV column (rows too short for it are skipped)."""
  with open(path, encoding="utf-8", errors="replace") as f:
    for line in f:
      fields = line.rstrip("\r\n").split("\t")
      if column < len(fields):
        yield fields[column]


def read_kept_captions(path: str) -> Iterator[str]:
  """The "caption" of kept rows of a `capjax.text.pipeline` output."""
  with open(path, encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      if row.get("kept") and row.get("caption"):
        yield row["caption"]


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m capjax.text.stats", description=__doc__.splitlines()[0])
  parser.add_argument("path", help="TSV of captions (CC3M: caption<TAB>url) or a pipeline .jsonl output")
  parser.add_argument("--column", type=int, default=0, help="TSV column holding the caption (default 0, as CC3M)")
  parser.add_argument("--tokenizer", choices=("whitespace", "treebank"), default="whitespace",
                      help="whitespace for released captions; treebank for raw alt-texts")
  args = parser.parse_args(argv)
  captions = read_kept_captions(args.path) if args.path.endswith(".jsonl") else read_column(args.path, args.column)
  if args.tokenizer == "treebank":
    from capjax.text.annotate import normalize_text, tokenize

    stats = caption_stats(captions, lambda c: tokenize(normalize_text(c)))
  else:
    stats = caption_stats(captions)
  print(json.dumps(stats))
  return 0


if __name__ == "__main__":
  sys.exit(main())
