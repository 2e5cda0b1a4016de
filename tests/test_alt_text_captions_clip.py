"""The alt_text_captions clip stage (beyond the paper) with the tiny random CLIP fixture (conftest's clip_weights) on
dummy_data/: a minimum drops the pairs the Scorer scores below it; a share (top=F) keeps the pairs at or above the
cut-off computed from every score, on the plain path and on Beam alike; the settings and their errors.
"""

from __future__ import annotations

import collections
import math
import os

import pytest
import tensorflow_datasets as tfds

from tfds_builders import img2dataset as i2d
from tfds_builders.alt_text_captions import alt_text_captions_dataset_builder as builder_lib
from tfds_builders.alt_text_captions import stages as stages_lib
import helpers
from test_alt_text_captions_builder import DUMMY, build, outcomes, raw_records

# The clip stage with the tiny random CLIP fixture (conftest's clip_weights) on the dummy data's 8 survivors of the
# cross filter (scores 0.45, 0.17, 0.07, -0.01, -0.06, -0.10, -0.11, -0.12): a minimum between them, and the top half.
CLIP_THRESHOLD = 0.03
CLIP_DROPPED = ["000000017", "000000018", "000010000", "000010001", "000010002"]
CLIP_SHARE = "top=0.5"


def clip_survivors(clip_weights) -> tuple[list[str], list[float]]:
  """The keys of the cross filter's survivors of the dummy data (the pairs the clip stage scores), with the scores the
  stage's Scorer gives them."""
  from tfds_builders.alt_text_captions import clip_stage
  survivors = {key for key, (stage, _) in outcomes(stages_lib.Settings()).items() if stage in (None, "hypernym")}
  candidates = [c for shard in i2d.list_shards(os.fspath(DUMMY))
                for c in i2d.shard_candidates(shard, collections.Counter()) if c.key in survivors]
  scores = clip_stage.load_scorer(os.fspath(clip_weights)).score([c.image for c in candidates],
                                                                  [c.caption for c in candidates])
  return [c.key for c in candidates], [float(score) for score in scores]


def test_clip_stage_drops_the_pairs_the_scorer_scores_below_a_minimum(clip_weights):
  keys, scores = clip_survivors(clip_weights)
  assert sorted(key for key, score in zip(keys, scores) if score < CLIP_THRESHOLD) == CLIP_DROPPED
  settings = stages_lib.parse_settings([f"clip_weights={clip_weights}", f"clip_threshold={CLIP_THRESHOLD}"])
  found = outcomes(settings, clip=os.fspath(clip_weights))
  paper = outcomes(stages_lib.Settings())
  assert found == {key: ("clip", "clip_below_threshold") if key in CLIP_DROPPED else paper[key] for key in paper}


@pytest.fixture(scope="module")
@helpers.slow_fixture  # builds on Beam too
def clip_builds(clip_weights, tmp_path_factory) -> tuple[tfds.core.DatasetBuilder, tfds.core.DatasetBuilder]:
  """The dummy data built with the clip stage keeping the top half of the scored pairs (the share's global step),
  then the dedup stage (which sees only the pairs above the cut-off), on the plain path and on Beam (the
  local runner in memory)."""
  items = [f"clip_weights={clip_weights}", f"clip_threshold={CLIP_SHARE}", "dedup=phash", "min_concept_count=0"]
  return build(tmp_path_factory.mktemp("clip_plain"), items), build(tmp_path_factory.mktemp("clip_beam"), items,
                                                                    beam=True)


def test_clip_share_keeps_the_pairs_at_or_above_the_cutoff_of_every_score(clip_builds, clip_weights):
  from capjax.text_models import clip_score
  plain, _ = clip_builds
  keys, scores = clip_survivors(clip_weights)
  cutoff = clip_score.cutoff(scores, clip_score.parse_threshold(CLIP_SHARE))  # over all 8, 000000017's included
  assert plain.info.metadata["clip_cutoff"] == cutoff == sorted(scores)[3]  # rank int(8 * 0.5) from the top
  below = sorted(key for key, score in zip(keys, scores) if score < cutoff)
  assert below == ["000000017", "000010001", "000010002"]  # 000000017, the hypernym repair's reject, goes at clip
  funnel = plain.info.metadata["funnel"]
  assert [e["stage"] for e in funnel] == ["image", "text", "cross", "clip", "hypernym", "dedup", "concepts"]
  assert funnel[3:] == [{"stage": "clip", "in": 8, "out": 5, "reasons": {"clip_below_threshold": 3}},
                        {"stage": "hypernym", "in": 5, "out": 5, "reasons": {}},
                        {"stage": "dedup", "in": 5, "out": 5, "reasons": {}},  # distinct scenes
                        {"stage": "concepts", "in": 5, "out": 5, "reasons": {}}]
  histogram = collections.Counter(f"{math.floor(score / 0.05) * 0.05:.2f}" for score in scores)
  assert plain.info.metadata["clip_scores"] == {edge: histogram[edge] for edge in sorted(histogram, key=float)}
  settings = plain.info.metadata["settings"]
  assert (settings["clip_weights"], settings["clip_threshold"]) == (os.fspath(clip_weights), CLIP_SHARE)
  assert sorted(raw_records(plain)) == sorted(key for key, score in zip(keys, scores) if score >= cutoff) == [
      "000000000", "000000001", "000000002", "000000018", "000010000"]
  line = builder_lib._describe(plain.info.metadata).splitlines()
  assert line[4].startswith("clip") and line[4].endswith("not in the paper          clip_below_threshold 3")
  assert line[-1].startswith("clip scores (cosine) of the 8 pairs scored: [")
  assert line[-1].endswith(f"; cut-off {cutoff:.6g} (clip_threshold={CLIP_SHARE})")


def test_clip_stage_on_beam_equals_the_plain_path(clip_builds):
  plain, beam_built = clip_builds
  for field in ("funnel", "shards", "clip_scores", "clip_cutoff", "settings"):
    assert beam_built.info.metadata[field] == plain.info.metadata[field], field
  want, got = raw_records(plain), raw_records(beam_built)
  assert sorted(got) == sorted(want)
  for key, record in want.items():
    assert {f: got[key][f].tolist() if hasattr(got[key][f], "tolist") else got[key][f] for f in record} == {
        f: v.tolist() if hasattr(v, "tolist") else v for f, v in record.items()}, key


def test_clip_settings_parse_and_reject():
  from tfds_builders.alt_text_captions import clip_stage
  assert stages_lib.Settings().stages() == ("image", "text", "cross", "hypernym", "concepts")
  assert "clip_weights" not in stages_lib.Settings().as_dict()  # the paper's metadata and config names as before
  on = stages_lib.parse_settings(["clip_weights=clip"])
  assert on.stages()[3] == "clip" and on.clip_threshold == "datacomp_b32" and on.clip_cutoff() == 0.25
  assert clip_stage.share(on) is None
  assert stages_lib.parse_settings(["clip_weights=clip", "clip_threshold=laion"]).clip_cutoff() == 0.28
  assert stages_lib.parse_settings(["clip_weights=clip", "clip_threshold=-0.5"]).clip_cutoff() == -0.5
  for value, share in (("datacomp_l14_top30", 0.3), ("top=1", 1.0)):  # decided once every pair is scored
    settings = stages_lib.parse_settings(["clip_weights=clip", f"clip_threshold={value}"])
    assert settings.clip_cutoff() == -math.inf and clip_stage.share(settings).top_fraction == share
  for value, match in (("1.5", "is out of range"), ("nan", "is out of range"), ("laion2b", "is not a CLIP cut-off"),
                       ("top=0", r"is out of range — give top=X with X the share of the scored pairs kept, in \(0"),
                       ("top=1.5", "is out of range"), ("min=2", "is out of range"),
                       ("top=most", "is not a number — give top=X")):
    with pytest.raises(ValueError, match=f"clip_threshold={value} {match}"):
      stages_lib.parse_settings(["clip_weights=clip", f"clip_threshold={value}"])
  with pytest.raises(ValueError, match="clip_threshold=laion needs a CLIP model — add --set=clip_weights=DIR"):
    stages_lib.parse_settings(["clip_threshold=laion"])
