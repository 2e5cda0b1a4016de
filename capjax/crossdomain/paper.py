"""The paper's published automatic metrics (Sharma et al., ACL 2018, Tables 5-7), copied from the paper as data, and
which of our models, training sets and test sets they sit beside. Nothing here is computed.
"""

from __future__ import annotations

import dataclasses

from capjax.data import integrity

CITATION = "Sharma et al. 2018 (ACL), Conceptual Captions"


@dataclasses.dataclass(frozen=True)
class PaperTable:
  """One of the paper's tables: its number, the test set it was scored on (the paper's words and what differs from
  ours), the metrics in our keys, and {(model, training): figures in `metrics` order}."""

  number: int
  test_set: str
  differs: str
  metrics: tuple[str, ...]
  rows: dict[tuple[str, str], tuple[float, ...]]


# The paper's Tables 5-7, as printed. Its models: RNN/T2T on IRv2 features as one pooled vector (1x1) or the 8x8 grid;
# its training sets: COCO and Conceptual (CC3M train). (Its text quotes 1.468 CIDEr for the Conceptual T2T8x8 on its
# test set, where Table 6 prints 1.676: the table is kept.)
TABLES: dict[str, PaperTable] = {
    "coco": PaperTable(
        5, "COCO C40 test (the COCO evaluation server)",
        "the paper scored COCO's hidden C40 test set (40 references per image) on the evaluation server; capjax scores "
        "Karpathy's test split (5 references per image), so compare the size of the numbers, not their decimals",
        ("cider_d", "ROUGE_L", "METEOR"),
        {("RNN1x1", "COCO"): (1.021, 0.694, 0.348), ("RNN8x8", "COCO"): (1.044, 0.698, 0.354),
         ("T2T1x1", "COCO"): (1.032, 0.700, 0.358), ("T2T8x8", "COCO"): (1.032, 0.700, 0.356),
         ("RNN1x1", "Conceptual"): (0.403, 0.445, 0.191), ("RNN8x8", "Conceptual"): (0.410, 0.437, 0.189),
         ("T2T1x1", "Conceptual"): (0.348, 0.403, 0.171), ("T2T8x8", "Conceptual"): (0.345, 0.400, 0.170)}),
    "cc3m": PaperTable(
        6, "the 22.5K Conceptual Captions test set",
        "Conceptual Captions' test split was never released: capjax scores cc3m's validation split in its place (the "
        "paper's own dev set)",
        ("cider_d", "ROUGE_L", "SPICE"),
        {("RNN1x1", "COCO"): (0.183, 0.149, 0.062), ("RNN8x8", "COCO"): (0.191, 0.152, 0.065),
         ("T2T1x1", "COCO"): (0.184, 0.148, 0.062), ("T2T8x8", "COCO"): (0.190, 0.151, 0.064),
         ("RNN1x1", "Conceptual"): (1.351, 0.326, 0.235), ("RNN8x8", "Conceptual"): (1.401, 0.330, 0.240),
         ("T2T1x1", "Conceptual"): (1.588, 0.331, 0.254), ("T2T8x8", "Conceptual"): (1.676, 0.336, 0.257)}),
    "flickr1k": PaperTable(
        7, "Flickr 1K test",
        "the paper does not name its 1,000 Flickr images; capjax reads them as Flickr30k's Karpathy test split, the "
        "common reading (tfds_builders/karpathy/README.md)",
        ("cider_d", "ROUGE_L", "SPICE"),
        {("RNN1x1", "COCO"): (0.340, 0.414, 0.101), ("RNN8x8", "COCO"): (0.356, 0.413, 0.103),
         ("T2T1x1", "COCO"): (0.341, 0.404, 0.101), ("T2T8x8", "COCO"): (0.359, 0.416, 0.103),
         ("RNN1x1", "Conceptual"): (0.269, 0.310, 0.076), ("RNN8x8", "Conceptual"): (0.275, 0.309, 0.076),
         ("T2T1x1", "Conceptual"): (0.226, 0.280, 0.068), ("T2T8x8", "Conceptual"): (0.227, 0.277, 0.066)}),
}

# (dataset, split) of ours -> the paper's test set it stands for.
_TEST_SETS = {("karpathy/coco", "test"): "coco", ("coco_captions", "test"): "coco",
              ("cc3m", "validation"): "cc3m", ("cc3m", "test"): "cc3m",
              ("karpathy/flickr30k", "test"): "flickr1k"}
# Training data of ours -> the paper's training condition.
_TRAINING = {"karpathy/coco": "COCO", "coco_captions": "COCO", "cc3m": "Conceptual"}


def test_set_key(dataset: str, split: str) -> str | None:
  """The key of TABLES the test set `dataset` ("karpathy/coco", "cc3m/unlabeled") `split` stands for, or None."""
  return _TEST_SETS.get((dataset, split)) or _TEST_SETS.get((integrity.split_dataset(dataset)[0], split))


PAPER_SIZES = {"t2t": {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6}, "rnn": {"d_model": 512}}


def model_key(model) -> str | None:
  """The paper's name of a model config (`config.model`: "T2T8x8"), or None for a model it has no figures of: another
  encoder (the synthetic scenes' conv), another size (`:debug`)."""
  name, grid, encoder = model.get("name"), model.get("grid", ""), model.get("encoder", {}).get("name")
  if name not in PAPER_SIZES or grid not in ("1x1", "8x8") or encoder not in ("features", "irv2"):
    return None
  if any(model.get(field) != size for field, size in PAPER_SIZES[name].items()):
    return None
  return f"{name.upper()}{grid}"


def training_key(dataset: str) -> str | None:
  """The paper's training condition ("COCO", "Conceptual") of our training dataset, or None."""
  return _TRAINING.get(dataset) or _TRAINING.get(integrity.split_dataset(dataset)[0])


def figures(test_set: str | None, model: str | None, training: str | None) -> dict[str, float]:
  """{metric: the paper's figure} for one row and test set; empty where the paper has none."""
  table = TABLES.get(test_set or "")
  row = table.rows.get((model, training)) if table else None
  return dict(zip(table.metrics, row)) if row else {}
