"""Caption statistics: the paper's table row for the released CC3M validation file."""

import json
import subprocess
import sys

import pytest

from capjax.text.stats import caption_stats


def test_stats_cli_on_cc3m_validation(cc3m_validation_tsv, repo_root):
  out = subprocess.run(
      [sys.executable, "-m", "capjax.text.stats", str(cc3m_validation_tsv)],
      cwd=repo_root, capture_output=True, text=True, check=True,
  ).stdout
  assert json.loads(out) == {"examples": 15833, "unique_tokens": 10898, "tokens_mean": 10.4035,
                             "tokens_std": 4.7322, "tokens_median": 9.0, "tokens_p95": 20.0}


def test_caption_stats_on_a_small_list():
  stats = caption_stats(["a dog .", "a dog in the park .", "two cats"])
  assert stats == {"examples": 3, "unique_tokens": 8, "tokens_mean": 3.6667, "tokens_std": 1.6997, "tokens_median": 3.0,
                   "tokens_p95": 6.0}  # lengths 2, 3, 6: 95% of them within 6


def test_column_and_pipeline_output_are_read(tmp_path, capsys):
  from capjax.text import stats

  tsv = tmp_path / "alt.tsv"
  tsv.write_text("1\tactors attend the premiere\n2\tdogs play\n", encoding="utf-8")
  stats.main([str(tsv), "--column=1"])
  assert json.loads(capsys.readouterr().out)["tokens_mean"] == 3.0
  jsonl = tmp_path / "out.jsonl"
  jsonl.write_text('{"kept": true, "caption": "a b c"}\n{"kept": false, "caption": null}\n', encoding="utf-8")
  stats.main([str(jsonl)])
  assert json.loads(capsys.readouterr().out)["examples"] == 1


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "capjax.text.stats", *args], cwd=cwd, capture_output=True, text=True)


def test_stats_of_a_built_tfds_split_count_every_caption(tmp_path, repo_root):
  import tensorflow_datasets as tfds

  import tfds_builders.cc3m  # noqa: F401 (registers the builder)

  manual = repo_root / "tfds_builders" / "cc3m" / "dummy_data"
  tfds.builder("cc3m", data_dir=tmp_path).download_and_prepare(
      file_format="array_record", download_config=tfds.download.DownloadConfig(manual_dir=str(manual)))
  proc = _cli("--dataset=cc3m", "--split=validation", f"--data_dir={tmp_path}", cwd=repo_root)
  assert proc.returncode == 0, proc.stderr[-2000:]
  # The two downloaded validation rows: "validation caption {0,1} with "quotes" and ünïcödé" (7 tokens each).
  assert json.loads(proc.stdout) == {"examples": 2, "unique_tokens": 8, "tokens_mean": 7.0, "tokens_std": 0.0,
                                     "tokens_median": 7.0, "tokens_p95": 7.0}
  proc = _cli("--dataset=cc3m", "--split=test", f"--data_dir={tmp_path}", cwd=repo_root)
  assert proc.returncode == 2
  expected = "error: cc3m has no split 'test' — use one of ['train', 'validation']"
  assert proc.stderr.strip().splitlines()[-1] == expected


def test_bad_input_is_one_error_line_and_exit_2(tmp_path, repo_root):
  cases = [(), (str(tmp_path / "missing.tsv"),), ("--column=x", "a.tsv"), ("a.tsv", "--dataset=cc3m"),
           ("--dataset=cc3m", f"--data_dir={tmp_path}")]
  for args in cases:
    proc = _cli(*args, cwd=repo_root)
    assert proc.returncode == 2, (args, proc.stderr[-1000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr[-1000:])


def test_help_shows_usage(repo_root):
  proc = _cli("--help", cwd=repo_root)
  assert proc.returncode == 0
  assert "python -m capjax.text.stats FILE.tsv" in proc.stdout and "--dataset" in proc.stdout


def test_blank_lines_are_skipped_and_counted_not_read_as_empty_captions(tmp_path, capsys):
  from capjax.text import stats

  tsv = tmp_path / "captions.tsv"
  tsv.write_bytes(b"\xef\xbb\xbfa dog\tu1\n\n  \r\nthree cats sleep\tu2\rtwo birds\tu3\r\n")  # BOM, CR, CRLF
  assert stats.main(["--column=0", str(tsv)]) == 0  # flags before FILE as well as after
  captured = capsys.readouterr()
  assert json.loads(captured.out) == {"examples": 3, "unique_tokens": 7, "tokens_mean": 2.3333, "tokens_std": 0.4714,
                                      "tokens_median": 2.0, "tokens_p95": 3.0}
  assert captured.err == "blank lines skipped: 2\n"
  jsonl = tmp_path / "out.jsonl"
  jsonl.write_text('\n{"kept": true, "caption": "a b c"}\n\n{"kept": false, "caption": null}\n', encoding="utf-8")
  assert stats.main([str(jsonl)]) == 0
  captured = capsys.readouterr()
  assert (json.loads(captured.out)["examples"], captured.err) == (1, "blank lines skipped: 2\n")


@pytest.mark.parametrize("name,data,args,message", [
    ("c.tsv", b"a dog\tu1\nno url here\n", ["--column=1"],
     "{path} line 2 has 1 column(s), no column 1 (counted from 0) — pass the --column every row has"),
    ("c.tsv", b"a dog\nCaf\xe9 au lait\n", [], "{path} line 2: byte 4 (0xe9) is not UTF-8 — save the file as UTF-8"),
    ("c.jsonl", b'{"kept": true, "caption": "a b"}\n{"kept": true,\n', [],
     "{path} line 2 is not JSON (Expecting property name enclosed in double quotes) — give a capjax.text.pipeline "
     "output"),
    ("c.jsonl", b'["a b"]\n', [], "{path} line 1 is not a JSON object — give a capjax.text.pipeline output"),
    ("c.jsonl", b'{"kept": true, "caption": 3}\n', [],
     "{path} line 1: the caption is int, not a string — give a capjax.text.pipeline output"),
    ("c.tsv", b"a dog\n", ["--column=-1"], "flag --column=-1: -1 is not a non-negative integer — see --help"),
    ("c.tsv", b"a dog\n", ["--tokenizer=spacy"],
     "flag --tokenizer=spacy: value should be one of <whitespace|treebank> — see --help"),
])
def test_a_row_the_statistics_cannot_use_is_an_error_naming_its_line(tmp_path, capsys, name, data, args, message):
  from capjax.text import stats

  path = tmp_path / name
  path.write_bytes(data)
  with pytest.raises(SystemExit) as exit_:
    stats.main([str(path), *args])
  captured = capsys.readouterr()
  assert (exit_.value.code, captured.out, captured.err) == (2, "", f"error: {message.format(path=path)}\n")


def test_only_json_true_is_kept_and_other_kept_values_are_counted_as_malformed(tmp_path, capsys):
  """"false" (a string), NaN, 1e309 (infinite) and 1 are truthy in Python and were counted as kept: only JSON true
  is; false is not; anything else is a malformed row, skipped and counted on stderr with the first one's line."""
  from capjax.text import stats

  jsonl = tmp_path / "out.jsonl"
  jsonl.write_text('{"kept": true, "caption": "a dog runs"}\n'
                   '{"kept": "false", "caption": "a cat"}\n'
                   '{"kept": NaN, "caption": "two birds fly"}\n'
                   '{"kept": 1e309, "caption": "a red car"}\n'
                   '{"kept": 1, "caption": "a man"}\n'
                   '{"kept": null, "caption": "a boat"}\n'
                   '{"caption": "no kept at all"}\n'
                   '{"kept": false, "caption": null}\n', encoding="utf-8")
  assert stats.main([str(jsonl)]) == 0
  captured = capsys.readouterr()
  assert json.loads(captured.out)["examples"] == 1
  assert captured.err == 'malformed rows skipped: kept_not_boolean 6 (first: line 2, "kept": "false")\n'
  counts = stats.LineCounts()
  assert list(stats.read_kept_captions(str(jsonl), counts)) == ["a dog runs"]
  assert counts.malformed == {"kept_not_boolean": 6}
  jsonl.write_text('{"caption": "x"}\n', encoding="utf-8")
  stats.main([str(jsonl)])
  assert capsys.readouterr().err == 'malformed rows skipped: kept_not_boolean 1 (first: line 1, "kept": absent)\n'
