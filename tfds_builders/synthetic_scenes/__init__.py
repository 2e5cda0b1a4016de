"""The synthetic_scenes dataset: importing this package registers its builder with TFDS."""

from tfds_builders.synthetic_scenes.synthetic_scenes_dataset_builder import Builder, SyntheticScenesConfig

__all__ = ["Builder", "SyntheticScenesConfig"]
