"""The alt_text_captions dataset (the paper's pipeline over harvested alt-texts): importing this package registers
its builder with TFDS."""

from tfds_builders.alt_text_captions.alt_text_captions_dataset_builder import (AltTextConfig, Builder,
                                                                             config_from_settings)

__all__ = ["AltTextConfig", "Builder", "config_from_settings"]
