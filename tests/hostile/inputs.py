"""The inputs the hostile cases share: `BASE_FILES` (every case's folder starts with them), the bytes several
commands' cases give (a PNG, JSON nested past the parser, UTF-16 text, the COCO files), the damaged copies of the
built dataset (`{dd:NAME}`: `DAMAGED`), and the shared assets (`{a}`: `build_assets`)."""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import numpy as np
from PIL import Image

from capjax.metrics.stylized_lm import StyleLanguageModel

REPO = pathlib.Path(__file__).resolve().parents[2]
HF_BERT = REPO / "tests" / "fixtures" / "text_models" / "bert"  # the tiny Hugging Face BERT directory


def png() -> bytes:
  buffer = io.BytesIO()
  Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), np.uint8)).save(buffer, format="PNG")
  return buffer.getvalue()


def as_json(value) -> bytes:
  return json.dumps(value).encode()


REFS = {"images": [{"id": 1}, {"id": 2}],
        "annotations": [{"image_id": 1, "caption": "a dog runs"}, {"image_id": 2, "caption": "a cat sleeps"}]}
PREDS = [{"image_id": 1, "caption": "a dog"}, {"image_id": 2, "caption": "a cat"}]
GOLD_HEADER = b"id\tsource\tcategory\talt_text\texpected\tnote\n"
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000  # nested past Python's recursion limit
UTF16 = "1\tA brown dog runs on the grass.\n".encode("utf-16")           # with its byte-order mark
UTF16_NO_BOM = "1\tA brown dog runs on the grass.\n".encode("utf-16-le")

# Every case's folder starts with these: inputs that are fine, earlier outputs, and the usual suspects.
BASE_FILES: dict[str, bytes] = {
    "alt.tsv": b"1\tA brown dog runs on the grass in the park.\n2\tTwo cats sleep on a red sofa.\n",
    "out.jsonl": b'{"id": "0", "alt_text": "earlier", "kept": false, "reason": "empty", "caption": null, '
                 b'"concepts": []}\n',  # an earlier run's output, with its funnel
    "out.funnel.json": b'{"input": 1, "kept": 0}\n',
    "captions.tsv": b"a dog runs on the grass\thttp://example.org/1.jpg\nthe cat sleeps\thttp://example.org/2.jpg\n",
    "empty.txt": b"",
    "random.bin": np.random.default_rng(1).integers(0, 256, 512, np.uint8).tobytes(),
    "latin1.tsv": b"1\tcaf\xe9 cr\xe8me on a table\n",
    "folder/inner.txt": b"a file inside a folder\n",
    "refs.json": as_json(REFS),
    "preds.json": as_json(PREDS),
    "ratings.csv": b"image_id,rater,rating\n1,1,GOOD\n1,2,BAD\n1,3,GOOD\n",
    "page.html": b"<html><body><img src='http://example.org/a.jpg' alt='a dog on the grass'></body></html>",
    "candidates.tsv": b"url\tcaption\tpage_url\nhttp://example.org/old.jpg\tearlier output\thttp://example.org/\n",
    "features.npz": b"PK an earlier extraction's output",
    "images/a.png": png(),
    "gold.tsv": GOLD_HEADER + b"g1\tcapjax\tanimals\tA dog runs on the grass.\tdog runs on the grass\t\n",
    "lm.json": as_json(StyleLanguageModel.train(["a dog runs on the grass", "a cat sleeps"],
                                                style="romantic").to_json()),
}

# --- damaged copies of the built dataset ({dd:NAME}) ----------------------------------------------------------------

TINY_DIR = "synthetic_scenes/tiny/1.0.0"
TRAIN_SHARD = "synthetic_scenes-train.array_record-00000-of-00001"


def _cut(path: pathlib.Path) -> None:
  """`path` cut to half its length, as a full disk or a killed copy leaves it."""
  path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _zero_inside(path: pathlib.Path) -> None:
  """100 kB in the middle of `path` zeroed: its footer, and so its record count, intact (what a cheap check misses)."""
  data = bytearray(path.read_bytes())
  middle = len(data) // 2
  data[middle:middle + 100_000] = bytes(100_000)
  path.write_bytes(bytes(data))


def _as_cc3m(root: pathlib.Path) -> None:
  """The dataset moved to where cc3m's build goes (a builder that needs manual files), its train shard cut."""
  (root / "cc3m/unlabeled").mkdir(parents=True)
  (root / TINY_DIR).rename(root / "cc3m/unlabeled/1.0.0")
  _cut(root / "cc3m/unlabeled/1.0.0" / TRAIN_SHARD)


def _as_variant(root: pathlib.Path) -> None:
  """The dataset moved to where its feature variant `irv2` goes, its features.json garbled (as a reader sees it:
  a variant has no builder code, so TFDS takes its features from that file)."""
  (root / "synthetic_scenes_irv2/tiny").mkdir(parents=True)
  (root / TINY_DIR).rename(root / "synthetic_scenes_irv2/tiny/1.0.0")
  (root / "synthetic_scenes_irv2/tiny/1.0.0/features.json").write_bytes(b"\x89\xff{garbled")


def _test_split_emptied(root: pathlib.Path) -> None:
  """The test split holds no example: its shard a whole ArrayRecord file of 0 records, as dataset_info.json says
  (a whole dataset with an empty split, not a damaged one)."""
  from array_record.python import array_record_module
  folder = root / TINY_DIR
  writer = array_record_module.ArrayRecordWriter(str(folder / "synthetic_scenes-test.array_record-00000-of-00001"),
                                                 "group_size:1")
  writer.close()
  info = json.loads((folder / "dataset_info.json").read_text())
  [test] = [split for split in info["splits"] if split["name"] == "test"]
  test["shardLengths"], test["numBytes"] = ["0"], "0"
  (folder / "dataset_info.json").write_text(json.dumps(info))


DAMAGED = {
    "shard-cut": lambda root: _cut(root / TINY_DIR / TRAIN_SHARD),
    "shard-zeroed-inside": lambda root: _zero_inside(root / TINY_DIR / TRAIN_SHARD),
    "info-cut": lambda root: _cut(root / TINY_DIR / "dataset_info.json"),
    "features-garbled": lambda root: (root / TINY_DIR / "features.json").write_bytes(b"\x89\xff{garbled"),
    "cc3m-shard-cut": _as_cc3m,
    "variant-features-garbled": _as_variant,
    "test-split-emptied": _test_split_emptied,
}


def build_assets(root: pathlib.Path) -> None:
  """Weight files and folders that take a library to write ({a}), written under `root`."""
  import h5py
  import orbax.checkpoint as ocp

  from capjax.models import inception_resnet_v2 as irv2
  from capjax.tools import convert_weights as cw
  rng = np.random.default_rng(2)
  # Another model's tensors, in a well-formed safetensors file (a BERT layer, as a user might grab by mistake).
  cw.write_safetensors(root / "other.safetensors", {
      "bert.embeddings.word_embeddings.weight": rng.normal(size=(64, 16)).astype(np.float32),
      "bert.encoder.layer.0.attention.self.query.weight": rng.normal(size=(16, 16)).astype(np.float32)},
      {"format": "pt"})
  whole = (root / "other.safetensors").read_bytes()
  (root / "truncated.safetensors").write_bytes(whole[:len(whole) - 1000])  # a download cut short
  with h5py.File(root / "other.h5", "w") as f:  # legacy Keras layout, another network's layers
    f.attrs["layer_names"] = [b"dense", b"dense_1"]
    for layer, shape in (("dense", (16, 8)), ("dense_1", (8, 2))):
      group = f.create_group(layer)
      group.attrs["weight_names"] = [f"{layer}/kernel:0".encode()]
      group.create_dataset(f"{layer}/kernel:0", data=rng.normal(size=shape).astype(np.float32))
  with h5py.File(root / "plain.h5", "w") as f:  # HDF5, but not Keras weights
    f.create_dataset("x", data=np.arange(10))
  whole = (root / "other.h5").read_bytes()
  (root / "truncated.h5").write_bytes(whole[:len(whole) // 2])
  metadata = {"model": "inception_resnet_v2", "format": "test", "num_classes": 1000}
  for name, text in (("metadata_only", json.dumps(metadata)), ("bad_metadata", '{"num_classes": 10'),
                     ("no_classes", json.dumps({"format": "keras-legacy-h5"}))):
    (root / name).mkdir()
    (root / name / irv2.METADATA_FILE).write_text(text)
  # metadata.json as convert_weights writes it, over an orbax checkpoint of another network.
  (root / "other_model").mkdir()
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(root / "other_model" / irv2.VARIABLES_DIR, {"params": {"dense": {"kernel": np.ones((4, 2))}}})
  (root / "other_model" / irv2.METADATA_FILE).write_text(json.dumps(metadata))
  # The tiny text-model fixtures converted, and a conversion whose config.json was edited afterwards.
  for kind in ("bert", "gpt2"):
    cw.convert_hf(f"hf_{kind}", HF_BERT.parent / kind, root / kind)
  shutil.copytree(root / "bert", root / "bert_edited")
  config = json.loads((root / "bert_edited" / "config.json").read_text())
  (root / "bert_edited" / "config.json").write_text(json.dumps({**config, "intermediate_size": 128}))
