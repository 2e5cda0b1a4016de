"""Sentence embeddings from a converted BERT-family checkpoint, computed as sentence-transformers does: the mean of
the last hidden states over the attention mask (L2-normalized only with --normalize).

usage: python -m capjax.text_models.embed --weights=DIR --input=LINES.txt --output=OUT.npz [--normalize]
DIR is a BERT-family checkpoint converted by `python -m capjax.tools.convert_weights --format=hf_bert`: its
vocab.txt is the tokenizer's, and its config.json says whether to lowercase. OUT.npz gets `embeddings`, float32,
one row per input line.

Input: UTF-8, one sentence per line (a final newline does not start another line). An empty or blank line is an
error naming its number: every line gets the row of its number, so none can be dropped silently. A sentence
longer than max_position_embeddings tokens ([CLS] and [SEP] included; 512 for BERT and MiniLM) is cut to that
length, keeping [SEP] last, as Hugging Face truncates, and a warning on stderr counts the cut lines.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # as capjax.main: TensorFlow (the WordPiece tables) quietly

import numpy as np
from absl import flags

from capjax import cli, files
from capjax.text.lines import split_lines
from capjax.text_models import tokenizers

if TYPE_CHECKING:
  from capjax.text_models import checkpoint

# jax, the model and its checkpoint module are imported where they are used: --help answers without them (1.3 s).


class InputError(ValueError):
  """Sentences that cannot be embedded (an empty one): the message names it."""


class Embedder:
  """A converted BERT-family model with its tokenizer, for mean-pooled sentence embeddings."""

  def __init__(self, model: checkpoint.TextModel):
    from capjax.text_models import checkpoint  # noqa: PLC0415
    if model.kind != "bert":
      raise checkpoint.WeightsError(f"{model.directory} holds a {model.kind} model — embeddings need a BERT-family "
                                    "checkpoint (--format=hf_bert)")
    self.model = model
    self.tokenizer = tokenizers.WordPiece(model.directory / "vocab.txt", model.config.do_lower_case)

  @classmethod
  def load(cls, directory: str | os.PathLike[str]) -> Embedder:
    from capjax.text_models import checkpoint  # noqa: PLC0415
    return cls(checkpoint.load(directory, "bert"))

  @functools.cached_property
  def _forward(self):
    import jax  # noqa: PLC0415

    from capjax.text_models import bert as bert_lib  # noqa: PLC0415
    module = bert_lib.Bert(self.model.config)

    @jax.jit
    def forward(params, ids, mask):
      return bert_lib.mean_pool(module.apply({"params": params}, ids, mask).last_hidden_state, mask)
    return forward

  def embed(self, sentences: Sequence[str], normalize: bool = False, batch_size: int = 64
            ) -> tuple[np.ndarray, list[int]]:
    """(embeddings (len(sentences), hidden) float32, indices of the sentences cut to max_position_embeddings)."""
    import jax.numpy as jnp  # noqa: PLC0415
    for i, sentence in enumerate(sentences):
      if not sentence.strip():
        raise InputError(f"sentence {i + 1} is empty")
    max_length = self.model.config.max_position_embeddings
    rows, cut = [], []
    for start in range(0, len(sentences), batch_size):
      encoded = self.tokenizer.encode(sentences[start:start + batch_size])
      ids, mask, truncated = tokenizers.pad(encoded, max_length, self.tokenizer.pad_id, self.tokenizer.sep_id)
      rows.append(np.asarray(self._forward(self.model.params, jnp.asarray(ids), jnp.asarray(mask)), np.float32))
      cut.extend(start + i for i in truncated)
    embeddings = np.concatenate(rows) if rows else np.zeros((0, self.model.config.hidden_size), np.float32)
    if normalize:
      embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=-1, keepdims=True), 1e-12)
    return embeddings.astype(np.float32), cut


def read_lines(path: str | os.PathLike[str], flag: str = "") -> list[str]:
  """The lines of a UTF-8 file (no line for a final newline); an empty or blank line is an InputError, a FIFO, a
  device or text that is not UTF-8 an `error:` line naming `flag` (`capjax.files.read_text`)."""
  lines = split_lines(files.read_text(path, flag, "a text file with one sentence per line"))
  for number, line in enumerate(lines, 1):
    if not line.strip():
      raise InputError(f"line {number} is {'blank' if line else 'empty'}")
  return lines


FLAGS = flags.FlagValues()
_WEIGHTS = flags.DEFINE_string("weights", None, "a converted BERT-family checkpoint directory (convert_weights "
                               "--format=hf_bert)", flag_values=FLAGS, required=True)
_INPUT = flags.DEFINE_string("input", None, "UTF-8 text file, one sentence per line", flag_values=FLAGS,
                             required=True)
_OUTPUT = flags.DEFINE_string("output", None, ".npz file to write (`embeddings`, float32)", flag_values=FLAGS,
                              required=True)
_NORMALIZE = flags.DEFINE_boolean("normalize", False, "L2-normalize each embedding", flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch_size", 64, "sentences per forward pass", lower_bound=1, flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  from capjax.text_models import checkpoint  # noqa: PLC0415
  output = files.output_file(_OUTPUT.value, inputs={"--input": _INPUT.value, "--weights": _WEIGHTS.value},
                             example="embeddings.npz")
  try:
    lines = read_lines(_INPUT.value, "--input")
  except InputError as error:
    cli.fail(f"--input={_INPUT.value}: {error} — write one sentence on every line (remove empty lines)")
  if not lines:
    cli.fail(f"--input={_INPUT.value} has no lines — give at least one sentence")
  try:
    embedder = Embedder.load(_WEIGHTS.value)
  except (checkpoint.WeightsError, tokenizers.TokenizerError) as error:
    cli.fail(f"--weights={_WEIGHTS.value}: {error}" + ("" if " — " in str(error) else
                                                          f" — {checkpoint.CONVERT}"))
  embeddings, cut = embedder.embed(lines, _NORMALIZE.value, _BATCH.value)
  if cut:
    print(f"warning: {len(cut)} of {len(lines)} lines are longer than max_position_embeddings="
          f"{embedder.model.config.max_position_embeddings} tokens and were truncated (first: line {cut[0] + 1})",
          file=sys.stderr)
  with files.writing(output, "wb") as f:  # a file object: np.savez would add .npz to a name without it
    np.savez(f, embeddings=embeddings)
  print(f"wrote {embeddings.shape[0]} embeddings of dimension {embeddings.shape[1]} to {output}")


if __name__ == "__main__":
  cli.run(main)
