"""The paper's experiments: the `coco` configs, and `python -m capjax.crossdomain` end to end on two debug models
trained on two datasets (the tiny synthetic scenes, and Karpathy's Flickr30k dummy data), whose every figure must
equal `python -m capjax.metrics` on the files the matrix writes."""

import contextlib
import io
import json
import pathlib
import re
import shutil
import types

import pytest

from capjax import config_util
from capjax.crossdomain import paper, report

REPO = pathlib.Path(__file__).resolve().parent.parent
DUMMY = REPO / "tfds_builders" / "karpathy" / "dummy_data"
SYNTHETIC, FLICKR = "synthetic_scenes/tiny:test", "karpathy/flickr30k:test"


@pytest.mark.parametrize("config_file", ["t2t", "rnn"])
@pytest.mark.parametrize("grid", ["8x8", "1x1"])
def test_the_coco_configs_train_as_the_paper_did_on_karpathy_coco(config_file, grid):
  c = config_util.load(f"configs/{config_file}.py:coco,{grid}")
  assert (c.dataset.name, c.dataset.builder_config) == ("karpathy", "coco")
  assert (c.dataset.train_split, c.dataset.eval_split, c.dataset.test_split) == ("train+restval", "val", "test")
  assert (c.max_caption_tokens, c.vocab.min_count) == (15, 4)
  assert (c.optimizer.name, c.optimizer.learning_rate, c.batch_size) == ("adagrad", 0.01, 25)
  assert (c.decode.method, c.decode.beam_size) == ("beam", 4)
  assert c.dataset.features == "irv2" and c.model.grid == grid and c.model.name == config_file
  assert c.dataset.feature_key == ("grid" if grid == "8x8" else "pooled")


def test_a_training_split_may_join_splits_as_karpathy_coco_trains_on_train_and_restval(tmp_path):
  from capjax.data import build, sources
  build.main(["build", "--dataset=karpathy/coco", f"--manual_dir={DUMMY}", f"--data_dir={tmp_path}"])
  dataset = config_util.load("configs/t2t.py:coco").dataset
  dataset.update(data_dir=str(tmp_path), features="")
  source = sources.data_source(dataset, dataset.train_split)
  assert len(source) == 3  # the dummy json's 2 train images and 1 restval image
  with pytest.raises(config_util.ConfigError, match="'restvall'"):
    sources.data_source(dataset, "train+restvall")


def test_the_paper_figures_sit_beside_the_rows_and_test_sets_they_were_measured_on():
  assert paper.figures("flickr1k", "T2T8x8", "Conceptual") == {"cider_d": 0.227, "ROUGE_L": 0.277, "SPICE": 0.066}
  assert paper.figures("coco", "RNN1x1", "COCO") == {"cider_d": 1.021, "ROUGE_L": 0.694, "METEOR": 0.348}
  assert paper.test_set_key("cc3m/unlabeled", "validation") == "cc3m"  # its test split was never released
  assert paper.test_set_key("karpathy/flickr30k", "val") is None
  assert paper.test_set_key("karpathy/coco", "test") == "coco"
  assert paper.training_key("cc3m/unlabeled") == "Conceptual" and paper.training_key("karpathy/coco") == "COCO"
  assert paper.model_key(config_util.load("configs/rnn.py:1x1").model) == "RNN1x1"
  assert paper.model_key(config_util.load("configs/t2t.py:coco").model) == "T2T8x8"
  for not_the_papers in ("configs/t2t.py:coco,debug", "configs/t2t.py:shapes"):  # its size, its encoder
    assert paper.model_key(config_util.load(not_the_papers).model) is None
  cell = {"metrics": {"cider_d": 0.41234}, "paper": {"cider_d": 1.032}}
  assert report.cell_text(cell, "cider_d") == "0.412 (paper 1.032)"


def _no_java(name):
  del name


@pytest.fixture(scope="module")
def trained(shapes_debug_run, tmp_path_factory):
  """(data_dir, [synthetic workdir, flickr workdir]): the session's shared `:shapes,debug` T2T run on
  synthetic_scenes/tiny, and an RNN debug model trained here for two steps on Karpathy's Flickr30k dummy data; one data
  dir holds both datasets."""
  from capjax import evaluate as evaluate_lib
  from capjax import train
  from capjax.data import build
  shared_data, synthetic, _ = shapes_debug_run
  root = tmp_path_factory.mktemp("crossdomain")
  data_dir = root / "tfds"
  shutil.copytree(shared_data / "synthetic_scenes", data_dir / "synthetic_scenes")
  build.main(["build", "--dataset=karpathy/flickr30k", f"--manual_dir={DUMMY}", f"--data_dir={data_dir}"])
  flickr = config_util.load("configs/rnn.py:shapes,debug")
  flickr.dataset.update(name="karpathy", builder_config="flickr30k", data_dir=str(data_dir), auto_build=False,
                        train_split="train", eval_split="val", test_split="test")
  flickr.vocab.min_count = 1
  flickr.update(num_train_steps=2, eval_every=1000, checkpoint_every=2, log_every=2, debug_nans=False)
  flickr.eval.rating_sheet_size = flickr.eval.gallery_size = 0
  with pytest.MonkeyPatch.context() as monkeypatch:
    # Training's own test evaluation without METEOR's JVM (6 s): the matrix runs METEOR itself.
    monkeypatch.setattr(evaluate_lib, "shutil", types.SimpleNamespace(which=_no_java))
    train.train_and_evaluate(flickr, str(root / "flickr"))
  return data_dir, [synthetic, root / "flickr"]


def _metrics_command(refs: str, preds: str, *flags: str) -> dict:
  """`python -m capjax.metrics REFS PREDS FLAGS` run in this process (its main, as the command line runs it)."""
  from capjax.metrics import __main__ as metrics_main
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    assert metrics_main.main(["capjax.metrics", refs, preds, *flags]) == 0
  return json.loads(out.getvalue())


def test_the_matrix_scores_every_workdir_on_every_test_set_as_capjax_metrics_does(trained, tmp_path, capsys):
  from capjax.crossdomain import __main__ as crossdomain
  data_dir, workdirs = trained
  out = tmp_path / "matrix"
  assert crossdomain.main(["crossdomain", f"--workdirs={','.join(map(str, workdirs))}",
                           f"--test={SYNTHETIC},{FLICKR}", f"--data_dir={data_dir}", f"--output={out}"]) == 0
  matrix = json.loads((out / "matrix.json").read_text())
  java = shutil.which("java") is not None

  # Rows: model x training data, then one constant caption per training set; columns: one group per test set.
  assert [(r["kind"], r["model"], r["training"]) for r in matrix["rows"]] == [
      ("model", "T2T (conv encoder)", "synthetic_scenes/tiny:train"),
      ("model", "RNN (conv encoder)", "karpathy/flickr30k:train"),
      ("constant_caption", "constant caption", "synthetic_scenes/tiny:train"),
      ("constant_caption", "constant caption", "karpathy/flickr30k:train")]
  meteor = ["METEOR"] if java else []
  assert matrix["columns"] == {SYNTHETIC: ["cider_d", "ROUGE_L", *meteor, "chair_i", "chair_s"],
                               FLICKR: ["cider_d", "ROUGE_L", *meteor]}
  assert [t["examples"] for t in matrix["test_sets"]] == [64, 2]
  # Flickr30k's Karpathy test split is the paper's Flickr 1K (Table 7); neither debug model is one of the paper's.
  assert [(t["paper_table"] or {}).get("table") for t in matrix["test_sets"]] == [None, 7]
  assert all(not c["paper"] for r in matrix["rows"] for c in r["cells"].values())
  markdown = (out / "matrix.md").read_text()
  header = markdown.splitlines()[2]
  for spec, metrics in matrix["columns"].items():
    for metric in metrics:
      assert f"{spec} · {report.NAMES[metric]}" in header
  assert sum(line.startswith("|") for line in markdown.splitlines()) == 1 + 1 + 4  # header, rule, four rows
  page = (out / "matrix.html").read_text()
  assert page.count('<th colspan="') == 2 and page.count("<tr") == 2 + 4
  assert "not computed" in matrix["spice"] or matrix["spice"] == "computed"

  # Every figure is the metrics command's on the files the matrix names.
  for row in matrix["rows"]:
    for test in matrix["test_sets"]:
      cell = row["cells"][test["spec"]]
      expected = _metrics_command(test["references"], cell["predictions"], "--metrics=ROUGE_L,CIDEr")
      assert cell["metrics"]["cider_d"] == expected["CIDEr"]
      assert cell["metrics"]["ROUGE_L"] == expected["ROUGE_L"]
      assert report.cell_text(cell, "cider_d") in markdown
  # METEOR on one cell, the cross-domain one (each run of the command starts its own JVM, 6 s).
  if java:
    cell = matrix["rows"][0]["cells"][FLICKR]
    expected = _metrics_command(matrix["test_sets"][1]["references"], cell["predictions"], "--metrics=METEOR")
    assert cell["metrics"]["METEOR"] == expected["METEOR"]
  # The constant caption is the most frequent training caption, said of every image.
  constant = matrix["rows"][2]
  predictions = json.loads(pathlib.Path(constant["cells"][FLICKR]["predictions"]).read_text())
  assert {p["caption"] for p in predictions} == {constant["caption"]}


def _crossdomain(*flags: str) -> int:
  from capjax.crossdomain import __main__ as crossdomain
  try:
    return crossdomain.main(["crossdomain", *flags])
  except SystemExit as exit_:
    return exit_.code


@pytest.fixture(scope="module")
def sliced(trained, tmp_path_factory):
  """(the matrix of the synthetic model on two slices of Flickr30k's test split, with a --data_dir that holds
  Flickr30k only, that data dir): the model's own training set lives in its own data dir."""
  data_dir, workdirs = trained
  root = tmp_path_factory.mktemp("sliced")
  flickr_only = root / "tfds"
  shutil.copytree(data_dir / "karpathy", flickr_only / "karpathy")
  assert _crossdomain(f"--workdirs={workdirs[0]}", "--test=karpathy/flickr30k:test[:1],karpathy/flickr30k:test[1:]",
                      f"--data_dir={flickr_only}", f"--output={root / 'matrix'}") == 0
  return json.loads((root / "matrix" / "matrix.json").read_text()), flickr_only


def test_two_slices_of_one_split_are_two_reference_files_each_of_its_own_images(sliced):
  import ml_collections
  from capjax.data import sources
  from capjax.strings import as_str
  matrix, flickr_only = sliced
  dataset = ml_collections.ConfigDict({"name": "karpathy", "builder_config": "flickr30k", "data_dir": str(flickr_only),
                                       "auto_build": False, "features": ""})
  split = sources.data_source(dataset, "test")
  expected = [[as_str(c) for c in split[i]["captions"]] for i in range(len(split))]
  references = [json.loads(pathlib.Path(t["references"]).read_text()) for t in matrix["test_sets"]]
  assert [[a["caption"] for a in r["annotations"]] for r in references] == expected
  for row in matrix["rows"]:
    assert len({c["predictions"] for c in row["cells"].values()}) == 2


def test_the_constant_caption_is_read_from_the_models_own_data_dir_not_the_test_sets(trained, sliced):
  from capjax import evaluate as evaluate_lib
  from capjax.crossdomain import matrix as matrix_lib
  matrix, flickr_only = sliced
  synthetic = config_util.load("configs/t2t.py:shapes,debug").dataset
  synthetic.update(builder_config="tiny", data_dir=json.loads(
      (trained[1][0] / matrix_lib.CONFIG_FILENAME).read_text())["dataset"]["data_dir"], auto_build=False)
  from capjax.data import sources
  from capjax.strings import as_str
  source = sources.data_source(synthetic, "train")
  caption = evaluate_lib.constant_caption([[as_str(c) for i in range(len(source)) for c in source[i]["captions"]]])
  assert [(r["kind"], r.get("caption")) for r in matrix["rows"]] == [("model", None), ("constant_caption", caption)]
  assert sorted(p.name for p in flickr_only.iterdir()) == ["karpathy"]  # nothing built into the test sets' folder


# The lines TensorFlow's and XLA's native code logs as they load (oneDNN, no CUDA driver): theirs, not the command's.
NATIVE_LOG_LINE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\)"
                             r"|[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]")


def test_a_damaged_checkpoint_is_an_error_whose_remedy_names_the_commands_own_flags(trained, tmp_path):
  """The command's whole stderr is its one error line: a garbled manifest fails every array's read, and none of the
  reads still pending when orbax gave up reports on orbax's closed event loop (`RuntimeError: Event loop is closed`,
  dozens of tracebacks, before `model_io.settled_event_loops`). A subprocess: those came from TensorStore's threads,
  through `sys.unraisablehook`, which pytest takes over in its own process."""
  import os
  import subprocess
  import sys
  data_dir, workdirs = trained
  workdir = tmp_path / "damaged"
  shutil.copytree(workdirs[0], workdir)
  for manifest in workdir.glob("checkpoints/*/state/**/manifest.ocdbt"):
    manifest.write_bytes(b"not ocdbt")
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-m", "capjax.crossdomain", f"--workdirs={workdir}", f"--test={SYNTHETIC}",
                         f"--data_dir={data_dir}", f"--output={tmp_path / 'matrix'}"],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr and "Event loop is closed" not in proc.stderr, proc.stderr[-3000:]
  lines = [line for line in proc.stderr.splitlines() if not NATIVE_LOG_LINE.match(line)]
  assert len(lines) == 1, proc.stderr[-3000:]
  line = lines[0]
  assert line.startswith(f"error: --workdirs: {workdir}: checkpoint ") and " cannot be restored (" in line, line
  assert line.endswith(f" — resume its training (`python -m capjax.main --config=... --workdir={workdir}`), which sets "
                       "damaged checkpoints aside, or leave it out of --workdirs"), line
  assert not (tmp_path / "matrix").exists()


def test_ctrl_c_while_the_matrix_decodes_is_one_line_and_exit_130(trained, tmp_path):
  import os
  import signal
  import subprocess
  import sys
  data_dir, workdirs = trained
  env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
  proc = subprocess.Popen([sys.executable, "-m", "capjax.crossdomain", f"--workdirs={workdirs[0]}",
                           f"--test={SYNTHETIC},{FLICKR}", f"--data_dir={data_dir}", f"--output={tmp_path / 'm'}"],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    for line in proc.stdout:  # the first cell scored: the second is decoding
      if f"on {SYNTHETIC}: CIDEr" in line:
        proc.send_signal(signal.SIGINT)
        break
    _, err = proc.communicate(timeout=120)
  finally:
    proc.kill()
    proc.wait()
  assert proc.returncode == 130, err[-3000:]
  assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
  assert err.splitlines()[-1] == "interrupted: the command stopped before it finished — run it again to finish"
  assert not (tmp_path / "m" / "matrix.json").exists()
