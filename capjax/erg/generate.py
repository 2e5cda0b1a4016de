"""ERG's generator: GPT-2 that grafts a retrieved style phrase onto a factual caption.

Training reads stylized captions whose planted phrase is known: the prompt is `[CLS] phrase [SEP] content` (the
caption without the phrase) and the target is the stylized caption; the loss covers the target only. Inference
prompts with `[CLS] retrieved phrase [SEP] factual caption` and decodes with `capjax.decode`'s batched greedy or
beam search, or top-p sampling, over the GPT-2 key/value cache (the prompt runs once, then one token per step).

Layout of a sequence (P = `prompt_length`, fixed per model so that every row's caption starts at position P and a
batch needs no per-row positions): the prompt left-padded to P, then `<BOS>` caption `<EOS>`, right-padded.
`[CLS]`, `[SEP]`, `<BOS>`, `<EOS>`, `<PAD>` are added ids, never text, so a caption cannot spell them.

Two vocabularies:
  * `WordVocab` for a model trained from scratch: the caption vocabulary's word level (ids 0-3 are
    `capjax.tokens.SPECIALS`, then `[CLS]`, `[SEP]`, then the training words). The embedded data has ~70 words, so
    a word-level softmax is tiny and a caption is ~15 tokens; BPE's 50k rows would dominate a from-scratch model and
    split words that never need splitting.
  * `BPEVocab` for imported GPT-2 weights (a `convert_weights --format=hf_gpt2` directory): GPT-2's byte-level BPE
    plus four added ids after its 50,257 (the embedding grows by four rows), `<|endoftext|>` as the end.

`capjax.decode` feeds `BOS_ID` first and stops at `EOS_ID` (the caption vocabulary's 1 and 2); a BPE model's ids
for those differ, so its step function swaps the three special ids in and out (`token_map`, an involution).

Settings: the paper fine-tunes GPT-2 with AdamW at 5e-5 for one epoch (`PAPER`). A randomly initialised tiny model
learns nothing useful in one epoch at 5e-5 (its loss barely leaves log(vocab)): from scratch uses 3e-3 with cosine
decay over 20 epochs in batches of 32 (`SCRATCH`). On 500 stylized_scenes training images (1,000 captions) that
trains in ~30 s on 2 CPU cores to a caption loss of ~0.05 (what is left is mostly the placement of the phrase,
which the data draws at random); at 12 epochs the phrase-and-objects rate was 82%, at 20 it is 90%.

Command:
  python -m capjax.erg.generate --train --output=DIR [--weights=GPT2_DIR] [--num_train=500]
  python -m capjax.erg.generate --generator=DIR --input=PAIRS.jsonl|.tsv [--beam_size=4 | --top_p=0.9]
      [--output=OUT.jsonl]
A JSONL line is {"phrase": ..., "caption": ...}; a TSV line is `phrase<TAB>caption`.

The code lives in the package `capjax.erg.generator` (vocabularies, the model and its search, pairs, training,
saving); this module is the command and keeps the names its callers use.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from capjax import cli

# The names callers reach through this module, and the module each lives in: imported on first use, so that the
# command's --help does not load JAX and Flax (tests and benchmarks also reach `decode` and `tokens` here).
_PACKAGE = "capjax.erg.generator"
_EXPORTS = {
    **dict.fromkeys(("Generator", "GeneratorError", "Pair", "captions_per_second", "nucleus"), f"{_PACKAGE}.model"),
    **dict.fromkeys(("read_pairs", "scene_pairs", "training_pairs"), f"{_PACKAGE}.pairs"),
    **dict.fromkeys(("GENERATOR_FILE", "TRAIN_HINT", "VARIABLES_DIR", "load", "save"), f"{_PACKAGE}.storage"),
    **dict.fromkeys(("PAPER", "SCRATCH", "TINY", "TrainSettings", "new_generator", "sequences", "train"),
                    f"{_PACKAGE}.training"),
    **dict.fromkeys(("BPE_FILES", "CLS", "SEP", "BPEVocab", "Vocab", "WordVocab"), f"{_PACKAGE}.vocab"),
}
_EXPORTS.update({"decode": "capjax.decode", "tokens": "capjax.tokens"})  # modules, as `from capjax import decode`
__all__ = sorted([*_EXPORTS, "main"])
__getattr__ = cli.lazy_attributes(__name__, _EXPORTS)


def _flags():
  from absl import flags  # noqa: PLC0415 (only the command parses flags)
  values = flags.FlagValues()
  flags.DEFINE_boolean("train", False, "train a generator (else: generate from --generator and --input)",
                       flag_values=values)
  flags.DEFINE_string("output", None, "--train: the directory to save the generator in; generate: a JSONL file "
                      "to write (default: stdout)", flag_values=values)
  flags.DEFINE_string("weights", None, "--train: a converted GPT-2 directory (convert_weights --format=hf_gpt2) "
                      "to fine-tune; default: a tiny GPT-2 from scratch", flag_values=values)
  flags.DEFINE_integer("num_train", 500, "--train: stylized_scenes training images (two captions each)",
                       lower_bound=1, flag_values=values)
  flags.DEFINE_integer("epochs", None, "--train: epochs (default: 1 fine-tuning, 20 from scratch)", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_float("learning_rate", None, "--train: peak AdamW rate (default: 5e-5 fine-tuning, 3e-3 from "
                     "scratch)", lower_bound=0.0, flag_values=values)
  flags.DEFINE_string("generator", None, "generate: a directory saved by --train", flag_values=values)
  flags.DEFINE_string("input", None, "generate: a .jsonl ({\"phrase\", \"caption\"} per line) or .tsv "
                      "(phrase<TAB>caption) file", flag_values=values)
  flags.DEFINE_integer("beam_size", 1, "generate: 1 for greedy, more for beam search", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_float("top_p", None, "generate: sample from the nucleus of this probability mass instead of "
                     "searching (with --seed)", flag_values=values)
  flags.DEFINE_integer("seed", 0, "generate: the sampling seed for --top_p", flag_values=values)
  flags.DEFINE_integer("batch_size", 256, "generate: captions per batch", lower_bound=1, flag_values=values)
  return values


def main(argv: Sequence[str]) -> None:
  """argv as `app.run` passes it: the program name, then the flags."""
  values = _flags()
  cli.parse(values, argv, __doc__)
  # After the flags: the generator's modules load JAX and Flax.
  from capjax.erg.generator.model import GeneratorError  # noqa: PLC0415
  from capjax.erg.generator.pairs import read_pairs, scene_pairs  # noqa: PLC0415
  from capjax.erg.generator.storage import load, save  # noqa: PLC0415
  from capjax.erg.generator.training import PAPER, SCRATCH, train  # noqa: PLC0415
  if values["learning_rate"].value is not None:  # 0 is a value (that trains nothing), not "unset"
    cli.check_number("--learning_rate", values["learning_rate"].value, 0, low_open=True)
  if values["top_p"].value is not None:
    cli.check_number("--top_p", values["top_p"].value, 0, 1, low_open=True, hint=" (the probability mass to sample "
                     "from)")
  try:
    if values["train"].value:
      if not values["output"].value:
        cli.fail("--train needs --output=DIR — give the directory to save the generator in")
      output = cli.writable_dir(values["output"].value, "--output")
      base = PAPER if values["weights"].value else SCRATCH
      given = {k: values[k].value for k in ("epochs", "learning_rate") if values[k].value is not None}
      settings = dataclasses.replace(base, **given)
      from capjax.text_models import checkpoint  # noqa: PLC0415
      try:
        generator = train(scene_pairs(values["num_train"].value), settings, values["weights"].value, log=True)
      except checkpoint.WeightsError as error:  # says what to do
        cli.fail(f"--weights={values['weights'].value}: {error}")
      print(save(generator, output))
      return
    if not values["generator"].value or not values["input"].value:
      cli.fail("generating needs --generator=DIR and --input=PAIRS.jsonl|.tsv (or --train to train) — see --help")
    from capjax import files  # noqa: PLC0415
    files.text_input(values["input"].value, "--input", "a UTF-8 JSONL or TSV file")  # before the generator loads
    if values["output"].value is not None:  # checked before the generator loads: an input is never overwritten
      reads = {"--input": values["input"].value, "--generator": values["generator"].value}
      files.output_file(values["output"].value, inputs=reads, example="stylized.jsonl")
    try:
      generator = load(values["generator"].value)
    except GeneratorError as error:
      cli.fail(f"--generator={values['generator'].value}: {error}")
    pairs = read_pairs(values["input"].value)
    captions = generator.generate(pairs, values["beam_size"].value, values["batch_size"].value,
                                  values["top_p"].value, values["seed"].value)
    lines = [json.dumps({"phrase": p.phrase, "caption": p.content, "stylized": c}) for p, c in zip(pairs, captions)]
    if values["output"].value:
      with files.writing(values["output"].value) as f:
        f.write("\n".join(lines) + "\n")
    else:
      print("\n".join(lines))
  except GeneratorError as error:
    cli.fail(str(error))


if __name__ == "__main__":
  cli.run(main)
