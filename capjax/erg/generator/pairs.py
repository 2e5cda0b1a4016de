"""The generator's (phrase, caption) pairs: from stylized_scenes records (training), drawn from the embedded data
(the command's training set), read from a JSONL or TSV file (the command's input)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from capjax.data import stylized
from capjax.erg.generator.model import GeneratorError, Pair
from capjax.text.lines import split_lines


def training_pairs(records: Iterable[dict[str, Any]]) -> list[Pair]:
  """Pairs from stylized_scenes records: per stylized caption, its planted phrase, the caption without the
  phrase's word span (`phrase_start`, `phrase_end`) as the content, and the caption as the target."""
  pairs = []
  for record in records:
    for entry in stylized.entries(record) or ():
      if entry.content is None:
        raise GeneratorError(f"a stylized caption without a planted phrase's span ({entry.caption!r}) — train the "
                             "generator on stylized_scenes records, whose captions carry one")
      pairs.append(Pair(entry.phrase, entry.content, entry.caption))
  return pairs


def scene_pairs(num: int, seed: int = 0, split_index: int = 0) -> list[Pair]:
  """Training pairs of the embedded data: stylized_scenes' split `split_index` (0: train) drawn in this process,
  as its builder draws it (`capjax.scenes` for the factual caption, `capjax.scenes.stylized` for the phrases):
  `tfds_builders` is an entry-point layer that `capjax.erg` may not import, and no build is needed."""
  from capjax import scenes  # noqa: PLC0415 (the command's data only)
  from capjax.scenes import stylized  # noqa: PLC0415
  pairs = []
  for index in range(num):
    factual = scenes.make_example(seed, split_index, index).captions[0]
    for c in stylized.stylized_captions(seed, split_index, index, factual):
      pairs.append(Pair(c.phrase, c.factual, c.caption))
  return pairs


def read_pairs(path: str) -> list[Pair]:
  """(phrase, factual caption) pairs from a JSONL file ({"phrase", "caption"} per line) or a TSV file
  (`phrase<TAB>caption`); a GeneratorError names the first bad line."""
  from capjax import files  # noqa: PLC0415 (a FIFO, a device, text not UTF-8: an `error:` line)
  lines = split_lines(files.read_text(path, "--input", "a UTF-8 JSONL or TSV file"))
  pairs = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    if path.endswith(".tsv"):
      fields = line.split("\t")
      if len(fields) != 2:
        raise GeneratorError(f"--input={path} line {number} has {len(fields)} tab-separated fields — write "
                             "`phrase<TAB>caption` on every line")
      phrase, caption = fields
    else:
      try:
        record = json.loads(line)
        phrase, caption = record["phrase"], record["caption"]
      except (ValueError, KeyError, TypeError, RecursionError) as error:  # RecursionError: nested thousands deep
        raise GeneratorError(f"--input={path} line {number} is not a JSON object with \"phrase\" and \"caption\" "
                             f"({type(error).__name__}: {error}) — write one such object per line, or a .tsv "
                             "file") from error
      if not isinstance(phrase, str) or not isinstance(caption, str):
        raise GeneratorError(f"--input={path} line {number}: \"phrase\" and \"caption\" must be strings — fix "
                             "that line")
    pairs.append(Pair(phrase.strip(), caption.strip()))
  if not pairs:
    raise GeneratorError(f"--input={path} holds no (phrase, caption) pairs — give at least one line")
  return pairs
