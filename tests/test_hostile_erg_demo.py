"""`python -m capjax.erg.demo` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import case, not_flags, runner

DEMO = "capjax.erg.demo"

# Every case stops before the first stage (the dataset build): the flags, the config and the sizes are checked
# first. A failed start may leave its --workdir, empty. Cases run in their own folder, so they name the repository's
# configs/ (the demo reads --configs from the working directory).

W = "--workdir={t}/w", "--configs={r}/configs"
CASES = [
    case(DEMO, "variants-unknown", *W, "--variants=bogus", match="--variants=bogus: unknown config variant 'bogus'"),
    case(DEMO, "variants-value-not-a-number", *W, "--variants=steps=many", match="steps"),
    case(DEMO, "variants-impossible-value", *W, "--variants=batch=0", match="batch_size"),
    case(DEMO, "tiny-with-default-sizes", *W, "--dataset_config=tiny",
         match="--original_images=100 is more than the 64 train images of stylized_scenes/tiny"),
    case(DEMO, "factual-examples-beyond-the-split", *W, "--dataset_config=tiny", "--original_images=0",
         "--factual_captions=0", "--factual_examples=200", match="--factual_examples=200 is more than the 128"),
    case(DEMO, "factual-captions-beyond-the-split", *W, "--dataset_config=tiny", "--original_images=64",
         "--factual_captions=129", "--factual_examples=128", match="--factual_captions=129"),
    case(DEMO, "min-content-two", *W, "--min_content=2", match="--min_content=2.0 is impossible"),
    case(DEMO, "min-content-nan", *W, "--min_content=nan", match="--min_content=nan"),
    case(DEMO, "captioner-unknown", *W, "--captioner=lstm", match="captioner"),
    case(DEMO, "steps-negative", *W, "--steps=-1", match="steps"),
    case(DEMO, "style-model-not-a-classifier", *W, "--style_model={t}/folder", match="--style_model"),
    case(DEMO, "workdir-is-a-file", "--workdir={t}/alt.tsv", W[1], match="--workdir"),
    case(DEMO, "generator-missing", *W, "--generator={t}/missing",
         match="--generator={t}/missing has no generator.json"),
    case(DEMO, "retriever-missing", *W, "--retriever={t}/missing",
         match="--retriever={t}/missing has no retriever.json"),
    case(DEMO, "style-model-missing", *W, "--style_model={t}/missing",
         match="--style_model={t}/missing has no style_classifier.json"),
    case(DEMO, "data-dir-is-a-file", *W, "--data_dir={t}/alt.tsv",
         match="--data_dir={t}/alt.tsv is a file, not a directory"),
    case(DEMO, "configs-not-here", "--workdir={t}/w",
         match="--configs=configs has no t2t.py — run the demo from the repository's root (where configs/ is), or "
               "give --configs=DIR"),
    case(DEMO, "configs-without-the-captioner", "--workdir={t}/w", "--configs={t}/folder", "--captioner=rnn",
         match="--configs={t}/folder has no rnn.py"),
    case(DEMO, "configs-is-a-file", "--workdir={t}/w", "--configs={t}/alt.tsv", match="--configs={t}/alt.tsv has no"),
    *not_flags(DEMO, *W),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
