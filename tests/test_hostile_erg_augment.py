"""`python -m capjax.erg.augment` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner

AUGMENT = "capjax.erg.augment"

AUGMENT_ARGS = ("--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny", "--style=romantic",
                "--output_dataset=erg", "--data_dir={t}/tfds", "--output_data_dir={t}/out")


def _augment(name: str, *args: str, match: str = "", **kw):
  return case(AUGMENT, name, *AUGMENT_ARGS, *args, absent=("out", "tfds"), match=match, **kw)


CASES = [
    case(AUGMENT, "required-flags-missing", "--style=romantic", match="--stylized, --factual, --output_dataset are"),
    _augment("min-similarity-nan", "--min_similarity=nan", match="--min_similarity=nan is not a finite number"),
    _augment("min-similarity-above-one", "--min_similarity=1.5", match="--min_similarity=1.5 is impossible — set "
             "--min_similarity in [-1, 1]"),
    _augment("min-similarity-below-minus-one", "--min_similarity=-2", match="--min_similarity"),
    _augment("max-perplexity-negative", "--max_perplexity=-1", match="--max_perplexity=-1.0 is impossible — set "
             "--max_perplexity to more than 0"),
    _augment("max-perplexity-zero", "--max_perplexity=0", match="--max_perplexity"),
    _augment("max-perplexity-infinite", "--max_perplexity=inf", match="--max_perplexity=inf is not a finite number"),
    _augment("min-content-two", "--min_content=2", match="--min_content=2.0 is impossible — set --min_content in "
             "[0, 1]"),
    _augment("min-content-negative", "--min_content=-0.5", match="--min_content"),
    _augment("beam-size-zero", "--beam_size=0", match="beam_size"),
    _augment("mode-unknown", "--mode=x2y", match="mode"),
    *not_flags(AUGMENT, *AUGMENT_ARGS),
]

# Its files: every case stops before a model loads or a dataset is read, the paths are checked first.

AUG = ("--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny", "--style=romantic",
       "--output_dataset=augmented", "--data_dir={t}/folder")  # nothing built there: no case reads a dataset
CASES += [
    case(AUGMENT, "no-flags", match="are required"),
    case(AUGMENT, "no-output-dataset", *AUG[:3], match="--output_dataset is required"),
    # before any dataset is opened: with nothing built in --data_dir, the stylized set was built there first
    case(AUGMENT, "no-generator", *AUG, match="--generator is required"),
    case(AUGMENT, "no-style-model", *AUG, "--generator={t}/folder", match="--style_model is required"),
    case(AUGMENT, "output-data-dir-is-a-file", *AUG, "--output_data_dir={t}/alt.tsv", match="--output_data_dir"),
    case(AUGMENT, "output-data-dir-is-a-device", *AUG, "--output_data_dir={t}/null", files={"null": NULL_DEVICE},
         match="--output_data_dir"),
    case(AUGMENT, "output-data-dir-read-only", *AUG, "--output_data_dir={ro}/tfds", match="--output_data_dir"),
    case(AUGMENT, "save-retriever-is-a-file", *AUG, "--save_retriever={t}/alt.tsv", match="--save_retriever"),
    case(AUGMENT, "lm-is-a-fifo", *AUG, "--lm={t}/pipe.json", files={"pipe.json": FIFO},
         match="--lm={t}/pipe.json is a FIFO"),
    case(AUGMENT, "lm-missing", *AUG, "--lm={t}/missing.json", match="--lm={t}/missing.json does not exist"),
    case(AUGMENT, "lm-is-a-folder", *AUG, "--lm={t}/folder", match="is a directory"),
    case(AUGMENT, "output-dataset-a-path", *AUG[:3], "--output_dataset=../escape", "--data_dir={t}/folder",
         match="is not a TFDS name"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
