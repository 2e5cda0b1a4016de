"""SPICE runs where its jar, CoreNLP 3.6.0 and Java are present and otherwise says what to install where; without
CoreNLP here, the run is checked with a stand-in `java` that answers like the SPICE jar.
"""

from __future__ import annotations

import math
import pathlib
import stat

import pytest

from capjax.metrics import spice
from capjax.metrics.spice import CORENLP_JARS, Spice, check_installation


def test_spice_lives_in_pycocoevalcaps_spice_directory():
  directory = pathlib.Path(spice.spice_dir())
  assert directory.parts[-2:] == ("pycocoevalcap", "spice") and (directory / "spice-1.0.jar").exists()


def test_missing_corenlp_says_what_to_download_and_where_it_goes(tmp_path):
  directory = _spice_dir(tmp_path, corenlp=False)
  with pytest.raises(RuntimeError) as error:
    Spice(str(directory))
  message = str(error.value)
  assert f"SPICE needs Stanford CoreNLP 3.6.0 in {directory / 'lib'}" in message
  assert "lacks stanford-corenlp-3.6.0.jar, stanford-corenlp-3.6.0-models.jar" in message
  assert "python -m pycocoevalcap.spice.get_stanford_models" in message and "~384 MB" in message
  assert "stanford-corenlp-full-2015-12-09.zip" in message and "Java 8" in message


def _spice_dir(tmp_path: pathlib.Path, corenlp: bool = True) -> pathlib.Path:
  (tmp_path / "lib").mkdir(parents=True)
  (tmp_path / "spice-1.0.jar").write_bytes(b"")
  for name in CORENLP_JARS if corenlp else ():
    (tmp_path / "lib" / name).write_bytes(b"")
  return tmp_path


def test_a_directory_without_the_models_jar_names_it(tmp_path):
  directory = _spice_dir(tmp_path, corenlp=False)
  (directory / "lib" / CORENLP_JARS[0]).write_bytes(b"")
  with pytest.raises(RuntimeError, match="lacks stanford-corenlp-3.6.0-models.jar"):
    check_installation(str(directory))


def test_a_directory_without_the_spice_jar_names_it(tmp_path):
  with pytest.raises(RuntimeError, match="spice-1.0.jar is missing"):
    check_installation(str(tmp_path))


def test_missing_java_says_what_to_install(tmp_path):
  with pytest.raises(RuntimeError, match="apt-get install default-jre"):
    Spice(str(_spice_dir(tmp_path)), java="no-such-java-binary")


def test_scores_are_read_from_the_jars_output_as_pycocoevalcap_reads_them(tmp_path):
  directory = _spice_dir(tmp_path / "spice")
  java = tmp_path / "java"  # answers like `java -jar spice-1.0.jar IN -cache DIR -out OUT -subset -silent`
  java.write_text(
      "#!/usr/bin/env python3\n"
      "import json, sys\n"
      "args = sys.argv[1:]\n"
      "assert args[:3] == ['-jar', '-Xmx8G', 'spice-1.0.jar'] and args[4] == '-cache' and args[6] == '-out'\n"
      "assert args[8:] == ['-subset', '-silent']\n"
      "items = json.load(open(args[3]))\n"
      "scores = {'a': 0.5, 'b': 'NaN'}\n"
      "out = [{'image_id': i['image_id'], 'scores': {'All': {'f': scores[i['image_id']], 'pr': 1.0}}} for i in items]\n"
      "json.dump(out, open(args[7], 'w'))\n")
  java.chmod(java.stat().st_mode | stat.S_IEXEC)
  scorer = Spice(str(directory), java=str(java), cache_dir=str(tmp_path / "cache"))
  mean, tables = scorer.compute_score({"b": ["a cat"], "a": ["a dog"]}, {"a": ["a dog"], "b": ["a"]})
  assert math.isnan(mean)  # pycocoevalcap's mean over images keeps a NaN
  assert tables[0] == {"All": {"f": 0.5, "pr": 1.0}} and math.isnan(tables[1]["All"]["f"])


def test_a_failing_spice_run_shows_its_error_output(tmp_path):
  directory = _spice_dir(tmp_path / "spice")
  java = tmp_path / "java"
  java.write_text("#!/bin/sh\necho 'Exception in thread main: UnsupportedClassVersionError' >&2\nexit 1\n")
  java.chmod(java.stat().st_mode | stat.S_IEXEC)
  scorer = Spice(str(directory), java=str(java), cache_dir=str(tmp_path / "cache"))
  with pytest.raises(RuntimeError, match="exit code 1.*UnsupportedClassVersionError.*Java 8"):
    scorer.compute_score({1: ["a"]}, {1: ["a"]})


def test_the_metrics_command_without_corenlp_is_one_error_line_that_says_what_to_do(tmp_path, monkeypatch, capsys):
  from capjax.metrics import __main__ as metrics_cli
  monkeypatch.setattr(spice, "spice_dir", lambda: str(_spice_dir(tmp_path / "spice", corenlp=False)))
  (tmp_path / "r.json").write_text('{"annotations": [{"image_id": 1, "caption": "a dog"}]}')
  (tmp_path / "p.json").write_text('[{"image_id": 1, "caption": "a dog"}]')
  with pytest.raises(SystemExit) as exit_info:
    metrics_cli.main(["metrics", str(tmp_path / "r.json"), str(tmp_path / "p.json"), "--metrics=SPICE",
                      "--notokenize"])
  [line] = capsys.readouterr().err.splitlines()
  assert exit_info.value.code == 2 and line.startswith("error: SPICE needs Stanford CoreNLP 3.6.0 in ")
  assert " — either run `python -m pycocoevalcap.spice.get_stanford_models`" in line
  assert line.endswith("or leave SPICE out of --metrics")


@pytest.mark.parametrize("make_error", [
    lambda tmp_path: check_installation(str(tmp_path)),
    lambda tmp_path: check_installation(str(_spice_dir(tmp_path, corenlp=False))),
    lambda tmp_path: Spice(str(_spice_dir(tmp_path)), java="no-such-java-binary"),
])
def test_every_spice_error_says_what_to_do(tmp_path, make_error):
  with pytest.raises(RuntimeError) as error:
    make_error(tmp_path)
  assert " — " in str(error.value)
