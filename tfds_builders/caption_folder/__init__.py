"""The caption_folder dataset (a folder of the user's own captioned images, one folder per split): importing this
package registers its builder with TFDS."""

from tfds_builders.caption_folder.caption_folder_dataset_builder import Builder

__all__ = ["Builder"]
