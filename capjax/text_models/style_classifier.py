"""The ERG paper's style classifier: BERT with a linear head on [CLS] (the pooler's output when the checkpoint has
one), fine-tuned with AdamW to tell the styles and factual sentences apart. It is the extractor's model
(`style_phrases`) and the `cls` metric of `python -m capjax.metrics --style_model=DIR`.

usage: python -m capjax.text_models.style_classifier --output=DIR [--train=stylized_scenes|STYLE=FILE,...]
         [--init=BERT_DIR] [--epochs=N] [--batch_size=N] [--learning_rate=X]
--train: `stylized_scenes` (the default: the embedded dataset's train split, generated here, romantic, humorous
and factual sentences) or STYLE=FILE pairs, one UTF-8 sentence per line, e.g.
`--train=romantic=rom.txt,factual=fact.txt` (the styles: romantic, humorous, positive, negative, and factual).
--init: a BERT-family checkpoint converted by `python -m capjax.tools.convert_weights --format=hf_bert` (e.g.
MiniLM); without it a tiny BERT (2 layers, 4 heads, 64 wide) starts from random weights over the training words.
Defaults: the paper's (batch 32 and learning rate 1e-5 for romantic/humorous, 64 and 2e-5 for positive/negative,
3 epochs) with --init; 32, 1e-3 and 8 epochs from random weights, which learn nothing at 1e-5 in 3 epochs.
DIR gets the BERT directory (config.json, vocab.txt, variables/) plus `style_classifier.json` (the labels and the
training settings) and `head/`: it is self-contained for --style_model=DIR.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow (the WordPiece tables) quietly

from absl import flags

from capjax import cli, files

# The classifier's library (`capjax.text_models.style_model`), reached through this module by its callers, imported
# on first use: the command's --help does not load JAX and Flax.
_EXPORTS = dict.fromkeys((
    "Classifier", "FACTUAL", "HEAD_DIR", "MAX_LENGTH", "META_FILE", "RANDOM_INIT_SETTINGS", "STYLES", "Settings",
    "StyleClassifier", "StyleModelError", "TINY_BERT", "check_labels", "paper_settings", "read_training",
    "stylized_scenes_sentences", "train", "word_vocabulary"
), "capjax.text_models.style_model")
__all__ = sorted([*_EXPORTS, "main"])
__getattr__ = cli.lazy_attributes(__name__, _EXPORTS)

FLAGS = flags.FlagValues()
_TRAIN = flags.DEFINE_string("train", "stylized_scenes", "stylized_scenes, or STYLE=FILE,... (one sentence per line)",
                             flag_values=FLAGS)
_OUTPUT = flags.DEFINE_string("output", None, "directory to write the classifier to", flag_values=FLAGS,
                              required=True)
_INIT = flags.DEFINE_string("init", "", "converted BERT-family checkpoint to start from (default: tiny random BERT)",
                            flag_values=FLAGS)
_EPOCHS = flags.DEFINE_integer("epochs", None, "epochs (default: see the usage)", lower_bound=1,
                                flag_values=FLAGS)
_BATCH = flags.DEFINE_integer("batch_size", None, "mini-batch size", lower_bound=1, flag_values=FLAGS)
_LR = flags.DEFINE_float("learning_rate", None, "AdamW learning rate", lower_bound=0.0, flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  cli.parse(FLAGS, argv, __doc__)
  from capjax.text_models import checkpoint  # noqa: PLC0415 (after the flags: JAX and Flax)
  from capjax.text_models.style_model import (RANDOM_INIT_SETTINGS, StyleModelError, check_labels,  # noqa: PLC0415
                                              paper_settings, read_training, train)
  if _LR.value is not None:
    cli.check_number("--learning_rate", _LR.value, 0, low_open=True)
  files.refuse_overlap({"--output": _OUTPUT.value}, {"--init": _INIT.value})  # saving there replaces what it reads
  try:  # every input is checked before --output is made: a run that stops at bad input writes nothing
    data = read_training(_TRAIN.value)
    labels = check_labels(list(data))
    for label in labels:
      if not data[label]:
        raise StyleModelError(f"--train: no {label} sentences — give a file with at least one")
    init = checkpoint.load(_INIT.value, "bert") if _INIT.value else None
  except OSError as error:
    cli.fail(f"--train: cannot read {error.filename}: {error.strerror} — check the path")
  except checkpoint.WeightsError as error:
    cli.fail(f"--init={_INIT.value}: {error}")
  except StyleModelError as error:
    cli.fail(str(error))
  output = cli.writable_dir(_OUTPUT.value, "--output")
  base = paper_settings(labels) if init else RANDOM_INIT_SETTINGS
  settings = dataclasses.replace(base, **{k: v for k, v in (("epochs", _EPOCHS.value), ("batch_size", _BATCH.value),
                                                            ("learning_rate", _LR.value)) if v is not None})
  classifier = train(data, init, settings, log=lambda m: print(m, file=sys.stderr))
  classifier.save(output)
  print(f"wrote a {'/'.join(classifier.labels)} classifier to {output}")


if __name__ == "__main__":
  cli.run(main)
