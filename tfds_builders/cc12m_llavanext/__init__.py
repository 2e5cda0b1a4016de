"""The cc12m_llavanext dataset (CC12M with LLaVA-NeXT recaptions): importing this package registers its builder with
TFDS."""

from tfds_builders.cc12m_llavanext.cc12m_llavanext_dataset_builder import Builder, Cc12mLlavanextConfig

__all__ = ["Builder", "Cc12mLlavanextConfig"]
