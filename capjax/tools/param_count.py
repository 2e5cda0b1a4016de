r"""Prints the parameter counts of configured models, measured from their shapes and by the analytic formula.

usage: python -m capjax.tools.param_count --config=configs/t2t.py:8x8 [--config=configs/rnn.py:1x1 ...] \
           [--vocab_size=N]
Exit status 1 when a measured count differs from the analytic one.
"""

from __future__ import annotations

from collections.abc import Sequence

from absl import flags

from capjax import cli, config_util

FLAGS = flags.FlagValues()
_CONFIGS = flags.DEFINE_multi_string("config", None, "config file[:variants]; repeatable", flag_values=FLAGS,
                                     required=True)
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 10_000, "caption vocabulary incl. specials", lower_bound=1,
                                   flag_values=FLAGS)


def counts(config, vocab_size: int) -> dict[str, int]:
  """{'measured', 'analytic', 'image_encoder'}: parameters outside the image encoder, and its own."""
  import jax  # noqa: PLC0415 (jax and the models here, not at import: --help answers without them)
  import numpy as np  # noqa: PLC0415

  from capjax import models  # noqa: PLC0415
  from capjax.data import sources  # noqa: PLC0415
  from capjax.models import rnn, t2t  # noqa: PLC0415
  model = models.build(config, vocab_size)
  images = sources.input_spec(config).zeros(1)
  tokens = np.zeros((1, config.max_caption_tokens + 1), np.int32)
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), images, tokens))["params"]
  sizes = {k: sum(int(np.prod(x.shape)) for x in jax.tree.leaves(v)) for k, v in shapes.items()}
  encoder = sizes.pop("image_encoder", 0)
  feature_dim = {"features": config.dataset.feature_shape[-1], "irv2": 1536}.get(
      config.model.encoder.name, config.model.encoder.get("out_features"))
  if config.model.name == "t2t":
    analytic = t2t.count_params(model.config, feature_dim)
  else:
    analytic = rnn.count_params(model.config.vocab_size, model.config.d_model, feature_dim)
  return {"measured": sum(sizes.values()), "analytic": analytic, "image_encoder": encoder}


def main(argv: Sequence[str]) -> int:
  """argv as `app.run` passes it: the program name, then the flags."""
  cli.parse(FLAGS, argv, __doc__)
  configs = {}
  for spec in _CONFIGS.value:
    try:
      configs[spec] = config_util.load(spec)
    except (FileNotFoundError, ValueError) as error:
      cli.fail(f"--config={spec}: {error}")
  print(f"{'config':<28} {'params (measured)':>18} {'analytic':>12} {'image encoder':>14}")
  ok = True
  for spec, config in configs.items():
    try:
      c = counts(config, _VOCAB_SIZE.value)
    except config_util.ConfigError as error:  # fields that do not fit together, a --vocab_size beyond int32 ids
      cli.fail(f"--config={spec}: {error}")
    ok &= c["measured"] == c["analytic"]
    print(f"{spec:<28} {c['measured']:>18,} {c['analytic']:>12,} {c['image_encoder']:>14,}")
  return 0 if ok else 1


if __name__ == "__main__":
  cli.run(main)
