"""The karpathy dataset (Karpathy's COCO / Flickr30k / Flickr8k splits, COCO-format caption files, nocaps):
importing this package registers its builder with TFDS."""

from tfds_builders.karpathy.karpathy_dataset_builder import Builder

__all__ = ["Builder"]
