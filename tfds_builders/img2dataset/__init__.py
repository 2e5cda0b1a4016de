"""img2dataset's output (webdataset tars or the files layout, with parquet sidecars) read as streams and joined by
url to a caption TSV, with every row and image accounted for; the plain and the Beam paths share it:
`shards.py` (reading a shard: samples, candidates; a second read of chosen images), `tsv.py` (the TSV's url
index), `join.py` (a shard's events, the one join rule `row_outcome`, the plain path, the build report's counts),
`beam.py` (the Beam path: light events grouped by row, winners by shard, no image bytes in a shuffle),
`features.py` (the image fields every such builder writes). The names below are the package's API.

Builders import this package by its package name: `tfds build tfds_builders/cc3m` loads the builder module under
another name (`cc3m.cc3m_dataset_builder`), which Beam workers could not import back to run its functions.
"""

from tfds_builders.img2dataset.beam import beam_split_transform
from tfds_builders.img2dataset.features import image_caption_features, image_features
from tfds_builders.img2dataset.join import (CC3M_BREAKDOWNS, IMAGE_KEYS, REPORT_KEYS, ROW_KEYS, Event, format_report,
                                            plain_split, row_outcome, row_outcomes, shard_events, split_report)
from tfds_builders.img2dataset.shards import (IMAGES_DIR, MAX_MEMBER_BYTES, Candidate, Sample, Where, list_shards,
                                              read_images, shard_candidates, shard_samples, split_shards, verify_image)
from tfds_builders.img2dataset.tsv import TsvIndex, tsv_index

__all__ = ["CC3M_BREAKDOWNS", "IMAGES_DIR", "IMAGE_KEYS", "MAX_MEMBER_BYTES", "REPORT_KEYS", "ROW_KEYS", "Candidate",
           "Event", "Sample", "TsvIndex", "Where", "beam_split_transform", "format_report", "image_caption_features",
           "image_features", "list_shards", "plain_split", "read_images", "row_outcome", "row_outcomes",
           "shard_candidates", "shard_events", "shard_samples", "split_report", "split_shards", "tsv_index",
           "verify_image"]
