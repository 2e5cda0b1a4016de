r"""ERG's augmentation job: stylized captions for a factual dataset, filtered, written as a TFDS dataset.

usage: python -m capjax.erg.augment --stylized=stylized_scenes/tiny --factual=stylized_scenes/tiny --style=romantic \
           --output_dataset=NAME --generator=DIR --style_model=DIR [--lm=LM.json] [--mode=i2i|i2t|t2i|t2t] \
           [--data_dir=DIR] [--output_data_dir=DIR] [--stylized_split=train] [--factual_split=factual] \
           [--examples_per_shard=1024] [--retriever_steps=200] [--text_encoder=BERT_DIR] \
           [--retriever=DIR | --save_retriever=DIR] [--min_content=1.0]

For each factual example (image and first caption) the retriever finds the most similar stylized scene of --style
(the query and bank sides by --mode, as in the paper's Table 1); the scene's style phrase (the planted phrase that
stylized_scenes records carry, or the one the style-phrase extractor finds with --style_model) and the factual
caption prompt the generator (`[CLS] phrase [SEP] caption`); the generated caption then passes the three quality
filters (`capjax.erg.filters`), and with --min_content the content filter. The nearest scene prompts the generator
even at or below the similarity threshold, so that every factual example is one generated caption of the funnel and
its reject is counted by reason. The kept pairs go to the TFDS dataset NAME (version 1.0.0, split `train`,
ArrayRecord) in --output_data_dir (default --data_dir), one record each:
  image            the factual image (absent when the factual dataset has none: then only t2t is possible)
  caption          the generated stylized caption
  factual_caption  the caption it was generated from
  style            --style
  scene_id         the retrieved stylized scene's `id` (its index in --stylized_split without one)
  similarity       the retrieval cosine similarity
  perplexity       the caption's trigram perplexity under the style's language model
  source_index     the factual example's index in --factual_split.
The funnel (generated -> after each filter -> kept, and rejects by reason) is printed, stored in the dataset's
metadata (`builder.info.metadata["funnel"]`, metadata.json) and drawn in funnel.html beside it.

The pieces: --generator from `python -m capjax.erg.generate --train --output=DIR`, --style_model from
`python -m capjax.text_models.style_classifier --output=DIR`, --lm from `python -m capjax.metrics.stylized_lm`
(default: a trigram LM trained here on the stylized set's captions of --style). The retriever's dual encoder is
trained here (`capjax.erg.dual_encoder`, --retriever_steps) on the factual (image, caption) pairs, or on the
stylized set's when the factual dataset has no images. Its text tower is a small Transformer over the captions'
words, or with --text_encoder=DIR a converted BERT-family encoder (all-MiniLM-L6-v2: `convert_weights
--format=hf_bert`), kept locked while the image tower and the projections learn. --save_retriever=DIR keeps it in
DIR, and --retriever=DIR loads such a directory instead of training one (for another style, another factual shard
of the same corpus, or a rerun: training is most of a small job's time).

The factual split is cut into shards of --examples_per_shard consecutive examples; a shard is written to a temporary
file and renamed when complete, so a killed job, run again with the same arguments, resumes at the first missing
shard (and a run with other arguments over a partial output is an error, not a mixed dataset).
"""

from __future__ import annotations

from collections.abc import Sequence

from capjax import cli
from capjax.erg import settings

# The job's API, for `capjax.erg.demo` and the tests (the command is its front), imported on first use so that the
# command's --help does not load JAX.
_EXPORTS = {
    **dict.fromkeys(("FUNNEL_HTML", "MANIFEST", "MODES", "SHARD_INFO_DIR", "SPLIT", "VERSION", "Options",
                     "augment_dataset"), "capjax.erg.augment_job"),
    "AugmentError": "capjax.erg.augment_inputs",
}
DEFAULT_EXAMPLES_PER_SHARD = settings.DEFAULT_EXAMPLES_PER_SHARD
__all__ = sorted([*_EXPORTS, "DEFAULT_EXAMPLES_PER_SHARD", "check_filter_flags", "main"])


__getattr__ = cli.lazy_attributes(__name__, _EXPORTS)


# ----------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------
def _flags():
  from absl import flags  # noqa: PLC0415
  values = flags.FlagValues()
  flags.DEFINE_string("stylized", None, "the stylized TFDS dataset, name[/config] (e.g. stylized_scenes/tiny)",
                      flag_values=values)
  flags.DEFINE_string("factual", None, "the factual TFDS dataset, name[/config]", flag_values=values)
  flags.DEFINE_string("style", None, "the target style (e.g. romantic)", flag_values=values)
  flags.DEFINE_string("output_dataset", None, "the TFDS name of the dataset to write", flag_values=values)
  flags.DEFINE_string("generator", None, "a directory from `python -m capjax.erg.generate --train`",
                      flag_values=values)
  flags.DEFINE_string("style_model", None, "a directory from `python -m capjax.text_models.style_classifier`",
                      flag_values=values)
  flags.DEFINE_string("lm", "", "a style LM file from `python -m capjax.metrics.stylized_lm` (default: trained here "
                      "on the stylized captions of --style)", flag_values=values)
  flags.DEFINE_enum("mode", "i2i", list(settings.MODES), "query side 2 bank side (image or text), the paper's Table 1",
                    flag_values=values)
  flags.DEFINE_string("data_dir", "", "TFDS data dir of the inputs ('' -> $TFDS_DATA_DIR or ~/tensorflow_datasets)",
                      flag_values=values)
  flags.DEFINE_string("output_data_dir", "", "where the output dataset goes ('' -> --data_dir)", flag_values=values)
  flags.DEFINE_string("stylized_split", "train", "the stylized split (a TFDS slice is fine)", flag_values=values)
  flags.DEFINE_string("factual_split", "factual", "the factual split (a TFDS slice is fine)", flag_values=values)
  flags.DEFINE_integer("examples_per_shard", DEFAULT_EXAMPLES_PER_SHARD, "factual examples per output shard",
                       lower_bound=1, flag_values=values)
  flags.DEFINE_integer("retriever_steps", 200, "training steps of the retriever's dual encoder", lower_bound=1,
                       flag_values=values)
  flags.DEFINE_integer("retriever_pairs", 1024, "(image, captions) records the retriever trains on", lower_bound=2,
                       flag_values=values)
  flags.DEFINE_string("retriever", "", "a directory from --save_retriever: use its dual encoder instead of training "
                      "one (--retriever_steps, --retriever_pairs and --seed then do not apply)", flag_values=values)
  flags.DEFINE_string("save_retriever", "", "keep the dual encoder trained here in this directory (for --retriever)",
                      flag_values=values)
  flags.DEFINE_string("text_encoder", "", "a converted BERT-family checkpoint (e.g. all-MiniLM-L6-v2) as the "
                      "retriever's locked text tower (default: a small Transformer trained here)", flag_values=values)
  flags.DEFINE_integer("beam_size", 1, "the generator's beam (1: greedy)", lower_bound=1, flag_values=values)
  flags.DEFINE_float("max_perplexity", settings.MAX_PERPLEXITY, "the perplexity filter, more than 0 (the paper's 80)",
                     flag_values=values)
  flags.DEFINE_float("min_similarity", settings.MIN_SIMILARITY, "the similarity filter, a cosine in [-1, 1] "
                     "(the paper's 0.6)",
                     flag_values=values)
  flags.DEFINE_float("min_content", settings.MIN_CONTENT, "the content filter: the share of the factual caption's "
                     "words a generated caption must keep in order, in [0, 1] (1.0: all; 0: off, the paper's)",
                     flag_values=values)
  flags.DEFINE_integer("seed", 0, "seed of the retriever's training", flag_values=values)
  return values


def check_filter_flags(values) -> None:
  """The filters' thresholds, before any work: out of range, no pair passes and the dataset written is empty.
  (`values`: parsed flags with max_perplexity, min_similarity and min_content; erg.demo has the last alone.)"""
  if "max_perplexity" in values:
    cli.check_number("--max_perplexity", values["max_perplexity"].value, 0, low_open=True,
                     hint=f" (the paper's {settings.MAX_PERPLEXITY:g})")
  if "min_similarity" in values:
    cli.check_number("--min_similarity", values["min_similarity"].value, -1, 1,
                     hint=f", a cosine similarity (the paper's {settings.MIN_SIMILARITY:g})")
  cli.check_number("--min_content", values["min_content"].value, 0, 1,
                   hint=", a share of the factual caption's words (0: off)")


def main(argv: Sequence[str]) -> None:
  values = _flags()
  cli.parse(values, argv, __doc__)
  missing = [f"--{name}" for name in ("stylized", "factual", "style", "output_dataset") if not values[name].value]
  if missing:
    cli.fail(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required — see --help")
  check_filter_flags(values)
  from capjax.erg.augment_inputs import AugmentError  # noqa: PLC0415 (after the flags: the job loads JAX)
  from capjax.erg.augment_job import Options, augment_dataset  # noqa: PLC0415
  if values["lm"].value:  # read after the models load: a FIFO or a folder is refused now, not minutes later
    from capjax import files  # noqa: PLC0415
    files.input_file(values["lm"].value, "--lm", "a style LM file from `python -m capjax.metrics.stylized_lm`")
  from capjax.data import integrity  # noqa: PLC0415
  data_dir = integrity.data_dir(values["data_dir"].value)
  output_data_dir = values["output_data_dir"].value or data_dir
  cli.writable_dir(output_data_dir, "--output_data_dir")
  if values["save_retriever"].value:
    cli.writable_dir(values["save_retriever"].value, "--save_retriever")
  try:
    out_dir, counts = augment_dataset(Options(
        stylized=values["stylized"].value, factual=values["factual"].value, style=values["style"].value,
        output_dataset=values["output_dataset"].value, generator_dir=values["generator"].value,
        style_model_dir=values["style_model"].value, lm_path=values["lm"].value, mode=values["mode"].value,
        data_dir=data_dir, output_data_dir=output_data_dir, stylized_split=values["stylized_split"].value,
        factual_split=values["factual_split"].value, examples_per_shard=values["examples_per_shard"].value,
        retriever_steps=values["retriever_steps"].value, retriever_pairs=values["retriever_pairs"].value,
        retriever_dir=values["retriever"].value, save_retriever=values["save_retriever"].value,
        text_encoder=values["text_encoder"].value, beam_size=values["beam_size"].value,
        max_perplexity=values["max_perplexity"].value, min_similarity=values["min_similarity"].value,
        min_content=values["min_content"].value, seed=values["seed"].value))
  except AugmentError as error:
    cli.fail(str(error))
  print("\n".join(counts.lines()))
  print(out_dir)


if __name__ == "__main__":
  cli.run(main)
