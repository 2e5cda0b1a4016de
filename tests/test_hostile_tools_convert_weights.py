"""`python -m capjax.tools.convert_weights` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

import json

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink
from hostile.inputs import DEEP_JSON, HF_BERT, as_json

CONVERT = "capjax.tools.convert_weights"

NO_CONVERSION = ("converted/metadata.json", "converted/variables")


def _convert(name: str, weights_format: str, weights: str, match: str = "", **kw):
  return case(CONVERT, name, f"--format={weights_format}", f"--input={weights}", "--output={t}/converted",
              absent=NO_CONVERSION, match=match, **kw)


CASES = [
    case(CONVERT, "random-with-input", "--format=random", "--input={a}/other.safetensors", "--output={t}/converted",
         match="--format=random reads no file", absent=("converted",)),
    case(CONVERT, "random-output-is-a-file", "--format=random", "--output={t}/alt.tsv", match="is a file"),
    case(CONVERT, "random-over-real-weights", "--format=random", "--output={t}/real",
         files={"real/metadata.json": b'{"format": "keras-h5", "num_classes": 1000}\n', "real/variables/x": b"x"},
         match="holds weights converted from a file"),
    case(CONVERT, "random-into-a-full-folder", "--format=random", "--output={t}/folder", match="other files in it"),
    case(CONVERT, "random-seed-negative", "--format=random", "--output={t}/converted", "--seed=-1", match="--seed",
         absent=("converted",)),
    case(CONVERT, "no-format", "--input={a}/other.safetensors", "--output={t}/converted", match="--format"),
    case(CONVERT, "format-unknown", "--format=onnx", "--input={a}/other.safetensors", "--output={t}/converted",
         match="--format", absent=NO_CONVERSION),
    case(CONVERT, "no-input", "--format=timm", "--output={t}/converted", match="--input"),
    case(CONVERT, "no-output", "--format=timm", "--input={a}/other.safetensors", match="--output"),
    _convert("input-missing", "timm", "{t}/missing.safetensors", match="missing.safetensors"),
    _convert("input-is-a-folder", "keras", "{t}/folder", match="folder"),
    _convert("input-chmod", "timm", "{t}/copy.safetensors", files={"copy.safetensors": b"\0" * 16},
             chmod={"copy.safetensors": 0o200}),
    _convert("timm-empty-file", "timm", "{t}/empty.txt", match="too short"),
    _convert("keras-empty-file", "keras", "{t}/empty.txt", match="empty.txt"),
    _convert("timm-random-bytes", "timm", "{t}/random.bin", match="random.bin"),
    _convert("keras-random-bytes", "keras", "{t}/random.bin", match="random.bin"),
    _convert("timm-truncated", "timm", "{a}/truncated.safetensors", match="truncated.safetensors"),
    _convert("keras-truncated", "keras", "{a}/truncated.h5", match="truncated.h5"),
    _convert("timm-other-model", "timm", "{a}/other.safetensors", match="missing tensor"),
    _convert("keras-other-model", "keras", "{a}/other.h5", match="other.h5"),
    _convert("keras-h5-not-keras", "keras", "{a}/plain.h5", match="plain.h5"),
    _convert("keras-given-safetensors", "keras", "{a}/other.safetensors", match="other.safetensors"),
    _convert("timm-given-h5", "timm", "{a}/other.h5", match="other.h5"),
    _convert("timm-header-not-json", "timm", "{t}/bad.safetensors",
             files={"bad.safetensors": (9).to_bytes(8, "little") + b"{not json"}, match="JSON"),
    _convert("timm-header-nested-deep", "timm", "{t}/bad.safetensors",
             files={"bad.safetensors": len(DEEP_JSON).to_bytes(8, "little") + DEEP_JSON + b"\0" * 8},
             match="header is nested deeper than the JSON parser follows"),
    case(CONVERT, "output-is-a-file", "--format=timm", "--input={a}/other.safetensors", "--output={t}/alt.tsv",
         match="--output"),
    case(CONVERT, "output-is-the-input", "--format=timm", "--input={t}/random.bin", "--output={t}/random.bin",
         match="--output"),
    case(CONVERT, "output-read-only", "--format=timm", "--input={a}/other.safetensors", "--output={ro}/w",
         match="--output"),
    case(CONVERT, "output-chmod", "--format=timm", "--input={a}/other.safetensors", "--output={t}/locked/w",
         files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--output"),
    *not_flags(CONVERT, "--format=timm", "--input={a}/other.safetensors", "--output={t}/converted"),
]

# Hugging Face directories: the tiny BERT fixture (HF_BERT), and copies of it with one thing wrong.


def _hf_bert(**replaced: bytes) -> dict[str, bytes]:
  files = {f"hf/{name}": (HF_BERT / name).read_bytes() for name in ("model.safetensors", "config.json", "vocab.txt")}
  return files | {f"hf/{name}": data for name, data in replaced.items()}


def _hf_clip_over_bert() -> dict[str, bytes]:
  clip = HF_BERT.parent / "clip"
  return {"hf/model.safetensors": (HF_BERT / "model.safetensors").read_bytes(),
          **{f"hf/{name}": (clip / name).read_bytes() for name in ("config.json", "vocab.json", "merges.txt")}}


def _config(**changes) -> bytes:
  return as_json({**json.loads((HF_BERT / "config.json").read_text()), **changes})


CASES += [
    _convert("hf-input-is-a-file", "hf_bert", "{a}/other.safetensors", match="is not a directory"),
    _convert("hf-folder-without-checkpoint", "hf_bert", "{t}/folder", match="model.safetensors is missing"),
    _convert("hf-gpt2-given-bert", "hf_gpt2", "{r}/tests/fixtures/text_models/bert",
             match="config.json has model_type 'bert', not 'gpt2'"),
    # CLIP weights that are not CLIP: a BERT directory, and BERT's tensors under a CLIP config.json.
    _convert("hf-clip-given-bert", "hf_clip", "{r}/tests/fixtures/text_models/bert",
             match="config.json has model_type 'bert', not 'clip'"),
    _convert("hf-clip-config-over-bert-weights", "hf_clip", "{t}/hf", files=_hf_clip_over_bert(),
             match="holds no CLIPModel tensor (text_model.*, vision_model.*; it has 'embeddings.LayerNorm.bias', "
                   "'embeddings.LayerNorm.weight', 'embeddings.position_embeddings.weight', ...): these are not CLIP "
                   "weights"),
    _convert("hf-config-hidden-size", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": _config(hidden_size=48)}),
             match="config.json implies (48,)"),
    _convert("hf-config-layers", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": _config(num_hidden_layers=1)}),
             match="unexpected tensor 'encoder.layer.1."),
    _convert("hf-config-not-json", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": b'{"hidden_size": '}),
             match="not readable JSON"),
    _convert("hf-config-heads", "hf_bert", "{t}/hf", files=_hf_bert(**{"config.json": _config(num_attention_heads=5)}),
             match="not divisible"),
    case(CONVERT, "hf-output-is-the-input", "--format=hf_bert", "--input={t}/hf", "--output={t}/hf", files=_hf_bert(),
         match="--output={t}/hf would overwrite --input={t}/hf — "),
    case(CONVERT, "hf-output-links-to-the-input", "--format=hf_bert", "--input={t}/hf", "--output={t}/link",
         files=_hf_bert() | {"link": symlink("hf")}, match="would overwrite --input="),
    _convert("input-is-a-fifo", "timm", "{t}/pipe.safetensors", files={"pipe.safetensors": FIFO}, match="is a FIFO"),
    _convert("input-is-a-device", "keras", "{t}/null.h5", files={"null.h5": NULL_DEVICE},
             match="is a character device"),
    _convert("hf-weights-truncated", "hf_bert", "{t}/hf", match="model.safetensors",
             files=_hf_bert(**{"model.safetensors": (HF_BERT / "model.safetensors").read_bytes()[:-100]})),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
