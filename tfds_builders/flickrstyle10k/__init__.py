"""The flickrstyle10k dataset (FlickrStyle10K's humorous and romantic captions): importing this package registers
its builder with TFDS."""

from tfds_builders.flickrstyle10k.flickrstyle10k_dataset_builder import Builder

__all__ = ["Builder"]
