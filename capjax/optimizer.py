"""The captioner's optimizer from its config (`config.optimizer`): the paper's Adagrad or Adam, the learning-rate
schedule with its warmup, gradient clipping. Apart from `capjax.train` because it needs only optax and the config.
"""

from __future__ import annotations

import ml_collections
import optax


def learning_rate_schedule(config: ml_collections.ConfigDict) -> optax.Schedule:
  o = config.optimizer
  if o.schedule == "constant":
    decay = optax.constant_schedule(o.learning_rate)
  elif o.schedule == "cosine":
    decay = optax.cosine_decay_schedule(o.learning_rate, max(config.num_train_steps - o.warmup_steps, 1))
  else:
    raise ValueError(f"optimizer.schedule={o.schedule!r}: use 'constant' or 'cosine'")
  if o.warmup_steps <= 0:
    return decay
  warmup = optax.linear_schedule(0.0, o.learning_rate, o.warmup_steps)
  return optax.join_schedules([warmup, decay], [o.warmup_steps])


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """Adagrad as in the paper (TF's initial accumulator 0.1; optax puts eps=1e-7 inside the square root, where
  next to an accumulator >= 0.1 it changes updates by < 1e-6 relative), or Adam for the demo."""
  o = config.optimizer
  lr = learning_rate_schedule(config)
  if o.name == "adagrad":
    opt = optax.adagrad(lr, initial_accumulator_value=o.initial_accumulator_value, eps=o.eps)
  elif o.name == "adam":
    opt = optax.adam(lr, b1=o.b1, b2=o.b2, eps=o.eps)
  else:
    raise ValueError(f"optimizer.name={o.name!r}: use 'adagrad' or 'adam'")
  if o.grad_clip_norm:
    opt = optax.chain(optax.clip_by_global_norm(o.grad_clip_norm), opt)
  return opt
