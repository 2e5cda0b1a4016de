"""The alt_text_captions builder over dummy_data/: the TFDS contract, each stage's rejects with their reasons, the
funnel in metadata, the labels cross filter, --set settings (and their errors) through capjax.data.build.
"""

from __future__ import annotations

import collections
import os
import pathlib
import re
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

from capjax.image import filters as image_filters
from tfds_builders import img2dataset as i2d
from capjax import progress as progress_lib
from tfds_builders.alt_text_captions import alt_text_captions_dataset_builder as builder_lib
from tfds_builders.alt_text_captions import make_dummy_data as dummy
from tfds_builders.alt_text_captions import stages as stages_lib
import helpers

REPO = pathlib.Path(__file__).resolve().parent.parent
DUMMY = REPO / "tfds_builders" / "alt_text_captions" / "dummy_data"
KEPT = [key for key, _, _, stage, _ in dummy.CANDIDATES if stage is None]


class AltTextCaptionsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = builder_lib.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ["paper"]
  SPLITS = {"train": len(KEPT)}
  SKIP_CHECKSUMS = True


def outcomes(settings: stages_lib.Settings, labels: str = "",
             clip: str = "") -> dict[str, tuple[str | None, str | None]]:
  stages = stages_lib.Stages(settings, labels, clip_path=clip)
  counts: collections.Counter = collections.Counter()
  return {o.key: (o.stage, o.reason) for shard in i2d.list_shards(os.fspath(DUMMY))
          for o, _ in stages_lib.shard_outcomes(shard, stages, counts)}


def test_every_candidate_gets_its_stage_and_reason():
  found = outcomes(stages_lib.Settings())
  # Concept pruning is global (the builder runs it): per candidate, the pruned one is still a survivor here.
  want = {key: (None, None) if stage == "concepts" else (stage, reason)
          for key, _, _, stage, reason in dummy.CANDIDATES}
  assert found == want


def test_truncated_shard_and_shard_without_parquet_are_counted(tmp_path):
  import shutil
  from tfds_builders.cc3m.make_dummy_data import cut_last_member
  shutil.copytree(DUMMY, tmp_path / "manual")
  cut_last_member(tmp_path / "manual" / "00000.tar")  # inside the last member of the webdataset shard
  (tmp_path / "manual" / "00001.parquet").unlink()
  stages = stages_lib.Stages(stages_lib.Settings())
  counts: collections.Counter = collections.Counter()
  found = {o.key: (o.stage, o.reason) for shard in i2d.list_shards(os.fspath(tmp_path / "manual"))
           for o, _ in stages_lib.shard_outcomes(shard, stages, counts)}
  assert found["000000018"] == ("image", "truncated")  # its .txt was the member cut
  assert found["000000017"] == ("hypernym", "unresolved_entity")  # the samples before the cut are read
  assert found["000010000"] == (None, None)  # the files shard still reads its .json and .txt
  assert counts["truncated_shard"] == 1 and counts["shard_without_parquet"] == 1
  assert len(found) == len(dummy.CANDIDATES)


def test_cross_filter_with_labels_file():
  settings = stages_lib.parse_settings(["cross_filter=labels", "labels_file=labels.tsv"])
  found = outcomes(settings, os.fspath(DUMMY / dummy.LABELS_TSV))
  assert found["000000000"] == (None, None)  # dog ~ "A dog runs"
  assert found["000000001"] == (None, None)  # child ~ "children" by lemma
  assert found["000000002"] == ("cross", "no_label_overlap")  # vehicle, wheel vs "a red car"
  assert found["000010002"] == ("cross", "no_label_overlap")  # dog, pet vs a cat
  assert found["000000017"] == ("cross", "no_label_overlap")  # checked before the hypernym repair
  assert found["000000018"] == (None, None)  # premiere
  assert found["000000014"] == ("text", "boilerplate_only")  # text before cross
  assert found["000010001"] == (None, None) and found["000010000"] == (None, None)


def test_image_filter_uses_original_size_and_scorer():
  config = image_filters.ImageFilterConfig()
  small = dummy.jpeg(1, 240, 220)
  assert image_filters.image_filter(small, {}, config) == ("too_small", (240, 220))
  resized = {"original_width": 960, "original_height": 880}  # img2dataset resized it: the original size counts
  assert image_filters.image_filter(small, resized, config) == (None, (960, 880))
  good = dummy.jpeg(2)
  assert image_filters.image_filter(good, {}, config, scorer=lambda b: 0.7)[0] == "unsafe"
  assert image_filters.image_filter(good, {}, config, scorer=lambda b: 0.2)[0] is None
  assert image_filters.image_filter(dummy.bomb(), {}, config)[0] == "decompression_bomb"
  assert image_filters.image_filter(dummy.bomb(12_000, 9_000), {}, config)[0] == "decompression_bomb"  # under 2x
  assert len(dummy.bomb()) < 2_000
  assert image_filters.load_scorer("") is None and image_filters.load_scorer("os.path:getsize") is os.path.getsize
  with pytest.raises(ValueError, match="package.module:function"):
    image_filters.load_scorer("no_such_module:f")


def test_settings_parse_and_reject():
  s = stages_lib.parse_settings(["min_side=300", "max_aspect_ratio=3", "filters.max_chars=500",
                                 "hypernyms.discard_unresolved=false", "min_concept_count=0"])
  assert (s.min_side, s.max_aspect_ratio, s.min_concept_count) == (300, 3.0, 0)
  config = s.pipeline_config()
  assert config.filters.max_chars == 500 and config.hypernyms.discard_unresolved is False
  with pytest.raises(ValueError, match="unknown setting 'min_size' — valid keys are min_side, max_aspect_ratio"):
    stages_lib.parse_settings(["min_size=3"])
  with pytest.raises(ValueError, match="cross_filter=labels needs"):
    stages_lib.parse_settings(["cross_filter=labels"])
  with pytest.raises(ValueError, match="choose one of irv2, labels, none"):
    stages_lib.parse_settings(["cross_filter=clip"])
  assert builder_lib.config_from_settings([]).name == "paper"
  assert builder_lib.config_from_settings(["min_side=300"]).name.startswith("custom_")


def build(data_dir: pathlib.Path, items=(), manual: pathlib.Path = DUMMY,
          beam: bool = False) -> tfds.core.DatasetBuilder:
  config = builder_lib.config_from_settings(list(items))
  builder = builder_lib.Builder(config=config, data_dir=data_dir)
  options = {}
  if beam:  # the DirectRunner's local runner, by name (docs/data-at-scale.md "Beam runs here"): one worker, in memory
    beam_lib = helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
    options["beam_options"] = beam_lib.options.pipeline_options.PipelineOptions(["--runner=FnApiRunner"])
  builder.download_and_prepare(file_format="array_record", download_config=tfds.download.DownloadConfig(
      manual_dir=os.fspath(manual), **options))
  return tfds.builder(f"alt_text_captions/{config.name}", data_dir=data_dir)


@pytest.fixture(scope="module")
def paper_build(tmp_path_factory) -> tfds.core.DatasetBuilder:
  return build(tmp_path_factory.mktemp("paper"))


def test_funnel_and_examples(paper_build):
  builder = paper_build
  funnel = builder.info.metadata["funnel"]
  assert funnel == [
      {"stage": "image", "in": 22, "out": 11, "reasons": {
          "aspect_ratio": 1, "decompression_bomb": 1, "download_failed": 1, "missing_image": 1, "not_jpeg": 1,
          "not_rgb": 1, "too_small": 3, "truncated": 1, "undecodable": 1}},
      {"stage": "text", "in": 11, "out": 8, "reasons": {"all_caps": 1, "boilerplate_only": 1, "too_short": 1}},
      {"stage": "cross", "in": 8, "out": 8, "reasons": {}},
      {"stage": "hypernym", "in": 8, "out": 7, "reasons": {"unresolved_entity": 1}},
      {"stage": "concepts", "in": 7, "out": 6, "reasons": {"rare_concept": 1}},
  ]
  assert builder.info.metadata["settings"]["min_side"] == 400
  assert builder.info.metadata["shards"]["shards"] == 2
  table = stages_lib.format_funnel(funnel).splitlines()
  assert table[1].split()[:5] == ["image", "22", "11", "50%", ">"] and "> 65% discarded" in table[1]
  assert table[5].endswith("~55% removed              rare_concept 1")
  source = builder.as_data_source(split="train")
  records = sorted((source[i] for i in range(len(source))), key=lambda r: r["key"])
  assert [r["key"].decode() for r in records] == KEPT
  first = records[0]
  assert first["caption"].decode() == "a dog runs along the beach ."
  assert first["alt_text"].decode() == "A dog runs along the beach."
  assert [c.decode() for c in first["captions"]] == ["a dog runs along the beach ."]
  assert first["url"].decode() == dummy.url("000000000") and first["image"].shape == (440, 480, 3)


def test_settings_change_the_build(tmp_path):
  builder = build(tmp_path, ["min_concept_count=0", "cross_filter=labels", "labels_file=labels.tsv"])
  funnel = {e["stage"]: e for e in builder.info.metadata["funnel"]}
  assert funnel["cross"]["reasons"] == {"no_label_overlap": 3}
  assert funnel["concepts"]["reasons"] == {}
  source = builder.as_data_source(split="train")
  records = {source[i]["key"].decode(): source[i] for i in range(len(source))}
  assert sorted(records) == ["000000000", "000000001", "000000018", "000010000", "000010001"]
  assert [c.decode() for c in records["000000018"]["concepts"]] == ["actor"]
  assert [c.decode() for c in records["000000000"]["labels"]] == ["dog", "sand", "beach"]
  assert builder.info.metadata["settings"]["cross_filter"] == "labels"


def run_build(*args):
  env = dict(os.environ, PYTHONPATH=os.fspath(REPO))
  return subprocess.run([sys.executable, "-m", "capjax.data.build", "--dataset=alt_text_captions", *args],
                        capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def test_build_cli_set_errors(tmp_path):
  for args, expected in (
      (["--set=min_size=3"], "error: unknown setting 'min_size' — valid keys are min_side"),
      (["--set=cross_filter=labels"], "error: cross_filter=labels needs"),
      (["--set=cross_filter=labels", "--set=labels_file=nope.tsv"], "error: labels_file"),
  ):
    result = run_build(f"--manual_dir={DUMMY}", f"--data_dir={tmp_path}", *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(expected), result.stderr[-2000:]
  result = run_build(f"--manual_dir={tmp_path / 'empty'}", f"--data_dir={tmp_path}")
  assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].startswith("error: ")


def raw_records(builder) -> dict[str, dict]:
  source = builder.as_data_source(split="train", decoders={"image": tfds.decode.SkipDecoding()})
  return {source[i]["key"].decode(): source[i] for i in range(len(source))}


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_beam_direct_runner_two_workers_matches_plain_path(paper_build, tmp_path):
  helpers.import_extra("apache_beam", "pip install -e '.[beam]'")
  plain = paper_build
  env = dict(os.environ, PYTHONPATH=os.fspath(REPO))
  proc = subprocess.run(
      [os.path.join(os.path.dirname(sys.executable), "tfds"), "build", "tfds_builders/alt_text_captions",
       f"--manual_dir={DUMMY}", f"--data_dir={tmp_path / 'beam'}", "--file_format=array_record",
       "--beam_pipeline_options=runner=FnApiRunner,direct_num_workers=2,direct_running_mode=multi_processing"],
      capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
  assert proc.returncode == 0, proc.stderr[-4000:]
  beam_built = tfds.builder("alt_text_captions/paper", data_dir=tmp_path / "beam")
  assert beam_built.info.metadata["funnel"] == plain.info.metadata["funnel"]
  assert beam_built.info.metadata["shards"] == plain.info.metadata["shards"]
  want, got = raw_records(plain), raw_records(beam_built)
  assert sorted(got) == sorted(want) == KEPT
  def as_list(value):
    return value.tolist() if hasattr(value, "tolist") else value

  for key, record in want.items():
    for feature in ("image", "caption", "alt_text", "url", "concepts", "labels", "captions"):
      assert as_list(got[key][feature]) == as_list(record[feature]), (key, feature)


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_a_generated_set_with_duplicates_and_failures_is_the_same_on_both_paths(tmp_path, monkeypatch):
  """200 candidates in 4 shards (make_dummy_data.generated_defect), concepts seen 5 times or fewer pruned. Both
  paths log their progress."""
  manual = tmp_path / "manual"
  dummy.write_generated(manual, 200, per_shard=50)
  lines: list[str] = []

  def info(fmt: str, *args) -> None:
    line = re.sub(r"[\d,.]+ (shards|candidates|examples)/s", r"R \1/s", fmt % args)
    if line.startswith("alt_text_captions train"):
      lines.append(line)
  monkeypatch.setattr(progress_lib.logging, "info", info)
  plain = build(tmp_path / "plain", ["min_concept_count=5"], manual)
  # Shards done of the shards; 10 candidates dropped by stages a-c and the hypernym repair, 2 by concept pruning.
  assert lines == [
      "alt_text_captions train stages a-c: 4/4 shards (100.0%), R shards/s, 200 candidates at R candidates/s, "
      "ETA 0:00:00, 10 candidates dropped so far",
      "alt_text_captions train concepts: 4/4 shards (100.0%), R shards/s, 188 examples at R examples/s, "
      "ETA 0:00:00, 2 pruned so far"]
  del lines[:]
  beam = build(tmp_path / "beam", ["min_concept_count=5"], manual, beam=True)
  assert sorted(lines) == [f"alt_text_captions train: shard {n} of 4 read: 50 candidates read, 1 failed, "
                           "R candidates/s" for n in range(1, 5)]  # failed: the 4 failed downloads, one a shard
  funnel = {e["stage"]: (e["in"], e["out"], e["reasons"]) for e in plain.info.metadata["funnel"]}
  assert funnel == {"image": (200, 194, {"download_failed": 4, "too_small": 2}), "text": (194, 192, {"too_short": 2}),
                    "cross": (192, 192, {}), "hypernym": (192, 190, {"unresolved_entity": 2}),
                    "concepts": (190, 188, {"rare_concept": 2})}
  assert plain.info.metadata["shards"] == {"duplicate_image": 2, "shards": 4}
  assert (beam.info.metadata["funnel"], beam.info.metadata["shards"]) == (plain.info.metadata["funnel"],
                                                                         plain.info.metadata["shards"])
  want, got = raw_records(plain), raw_records(beam)
  assert len(want) == 188 and sorted(got) == sorted(want)
  for key, record in want.items():
    assert {f: got[key][f].tolist() if hasattr(got[key][f], "tolist") else got[key][f] for f in record} == {
        f: v.tolist() if hasattr(v, "tolist") else v for f, v in record.items()}, key


def test_a_build_that_keeps_no_candidate_is_one_error_line_with_the_funnel(tmp_path, capsys):
  """Every image below --set=min_side: capjax.data.build's one `error:` line holds the funnel (and the table is
  printed, as after a build), not TFDS's "No examples were yielded"."""
  from capjax.data import build as build_cmd
  with pytest.raises(SystemExit) as exit_info:
    build_cmd.main(["capjax.data.build", "--dataset=alt_text_captions", "--set=min_side=100000",
                    f"--manual_dir={DUMMY}", f"--data_dir={tmp_path}"])
  out, err = capsys.readouterr()
  assert exit_info.value.code == 2 and "Traceback" not in err and "No examples were yielded" not in err
  [line] = [line for line in err.splitlines() if "error" in line.lower()]
  assert line == ("error: no example could be built: every candidate of the 2 shard(s) in the manual dir was "
                  "dropped: image 22 → 0 (decompression_bomb 1, download_failed 1, missing_image 1, not_jpeg 1, "
                  "too_small 17, undecodable 1); text 0 → 0; cross 0 → 0; hypernym 0 → 0; concepts 0 → 0 — check the "
                  "manual dir's shards, or loosen the --set settings of the stage that dropped them all (see "
                  "tfds_builders/alt_text_captions/README.md)")
  assert [row.split()[:3] for row in out.splitlines() if row.startswith("image")] == [["image", "22", "0"]]
  assert not list(tmp_path.glob("alt_text_captions/*/1.0.0"))


# ------------------------------------------------------------------------------------------------ dedup stage


def test_phash_finds_resized_reencoded_and_cropped_copies_and_keeps_distinct_scenes():
  from capjax.image import phash
  original = phash.phash(dummy.scene(0))[0]
  copies = {"resized": dummy.scene(0, 640, 587), "quality 30": dummy.scene(0, quality=30),
            "cropped 5%": dummy.cropped(dummy.scene(0), 0.05)}
  assert {name: phash.distance(original, phash.phash(data)[0]) for name, data in copies.items()} == {
      "resized": 0, "quality 30": 0, "cropped 5%": 6}
  others = [phash.phash(dummy.scene(seed))[0] for seed in range(1, 8)]
  assert min(phash.distance(original, other) for other in others) > 10
  hashed = [phash.Hashed(f"k{i}", *phash.phash(dummy.near_copies(i))) for i in range(10)]
  # The larger copy ranks first; of the two of equal size, the smaller key; the crop has fewer pixels.
  assert phash.near_duplicates(hashed, 10) == {"k0", "k2", "k3"}
  assert phash.near_duplicates(hashed, 0) == {"k0", "k2"}
  assert phash.phash(b"\xff\xd8\xff not a jpeg") is None


@pytest.mark.slow  # Beam, training or a capjax.main subprocess (conftest.py: the slow rule)
def test_dedup_and_exclude_drop_the_same_keys_on_both_paths(paper_build, tmp_path):
  """dummy.write_near_copies: 40 candidates in 2 shards, 4 groups of a scene and 3 near-copies (of group 10 the
  crop is too small, of group 20 the larger copy's caption is a text reject), and 2 copies of images of the paper
  build's train split, excluded. The concepts are counted after dedup: `actor` (candidates 30-33 and 35) is rare
  only then."""
  manual = tmp_path / "manual"
  dummy.write_near_copies(manual)
  items = ["dedup=phash", "exclude=alt_text_captions/paper:train",
           f"exclude_data_dir={paper_build.data_dir_root}", "min_concept_count=2"]
  plain = build(tmp_path / "plain", items, manual)
  funnel = {e["stage"]: (e["in"], e["out"], e["reasons"]) for e in plain.info.metadata["funnel"]}
  assert funnel == {"image": (40, 38, {"download_failed": 1, "too_small": 1}), "text": (38, 37, {"too_short": 1}),
                    "cross": (37, 37, {}), "hypernym": (37, 37, {}),
                    "dedup": (37, 25, {"eval_leak": 2, "near_duplicate": 10}),
                    "concepts": (25, 23, {"rare_concept": 2})}
  assert plain.info.metadata["eval_leaks"] == {"alt_text_captions/paper:train": 2}
  assert plain.info.metadata["settings"]["dedup_threshold"] == 10
  beam = build(tmp_path / "beam", items, manual, beam=True)
  for key in ("funnel", "shards", "eval_leaks"):
    assert beam.info.metadata[key] == plain.info.metadata[key], key
  want, got = raw_records(plain), raw_records(beam)
  kept = [f"0000{i // 20}{i % 20:04d}" for i in (1, 6, 8, 9, 11, 14, 15, 16, 17, 18, 19, 20, 24, 25, 26, 27, 28, 29,
                                                 34, 36, 37, 38, 39)]
  assert sorted(got) == sorted(want) == kept


def test_dedup_settings_parse_and_reject():
  assert stages_lib.Settings().stages() == ("image", "text", "cross", "hypernym", "concepts")
  assert "dedup" not in stages_lib.Settings().as_dict()  # off: the paper's metadata and config names as before
  on = stages_lib.parse_settings(["dedup=phash", "dedup_threshold=0"])
  assert on.stages() == ("image", "text", "cross", "hypernym", "dedup", "concepts")
  assert on.as_dict()["dedup_threshold"] == 0
  for items, message in ((["dedup=phash", "dedup_threshold=65"], "dedup_threshold=65 is out of range — give a "
                          "Hamming distance from 0 to 64"),
                         (["dedup_threshold=-1"], "dedup_threshold=-1 is out of range"),
                         (["dedup_threshold=5"], "dedup_threshold=5 does nothing with the dedup stage off — add "
                          "--set=dedup=phash"),
                         (["dedup=md5"], "dedup=md5 is no near-duplicate method — choose one of phash"),
                         (["exclude=karpathy/coco"], "exclude=karpathy/coco is no built dataset's split — give "
                          "NAME[/CONFIG]:SPLIT")):
    with pytest.raises(ValueError, match=re.escape(message)):
      stages_lib.parse_settings(items)


def test_an_exclude_dataset_not_built_is_one_error_line(tmp_path, capsys):
  from capjax.data import build as build_cmd
  with pytest.raises(SystemExit) as exit_info:
    build_cmd.main(["capjax.data.build", "--dataset=alt_text_captions", "--set=exclude=karpathy/coco:test",
                    f"--manual_dir={DUMMY}", f"--data_dir={tmp_path}"])
  err = capsys.readouterr().err
  assert exit_info.value.code == 2 and "Traceback" not in err
  [line] = [line for line in err.splitlines() if line.startswith("error:")]
  assert line.startswith(f"error: exclude=karpathy/coco:test cannot be read: dataset 'karpathy' is not built in "
                         f"{tmp_path}/karpathy/coco/1.0.0 — to build it: download what "
                         "tfds_builders/karpathy/README.md lists into DIR"), line


def test_overlap_command_counts_near_copies_and_rejects_bad_input(paper_build, capsys):
  from capjax.data import overlap
  data_dir = f"--data_dir={paper_build.data_dir_root}"
  overlap.main(["overlap", "alt_text_captions/paper", "alt_text_captions/paper:train", data_dir, "--pairs=2"])
  assert capsys.readouterr().out.splitlines() == [
      "6 of 6 images of alt_text_captions/paper have a near-copy in alt_text_captions/paper:train (6 images) within "
      "10 bits (100.0%)", "train/000000000\ttrain/000000000\t0", "train/000000001\ttrain/000000001\t0"]
  for args, message in ((["alt_text_captions/paper", "karpathy/coco:test"], "error: dataset 'karpathy' is not built"),
                        (["alt_text_captions/paper", "alt_text_captions/paper:validation"],
                         "error: alt_text_captions/paper has no split 'validation' — choose one of train"),
                        (["alt_text_captions/paper", "alt_text_captions/paper", "--threshold=65"],
                         "error: --threshold=65 is out of range — give a Hamming distance from 0 to 64"),
                        (["alt_text_captions/paper"], "error: give two datasets, not 1 (alt_text_captions/paper)")):
    with pytest.raises(SystemExit) as exit_info:
      overlap.main(["overlap", *args, data_dir])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith(message)
