"""The entry point end to end on the tiny synthetic scenes: train, SIGKILL or SIGTERM and resume as the same run,
`--mode=eval`, `--mode=caption`, and a clear error when the paper's dataset is not built."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from PIL import Image
from trained_models import MAIN_STEPS, main_command, main_env, run_main

pytestmark = pytest.mark.slow  # `python -m capjax.main` trains in a subprocess (conftest.py: the slow rule)

REPO = pathlib.Path(__file__).resolve().parent.parent
# The run itself is shared with test_crossdomain (trained_models.shapes_debug_run): one training per session.
STEPS = MAIN_STEPS
_command, _env = main_command, main_env


def _final_params(workdir: pathlib.Path) -> dict:
  with ocp.CheckpointManager(workdir / "checkpoints", item_names=("state", "data")) as mngr:
    assert mngr.latest_step() == STEPS
    state = mngr.restore(STEPS, args=ocp.args.Composite(state=ocp.args.StandardRestore()))["state"]
  return state["params"]


def _assert_same_params(got: dict, expected: dict) -> None:
  flat_expected = jax.tree_util.tree_leaves_with_path(expected)
  flat_got = dict(jax.tree_util.tree_leaves_with_path(got))
  assert len(flat_expected) == len(flat_got)
  for path, value in flat_expected:
    np.testing.assert_array_equal(np.asarray(flat_got[path]), np.asarray(value), err_msg=str(path))


def _history_steps(workdir: pathlib.Path) -> list[int]:
  return [json.loads(line)["step"] for line in (workdir / "train_history.jsonl").read_text().splitlines()]


_run = run_main


@pytest.fixture(scope="module")
def trained(shapes_debug_run):
  """(data_dir, workdir, stdout) of one uninterrupted run."""
  return shapes_debug_run


def test_training_reports_metrics_and_writes_outputs(trained):
  _, workdir, output = trained
  assert "test split: 64 images" in output and "cider_d" in output and "constant caption" in output
  assert "compiling the train step" in output  # and the first step is logged at once, before log_every's
  assert re.search(r"step 1/30  compiled the train step and ran it in [\d.]+ s\n", output), output[-3000:]
  assert list(workdir.glob("plugins/profile/*/*.xplane.pb"))  # --config.profile_steps=2: clu's profiler hook
  metrics_files = list((workdir / "eval").glob("test_step*/metrics.json"))
  assert len(metrics_files) == 1
  result = json.loads(metrics_files[0].read_text())
  assert result["examples"] == 64
  for key in ("cider_d", "Bleu_4", "ROUGE_L", "object_precision", "relation_accuracy", "exact_match"):
    assert key in result["metrics"] and key in result["constant_caption_baseline"]["metrics"]
  out = metrics_files[0].parent
  for name in ("gallery.png", "loss_curve.png"):
    with Image.open(out / name) as im:
      assert im.size[0] > 300 and im.size[1] > 200
  sheet = (out / "rating_sheet.html").read_text()
  assert sheet.count('data-image="') == 64  # tiny test split: every image, 3 raters each
  preds = json.loads((out / "predictions.json").read_text())
  assert sorted(p["image_id"] for p in preds) == list(range(64))
  history = [json.loads(line) for line in (workdir / "train_history.jsonl").read_text().splitlines()]
  assert [h["step"] for h in history] == list(range(5, STEPS + 1, 5))
  assert list(workdir.glob("events.out.tfevents.*"))  # TensorBoard


def test_eval_mode_scores_the_best_checkpoint(trained):
  data_dir, workdir, _ = trained
  proc = _run(_command(workdir, data_dir) + ["--mode=eval", "--split=validation"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "validation split: 64 images" in proc.stdout
  [out] = (workdir / "eval").glob("validation_step*")
  for name in ("metrics.json", "predictions.json", "gallery.png", "loss_curve.png", "rating_sheet.html"):
    assert (out / name).is_file(), name  # the outputs the README lists, the training's loss curve included


def test_scoring_another_dataset_names_its_own_eval_folder_so_the_run_s_own_is_kept(tmp_path):
  """`--mode=eval` with another domain (`--config.dataset.builder_config=vivid` on a plain run) once wrote into the
  run's own `eval/test_stepN`, replacing the training's final evaluation; its folder now ends in `_NAME[-CONFIG]`."""
  from capjax import config_util, inference
  from capjax import workdir as workdir_lib
  config = config_util.load(str(REPO / "configs/t2t.py:shapes,debug"))
  workdir_lib.prepare(str(tmp_path), config)  # writes config.json as a training's start does
  assert inference.other_dataset_suffix(config, str(tmp_path)) == ""
  config.dataset.builder_config = "vivid"
  assert inference.other_dataset_suffix(config, str(tmp_path)) == "_synthetic_scenes-vivid"
  config.dataset.name, config.dataset.builder_config = "caption_folder", ""
  assert inference.other_dataset_suffix(config, str(tmp_path)) == "_caption_folder"
  (tmp_path / "config.json").write_text("[1, 2]")  # unreadable as a run's config: its own dataset, as before
  assert inference.other_dataset_suffix(config, str(tmp_path)) == ""


def test_caption_mode_captions_files_reports_unreadable_ones_and_caches_its_programs(trained, tmp_path):
  data_dir, workdir, _ = trained
  rng = np.random.default_rng(0)
  for i in range(3):
    Image.fromarray(rng.integers(0, 256, (80, 80, 3), dtype=np.uint8)).save(tmp_path / f"img{i}.png")
  (tmp_path / "broken.png").write_bytes(b"not an image")
  env = {k: v for k, v in _env().items() if k != "JAX_COMPILATION_CACHE_DIR"}  # the suite's shared cache: unset
  env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # kept however fast this machine compiles the decoder
  proc = subprocess.run(_command(workdir, data_dir) + ["--mode=caption", f"--images={tmp_path}/*.png"], cwd=REPO,
                        env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  # JAX's persistent cache is on by default, in the workdir: the next caption call loads the decoder from there.
  assert "jit_decode" in {name.split("-")[0] for name in os.listdir(workdir / "compilation_cache")}
  result = json.loads((workdir / "captions.json").read_text())
  assert sorted(os.path.basename(p) for p in result["captions"]) == ["img0.png", "img1.png", "img2.png"]
  assert [os.path.basename(p) for p in result["failed"]] == ["broken.png"]
  assert "1 file(s) could not be read" in proc.stdout


def test_the_paper_command_as_typed_names_its_workdir_and_the_build_command(tmp_path):
  # `python -m capjax.main --config=configs/t2t.py` exactly, from a folder without the dataset: the default workdir
  # comes first, then one line that names the command building cc3m.
  env = dict(_env(), TFDS_DATA_DIR=str(tmp_path / "tfds"))
  proc = subprocess.run([sys.executable, "-m", "capjax.main", f"--config={REPO / 'configs/t2t.py'}"], cwd=tmp_path,
                        env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert proc.stdout.splitlines()[0] == f"workdir: {os.path.join('workdir', 't2t')}"
  [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert "python -m capjax.data.build --dataset=cc3m" in line and "Traceback" not in proc.stderr


@pytest.mark.parametrize("spec, expected", [
    ("configs/t2t.py", "workdir/t2t"),
    ("configs/t2t.py:shapes,debug", "workdir/t2t_shapes_debug"),
    ("/abs/configs/rnn.py:1x1,steps=10", "workdir/rnn_1x1_steps=10"),
    ("configs/t2t.py:a/b", "workdir/t2t_a_b"),
])
def test_default_workdir_is_named_after_the_config_and_its_variants(spec, expected):
  from capjax import main
  assert main.default_workdir(spec) == os.path.join(*expected.split("/"))


@pytest.mark.parametrize("args, message", [
    (["--config=configs/t2t.py:shapes", "--config.optimiser.name=adam"],
     "error: unknown config field --config.optimiser.name (did you mean optimizer?) — see the fields of "
     "configs/t2t.py"),
    (["--config=configs/t2t.py:shapez"],
     "error: --config=configs/t2t.py:shapez: unknown config variant 'shapez' — choose from ['1x1', '8x8', 'cc12m', "
     "'coco', 'debug', 'scst', 'shapes', 'stylized'] (or pass key=value pairs)"),
    (["--config=configs/t2t.pyx"],
     "error: --config=configs/t2t.pyx: config file 'configs/t2t.pyx' not found — give `path/to/config.py[:variants]`"),
    (["--workdir=w"], "error: missing --config — e.g. --config=configs/t2t.py:shapes, see --help"),
    (["--config=configs/t2t.py", "--mode=train", "--bogus"],
     "error: Unknown command line flag 'bogus' — see --help"),
])
def test_usage_errors_are_one_line_without_the_flag_list(args, message):
  proc = _run([sys.executable, "-m", "capjax.main", *args])
  assert proc.returncode == 2
  assert proc.stderr.strip() == message and proc.stdout == ""


def test_the_config_file_runs_once_and_the_overrides_apply_to_that_config(tmp_path, monkeypatch):
  """--config's file is loaded by the flag's own parser, through config_util.load, and by nothing else."""
  from capjax import main
  runs = tmp_path / "runs"
  (tmp_path / "counted.py").write_text(
      "import ml_collections\n\n\ndef get_config(arg=None):\n"
      f"  with open({str(runs)!r}, 'a') as f:\n    f.write('x')\n"
      "  return ml_collections.ConfigDict({'batch_size': 2, 'arg': arg})\n")
  argv = ["capjax.main", f"--config={tmp_path / 'counted.py'}:a,b", "--config.batch_size=3"]
  monkeypatch.setattr(sys, "argv", argv)  # ml_collections finds the --config.FIELD overrides in sys.argv
  main.parse_flags(argv)
  config = main.FLAGS.config
  assert runs.read_text() == "x"
  assert (config.batch_size, config.arg, config.is_locked) == (3, "a,b", True)


def test_verbose_shows_the_traceback_of_an_expected_error():
  proc = _run([sys.executable, "-m", "capjax.main", "--config=configs/t2t.py:shapez", "--verbose"])
  assert proc.returncode == 2
  assert proc.stderr.startswith("error: --config=configs/t2t.py:shapez") and "Traceback" in proc.stderr


def test_sigkill_then_resume_gives_the_same_parameters(trained, tmp_path):
  data_dir, straight, _ = trained
  expected = _final_params(straight)
  workdir = tmp_path / "killed"
  proc = subprocess.Popen(_command(workdir, data_dir), cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  # Kill mid-way: as soon as a checkpoint past step 9 has been committed (a later save may be in flight).
  deadline = time.time() + 300
  ckpt = workdir / "checkpoints"
  while time.time() < deadline and proc.poll() is None:
    done = [int(p.name) for p in ckpt.glob("*") if p.name.isdigit()] if ckpt.exists() else []
    if done and max(done) >= 9:
      break
    time.sleep(0.05)
  assert proc.poll() is None, "the run finished before it could be killed: make it longer"
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  killed_at = max(int(p.name) for p in ckpt.glob("*") if p.name.isdigit())
  assert killed_at < STEPS
  subprocess.run(_command(workdir, data_dir), cwd=REPO, env=_env(), check=True, capture_output=True,
                 timeout=600)
  assert _history_steps(workdir) == list(range(5, STEPS + 1, 5))  # logged before the kill and repeated: not doubled
  _assert_same_params(_final_params(workdir), expected)


def test_sigterm_saves_the_current_step_and_the_same_command_resumes_as_the_same_run(trained, tmp_path):
  data_dir, straight, _ = trained
  workdir = tmp_path / "stopped"
  # No periodic checkpoints before the last step: the one that the stopped run leaves can only be the signal's.
  command = _command(workdir, data_dir) + ["--config.checkpoint_every=1000"]
  with open(tmp_path / "stderr.txt", "w") as stderr:
    proc = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=stderr)
    # Signal as soon as training runs (the first log record, of step 5, is written inside the train loop).
    history, deadline = workdir / "train_history.jsonl", time.time() + 300
    while time.time() < deadline and proc.poll() is None and not (history.exists() and history.read_text()):
      time.sleep(0.02)
    assert proc.poll() is None, "the run finished before the signal: make it longer"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 0
  log = (tmp_path / "stderr.txt").read_text()
  stopped = re.findall(r"Stopped by SIGTERM at step (\d+): checkpoint saved", log)
  assert len(stopped) == 1, log[-3000:]
  stopped_at = int(stopped[0])
  assert 5 <= stopped_at < STEPS, "the run trained to the end before the signal: make it longer"
  ckpt = workdir / "checkpoints"
  assert sorted(p.name for p in ckpt.iterdir()) == [str(stopped_at)]  # committed: no orbax-checkpoint-tmp left
  assert _history_steps(workdir) == list(range(5, stopped_at + 1, 5))
  assert not (workdir / "eval").exists()  # no test evaluation of an unfinished run

  resumed = _run(command)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"Resumed from step {stopped_at}" in resumed.stderr
  assert _history_steps(workdir) == list(range(5, STEPS + 1, 5))  # every logged step once, in order
  _assert_same_params(_final_params(workdir), _final_params(straight))


def test_a_second_run_in_a_workdir_in_use_is_refused_naming_the_running_one(tmp_path):
  workdir = tmp_path / "busy"
  workdir.mkdir()
  (workdir / "vocab.txt").write_text("")  # a run's first file: --mode=eval goes as far as the lock
  # A process that holds the workdir as a training does, until its standard input closes.
  holder = subprocess.Popen(
      [sys.executable, "-c", f"import sys\nfrom capjax import workdir\nwith workdir.claim({str(workdir)!r}, "
       "'a training'):\n  print('held', flush=True)\n  sys.stdin.read()"],
      cwd=REPO, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "held\n"
    for mode in ("train", "eval"):
      proc = _run(_command(workdir, tmp_path / "data") + [f"--mode={mode}"])
      assert proc.returncode == 2, proc.stderr[-3000:]
      assert proc.stderr.splitlines()[-1].startswith(
          f"error: --workdir={workdir} is in use by a training (pid {holder.pid} on "), proc.stderr[-3000:]
  finally:
    holder.stdin.close()
    holder.wait(timeout=60)
  assert not (workdir / "run.lock").exists()
