"""The stylized_scenes dataset: importing this package registers its builder with TFDS."""

from tfds_builders.stylized_scenes.stylized_scenes_dataset_builder import Builder, StylizedScenesConfig

__all__ = ["Builder", "StylizedScenesConfig"]
