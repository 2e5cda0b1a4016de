"""`python -m capjax.tools.extract_tfds_features` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import case, not_flags, runner
from hostile.inputs import TRAIN_SHARD, as_json

EXTRACT_TFDS = "capjax.tools.extract_tfds_features"

TINY_SOURCE = ("--dataset=synthetic_scenes/tiny", "--data_dir={d}", "--distributed=off")
VARIANT_OUT = ("--output_data_dir={t}/features",)
NO_VARIANT = ("features/synthetic_scenes_irv2",)


def _tfds(name: str, *args: str, match: str = "", weights: str = "{a}/metadata_only", **kw):
  return case(EXTRACT_TFDS, name, *TINY_SOURCE, f"--weights={weights}", *VARIANT_OUT, *args, absent=NO_VARIANT,
              match=match, **kw)


OTHER_MANIFEST = as_json({"source": "synthetic_scenes/tiny/1.0.0", "weights": "0" * 64, "image_size": 139,
                        "dtype": "float32", "image_key": "image", "examples_per_shard": 24})
CASES = [
    case(EXTRACT_TFDS, "no-dataset", "--weights={a}/metadata_only", "--data_dir={d}", match="--dataset"),
    case(EXTRACT_TFDS, "dataset-unknown", "--dataset=cc4m", "--weights={a}/metadata_only", "--data_dir={t}/folder",
         match="cc4m"),
    case(EXTRACT_TFDS, "dataset-not-built", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={t}/folder", "--distributed=off", match="capjax.data.build",
         absent=("folder/synthetic_scenes_irv2",)),
    case(EXTRACT_TFDS, "data-dir-missing", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={t}/nothing", match="--data_dir", absent=("nothing",)),
    case(EXTRACT_TFDS, "data-dir-is-a-file", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={t}/alt.tsv", match="--data_dir"),
    case(EXTRACT_TFDS, "data-dir-read-only", "--dataset=synthetic_scenes/tiny", "--weights={a}/metadata_only",
         "--data_dir={ro}", match="--data_dir"),
    _tfds("weights-empty", weights="", match="convert_weights"),
    _tfds("weights-missing", weights="{t}/nothing", match="convert_weights"),
    _tfds("weights-is-a-file", weights="{t}/alt.tsv", match="alt.tsv"),
    _tfds("weights-metadata-not-json", weights="{a}/bad_metadata", match="metadata.json"),
    _tfds("weights-metadata-without-classes", weights="{a}/no_classes", match="num_classes"),
    _tfds("weights-without-variables", weights="{a}/metadata_only", match="variables"),
    _tfds("weights-of-another-model", weights="{a}/other_model", match="variables"),
    _tfds("split-unknown", "--splits=dev", match="dev"),
    _tfds("variant-empty", "--variant=", match="--variant"),
    case(EXTRACT_TFDS, "variant-escapes", *TINY_SOURCE, "--weights={a}/metadata_only", *VARIANT_OUT,
         "--variant=../../../escape", match="--variant=../../../escape holds a path separator",
         absent=("escape", *NO_VARIANT)),
    case(EXTRACT_TFDS, "source-shard-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:shard-cut}",
         "--distributed=off", "--weights={a}/metadata_only", *VARIANT_OUT, absent=NO_VARIANT,
         match=f"{TRAIN_SHARD} holds 0 records"),
    case(EXTRACT_TFDS, "source-info-cut", "--dataset=synthetic_scenes/tiny", "--data_dir={dd:info-cut}",
         "--distributed=off", "--weights={a}/metadata_only", *VARIANT_OUT, absent=NO_VARIANT,
         match="dataset_info.json is not JSON"),
    case(EXTRACT_TFDS, "source-config-escapes", "--dataset=synthetic_scenes/../x", "--data_dir={d}",
         "--distributed=off", "--weights={a}/metadata_only", *VARIANT_OUT, absent=NO_VARIANT,
         match="holds a path separator"),
    _tfds("image-key-unknown", "--image_key=picture", match="picture"),
    _tfds("image-size-zero", "--image_size=0", match="image_size"),
    _tfds("image-size-too-small", "--image_size=74", match="image_size"),
    _tfds("batch-size-zero", "--batch_size=0", match="batch_size"),
    _tfds("batch-size-negative", "--batch_size=-8", match="batch_size"),
    _tfds("examples-per-shard-zero", "--examples_per_shard=0", match="examples_per_shard"),
    _tfds("examples-per-shard-negative", "--examples_per_shard=-1", match="examples_per_shard"),
    _tfds("dtype-unknown", "--dtype=float64", match="dtype"),
    _tfds("distributed-unknown", "--distributed=maybe", match="distributed"),
    _tfds("distributed-on-without-a-cluster", "--distributed=on", match="no cluster was detected"),
    case(EXTRACT_TFDS, "output-data-dir-is-a-file", *TINY_SOURCE, "--weights={a}/metadata_only",
         "--output_data_dir={t}/alt.tsv", match="--output_data_dir"),
    case(EXTRACT_TFDS, "output-data-dir-read-only", *TINY_SOURCE, "--weights={a}/metadata_only",
         "--output_data_dir={ro}/features", match="--output_data_dir"),
    case(EXTRACT_TFDS, "output-data-dir-chmod", *TINY_SOURCE, "--weights={a}/metadata_only",
         "--output_data_dir={t}/locked/features", files={"locked/.keep": b""}, chmod={"locked": 0o500},
         match="--output_data_dir"),
    case(EXTRACT_TFDS, "partial-extraction-with-other-settings", *TINY_SOURCE, "--weights={a}/metadata_only",
         *VARIANT_OUT,
         files={"features/synthetic_scenes_irv2/tiny/1.0.0/extraction.json": OTHER_MANIFEST},
         match="holds a partial extraction with other settings (dtype: 'float32' -> 'float16', examples_per_shard: "
               "24 -> 4096, image_size: 139 -> 299, weights: "),
    *not_flags(EXTRACT_TFDS, *TINY_SOURCE, "--weights={a}/metadata_only", *VARIANT_OUT),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
