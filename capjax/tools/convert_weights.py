"""Imports released weights into capjax's layout: Inception-ResNet-v2 (Keras HDF5, timm safetensors) and Hugging
Face text models (BERT-family encoders such as MiniLM, GPT-2, CLIP's image and text towers).

usage: python -m capjax.tools.convert_weights --format=keras|timm --input=FILE --output=DIR
       python -m capjax.tools.convert_weights --format=hf_bert|hf_gpt2|hf_clip --input=DIR --output=DIR
       python -m capjax.tools.convert_weights --format=random --output=DIR [--seed=0]
Writes an orbax checkpoint and metadata.json (with the input's sha256) into DIR and prints the metadata.
--format=random writes untrained Inception-ResNet-v2 weights with the 1,000-class head, no download needed: for
trying the feature path end to end (their metadata says "format": "random"; features from them are noise). It
never replaces weights converted from a file in DIR.
A Hugging Face --input directory holds model.safetensors, config.json and vocab.txt (BERT; tokenizer_config.json's
do_lower_case is kept, default true) or vocab.json and merges.txt (GPT-2; CLIP, a CLIPModel checkpoint, whose
preprocessor_config.json's image_mean and image_std are kept when it has one); DIR gets them (capjax.text_models).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from absl import flags

from capjax import cli, files

# The conversion library (`capjax.tools.weights`), reached through this module by the tests and benchmarks, imported
# on first use: --help does not load JAX and Flax. FORMATS is the library's (a test keeps the two equal).
FORMATS = ("keras", "timm", "hf_bert", "hf_gpt2", "hf_clip", "random")
_EXPORTS = dict.fromkeys((
    "ConvSite", "ConversionError", "HF_FORMATS", "IMAGENET_CLASSES", "Key", "MAX_SAFETENSORS_HEADER",
    "SAFETENSORS_DTYPES", "Tensor", "assemble", "conv_sites", "convert", "convert_file", "convert_hf",
    "keras_variables", "read_keras_h5", "read_safetensors", "residual_stages", "sha256", "timm_stage",
    "timm_variables", "write_random", "write_safetensors"
), "capjax.tools.weights")
__all__ = sorted([*_EXPORTS, "FORMATS", "main"])
__getattr__ = cli.lazy_attributes(__name__, _EXPORTS)

FLAGS = flags.FlagValues()
_FORMAT = flags.DEFINE_enum("format", None, FORMATS, "keras: legacy .h5 (keras.applications download) or Keras 3 "
                            ".weights.h5; timm: inception_resnet_v2 safetensors; hf_bert: a Hugging Face "
                            "BERT-family (BertModel, MiniLM) directory; hf_gpt2: a Hugging Face GPT-2 directory; "
                            "hf_clip: a Hugging Face CLIPModel directory; "
                            "random: untrained Inception-ResNet-v2 weights (no --input)",
                            flag_values=FLAGS, required=True)
_INPUT = flags.DEFINE_string("input", None, "the weights file (keras, timm) or checkpoint directory (hf_*)",
                             flag_values=FLAGS)
_OUTPUT = flags.DEFINE_string("output", None, "directory for the orbax checkpoint and metadata.json",
                              flag_values=FLAGS, required=True)
_SEED = flags.DEFINE_integer("seed", 0, "--format=random: the seed of the draws", lower_bound=0, flag_values=FLAGS)


def _refuse_real_weights(output: str) -> None:
  """An `error:` line when `output` holds weights converted from a file: random ones never replace them."""
  from capjax.models import inception_resnet_v2 as irv2  # noqa: PLC0415
  path = os.path.join(output, irv2.METADATA_FILE)
  if not os.path.lexists(path):
    if os.path.isdir(output) and os.listdir(output):
      cli.fail(f"--output={output} is a folder with other files in it — give a new or empty directory for the random "
               "weights")
    return
  try:
    metadata = irv2.read_metadata(output)
  except (OSError, irv2.WeightsError):
    metadata = {}
  if not irv2.is_random(metadata):
    cli.fail(f"--output={output} holds weights converted from a file ({path}, format "
             f"{metadata.get('format', 'unknown')!r}) — give another directory: random weights never replace them")


def main(argv: Sequence[str]) -> None:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  from capjax.tools.weights import HF_FORMATS, ConversionError, convert, convert_hf, write_random  # noqa: PLC0415
  if _FORMAT.value == "random":
    if _INPUT.value is not None:
      cli.fail(f"--format=random reads no file, but --input={_INPUT.value} was given — drop --input, or give the "
               "format of that file (keras, timm)")
    if os.path.exists(_OUTPUT.value) and not os.path.isdir(_OUTPUT.value):
      cli.fail(f"--output={_OUTPUT.value} is a file, not a directory — give a new or empty directory")
    _refuse_real_weights(_OUTPUT.value)
    output = cli.writable_dir(_OUTPUT.value, "--output")
    print(json.dumps(write_random(output, _SEED.value), indent=2, sort_keys=True))
    return
  if _INPUT.value is None:
    cli.fail(f"missing --input — --format={_FORMAT.value} converts a file or directory, see --help")
  kind = HF_FORMATS.get(_FORMAT.value)
  if kind and not os.path.isdir(_INPUT.value):
    cli.fail(f"--input={_INPUT.value} is not a directory — give the Hugging Face checkpoint directory (with "
             "model.safetensors and config.json)")
  if not kind:
    files.input_file(_INPUT.value, "--input", f"the downloaded {_FORMAT.value} weights file")
  files.refuse_overlap({"--output": _OUTPUT.value}, {"--input": _INPUT.value})
  cli.writable_dir(_OUTPUT.value, "--output")  # before the conversion, not after it
  try:
    metadata = (convert_hf if kind else convert)(_FORMAT.value, _INPUT.value, _OUTPUT.value)
  except (ConversionError, OSError) as error:
    advice = (f"give a Hugging Face {kind} checkpoint whose config.json was saved with its weights" if kind else
              f"give Inception-ResNet-v2 weights in the --format={_FORMAT.value} layout (the formats are in --help)")
    cli.fail(f"--input={_INPUT.value}: {getattr(error, 'strerror', None) or error} — {advice}")
  print(json.dumps(metadata, indent=2, sort_keys=True))


if __name__ == "__main__":
  cli.run(main)
