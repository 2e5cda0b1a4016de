"""The senticap dataset (SentiCap's positive and negative captions of COCO images): importing this package
registers its builder with TFDS."""

from tfds_builders.senticap.senticap_dataset_builder import Builder

__all__ = ["Builder"]
