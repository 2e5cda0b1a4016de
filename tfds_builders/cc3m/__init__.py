"""The cc3m dataset (Conceptual Captions 3M): importing this package registers its builder with TFDS."""

from tfds_builders.cc3m.cc3m_dataset_builder import Builder, Cc3mConfig

__all__ = ["Builder", "Cc3mConfig"]
