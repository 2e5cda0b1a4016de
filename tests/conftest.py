"""Test set-up: 8 fake CPU devices before jax starts, one compilation cache for the session, the offline NLTK
data when it is beside the repo, and the `slow` marker's rule.

Slow (pyproject.toml's `slow` marker; `make test-fast` runs `-m "not slow"`, `make test` runs everything): a test that
trains a model (a few optimizer steps on a mesh count), starts a training subprocess, runs Beam or opens a browser,
or runs a job of that weight (an Inception-ResNet-v2 extraction job, a pytest subprocess). Marked so that it stays
right as tests are added, in this order of preference:
  - by fixture, here (`pytest_collection_modifyitems`): every test that uses, directly or through another fixture,
    a fixture of tests/trained_models.py or one tagged `@helpers.slow_fixture` (a module fixture that trains, builds
    on Beam or runs an extraction job). A new test of such a fixture is slow without a mark of its own;
  - by module: `pytestmark = pytest.mark.slow` in a file whose every test is slow (the end-to-end files, the
    browser's, the ones whose module fixture trains);
  - by test: `@pytest.mark.slow` on a single one elsewhere (a Beam build, a training, a capjax.main subprocess).
"""

import atexit
import gc
import os
import shutil
import sys
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
# Many tests compile the same programs again: a run and the run that resumes it, the same command in several
# subprocesses (which inherit this variable). The cache keys hold the XLA flags and devices, so a program compiled
# otherwise is never taken for another; jax caches only compilations of a second or more.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="capjax-tests-jax-cache-")
  atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_shared_nltk = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "nltk_data")
if "NLTK_DATA" not in os.environ and os.path.isdir(_shared_nltk):
  os.environ["NLTK_DATA"] = os.path.abspath(_shared_nltk)

import pathlib  # noqa: E402

import pytest  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
  return REPO_ROOT


@pytest.fixture(scope="session")
def cc3m_validation_tsv() -> pathlib.Path:
  """The released CC3M validation TSV (../shared in development and CI)."""
  path = SHARED / "data" / "cc3m" / "Validation_GCC-1.1.0-Validation.tsv"
  if not path.exists():
    pytest.fail(f"{path} is missing: tests that read real CC3M captions need ../shared/data/cc3m")
  return path


@pytest.fixture(scope="session")
def irv2_weights(tmp_path_factory) -> pathlib.Path:
  """Random Inception-ResNet-v2 weights with the 1,000-class head, saved the way convert_weights saves them."""
  from capjax.models import inception_resnet_v2 as irv2  # after XLA_FLAGS above
  from helpers import IRV2_NUM_CLASSES, random_irv2_variables
  directory = tmp_path_factory.mktemp("weights") / "irv2"
  irv2.save_converted(directory, random_irv2_variables(), {"format": "test", "num_classes": IRV2_NUM_CLASSES})
  return directory


@pytest.fixture(scope="session")
def clip_weights(tmp_path_factory) -> pathlib.Path:
  """The tiny random CLIPModel of tests/fixtures/text_models/clip through `convert_weights`, as a user's checkpoint
  would go (test_clip.py checks it against transformers; the alt_text_captions clip stage scores with it)."""
  from capjax.tools import convert_weights  # after XLA_FLAGS above
  output = tmp_path_factory.mktemp("converted") / "clip"
  convert_weights.main(["convert_weights", "--format=hf_clip",
                        f"--input={REPO_ROOT / 'tests' / 'fixtures' / 'text_models' / 'clip'}", f"--output={output}"])
  return output


# ----------------------------------------------------------------------------------------------------------
# Models trained once per session and shared across test files (tests/trained_models.py).
# ----------------------------------------------------------------------------------------------------------
from trained_models import (  # noqa: E402, F401 (fixtures: pytest finds them by name in conftest)
    erg_generator, erg_generator_dir, erg_retriever, shapes_debug_run, style_classifier, style_classifier_dir,
    stylized_tiny_data_dir)

# The hostile-input cases' assets, built data dir and command imports, built once per session whichever of the
# tests/test_hostile_*.py files run (tests/hostile/); the harness's asserts explained as a test module's are.
pytest.register_assert_rewrite("hostile")
from hostile.fixtures import hostile_assets, hostile_commands, hostile_data_dir  # noqa: E402, F401


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
  """After each test file, JAX's in-process caches of traced and compiled programs are dropped (the on-disk
  compilation cache above keeps the slow ones): no later file calls those functions again, and a session kept them
  all in memory."""
  yield
  if "jax" in sys.modules:
    sys.modules["jax"].clear_caches()
    gc.collect()


SLOW_FIXTURE_MODULES = {"trained_models"}  # every fixture there trains or builds a shared model's data


def _slow_fixture(fixturedef) -> bool:
  function = getattr(fixturedef, "func", None)
  return getattr(function, "__module__", None) in SLOW_FIXTURE_MODULES or getattr(function, "capjax_slow", False)


def pytest_collection_modifyitems(config, items):
  """Marks `slow` every test that uses a slow fixture (the module docstring's rule); `fixturenames` holds the
  fixtures a test uses through others too."""
  del config
  for item in items:
    info = getattr(item, "_fixtureinfo", None)
    if info is None or item.get_closest_marker("slow"):
      continue
    if any(_slow_fixture(d) for name in item.fixturenames for d in info.name2fixturedefs.get(name, ())):
      item.add_marker(pytest.mark.slow)
