"""Using a trained workdir: `--mode=eval` scores a split with a checkpoint (best by default) and
`--mode=caption` captions image files.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import logging

from capjax import checkpoints, config_util
from capjax import ema as ema_lib
from capjax import ensemble as ensemble_lib
from capjax import evaluate as evaluate_lib
from capjax import files
from capjax import sharding
from capjax import train
from capjax import workdir as workdir_lib
from capjax.config_util import ConfigError
from capjax.data import preprocess, sources
from capjax.data.vocab import VOCAB_FILENAME, Vocabulary
from capjax.features import Encoder
from capjax.image import io as image_io
from capjax.models import inception_resnet_v2 as irv2


def check_trained(workdir: str) -> None:
  """Raises unless `workdir` is a training run's folder (it has the run's vocabulary)."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise NotADirectoryError(f"--workdir={workdir} is a file, not a directory — give the workdir of a training run")
  if not os.path.exists(os.path.join(workdir, VOCAB_FILENAME)):
    raise FileNotFoundError(f"{workdir} has no {VOCAB_FILENAME}, so it holds no trained model — train first with "
                            f"--mode=train --workdir={workdir}, or give the workdir of a training run")


def _vocabulary(workdir: str) -> Vocabulary:
  check_trained(workdir)
  try:
    return Vocabulary.load(workdir)
  except ValueError as error:
    raise ConfigError(f"{error} — resume the training in this workdir (--mode=train), which builds it again") from None


def _restore(setup: train.Setup, config: ml_collections.ConfigDict, workdir: str, step: int | None,
             member: bool = False) -> tuple[Any, int]:
  """(the parameters evaluation decodes with, step) of checkpoint `step` of `workdir` (None: the best by validation
  CIDEr-D): the EMA parameters in a run with them, unless `eval.use_ema` is False (`capjax.ema`). `member`: the
  workdir is one of `--ensemble`'s, whose best checkpoint is read and whose errors say so."""
  mngr = checkpoints.checkpoint_manager(workdir, config)
  if step is None:
    step = checkpoints.best_step(mngr)
  if step is None or step not in mngr.all_steps():
    raise FileNotFoundError(f"no checkpoint {'' if step is None else step} in {workdir}/checkpoints "
                            f"(have {list(mngr.all_steps())}) — train first"
                            + ("" if member else ", or pick one with --step"))
  try:
    state = checkpoints.restore_state(mngr, step, setup)
  except Exception as error:  # noqa: BLE001 (orbax, tensorstore and json each raise their own)
    todo = ("--ensemble takes workdirs trained with this --config (its model and optimizer.ema_decay): drop this one"
            if member else f"pick another with --step (have {list(mngr.all_steps())}), or resume the training, which "
            "sets damaged checkpoints aside")
    raise ConfigError(f"checkpoint {step} in {workdir}/checkpoints cannot be restored ({checkpoints.why(error)}) "
                      f"— {todo}") from None
  finally:
    mngr.close()
  logging.info("%s: checkpoint %d, its %s", workdir, step, ema_lib.describe(state, config))
  return ema_lib.eval_params(state, config), step


def load_trained(config: ml_collections.ConfigDict, workdir: str, step: int | None = None,
                 ensemble: Sequence[str] = ()):
  """(setup, params, vocab, step) from a training workdir; `step` None means the best by validation CIDEr-D.

  With `ensemble` (other workdirs of the same config), `params` are `capjax.ensemble.Members`: this workdir's
  checkpoint, then each other's best, and `setup.decode` decodes with their mixture (`capjax.ensemble`). Another
  vocabulary in any of them, a workdir named twice, or a config value no run can use is a ConfigError."""
  ensemble_lib.check_members(workdir, ensemble)
  config_util.validate(config, jax.process_count())  # as training does: before any work, not at the first decode
  inputs = sources.input_spec(config)  # a mismatched config fails before any work
  vocab = _vocabulary(workdir)
  for other in ensemble:  # every vocabulary compared before any checkpoint is read
    difference = ensemble_lib.vocabulary_difference(vocab, _vocabulary(other))
    if difference:
      raise ConfigError(f"--ensemble={other} has another vocabulary than --workdir={workdir} ({difference}) — "
                        "ensemble models trained on the same captions with the same vocab settings")
  start = train.decode_start(config, vocab)
  setup = train.make_setup(config, len(vocab), sharding.make_mesh(config), inputs, start)
  params, step = _restore(setup, config, workdir, step)
  if not ensemble:
    return setup, params, vocab, step
  members = ensemble_lib.Members((params, *(_restore(setup, config, other, None, True)[0] for other in ensemble)))
  return dataclasses.replace(setup, decode=ensemble_decode(setup, len(members.params), start)), members, vocab, step


def ensemble_decode(setup: train.Setup, size: int, start: int) -> Callable[[Any, jax.Array], jax.Array]:
  """`setup.decode` for `size` models' `ensemble.Members`: each member's parameters placed as one model's are."""
  config = setup.config

  def decode(members: ensemble_lib.Members, images: jax.Array) -> jax.Array:
    with sharding.axis_rules(setup.mesh, setup.rules):
      return train.decode_tokens(setup.model, config.decode, config.max_caption_tokens + 1, members, images, start)

  data_sharding = sharding.batch_sharding(setup.mesh)
  params_shardings = ensemble_lib.Members((setup.state_shardings.params,) * size)
  return jax.jit(decode, in_shardings=(params_shardings, data_sharding), out_shardings=data_sharding)


def other_dataset_suffix(config: ml_collections.ConfigDict, workdir: str) -> str:
  """'' when `config` scores the dataset (name and builder config) that `workdir` trained on, else `_NAME[-CONFIG]`:
  scoring another domain or test set names its own folder, so it never overwrites the run's own evaluation of that
  split and step. A workdir whose config.json cannot be read counts as its own dataset."""
  saved, _ = files.json_object(os.path.join(workdir, workdir_lib.CONFIG_FILENAME))
  trained = saved.get("dataset") if saved else None
  if not isinstance(trained, dict):
    return ""
  name, builder_config = config.dataset.name, config.dataset.get("builder_config") or ""
  if (name, builder_config) == (trained.get("name"), trained.get("builder_config") or ""):
    return ""
  return f"_{name}" + (f"-{builder_config}" if builder_config else "")


def run_eval(config: ml_collections.ConfigDict, workdir: str, split: str | None = None,
             step: int | None = None, ensemble: Sequence[str] = ()) -> dict[str, Any]:
  """Scores `split` (default: the test split) with a checkpoint, or with the ensemble of it and the best checkpoints
  of the workdirs `ensemble`, and writes its outputs in `workdir/eval` (an ensemble's in a folder of its own, named
  `_ensembleN`; another dataset's, `_NAME[-CONFIG]`: `other_dataset_suffix`); a training or another evaluation
  writing the workdir meanwhile is refused (`workdir.Lock`)."""
  sources.input_spec(config)  # a mismatched config fails before any work
  check_trained(workdir)
  with workdir_lib.claim(workdir, "an evaluation"):
    setup, params, vocab, step = load_trained(config, workdir, step, ensemble)
    split = split or config.dataset.test_split
    source = sources.data_source(config.dataset, split)
    result = evaluate_lib.evaluate_split(setup, params, source, vocab, config)
    other = other_dataset_suffix(config, workdir)
    suffix = other + (f"_ensemble{len(ensemble) + 1}" if ensemble else "")
    extra = {"ensemble": [workdir, *ensemble]} if ensemble else {}
    if other:
      extra["dataset"] = {"name": config.dataset.name, "builder_config": config.dataset.get("builder_config") or ""}
    outputs = evaluate_lib.write_outputs(result, workdir, split, step=step, config=config,
                                         history_path=os.path.join(workdir, "train_history.jsonl"), suffix=suffix,
                                         extra=extra or None)
    evaluate_lib.report(result, split, step, config)
  return {"metrics": result.metrics, "outputs": outputs}


def load_image(path: str, size: int) -> np.ndarray:
  """RGB uint8 (size, size, 3), upright; raises ValueError for files that are not readable images."""
  try:
    return preprocess.resize(image_io.load_rgb(path), size)
  except image_io.ImageError as e:
    raise ValueError(f"{path}: not a readable image ({e})") from e


def feature_extractor(config: ml_collections.ConfigDict, inputs: sources.InputSpec,
                      batch: int) -> Callable[[np.ndarray], np.ndarray] | None:
  """For a model trained on pre-extracted features: uint8 pictures -> the features it reads (`inputs.key`),
  computed by the Inception-ResNet-v2 in `model.encoder.weights` (as capjax.tools.extract_tfds_features did).
  None for pixels."""
  key = inputs.key
  if key == "image":
    return None
  weights = config.model.encoder.get("weights")
  if not weights:
    raise ConfigError(
        "this model reads pre-extracted Inception-ResNet-v2 features — to caption image files, point "
        "--config.model.encoder.weights at the converted weights that extracted them (the directory written by "
        "`python -m capjax.tools.convert_weights`)")
  devices = jax.local_devices() if batch % jax.local_device_count() == 0 else jax.local_devices()[:1]
  encoder = Encoder(irv2.load_converted(weights), devices, "float32")
  return lambda images: np.asarray(jax.device_get(encoder(images)[key]))


def caption_files(config: ml_collections.ConfigDict, workdir: str, pattern: str,
                  step: int | None = None, ensemble: Sequence[str] = ()) -> dict[str, Any]:
  """Captions every image matching `pattern` (with the ensemble of the workdir and `ensemble`'s best checkpoints when
  given); unreadable files are reported and counted, not fatal."""
  if jax.process_count() > 1:
    raise ValueError("--mode=caption runs in one process — start it without jax.distributed")
  paths = sorted(glob.glob(pattern, recursive=True))
  if not paths:
    raise FileNotFoundError(f"no files match --images={pattern!r} — give a glob of image files, e.g. "
                            "--images='photos/*.jpg'")
  files.refuse_special(paths, "--images", "image files")  # a FIFO would hang the read
  setup, params, vocab, step = load_trained(config, workdir, step, ensemble)
  size, batch = config.dataset.image_size, config.eval.batch_size
  images, names, failed = [], [], {}
  for p in paths:
    try:
      images.append(load_image(p, size))
      names.append(p)
    except ValueError as e:
      failed[p] = str(e)
      logging.warning("%s", e)
  features = feature_extractor(config, setup.inputs, batch)
  captions: list[str] = []
  for start in range(0, len(images), batch):
    chunk = np.stack(images[start:start + batch])
    padded = np.concatenate([chunk, np.zeros((batch - len(chunk), *chunk.shape[1:]), chunk.dtype)])
    if features is not None:
      padded = features(padded)
    tokens = sharding.global_batch_to_host(
        setup.decode(params, sharding.host_to_global({"image": padded}, setup.mesh)["image"]))
    captions += [vocab.decode(t) for t in tokens[:len(chunk)]]
  result = {"step": step, "captions": dict(zip(names, captions)), "failed": failed}
  if ensemble:
    result["ensemble"] = [workdir, *ensemble]
  if jax.process_index() == 0:
    for name, caption in zip(names, captions):
      print(f"{name}\t{caption}")
    if failed:
      print(f"{len(failed)} file(s) could not be read: {sorted(failed)}")
    out = os.path.join(workdir, "captions.json")
    with open(out, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
    print(f"captions: {out}")
  return result
