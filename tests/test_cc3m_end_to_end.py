"""cc3m end to end, through the documented commands: a generated manual dir → `capjax.data.build` → IRv2 features
(random weights) → the paper's T2T 8x8 and RNN 1x1 configs at debug widths train, evaluate and caption two files.

The configs get no flag but `--config.dataset.data_dir` (and the weights that caption files need).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import helpers
import pytest

from tfds_builders.cc3m import make_dummy_data as dummy

pytestmark = pytest.mark.slow  # builds, extracts features and trains end to end (conftest.py: the slow rule)

REPO = pathlib.Path(__file__).resolve().parent.parent
NUM_TRAIN, NUM_VALIDATION = 24, 8  # whole batches of 8 for the extraction


def _env() -> dict[str, str]:
  env = dict(os.environ)
  env["XLA_FLAGS"] = helpers.FAST_COMPILE  # and one CPU device, like a laptop run
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = os.pathsep.join([os.fspath(REPO), env.get("PYTHONPATH", "")])
  return env


def _run(args: list[str]) -> subprocess.CompletedProcess:
  proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=_env(), capture_output=True, text=True,
                        timeout=900)
  assert proc.returncode == 0, f"{args[0]} failed:\n{proc.stderr[-4000:]}"
  return proc


@pytest.fixture(scope="module")
def extracted(tmp_path_factory, irv2_weights) -> pathlib.Path:
  root = tmp_path_factory.mktemp("cc3m_e2e")
  manual, data_dir = root / "manual", root / "tfds"
  dummy.write_clean(manual, NUM_TRAIN, NUM_VALIDATION, per_shard=10)
  proc = _run(["capjax.data.build", "--dataset=cc3m", f"--manual_dir={manual}", f"--data_dir={data_dir}"])
  assert f"train: {NUM_TRAIN} examples" in proc.stdout and f"validation: {NUM_VALIDATION} examples" in proc.stdout
  assert "cc3m build report" in proc.stdout
  _run(["capjax.tools.extract_tfds_features", "--dataset=cc3m", f"--weights={irv2_weights}",
        f"--data_dir={data_dir}", "--batch_size=8", "--distributed=off"])
  return data_dir


CONFIGS = ("configs/t2t.py:debug,steps=6", "configs/rnn.py:1x1,debug,steps=6")  # T2T 8x8 (default) and RNN 1x1


def _photos(folder: pathlib.Path) -> pathlib.Path:
  folder.mkdir()
  for i in range(2):
    (folder / f"photo{i}.jpg").write_bytes(dummy.jpeg(500 + i, 120, 90))
  return folder


def test_paper_configs_train_evaluate_and_caption_on_cc3m(extracted, irv2_weights, tmp_path):
  photos = _photos(tmp_path / "photos")
  # The two configs run side by side: each run is mostly single-threaded compilation.
  workdirs = {config: tmp_path / config.split("/")[1].replace(":", "_").replace(",", "_") for config in CONFIGS}
  scripts = {
      config: " && ".join(
          " ".join([sys.executable, "-m", "capjax.main", f"'--config={config}'",
                    f"--config.dataset.data_dir={extracted}", f"--workdir={workdir}", *extra])
          for extra in ([], ["--mode=caption", f"'--images={photos}/*.jpg'",
                             f"--config.model.encoder.weights={irv2_weights}"]))
      for config, workdir in workdirs.items()}
  procs = {config: subprocess.Popen(["bash", "-c", script], cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for config, script in scripts.items()}
  outputs = {config: proc.communicate(timeout=900) for config, proc in procs.items()}
  for config, workdir in workdirs.items():
    stdout, stderr = outputs[config]
    assert procs[config].returncode == 0, f"{config}:\n{stderr[-4000:]}"
    # Training ends by scoring the best checkpoint on the test split, which is validation for cc3m.
    assert f"validation split: {NUM_VALIDATION} images" in stdout and "cider_d" in stdout
    [metrics] = (workdir / "eval").glob("validation_step*/metrics.json")
    assert json.loads(metrics.read_text())["examples"] == NUM_VALIDATION
    steps = [json.loads(line)["step"] for line in (workdir / "train_history.jsonl").read_text().splitlines()]
    assert steps[-1] == 6
    result = json.loads((workdir / "captions.json").read_text())
    assert sorted(os.path.basename(p) for p in result["captions"]) == ["photo0.jpg", "photo1.jpg"]
    assert all(isinstance(c, str) for c in result["captions"].values())
    assert not result["failed"]
