"""Cost curves of the dataset builds: generated CC3M-shaped inputs (benchmarks/scale_inputs.py) at each size, each
build in a process of its own, so that its CPU seconds and peak RSS are that build's alone (`os.wait4`).

`python benchmarks/build_scale.py [--sizes=10000,100000,1000000] [--builds=cc3m,cc3m_beam,alt_text,cc12m,text]
    [--spill_mib=50]`

Prints, per build and size: rows, the generator's seconds, the build's wall and CPU seconds (user + system, start-up
included), rows/s per core (rows / CPU seconds), CPU µs per row, peak RSS (the largest process; Beam's workers are
processes of their own), examples and the built dataset's size (TFDS's writer holds up to 1000 MiB of serialized
examples in memory before it spills them to disk: RSS grows with it until then); then the projections to CC3M
(3.3M rows), CC12M (12M) and the paper's 5 billion candidates from each build's marginal cost (the CPU seconds between
its two largest sizes), and one JSON line. `cc3m_spill` and `cc12m_spill` are the plain builds with TFDS's writer
made to spill its examples to disk past --spill_mib, as it does past 1000 MiB: beside `cc3m` and `cc12m` at one size,
they print what the spill costs.
"""

from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SHARED_NLTK = REPO.parent / "shared" / "nltk_data"
if SHARED_NLTK.is_dir():
  os.environ.setdefault("NLTK_DATA", os.fspath(SHARED_NLTK))

from absl import app, flags  # noqa: E402

_SIZES = flags.DEFINE_list("sizes", ["10000", "100000"], "Rows (candidates) per generated input.")
_BUILDS = flags.DEFINE_list("builds", ["cc3m", "cc3m_beam", "alt_text", "cc12m", "text"], "Builds to measure.")
_WORK_DIR = flags.DEFINE_string("work_dir", "", "Where inputs and outputs go ('' → a temporary folder, removed).")
_SPILL_MIB = flags.DEFINE_integer("spill_mib", 50, "The *_spill builds: TFDS's writer spills its examples to disk "
                                  "past this many MiB instead of its 1000 (shuffle.MAX_MEM_BUFFER_SIZE).",
                                  lower_bound=1)
_CHILD = flags.DEFINE_enum("child", "", ["", "cc3m_beam", "text", "cc3m_spill", "cc12m_spill"],
                           "Internal: run one build in this process.")  # the *_spill ones: SPILLED
_MANUAL_DIR = flags.DEFINE_string("manual_dir", "", "Internal: the child's input.")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "Internal: the child's output.")

PROJECTIONS = (("CC3M", 3_300_000), ("CC12M", 12_000_000), ("paper's candidates", 5_000_000_000))
# Which input each build reads, and its command (python arguments) given the input and an output folder.
SPILLED = {"cc3m_spill": "cc3m", "cc12m_spill": "cc12m_llavanext"}  # build → its dataset, TFDS's spill forced
INPUTS = {"cc3m": "cc3m", "cc3m_beam": "cc3m", "alt_text": "alt_text", "cc12m": "cc12m", "text": "text",
          **{build: build.removesuffix("_spill") for build in SPILLED}}


def _dataset_command(dataset: str):
  return lambda manual, out: ["-m", "capjax.data.build", f"--dataset={dataset}", f"--manual_dir={manual}",
                              f"--data_dir={out}"]


def _child_command(child: str):
  return lambda manual, out: [os.fspath(REPO / "benchmarks" / "build_scale.py"), f"--child={child}",
                              f"--manual_dir={manual}", f"--data_dir={out}", f"--spill_mib={_SPILL_MIB.value}"]


COMMANDS = {"cc3m": _dataset_command("cc3m"), "cc3m_beam": _child_command("cc3m_beam"),
            "alt_text": _dataset_command("alt_text_captions"), "cc12m": _dataset_command("cc12m_llavanext"),
            "text": _child_command("text"), **{build: _child_command(build) for build in SPILLED}}


def generate(what: str, n: int, folder: pathlib.Path) -> tuple[pathlib.Path, object]:
  """The input of `what` at `n` rows (written once per size, shared by the builds that read it), and its plan."""
  import scale_inputs
  path = folder / f"{what}_{n}"
  if what == "text":
    path = path.with_suffix(".txt")
    return path, scale_inputs.write_text_input(path, n)
  writer = {"cc3m": scale_inputs.write_cc3m, "alt_text": scale_inputs.write_alt_text,
            "cc12m": scale_inputs.write_cc12m}[what]
  return path, writer(path, n)


def run_build(build: str, manual: pathlib.Path, out: pathlib.Path) -> dict[str, float]:
  """One build in its own process: wall seconds, CPU seconds (the process and the children it waited for) and peak
  RSS in MiB (ru_maxrss of the largest of them), from `os.wait4`."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.fspath(REPO), os.environ.get("PYTHONPATH", "")]))
  start = time.perf_counter()
  proc = subprocess.Popen([sys.executable, *COMMANDS[build](manual, out)], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  output = proc.stdout.read()
  _, status, usage = os.wait4(proc.pid, 0)
  wall = time.perf_counter() - start
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode != 0:
    raise RuntimeError(f"{build} on {manual} failed ({proc.returncode}):\n{output.decode(errors='replace')[-4000:]}")
  return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,
          "output": output.decode(errors="replace")}


def build_report(data_dir: pathlib.Path) -> dict:
  """The build report (`metadata.json`'s `build_report`, or alt_text's funnel) of the one dataset in data_dir."""
  found = glob.glob(os.fspath(data_dir / "*" / "*" / "*" / "metadata.json"))
  return json.loads(pathlib.Path(found[0]).read_text()) if found else {}


# ------------------------------------------------------------------------------------------------ children


def _child_cc3m_beam(manual: str, data_dir: str) -> None:
  """cc3m on Beam's local runner (FnApiRunner), 2 workers in processes (as benchmarks/build_speed.py)."""
  import tensorflow_datasets as tfds
  from apache_beam.options.pipeline_options import PipelineOptions

  import tfds_builders.cc3m  # noqa: F401
  options = PipelineOptions(["--runner=FnApiRunner", "--direct_num_workers=2",
                             "--direct_running_mode=multi_processing"])
  config = tfds.download.DownloadConfig(manual_dir=manual, beam_options=options)
  tfds.builder("cc3m", data_dir=data_dir).download_and_prepare(file_format="array_record", download_config=config)


def _child_spill(build: str, manual: str, data_dir: str) -> None:
  """`capjax.data.build` as the plain builds run it, with TFDS's writer spilling its serialized examples into its
  1,000 bucket files past --spill_mib instead of past 1000 MiB: what a build of more than 1000 MiB of examples
  does, at a size that fits in memory."""
  from tensorflow_datasets.core import shuffle

  from capjax.data import build as build_lib
  shuffle.MAX_MEM_BUFFER_SIZE = _SPILL_MIB.value << 20
  build_lib.main(["build", f"--dataset={SPILLED[build]}", f"--manual_dir={manual}", f"--data_dir={data_dir}"])


def _child_text(path: str, out: str) -> None:
  """capjax.text's pipeline (boilerplate, filters, hypernymization) over one alt-text a line, streamed; writes the
  number kept."""
  from capjax.text.pipeline import TextPipeline
  pipeline = TextPipeline()
  kept = total = 0
  with open(path, encoding="utf-8") as f:
    for total, line in enumerate(f, 1):
      kept += pipeline.process(str(total), line.rstrip("\n")).kept
  pathlib.Path(out).mkdir(parents=True, exist_ok=True)
  (pathlib.Path(out) / "kept.json").write_text(json.dumps({"candidates": total, "kept": kept}))


# ------------------------------------------------------------------------------------------------ report


def examples_of(build: str, out: pathlib.Path) -> int:
  """How many examples (kept candidates) the build gave."""
  if build == "text":
    return json.loads((out / "kept.json").read_text())["kept"]
  metadata = build_report(out)
  if "funnel" in metadata:
    return metadata["funnel"][-1]["out"]
  report = metadata["build_report"]
  return report["examples"] if "examples" in report else sum(split["examples"] for split in report.values())


def table(results: list[dict]) -> str:
  header = (f"{'build':<11}{'rows':>11}{'gen s':>8}{'wall s':>9}{'CPU s':>9}{'rows/s/core':>13}{'CPU µs/row':>12}"
            f"{'peak RSS MiB':>14}{'examples':>11}{'output MiB':>12}")
  lines = [header]
  for r in results:
    lines.append(f"{r['build']:<11}{r['rows']:>11,}{r['gen_s']:>8.0f}{r['wall_s']:>9.1f}{r['cpu_s']:>9.1f}"
                 f"{r['rows'] / r['cpu_s']:>13,.0f}{r['cpu_s'] / r['rows'] * 1e6:>12.0f}{r['peak_rss_mib']:>14.0f}"
                 f"{r['examples']:>11,}{r['output_mib']:>12,.0f}")
  return "\n".join(lines)


def spill_ratios(results: list[dict]) -> str:
  """Each *_spill build against its plain build at the same size, measured in the same run: CPU and peak RSS."""
  lines = []
  for r in (r for r in results if r["build"] in SPILLED):
    base = [b for b in results if b["build"] == INPUTS[r["build"]] and b["rows"] == r["rows"]]
    if base:
      lines.append(f"{r['build']:<13}{r['rows']:>11,}{r['cpu_s'] / base[-1]['cpu_s']:>10.2f}"
                   f"{(r['cpu_s'] - base[-1]['cpu_s']) / r['examples'] * 1e6:>16.0f}"
                   f"{r['peak_rss_mib'] / base[-1]['peak_rss_mib']:>10.2f}")
  header = (f"TFDS's spill forced (past {_SPILL_MIB.value} MiB) / its default, same input\n"
            f"{'build':<13}{'rows':>11}{'CPU':>10}{'+CPU µs/ex':>16}{'peak RSS':>10}")
  return "\n".join([header, *lines]) if lines else ""


def projections(results: list[dict]) -> str:
  """Per build: the marginal CPU per row between its two largest sizes (start-up left out), the fixed part, and
  the core-hours and peak RSS that gives at each projected size."""
  lines = [f"{'build':<11}{'marginal µs/row':>16}{'fixed s':>9}"
           + "".join(f"{name + ' core-h':>{max(14, len(name) + 9)}}" for name, _ in PROJECTIONS)
           + f"{'RSS growth MiB/1M rows':>24}"]
  for build in dict.fromkeys(r["build"] for r in results):
    runs = sorted((r for r in results if r["build"] == build), key=lambda r: r["rows"])
    if len(runs) < 2:
      continue
    small, large = runs[-2], runs[-1]
    per_row = (large["cpu_s"] - small["cpu_s"]) / (large["rows"] - small["rows"])
    fixed = large["cpu_s"] - per_row * large["rows"]
    growth = (large["peak_rss_mib"] - runs[0]["peak_rss_mib"]) / (large["rows"] - runs[0]["rows"]) * 1e6
    lines.append(f"{build:<11}{per_row * 1e6:>16.0f}{fixed:>9.1f}"
                 + "".join(f"{(fixed + per_row * n) / 3600:>{max(14, len(name) + 9)},.1f}" for name, n in PROJECTIONS)
                 + f"{growth:>24.1f}")
  return "\n".join(lines)


def main(argv) -> None:
  del argv
  if _CHILD.value:
    if _CHILD.value in SPILLED:
      _child_spill(_CHILD.value, _MANUAL_DIR.value, _DATA_DIR.value)
    else:
      {"cc3m_beam": _child_cc3m_beam, "text": _child_text}[_CHILD.value](_MANUAL_DIR.value, _DATA_DIR.value)
    return
  sys.path.insert(0, os.fspath(REPO / "benchmarks"))
  work = pathlib.Path(_WORK_DIR.value or tempfile.mkdtemp(prefix="build_scale_"))
  work.mkdir(parents=True, exist_ok=True)
  results = []
  print(f"{len(os.sched_getaffinity(0))} cores here; inputs and outputs in {work}", flush=True)
  try:
    for n in (int(s) for s in _SIZES.value):
      inputs: dict[str, tuple[pathlib.Path, float]] = {}
      for build in _BUILDS.value:
        what = INPUTS[build]
        if what not in inputs:
          start = time.process_time()
          path, _ = generate(what, n, work)
          inputs[what] = (path, time.process_time() - start)
        path, gen_s = inputs[what]
        out = work / f"out_{build}_{n}"
        shutil.rmtree(out, ignore_errors=True)
        measured = run_build(build, path, out)
        result = {"build": build, "rows": n, "gen_s": gen_s, **{k: v for k, v in measured.items() if k != "output"},
                  "examples": examples_of(build, out),
                  "output_mib": sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20}
        results.append(result)
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}), flush=True)
        shutil.rmtree(out, ignore_errors=True)
      for path, _ in inputs.values():
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
    print()
    print(table(results))
    if ratios := spill_ratios(results):
      print()
      print(ratios)
    print()
    print(projections(results))
    print(json.dumps({"results": [{k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}
                                  for r in results]}))
  finally:
    if not _WORK_DIR.value:
      shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
