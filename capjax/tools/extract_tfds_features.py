r"""Inception-ResNet-v2 features for a whole TFDS dataset, written as a TFDS dataset that training reads instead
of pixels (the paper trains on frozen features: running the CNN every step is most of the cost).

usage: python -m capjax.tools.extract_tfds_features --dataset=cc3m --weights=DIR [--data_dir=DIR] \
           [--splits=train,validation,test] [--dtype=float16] [--batch_size=64] [--examples_per_shard=4096]

The output is the dataset `{dataset}_{variant}` (default variant `irv2`, e.g. `cc3m_irv2`) with the source's builder
config and version, beside the source in `--data_dir` (or in `--output_data_dir`). Each record holds the source's
fields except its images, plus
  grid          (h, w, 1536) Inception-ResNet-v2's last feature map (8×8 at 299×299 pixels), in --dtype
  pooled        (1536,) its spatial mean, in --dtype
  source_index  the record's index in the source split (the gallery finds the picture there).
Train on it with `--config.dataset.features=irv2` (the paper configs' default).

Each split is cut into shards of --examples_per_shard consecutive examples. A shard is written to a temporary
file and renamed when complete, so a killed job, run again with the same arguments, resumes at the first missing
shard. Under `jax.distributed` the processes take shards in turn; within a process every batch is split over its
local devices. A record whose image cannot be decoded is skipped, reported and counted (`skipped.json`); a shard
of which no record can be read (a damaged source) stops the extraction, and a variant it started is removed.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tqdm
from absl import flags, logging

from capjax import cli, files
from capjax.config_util import ConfigError
from capjax.data import integrity, preprocess, shards
from capjax.tools.extract_features import IMAGE_SIZE, MIN_IMAGE_SIZE

if TYPE_CHECKING:
  import jax

  from capjax.features import Encoder

# jax, the network, the dataset registry and jax.distributed are imported where they are used: --help answers
# without them (1.4 s). The names below are capjax.features' and capjax.distributed's (a test checks it).
DEFAULT_VARIANT = "irv2"                # capjax.features.DEFAULT_VARIANT
DISTRIBUTED_MODES = ("auto", "on", "off")  # capjax.distributed.MODES

DEFAULT_BATCH_SIZE = 64
DEFAULT_EXAMPLES_PER_SHARD = 4096
MANIFEST = "extraction.json"
SKIPPED = "skipped.json"
SHARD_INFO_DIR = shards.INFO_DIR  # one JSON per finished shard: its length and skipped records
READ_WORKERS = 8


class SettingsError(ValueError):
  """Arguments that cannot work (or do not match the partial extraction being resumed); says what to change."""


class SourceError(ValueError):
  """The source dataset cannot be read (no record of a shard decodes); says how to build it again."""


@dataclasses.dataclass(frozen=True)
class Settings:
  """Everything the written features depend on; a resumed job must match the one that started."""
  source: str            # name/config/version of the source dataset
  weights: str           # sha256 of the converted weights' metadata (it names the source file's sha256)
  image_size: int
  dtype: str
  image_key: str
  examples_per_shard: int


def shard_ranges(num_examples: int, examples_per_shard: int) -> list[tuple[int, int]]:
  """[start, stop) index ranges of consecutive examples; at least one (possibly empty) shard per split."""
  try:
    return shards.shard_ranges(num_examples, examples_per_shard)
  except ValueError as error:
    raise SettingsError(str(error)) from None


def output_features(source_features, image_key: str, grid_shape: tuple[int, ...], dtype: str):
  """The source's FeaturesDict without its images, plus grid, pooled and source_index."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  if image_key not in source_features:
    raise SettingsError(f"the source has no {image_key!r} feature (it has {sorted(source_features)}) — name its "
                        "image with --image_key")
  from capjax.features import FEATURE_KEYS  # noqa: PLC0415
  kept = {k: f for k, f in source_features.items() if not isinstance(f, tfds.features.Image)}
  for key in (*FEATURE_KEYS, "source_index"):
    if key in kept:
      raise SettingsError(f"the source already has a {key!r} feature, which the features would overwrite — "
                          "extract from a dataset without it")
  return tfds.features.FeaturesDict({
      **kept,
      "grid": tfds.features.Tensor(shape=grid_shape, dtype=np.dtype(dtype),
                                   doc="Inception-ResNet-v2 feature map (conv_7b), raster order."),
      "pooled": tfds.features.Tensor(shape=(grid_shape[-1],), dtype=np.dtype(dtype),
                                     doc="Spatial mean of the grid (the model's global average pool)."),
      "source_index": tfds.features.Scalar(np.int64, doc="Index of the record in the source split."),
  })


@dataclasses.dataclass
class ShardResult:
  num_examples: int
  skipped: list[tuple[int, str]]  # (source index, reason)


def rgb(image: np.ndarray) -> np.ndarray:
  """(H, W), (H, W, 1), (H, W, 3) or (H, W, 4) uint8 -> (H, W, 3): grey repeated, alpha dropped."""
  if image.ndim == 3 and image.shape[-1] == 1:
    image = image[..., 0]
  if image.ndim == 2:
    return np.repeat(image[..., None], 3, axis=-1)
  if image.ndim == 3 and image.shape[-1] in (3, 4):
    return image[..., :3]
  raise ValueError(f"an image of shape {image.shape} is neither grey, RGB nor RGBA")


def _read(source, index: int, image_key: str, size: int) -> tuple[dict[str, Any] | None, np.ndarray | None, str]:
  """(record, its picture as RGB resized to `size`, "") or (None, None, reason) when it cannot be decoded."""
  try:
    record = source[index]
    pixels = preprocess.resize(rgb(np.asarray(record[image_key], np.uint8)), size)
  except Exception as error:  # noqa: BLE001 (any undecodable record is skipped and reported, never fatal)
    return None, None, f"{type(error).__name__}: {error}"
  return record, pixels, ""


def encode_shard(source, start: int, stop: int, encoder: Encoder, image_key: str, image_size: int,
                 batch_size: int, serialize: Callable[[dict[str, Any]], bytes], dropped: frozenset[str],
                 write: Callable[[bytes], None], on_examples: Callable[[int], None] = lambda n: None) -> ShardResult:
  """Writes the serialized output records of source[start:stop] in order, without the `dropped` (image)
  fields; unreadable records are skipped and listed.

  Records are decoded in threads while the devices encode the previous batch (dispatch is asynchronous).
  """
  import jax  # noqa: PLC0415
  written = 0
  skipped: list[tuple[int, str]] = []
  pending: tuple[list[tuple[int, dict]], dict[str, jax.Array]] | None = None

  def finish(batch: list[tuple[int, dict]], outputs: dict[str, jax.Array]) -> None:
    nonlocal written
    host = jax.device_get(outputs)
    for row, (index, record) in enumerate(batch):
      example = {k: v for k, v in record.items() if k not in dropped}
      example.update(grid=host["grid"][row], pooled=host["pooled"][row], source_index=index)
      write(serialize(example))
    written += len(batch)
    on_examples(len(batch))

  def batches() -> Iterator[tuple[list[tuple[int, dict]], np.ndarray]]:
    batch: list[tuple[int, dict]] = []
    pixels: list[np.ndarray] = []
    with concurrent.futures.ThreadPoolExecutor(READ_WORKERS) as pool:
      chunk = 4 * READ_WORKERS
      for lo in range(start, stop, chunk):
        indices = range(lo, min(lo + chunk, stop))
        for index, (record, image, reason) in zip(
            indices, pool.map(lambda i: _read(source, i, image_key, image_size), indices)):
          if record is None:
            skipped.append((index, reason))
            logging.warning("skipped record %d: %s", index, reason)
            on_examples(1)
            continue
          batch.append((index, record))
          pixels.append(image)
          if len(batch) == batch_size:
            yield batch, np.stack(pixels)
            batch, pixels = [], []
    if batch:
      padding = [np.zeros_like(pixels[0])] * (batch_size - len(batch))
      yield batch, np.stack(pixels + padding)

  for batch, pixels in batches():
    outputs = encoder(pixels)
    if pending:
      finish(*pending)
    pending = (batch, outputs)
  if pending:
    finish(*pending)
  return ShardResult(written, skipped)


def weights_fingerprint(weights_dir: str | pathlib.Path) -> str:
  """sha256 of the converted weights' metadata.json (it records the sha256 of the file they came from)."""
  from capjax.models import inception_resnet_v2 as irv2  # noqa: PLC0415
  return hashlib.sha256((pathlib.Path(weights_dir) / irv2.METADATA_FILE).read_bytes()).hexdigest()


def _check_manifest(out_dir: pathlib.Path, settings: Settings, write: bool = True) -> None:
  """Writes the settings on the first run (unless not `write`); a resumed run with other settings is an error, not
  a mixed dataset."""
  shards.check_manifest(out_dir / MANIFEST, dataclasses.asdict(settings), lambda details: SettingsError(
      f"{out_dir} holds a partial extraction with other settings ({details}) — run again with the same arguments to "
      f"resume it, or delete {out_dir} (or pick another --output_data_dir) to start over"), write)


def extract_dataset(source_builder, weights_dir: str | pathlib.Path, output_data_dir: str | pathlib.Path,
                    variant: str = DEFAULT_VARIANT, splits: Sequence[str] | None = None,
                    image_size: int = IMAGE_SIZE, dtype: str = "float16", image_key: str = "image",
                    batch_size: int = DEFAULT_BATCH_SIZE, examples_per_shard: int = DEFAULT_EXAMPLES_PER_SHARD,
                    devices: Sequence[jax.Device] | None = None, sources: dict[str, Any] | None = None,
                    progress: bool = True) -> pathlib.Path:
  """Writes the feature variant of `source_builder` (a prepared TFDS builder) and returns its directory.

  `sources` may replace the builder's data sources by split (tests pass sources with unreadable records).
  """
  import jax  # noqa: PLC0415

  from capjax import distributed  # noqa: PLC0415
  from capjax.features import Encoder, grid_shape, variant_name  # noqa: PLC0415
  from capjax.models import inception_resnet_v2 as irv2  # noqa: PLC0415

  if wrong := integrity.name_problem(variant):
    raise SettingsError(f"--variant={variant} {wrong}, and it names the output folder {{dataset}}_{{variant}} — give "
                        f"a plain name such as {DEFAULT_VARIANT}")
  if image_size < irv2.MIN_IMAGE_SIZE:
    raise SettingsError(f"image_size={image_size} is below {irv2.MIN_IMAGE_SIZE} — give at least "
                        f"{irv2.MIN_IMAGE_SIZE}")
  if np.dtype(dtype) not in (np.float16, np.float32):
    raise SettingsError(f"dtype={dtype!r} is neither float16 nor float32 — give one of them")
  info = source_builder.info
  splits = list(splits or info.splits.keys())
  missing = [s for s in splits if s not in info.splits]
  if missing:
    raise SettingsError(f"splits {missing} are not in {source_builder.name} — choose from {sorted(info.splits)}")
  config = source_builder.builder_config.name if source_builder.builder_config else None
  name = variant_name(source_builder.name, variant)
  out_dir = pathlib.Path(output_data_dir).expanduser().resolve() / name
  if config:
    out_dir /= config
  out_dir /= str(source_builder.version)

  devices = list(devices or jax.local_devices())
  if batch_size % len(devices):
    batch_size += len(devices) - batch_size % len(devices)
    logging.info("batch size rounded up to %d, a multiple of the %d local devices", batch_size, len(devices))
  features = output_features(info.features, image_key, grid_shape(image_size), dtype)
  dropped = frozenset(info.features) - frozenset(features)  # the source's images

  settings = Settings(
      source=f"{source_builder.name}/{config or ''}/{source_builder.version}",
      weights=weights_fingerprint(weights_dir), image_size=image_size, dtype=str(np.dtype(dtype)),
      image_key=image_key, examples_per_shard=examples_per_shard)
  _check_manifest(out_dir, settings, write=False)  # other settings than a partial extraction's: told at once
  # Loaded before the manifest is written: weights that cannot be read leave no output folder behind.
  encoder = Encoder(irv2.load_converted(weights_dir), devices, dtype)
  created = _first_missing(out_dir)  # removed again if the source turns out unreadable: no variant is left
  if jax.process_index() == 0:
    _check_manifest(out_dir, settings)
  distributed.sync("capjax_features_manifest")
  if jax.process_index() != 0:
    _check_manifest(out_dir, settings)

  for split in splits:
    source = (sources or {}).get(split) or source_builder.as_data_source(split=split)
    written = shards.SplitShards(out_dir, name, split, shard_ranges(len(source), examples_per_shard))
    ranges = written.ranges
    mine = [i for i in range(len(ranges)) if i % jax.process_count() == jax.process_index()]
    todo = written.missing(mine)
    done = sum(ranges[i][1] - ranges[i][0] for i in mine if i not in todo)
    total = sum(ranges[i][1] - ranges[i][0] for i in mine)
    if done:
      logging.info("%s: resuming, %d of %d shards already written", split, len(mine) - len(todo), len(mine))
    bar = tqdm.tqdm(total=total, initial=done, unit="img", desc=f"{name} {split}", disable=not progress,
                    file=sys.stderr)
    for i in todo:
      start, stop = ranges[i]
      with written.writer(i) as writer:
        result = encode_shard(source, start, stop, encoder, image_key, image_size, batch_size,
                              features.serialize_example, dropped, writer.write, bar.update)
        if stop > start and not result.num_examples:  # a damaged source, not a few bad pictures
          bar.close()
          if created is not None and jax.process_index() == 0:
            shutil.rmtree(created, ignore_errors=True)
          rebuild = integrity.rebuild_command(settings.source.rsplit("/", 1)[0].rstrip("/"),
                                              os.fspath(source_builder.data_dir_root))
          raise SourceError(
              f"none of the {stop - start} records {start}-{stop - 1} of {source_builder.name}:{split} could be read "
              f"(the first: {result.skipped[0][1]}), so no feature variant was written — the source dataset is "
              f"damaged: {rebuild}")
        writer.info = {"num_examples": result.num_examples, "skipped": [list(x) for x in result.skipped]}
    bar.close()
  distributed.sync("capjax_features_written")
  if jax.process_index() == 0:
    every = {s: shards.SplitShards(out_dir, name, s, shard_ranges(info.splits[s].num_examples, examples_per_shard))
             for s in info.splits}
    complete = {s: written for s, written in every.items() if not written.missing()}
    for split in sorted(set(splits) - set(complete)):
      logging.error("%s: some shards are not in %s (written by other processes to their own disks?): gather "
                    "the shard files and %s/ there, then run the same command again to write the metadata",
                    split, out_dir, SHARD_INFO_DIR)
    _write_metadata(out_dir, name, config, source_builder, features, complete, settings)
  distributed.sync("capjax_features_metadata")
  return out_dir


def _first_missing(path: pathlib.Path) -> pathlib.Path | None:
  """The outermost folder of `path` (itself included) that does not exist yet, or None when it exists."""
  missing = None
  while not path.exists():
    missing, path = path, path.parent
  return missing


def _write_metadata(out_dir, name, config, source_builder, features, splits: dict[str, shards.SplitShards],
                    settings) -> None:
  """dataset_info.json and features.json (`shards.write_info`) of the complete `splits`, so that
  `tfds.builder(name/config, data_dir=...)` reads their shards; skipped.json, the pictures each split's shards
  could not read."""
  shard_info = {split: written.infos() for split, written in splits.items()}
  shards.write_info(
      out_dir, name, str(source_builder.version), features,
      {split: [s["num_examples"] for s in infos] for split, infos in shard_info.items()}, config_name=config,
      config_description=f"{source_builder.name}/{config or ''} as Inception-ResNet-v2 features",
      description=(f"Inception-ResNet-v2 features of {settings.source} at {settings.image_size}x"
                   f"{settings.image_size} pixels, written by capjax.tools.extract_tfds_features."),
      citation=source_builder.info.citation, homepage=source_builder.info.homepage)
  skipped = {split: [s for info in infos for s in info["skipped"]] for split, infos in shard_info.items()}
  (out_dir / SKIPPED).write_text(json.dumps(skipped, indent=1) + "\n")


FLAGS = flags.FlagValues()
_DATASET = flags.DEFINE_string("dataset", None, "source TFDS dataset, with its config: cc3m, synthetic_scenes/tiny",
                               flag_values=FLAGS, required=True)
_WEIGHTS = flags.DEFINE_string("weights", None, "directory written by capjax.tools.convert_weights",
                               flag_values=FLAGS, required=True)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "TFDS data dir of the source ('' -> $TFDS_DATA_DIR or "
                                "~/tensorflow_datasets)", flag_values=FLAGS)
_OUTPUT_DATA_DIR = flags.DEFINE_string("output_data_dir", "", "where the variant goes ('' -> --data_dir)",
                                       flag_values=FLAGS)
_VARIANT = flags.DEFINE_string("variant", DEFAULT_VARIANT, "suffix of the output name: {dataset}_{variant}",
                               flag_values=FLAGS)
_SPLITS = flags.DEFINE_list("splits", [], "comma-separated splits (none: all)", flag_values=FLAGS)
_IMAGE_SIZE = flags.DEFINE_integer("image_size", IMAGE_SIZE, "299 gives the 8x8 grid",
                                   lower_bound=MIN_IMAGE_SIZE, flag_values=FLAGS)
_DTYPE = flags.DEFINE_enum("dtype", "float16", ["float16", "float32"], "storage type of grid and pooled (float16 "
                           "halves the disk: 196 KB per 8x8 grid)", flag_values=FLAGS)
_IMAGE_KEY = flags.DEFINE_string("image_key", "image", "the source feature holding the picture", flag_values=FLAGS)
_BATCH_SIZE = flags.DEFINE_integer("batch_size", DEFAULT_BATCH_SIZE, "per process, over its devices",
                                   lower_bound=1, flag_values=FLAGS)
_EXAMPLES_PER_SHARD = flags.DEFINE_integer("examples_per_shard", DEFAULT_EXAMPLES_PER_SHARD,
                                           "the unit of resumption and of the output files", lower_bound=1,
                                           flag_values=FLAGS)
_DISTRIBUTED = flags.DEFINE_enum("distributed", "auto", list(DISTRIBUTED_MODES),
                                 "jax.distributed.initialize(), as capjax.main", flag_values=FLAGS)


def main(argv: Sequence[str]) -> None:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  import jax  # noqa: PLC0415

  from capjax import distributed  # noqa: PLC0415
  from capjax.data import show, sources  # noqa: PLC0415
  from capjax.models import inception_resnet_v2 as irv2  # noqa: PLC0415
  name = integrity.split_dataset(_DATASET.value)[0]
  if name not in sources.KNOWN_BUILDERS:
    cli.fail(f"unknown dataset {name!r} — choose one of {', '.join(sorted(sources.KNOWN_BUILDERS))}")
  if _DATA_DIR.value and not os.path.isdir(os.path.expanduser(_DATA_DIR.value)):
    cli.fail(f"--data_dir={_DATA_DIR.value} is not a directory — give the TFDS data dir the dataset was built in")
  try:
    distributed.maybe_initialize(_DISTRIBUTED.value)
  except distributed.NoClusterError as error:
    cli.fail(str(error))
  output_flag = "--output_data_dir" if _OUTPUT_DATA_DIR.value else "--data_dir"
  output_root = os.path.expanduser(_OUTPUT_DATA_DIR.value or integrity.data_dir(_DATA_DIR.value))
  # The variant's folder is apart from what the extraction reads: the source dataset's folder and the weights.
  files.refuse_overlap({output_flag: os.path.join(output_root, f"{name}_{_VARIANT.value}")},
                       {f"--dataset={name}'s folder": os.path.join(integrity.data_dir(_DATA_DIR.value), name),
                        "--weights": _WEIGHTS.value})
  output_root = cli.writable_dir(output_root, output_flag)  # checked before hours of extraction, not after
  start = time.perf_counter()
  try:  # a source that is not built, unconverted weights, or settings that do not fit: exit 2 with what to do
    source = show.open_builder(_DATASET.value, _DATA_DIR.value)
    if irv2.is_random(irv2.read_metadata(_WEIGHTS.value)):
      print(irv2.random_warning(_WEIGHTS.value), file=sys.stderr)
    out_dir = extract_dataset(
        source, _WEIGHTS.value, output_root, _VARIANT.value,
        _SPLITS.value or None, _IMAGE_SIZE.value, _DTYPE.value, _IMAGE_KEY.value, _BATCH_SIZE.value,
        _EXAMPLES_PER_SHARD.value)
  except (sources.DatasetNotBuiltError, ConfigError, FileNotFoundError, SettingsError, SourceError,
          irv2.WeightsError) as error:
    cli.fail(str(error))
  seconds = time.perf_counter() - start
  if jax.process_index() == 0:
    skipped = json.loads((out_dir / SKIPPED).read_text())
    print(f"wrote {out_dir} in {seconds:.0f}s; skipped (unreadable): "
          + ", ".join(f"{s} {len(v)}" for s, v in skipped.items()))
    print(f"train on it with --config.dataset.features={_VARIANT.value}")


if __name__ == "__main__":
  cli.run(main)
