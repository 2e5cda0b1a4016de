"""`python -m capjax.recaption` on the session's tiny trained captioner (tests/trained_models.py) and its
synthetic_scenes/tiny build: the captions are evaluation's, a killed job resumes without a duplicate, slices keep the
full split's indices, another model into the same file is refused, the TFDS copy reads back, and two processes of a
multi-host job write what one writes. In process, on the 8 fake CPU devices of conftest.py, so that the batch is split
over a mesh of 8."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from capjax.recaption import job as job_lib
from capjax.recaption import journal
import helpers

REPO = pathlib.Path(__file__).resolve().parent.parent
SPLIT = "test[:24]"
BATCH = 8


def _request(workdir, data_dir, output, split=SPLIT, **kw) -> job_lib.Request:
  return job_lib.Request(workdir=str(workdir), dataset=f"synthetic_scenes/tiny:{split}", output=str(output),
                         data_dir=str(data_dir), batch_size=BATCH, **kw)


def _recaption(request: job_lib.Request) -> dict:
  return job_lib.run(job_lib.resolve(request), log=lambda line: None)


@pytest.fixture(scope="module")
def straight(shapes_debug_run, tmp_path_factory):
  """(data_dir, workdir, output, summary): one uninterrupted greedy recaptioning of SPLIT."""
  data_dir, workdir, _ = shapes_debug_run
  output = tmp_path_factory.mktemp("recaption") / "captions.jsonl"
  summary = _recaption(_request(workdir, data_dir, output))
  return data_dir, workdir, output, summary


def _decode_split(request: job_lib.Request, count: int) -> list[str]:
  """`evaluate.decode_split`'s captions (`--mode=eval`'s) of the first `count` examples, same config and batch."""
  from capjax import evaluate, inference
  job = job_lib.resolve(request)
  setup, params, vocab, _ = inference.load_trained(job.config, request.workdir)
  indices, captions = evaluate.decode_split(setup, params, job.source, vocab, job.config, count)
  assert indices == list(range(count))
  return captions


def test_each_example_has_one_line_with_the_captions_mode_eval_gives(straight):
  data_dir, workdir, output, summary = straight
  assert summary["batch_shards"] == 8 and summary["written"] == 24  # the sharded path: 8 devices share each batch
  lines = journal.read_lines(str(output))
  assert [line["index"] for line in lines] == list(range(24))
  assert [line["key"] for line in lines] == list(range(24))  # synthetic_scenes' `id`
  assert all(len(line["captions"]) == len(line["scores"]) == 1 for line in lines)  # greedy: one caption
  assert all(line["scores"][0] <= 0 for line in lines)  # a log-probability
  assert [line["captions"][0] for line in lines] == _decode_split(_request(workdir, data_dir, output), 24)
  settings = json.loads(pathlib.Path(journal.settings_path(str(output))).read_text())
  assert settings["step"] == summary["step"] and settings["decode"] == "greedy"


def test_beam_writes_its_k_best_best_first_and_the_best_is_mode_eval_s(straight, tmp_path):
  data_dir, workdir, _, _ = straight
  request = _request(workdir, data_dir, tmp_path / "beam.jsonl", split="test[:8]", decode="beam", beam_size=3)
  _recaption(request)
  lines = journal.read_lines(request.output)
  assert all(len(line["captions"]) == 3 and line["scores"] == sorted(line["scores"], reverse=True) for line in lines)
  assert [line["captions"][0] for line in lines] == _decode_split(request, 8)


def test_a_killed_job_continues_after_its_last_complete_line_and_writes_no_example_twice(straight, tmp_path):
  data_dir, workdir, output, _ = straight
  resumed = tmp_path / "resumed.jsonl"
  first = _recaption(_request(workdir, data_dir, resumed, stop_after=1))  # stopped after its first batch
  assert first["written"] == BATCH
  with open(resumed, "ab") as f:  # and killed while writing the next one: a torn line
    f.write(b'{"index": 8, "key": 8, "capt')
  assert journal.read_done(str(resumed)).torn
  second = _recaption(_request(workdir, data_dir, resumed))
  assert second["written"] == 24 - BATCH
  assert resumed.read_bytes() == output.read_bytes()
  assert _recaption(_request(workdir, data_dir, resumed))["written"] == 0  # a third run has nothing to add


def test_a_process_killed_after_its_first_batch_resumes_to_the_same_file(straight, tmp_path):
  """The real kill: SIGKILL once the first batch's lines are on disk, then the command again."""
  data_dir, workdir, output, _ = straight
  out = tmp_path / "killed.jsonl"
  args = [sys.executable, "-m", "capjax.recaption", f"--workdir={workdir}", f"--dataset=synthetic_scenes/tiny:{SPLIT}",
          f"--data_dir={data_dir}", f"--output={out}", f"--batch_size={BATCH}"]
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    while proc.poll() is None and not (out.exists() and out.stat().st_size):
      time.sleep(0.05)
  finally:
    proc.kill()
    proc.wait()
  again = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert again.returncode == 0, again.stderr[-2000:]
  assert out.read_bytes() == output.read_bytes()


@pytest.mark.slow  # two capjax.recaption processes (conftest.py: the slow rule)
def test_two_processes_of_four_devices_write_the_file_one_process_of_eight_writes(straight, tmp_path):
  """A multi-host job on one machine, started as launch/multiprocess_cpu.sh starts training: 2 processes x 4 fake
  CPU devices joined by jax.distributed on 127.0.0.1 (--distributed=on). Each decodes its own rows of every global
  batch and process 0 alone writes: the file is byte for byte the one process of 8 devices' (the same per-device
  rows, so the same numbers), with --format=tfds's copy written once."""
  data_dir, workdir, output, _ = straight
  out = tmp_path / "two_hosts.jsonl"
  flags_ = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", ""))
  env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "SLURM_", "TPU_", "MEGASCALE_"))}
  env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"{flags_} --xla_force_host_platform_device_count=4".strip(),
             JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{helpers.free_port()}", JAX_NUM_PROCESSES="2")
  args = [sys.executable, "-m", "capjax.recaption", f"--workdir={workdir}", f"--dataset=synthetic_scenes/tiny:{SPLIT}",
          f"--data_dir={data_dir}", f"--output={out}", f"--batch_size={BATCH}", "--format=tfds", "--distributed=on"]
  logs = [tmp_path / f"process{i}.log" for i in range(2)]
  procs = []
  for i, log in enumerate(logs):
    with open(log, "w") as f:
      procs.append(subprocess.Popen(args, cwd=REPO, env=dict(env, JAX_PROCESS_ID=str(i)), stdout=f,
                                    stderr=subprocess.STDOUT))
  try:
    codes = [p.wait(timeout=300) for p in procs]
  finally:
    for p in procs:
      p.kill()
  tails = "\n".join(f"--- process {i}:\n{log.read_text()[-2000:]}" for i, log in enumerate(logs))
  assert codes == [0, 0], tails
  assert "recaption: 24 examples written now, 24 in" in logs[1].read_text(), tails  # both decoded every batch
  assert out.read_bytes() == output.read_bytes()
  import tensorflow_datasets as tfds
  assert len(tfds.builder_from_directory(str(tmp_path / "two_hosts_tfds")).as_data_source(split="test")) == 24


def test_a_slice_keeps_each_example_s_index_in_the_full_split(straight, tmp_path):
  data_dir, workdir, output, _ = straight
  sliced = tmp_path / "slice.jsonl"
  _recaption(_request(workdir, data_dir, sliced, split="test[4:20]"))
  lines = journal.read_lines(str(sliced))
  assert lines == journal.read_lines(str(output))[4:20]


def test_another_split_or_step_into_the_same_file_is_refused(straight):
  data_dir, workdir, output, summary = straight
  with pytest.raises(job_lib.RecaptionInputError, match=r"split: 'test\[:24\]' -> 'test\[:16\]'"):
    job_lib.resolve(_request(workdir, data_dir, output, split="test[:16]"))
  with pytest.raises(job_lib.RecaptionInputError, match="step"):
    job_lib.resolve(_request(workdir, data_dir, output, step=summary["step"] - 3))


def test_the_tfds_copy_joins_the_original_captions_with_the_new_ones(straight, tmp_path):
  import tensorflow_datasets as tfds

  from capjax.recaption import tfds_output
  data_dir, workdir, _, _ = straight
  request = _request(workdir, data_dir, tmp_path / "copy.jsonl", split="test[2:10]", format="tfds")
  job = job_lib.resolve(request)
  job_lib.run(job, log=lambda line: None)
  folder = tfds_output.write(job)
  assert folder == str(tmp_path / "copy_tfds")
  builder = tfds.builder_from_directory(folder)
  source = builder.as_data_source(split="test")
  lines = journal.read_lines(request.output)
  assert len(source) == len(lines) == 8
  original = job.source
  for record, line in zip(source, lines):
    assert int(record["split_index"]) == line["index"] == int(record["id"])
    assert [c.decode() for c in record["recaptions"]] == line["captions"]
    assert list(record["captions"]) == list(original[line["index"]]["captions"])
    assert (record["image"] == original[line["index"]]["image"]).all()
