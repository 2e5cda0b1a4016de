"""benchmarks/build_scale.py's generated inputs build, and the cc3m report counts exactly the failures the generator
planned; the projection arithmetic. (Its figures are read by people, never asserted.)"""

import pathlib
import sys
import tarfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import build_scale  # noqa: E402
import scale_inputs  # noqa: E402


def test_a_generated_cc3m_input_builds_to_its_planned_report(tmp_path, monkeypatch):
  # 200 rows in 4 shards, failures at rates high enough that every kind occurs (CC3M's rates would give one or
  # two); the build runs as the benchmark runs it, in a process of its own, measured by os.wait4.
  monkeypatch.setattr(scale_inputs, "PER_SHARD", 64)
  plan = scale_inputs.write_cc3m(tmp_path / "manual", 200, seed=3,
                                 rates={"missing": 0.3, "truncated": 0.05, "not_jpeg": 0.05}, duplicate_rate=0.05)
  assert plan.counts["tsv_rows"] == 200 and plan.counts["shards"] == 4
  assert all(plan.counts[k] > 0 for k in ("examples", "missing_image", "corrupt_image", "duplicate_url",
                                          "duplicate_image")), plan
  assert set(plan.reasons) == {"truncated", "not_jpeg"}
  with tarfile.open(tmp_path / "manual" / "images" / "train" / "00000.tar") as tar:  # a tar as tarfile reads it
    assert [m.name for m in tar.getmembers()[:3]] == ["000000000.jpg", "000000000.txt", "000000000.json"]

  measured = build_scale.run_build("cc3m", tmp_path / "manual", tmp_path / "out")
  assert measured["cpu_s"] > 0 and measured["peak_rss_mib"] > 50
  report = build_scale.build_report(tmp_path / "out")["build_report"]["train"]
  assert report == {"malformed_row": 0, "image_without_row": 0, "unsafe_member": 0,
                    "shard_without_parquet": 0, "truncated_shard": 0, **plan.counts, "corrupt_reasons": plan.reasons}
  assert build_scale.examples_of("cc3m", tmp_path / "out") == plan.counts["examples"]


def test_projections_take_the_marginal_cost_between_the_two_largest_sizes():
  runs = [{"build": "b", "rows": rows, "cpu_s": cpu, "peak_rss_mib": rss}
          for rows, cpu, rss in ((1_000, 12.0, 200.0), (10_000, 20.0, 201.0), (100_000, 110.0, 209.0))]
  lines = build_scale.projections(runs).splitlines()
  # 1,000 µs a row between 10k and 100k rows, 10 s fixed: CC3M (10 + 3.3e6 × 1e-3) s = 0.9 core-hours, CC12M 3.3,
  # 5e9 candidates 1,388.9; RSS 9 MiB more over 99,000 rows: 90.9 MiB per million.
  assert lines[1].split() == ["b", "1000", "10.0", "0.9", "3.3", "1,388.9", "90.9"]
