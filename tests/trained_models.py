"""The models that several test files need, each trained once per session (conftest.py imports the fixtures):
the `:shapes,debug` captioner trained by `python -m capjax.main` (test_main, test_crossdomain),
the style classifier (test_style_classifier, test_erg_augment), ERG's generator (test_erg_generate,
test_erg_augment), the retriever's dual encoder (test_erg_augment) and the `tiny` stylized_scenes build
(test_stylized_scenes, test_erg_augment). Training them once per file cost CI about three minutes.

Heavy imports stay inside the fixtures: conftest must not import jax before it sets XLA_FLAGS.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
MAIN_STEPS = 30  # the shared captioner run's training steps

NUM_GENERATOR_TRAIN = 500  # stylized_scenes training images: 1,000 stylized captions
RETRIEVER_STEPS = 20       # the augmentation tests' retriever: 20 steps on the first 64 factual images
RETRIEVER_PAIRS = 64


def main_command(workdir: pathlib.Path, data_dir: pathlib.Path) -> list[str]:
  """`python -m capjax.main` training the tiny `:shapes,debug` T2T on synthetic_scenes/tiny for MAIN_STEPS steps."""
  return [sys.executable, "-m", "capjax.main", "--config=configs/t2t.py:shapes,debug",
          "--config.dataset.builder_config=tiny", f"--config.dataset.data_dir={data_dir}",
          f"--config.num_train_steps={MAIN_STEPS}", "--config.eval_every=1000", "--config.checkpoint_every=3",
          "--config.debug_nans=False", f"--workdir={workdir}"]


def main_env() -> dict[str, str]:
  import helpers  # here, not at the top: it imports jax
  env = dict(os.environ)
  env["XLA_FLAGS"] = helpers.FAST_COMPILE  # and one CPU device, like a laptop run
  env["JAX_PLATFORMS"] = "cpu"
  return env


def run_main(args: list[str]) -> subprocess.CompletedProcess:
  return subprocess.run(args, cwd=REPO, env=main_env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def shapes_debug_run(tmp_path_factory):
  """(data_dir, workdir, stdout + stderr) of one uninterrupted `main_command` run (profiling steps 10-12). Tests
  may score, caption or copy it; none may train in it."""
  root = tmp_path_factory.mktemp("main")
  data_dir, workdir = root / "data", root / "straight"
  proc = run_main(main_command(workdir, data_dir) + ["--config.profile_steps=2"])  # clu's profiler, steps 10-12
  assert proc.returncode == 0, proc.stderr[-3000:]
  return data_dir, workdir, proc.stdout + proc.stderr


def stylized_split_pairs(split: str, num: int) -> list:
  """generate.Pair of `num` images of stylized_scenes' `split`, as its builder writes them (phrase spans removed)."""
  from capjax.erg import generate
  from tfds_builders.stylized_scenes.stylized_scenes_dataset_builder import (
      StylizedScenesConfig, generate_split)
  config = StylizedScenesConfig(name="erg_generate", num_train=num, num_validation=1, num_test=num, num_factual=1)
  return generate.training_pairs(record for _, record in generate_split(config, split))


@pytest.fixture(scope="session")
def stylized_tiny_data_dir(tmp_path_factory) -> pathlib.Path:
  """A TFDS data dir holding the `stylized_scenes/tiny` build (ArrayRecord). Read it only: tests share it."""
  import tensorflow_datasets as tfds
  import tfds_builders.stylized_scenes  # noqa: F401 (registers the builder)
  directory = tmp_path_factory.mktemp("stylized_tiny")
  tfds.builder("stylized_scenes/tiny", data_dir=directory).download_and_prepare(file_format="array_record")
  return directory


@pytest.fixture(scope="session")
def style_classifier():
  """A tiny BERT style classifier (factual/humorous/romantic) on 200 training images' sentences, default settings."""
  from capjax.text_models import style_classifier as sc
  return sc.train(sc.stylized_scenes_sentences(0, 200))


@pytest.fixture(scope="session")
def style_classifier_dir(style_classifier, tmp_path_factory) -> pathlib.Path:
  """`style_classifier` saved. Read it only: tests share it."""
  return style_classifier.save(tmp_path_factory.mktemp("style") / "model")


@pytest.fixture(scope="session")
def erg_generator():
  """A tiny GPT-2 from scratch (generate.SCRATCH) on stylized_scenes' training stylized captions."""
  from capjax.erg import generate
  return generate.train(stylized_split_pairs("train", NUM_GENERATOR_TRAIN), generate.SCRATCH)


@pytest.fixture(scope="session")
def erg_generator_dir(erg_generator, tmp_path_factory) -> pathlib.Path:
  """`erg_generator` saved. Read it only: tests share it."""
  from capjax.erg import generate
  return generate.save(erg_generator, tmp_path_factory.mktemp("generator") / "gen")


@pytest.fixture(scope="session")
def erg_retriever(stylized_tiny_data_dir, tmp_path_factory):
  """(encoder, directory): the dual encoder the augmentation job trains on `tiny`'s factual split (RETRIEVER_STEPS
  steps on RETRIEVER_PAIRS images, seed 0), and the directory it is saved in (for --retriever). Read it only."""
  from capjax.erg import augment_inputs, dual_encoder
  _, source = augment_inputs.open_dataset("stylized_scenes/tiny", "factual", str(stylized_tiny_data_dir), "--factual")
  encoder = augment_inputs.train_retriever(source, True, RETRIEVER_STEPS, RETRIEVER_PAIRS, 0, "--factual")
  directory = dual_encoder.save(encoder, tmp_path_factory.mktemp("retriever") / "retriever",
                                {"dataset": "stylized_scenes/tiny", "split": "factual", "steps": RETRIEVER_STEPS})
  return encoder, directory
