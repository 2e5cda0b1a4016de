"""What every builder here shares: the fix for TFDS's `code_path`, and the error for a missing manual-dir file."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from etils import epath
from tensorflow_datasets.core import utils as tfds_utils


class ManualDataError(FileNotFoundError):
  """A manual-dir file the build needs is not there (`capjax.data.build` prints it as one `error:` line)."""


def manual_dir(dl_manager, what: str, readme: str) -> epath.Path:
  """The manual dir, or a ManualDataError that says what to put there and where the README is."""
  try:
    return epath.Path(dl_manager.manual_dir)
  except AssertionError as e:  # TFDS: "Manual directory X does not exist or is empty. ..." + instructions
    first = str(e).split(". ")[0]
    raise ManualDataError(f"{first} — put {what} there, as {readme} says (pass it with --manual_dir)") from e


T = TypeVar("T")


def at_least_one(examples: Iterable[T], describe: Callable[[], str],
                 what_to_do: str = "check that the manual dir holds the dataset's files whole (see the builder's "
                                   "README)") -> Iterator[T]:
  """`examples`, passed through; none at all raises ManualDataError with `describe()` (what was read and what was
  left out) and `what_to_do`. Without it TFDS fails with `AssertionError: No examples were yielded`, a traceback
  that names neither the files nor what to do."""
  count = 0
  for example in examples:
    count += 1
    yield example
  if not count:
    raise ManualDataError(f"no example could be built: {describe()} — {what_to_do}")


class LocalCodePath:
  """Mixed in before tfds.core.GeneratorBasedBuilder: the inherited `code_path` needs the `importlib_resources`
  backport, which TFDS declares only for Python < 3.9 (tensorflow/datasets#11212), and without it
  download_and_prepare fails. The builder's own file is the answer."""

  @tfds_utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:
    return epath.Path(inspect.getfile(cls))


class PlainOrBeam:
  """Mixed in by builders with a plain and a Beam path. TFDS hands a builder's `_split_generators` nothing that
  says whether the build was given Beam (`DownloadConfig.beam_options` / `beam_runner`), so the public
  `download_and_prepare` notes it for the length of that one call, and `uses_beam()` reads it; nothing outlives
  the call."""

  _beam_requested = False

  def download_and_prepare(self, *, download_config: Any = None, **kwargs: Any) -> None:
    beam = download_config is not None and (download_config.beam_runner is not None
                                            or download_config.beam_options is not None)
    self._beam_requested = beam
    try:
      return super().download_and_prepare(download_config=download_config, **kwargs)
    finally:
      del self._beam_requested  # back to the class's False

  def uses_beam(self) -> bool:
    return self._beam_requested
