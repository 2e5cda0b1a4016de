"""ERG's quality filters and augmentation job on the embedded stylized_scenes data (the `tiny` build), with the
session's tiny models (tests/trained_models.py): the generator, the style classifier and the retriever's dual
encoder (20 steps on 64 factual images), saved and given to the job with --retriever; one job trains its own and
keeps it with --save_retriever. A saved retriever embeds exactly as the trained one; a directory that is not one,
or one for other images, is one line."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest

from capjax.erg import augment, augment_inputs, filters, retrieve

STYLE = "romantic"
FACTUAL_SPLIT = "factual[:24]"  # three shards of eight
PER_SHARD = 8


@pytest.fixture(scope="module")
def pieces(stylized_tiny_data_dir, erg_generator_dir, style_classifier, style_classifier_dir, erg_retriever,
           tmp_path_factory):
  """The session's models; a data dir of its own that links the shared `tiny` build (a test adds a dataset)."""
  data_dir = tmp_path_factory.mktemp("erg_data")
  (data_dir / "stylized_scenes").symlink_to(stylized_tiny_data_dir / "stylized_scenes")
  return {"data_dir": str(data_dir), "generator_dir": str(erg_generator_dir),
          "style_model_dir": str(style_classifier_dir), "classifier": style_classifier,
          "retriever": erg_retriever[0], "retriever_dir": str(erg_retriever[1])}


def run(pieces, out, **overrides):
  args = dict(stylized="stylized_scenes/tiny", factual="stylized_scenes/tiny", style=STYLE, output_dataset="aug",
              generator_dir=pieces["generator_dir"], style_model_dir=pieces["style_model_dir"], mode="t2t",
              data_dir=pieces["data_dir"], output_data_dir=str(out), factual_split=FACTUAL_SPLIT,
              examples_per_shard=PER_SHARD, retriever_dir=pieces["retriever_dir"])
  log = overrides.pop("log", lambda line: None)
  return augment.augment_dataset(augment.Options(**{**args, **overrides}), log=log)


@pytest.fixture(scope="module")
def written(pieces, tmp_path_factory):
  return run(pieces, tmp_path_factory.mktemp("aug_out"))


def read(out_dir: pathlib.Path):
  import tensorflow_datasets as tfds
  builder = tfds.builder_from_directory(out_dir)
  if builder.info.splits["train"].num_examples == 0:  # TFDS cannot open a data source over no records
    return builder, []
  source = builder.as_data_source(split="train")
  return builder, [source[i] for i in range(len(source))]


def test_the_filters_count_every_reject_under_each_reason_and_once_in_the_total():
  styles = ["romantic", "romantic", "humorous", "humorous", "romantic", "factual"]
  ppl = [10.0, 90.0, 10.0, 95.0, 79.9, float("nan")]
  sim = [0.9, 0.9, 0.5, 0.7, 0.6, 0.61]
  verdicts = filters.apply(styles, "romantic", ppl, sim)
  assert verdicts.kept.tolist() == [True, False, False, False, False, False]
  counts = verdicts.counts()
  assert counts.generated == 6 and counts.kept == 1 and counts.rejected_total == 5
  # 0.6 is not above 0.6; nan fails; without content shares the content filter passes every caption.
  assert counts.rejected == {"style": 3, "perplexity": 3, "similarity": 2, "content": 0}
  assert counts.funnel == {"generated": 6, "after_style": 3, "after_perplexity": 2, "after_similarity": 1,
                           "after_content": 1}
  assert (counts + counts).funnel["after_style"] == 6 and (counts + counts).rejected["style"] == 6
  assert filters.Counts.from_json(json.loads(json.dumps(counts.to_json()))) == counts
  old = counts.to_json()  # counts written before the content filter existed: all passed it
  del old["rejected"]["content"], old["funnel"]["after_content"]
  assert filters.Counts.from_json(old) == counts
  with pytest.raises(ValueError, match="one of each per caption"):
    filters.apply(styles, "romantic", ppl[:2], sim)
  contents = [1.0, 1.0, 1.0, 1.0, 1.0, 0.5]
  counts = filters.apply(styles, "romantic", ppl, [0.9] * 6, contents=contents, min_content=1.0).counts()
  assert counts.rejected == {"style": 3, "perplexity": 3, "similarity": 0, "content": 1}
  assert counts.funnel == {"generated": 6, "after_style": 3, "after_perplexity": 2, "after_similarity": 2,
                           "after_content": 2}


@pytest.mark.parametrize("factual, generated, share", [
    ("a small red circle", "a small red circle in love", 1.0),
    ("a small red circle above a blue square", "a small red circle deeply in love above a blue square", 1.0),
    ("a small red circle", "a large red circle in love", 0.75),            # the generator changed the size
    ("a small red circle , a red square", "a small red square , a circle", 5 / 8),  # order counts: a subsequence
    ("a circle", "", 0.0),
    ("", "anything", 1.0),
])
def test_content_kept_is_the_factual_words_kept_in_order(factual, generated, share):
  assert filters.content_kept(factual, generated) == pytest.approx(share)


def test_the_job_writes_a_readable_dataset_with_the_funnel_in_its_metadata(written, pieces):
  out_dir, counts = written
  builder, records = read(out_dir)
  assert builder.info.metadata["funnel"] == counts.to_json()
  assert counts.generated == 24 and len(records) == counts.kept
  assert counts.funnel["after_content"] == counts.kept and counts.generated == counts.kept + counts.rejected_total
  assert counts.kept > 0, counts.lines()
  assert set(records[0]) == {"image", "caption", "factual_caption", "style", "scene_id", "similarity", "perplexity",
                             "source_index"}
  assert records[0]["image"].shape == (64, 64, 3)
  indices = [int(r["source_index"]) for r in records]
  assert indices == sorted(indices) and all(0 <= i < 24 for i in indices)
  captions = [r["caption"].decode() for r in records]
  # Every kept record passes the three filters, checked again here from what was written.
  assert pieces["classifier"].predict(captions) == [STYLE] * len(records)
  assert all(r["similarity"] > 0.6 and r["perplexity"] < 80 and r["style"] == STYLE.encode() for r in records)
  assert all(0 <= int(r["scene_id"]) < 64 for r in records)
  assert "after_perplexity" in (out_dir / augment.FUNNEL_HTML).read_text()


def test_a_killed_job_resumes_at_the_first_missing_shard_and_writes_the_same_dataset(written, pieces, tmp_path):
  out_dir, counts = written
  import shutil
  copy = tmp_path / "aug" / augment.VERSION
  shutil.copytree(out_dir, copy)
  shards = sorted(copy.glob("aug-train.array_record-*"))
  assert len(shards) == 3
  # As a job killed while writing shard 1 leaves it: shards 0 done, 1 half written (temporary), 2 missing, no info.
  before = shards[0].stat().st_mtime_ns
  shards[1].rename(shards[1].with_name(f".{shards[1].name}.tmp123"))
  shards[2].unlink()
  for name in ("dataset_info.json", "features.json", "metadata.json"):
    (copy / name).unlink(missing_ok=True)
  lines = []
  _, resumed = run(pieces, tmp_path, log=lines.append)
  assert lines[0] == "resuming: 1 of 3 shards already written"
  assert shards[0].stat().st_mtime_ns == before
  assert resumed == counts and not list(copy.glob(".*tmp*"))
  for a, b in zip(sorted(out_dir.glob("aug-train.array_record-*")), shards):
    assert a.read_bytes() == b.read_bytes()
  assert [r["caption"] for r in read(copy)[1]] == [r["caption"] for r in read(out_dir)[1]]
  with pytest.raises(augment.AugmentError, match="other settings .*mode: 't2t' -> 'i2t'"):
    run(pieces, tmp_path, mode="i2t")


def test_nothing_above_the_threshold_finishes_a_dataset_with_zero_kept_and_the_funnel(pieces, tmp_path):
  lines = []
  out_dir, counts = run(pieces, tmp_path, mode="i2i", min_similarity=1.0, factual_split="factual[:8]",
                        log=lines.append)
  assert counts.kept == 0 and counts.rejected["similarity"] == 8 and counts.funnel["generated"] == 8
  assert lines[-1].startswith("warning: no factual example retrieved a romantic scene above similarity 1.0")
  builder, records = read(out_dir)
  assert records == [] and builder.info.metadata["funnel"]["kept"] == 0


def main_error(pieces, tmp_path, capsys, *flags):
  argv = ["augment", f"--data_dir={pieces['data_dir']}", f"--output_data_dir={tmp_path}", "--output_dataset=aug",
          f"--generator={pieces['generator_dir']}", f"--style_model={pieces['style_model_dir']}", *flags]
  with pytest.raises(SystemExit) as exit_info:
    augment.main(argv)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and err.startswith("error: ") and " — " in err
  return err


def test_an_empty_stylized_set_is_a_clear_error(pieces, tmp_path, capsys):
  err = main_error(pieces, tmp_path, capsys, "--stylized=stylized_scenes/tiny", "--stylized_split=train[:0]",
                   "--factual=stylized_scenes/tiny", f"--style={STYLE}")
  assert "the stylized set stylized_scenes/tiny:train[:0] is empty" in err
  err = main_error(pieces, tmp_path, capsys, "--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny",
                   "--style=factual")
  assert "has no 'factual' captions (styles found: humorous, romantic)" in err
  assert not (tmp_path / "aug").exists()


def write_text_only(out_dir: pathlib.Path, texts: list[str]) -> None:
  """A TFDS dataset `text_only` (one split, `train`) of records with `captions` and no image."""
  import tensorflow_datasets as tfds
  from array_record.python import array_record_module
  from tensorflow_datasets.core import dataset_info, naming
  out_dir.mkdir(parents=True)
  features = tfds.features.FeaturesDict({"captions": tfds.features.Sequence(tfds.features.Text())})
  template = naming.ShardedFileTemplate(data_dir=out_dir, dataset_name="text_only", split="train",
                                        filetype_suffix="array_record", template=naming.DEFAULT_FILENAME_TEMPLATE)
  path, = template.sharded_filepaths(1)
  writer = array_record_module.ArrayRecordWriter(str(path), "group_size:1")
  for text in texts:
    writer.write(features.serialize_example({"captions": [text]}))
  writer.close()
  info = tfds.core.DatasetInfo(builder=dataset_info.DatasetIdentity(
      name="text_only", version=tfds.core.Version("1.0.0"), data_dir=str(out_dir), module_name=""),
      features=features, disable_shuffling=True)
  info.set_file_format("array_record")
  info.set_splits(tfds.core.SplitDict([tfds.core.SplitInfo(name="train", shard_lengths=[len(texts)], num_bytes=0,
                                                           filename_template=template)]))
  info.write_to_directory(out_dir)


def test_a_factual_set_without_images_allows_only_t2t_and_the_job_trains_and_saves_its_retriever(
    pieces, tmp_path, capsys):
  """Without --retriever the job trains its dual encoder, here on the stylized set's images (the factual set has
  none), and --save_retriever keeps it: the saved one gives the similarities the job wrote."""
  from capjax.erg import dual_encoder
  data_dir = pathlib.Path(pieces["data_dir"])
  texts = ["a small red circle to the left of a big blue square", "a big green triangle"] * 4
  write_text_only(data_dir / "text_only" / "1.0.0", texts)
  err = main_error(pieces, tmp_path, capsys, "--stylized=stylized_scenes/tiny", "--factual=text_only",
                   "--factual_split=train", f"--style={STYLE}", "--mode=i2t")
  assert "--factual=text_only has no images, so --mode=i2t (image queries) is impossible — use --mode=t2t" in err
  lines = []
  out_dir, counts = run(pieces, tmp_path, factual="text_only", factual_split="train", retriever_dir="",
                        save_retriever=str(tmp_path / "retriever"), retriever_steps=2, retriever_pairs=16,
                        min_similarity=-1.0, log=lines.append)  # every similarity passes: records to check below
  builder, records = read(out_dir)
  assert counts.generated == 8 and len(records) == counts.kept and "image" not in builder.info.features
  assert np.all([r["factual_caption"].decode() in texts for r in records])
  assert lines[0] == f"saved the retriever to {tmp_path / 'retriever'}"
  saved = dual_encoder.load(tmp_path / "retriever")
  meta = json.loads((tmp_path / "retriever" / dual_encoder.RETRIEVER_FILE).read_text())
  assert meta["training"] == {"dataset": "stylized_scenes/tiny", "split": "train", "steps": 2, "pairs": 16, "seed": 0}
  settings = builder.info.metadata["settings"]
  assert settings["retriever"] == "" and settings["retriever_steps"] == 2  # trained here, not a --retriever
  _, stylized = augment_inputs.open_dataset("stylized_scenes/tiny", "train", pieces["data_dir"], "--stylized")
  bank = augment_inputs.stylized_bank(stylized, STYLE, None, "train")
  found = retrieve.Retriever(saved, bank_texts=[b.content for b in bank]).retrieve(
      "t2t", [r["factual_caption"].decode() for r in records], k=1, threshold=-1.0)
  assert records and [int(r["scene_id"]) for r in records] == [bank[i].scene_id for i in found.ids[:, 0]]
  np.testing.assert_allclose([r["similarity"] for r in records], found.scores[:, 0], rtol=1e-6)


def test_a_saved_retriever_embeds_exactly_as_the_trained_one(pieces):
  from capjax.erg import dual_encoder
  trained, loaded = pieces["retriever"], dual_encoder.load(pieces["retriever_dir"])
  _, source = augment_inputs.open_dataset("stylized_scenes/tiny", "factual[:8]", pieces["data_dir"], "--factual")
  images = np.stack([source[i]["image"] for i in range(8)])
  texts = [augment_inputs.first_caption(source[i]) for i in range(8)] + ["an unseen zebra word", ""]
  assert (loaded.image_shape, loaded.image_dtype) == ((64, 64, 3), "uint8")
  assert loaded.tokenizer == trained.tokenizer
  np.testing.assert_array_equal(loaded.embed_images(images), trained.embed_images(images))
  np.testing.assert_array_equal(loaded.embed_texts(texts), trained.embed_texts(texts))
  assert dual_encoder.params_digest(loaded.params) == dual_encoder.params_digest(trained.params)


def test_a_retriever_that_is_missing_corrupt_or_for_other_images_is_one_line(pieces, tmp_path, capsys):
  """Each a copy of the session's saved retriever, changed: no compile, no training."""
  import shutil
  import orbax.checkpoint as ocp
  from capjax.erg import dual_encoder
  job = ["--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny", f"--style={STYLE}"]

  def copy(name: str) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(pieces["retriever_dir"], tmp_path / name))

  (tmp_path / "empty").mkdir()
  err = main_error(pieces, tmp_path, capsys, *job, f"--retriever={tmp_path / 'empty'}")
  assert err == (f"error: --retriever={tmp_path / 'empty'}: {tmp_path / 'empty'} is not a saved retriever (no "
                 f"retriever.json) — {dual_encoder.SAVE_HINT}")
  small = copy("small")  # a retriever of 32 x 32 images (the conv tower's parameters do not depend on the size)
  meta = json.loads((small / dual_encoder.RETRIEVER_FILE).read_text())
  (small / dual_encoder.RETRIEVER_FILE).write_text(json.dumps({**meta, "image_shape": [32, 32, 3]}))
  err = main_error(pieces, tmp_path, capsys, *job, "--mode=i2t", f"--retriever={small}")
  assert err == (f"error: --retriever={small} reads images of shape (32, 32, 3) (uint8), but --factual images are "
                 "(64, 64, 3) (uint8) — give a retriever trained on such images, or drop --retriever to train one "
                 "here")
  err = main_error(pieces, tmp_path, capsys, *job, "--mode=t2i", f"--retriever={small}")
  assert "but --stylized images are (64, 64, 3)" in err
  # Other parameters (one changed) under the description: the checksum differs.
  changed = copy("changed")
  params = dict(pieces["retriever"].params, log_scale=pieces["retriever"].params["log_scale"] + 1.0)
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(changed / dual_encoder.VARIABLES_DIR, params, force=True)
  err = main_error(pieces, tmp_path, capsys, *job, f"--retriever={changed}")
  assert err == (f"error: --retriever={changed}: {changed / 'variables'} does not hold the parameters retriever.json "
                 f"describes (their shapes or checksum differ) — {dual_encoder.SAVE_HINT}")
  shutil.rmtree(changed / dual_encoder.VARIABLES_DIR)
  err = main_error(pieces, tmp_path, capsys, *job, f"--retriever={changed}")
  assert f"{changed / 'variables'} does not hold the parameters retriever.json describes (" in err
  cut = copy("cut")
  (cut / dual_encoder.RETRIEVER_FILE).write_text('{"format": "capjax.dual_encoder", "vocab": ')
  err = main_error(pieces, tmp_path, capsys, *job, f"--retriever={cut}")
  assert f"{cut / 'retriever.json'} is not a readable retriever description (JSONDecodeError" in err
  err = main_error(pieces, tmp_path, capsys, *job, f"--retriever={small}", f"--save_retriever={tmp_path / 's'}")
  assert err.startswith("error: --retriever and --save_retriever do not go together")
  assert not (tmp_path / "aug").exists()


def test_a_text_encoder_becomes_the_locked_text_tower_and_is_saved_with_the_retriever(pieces, tmp_path, capsys):
  """--text_encoder (here the tiny BERT fixture, converted): the job trains the retriever around it, locked, and
  --save_retriever keeps the BERT tower with its vocab.txt; the saved one gives the similarities the job wrote."""
  from capjax.erg import dual_encoder
  from capjax.text_models import checkpoint
  from capjax.tools import convert_weights
  bert = tmp_path / "bert"
  convert_weights.convert_hf("hf_bert", pathlib.Path(__file__).parent / "fixtures" / "text_models" / "bert", bert)
  job = ["--stylized=stylized_scenes/tiny", "--factual=stylized_scenes/tiny", f"--style={STYLE}"]
  err = main_error(pieces, tmp_path, capsys, *job, f"--retriever={pieces['retriever_dir']}", f"--text_encoder={bert}")
  assert err.startswith("error: --retriever and --text_encoder do not go together")
  err = main_error(pieces, tmp_path, capsys, *job, f"--text_encoder={tmp_path}")
  assert err.startswith(f"error: --text_encoder={tmp_path}: {tmp_path / 'config.json'} is missing")
  saved_dir = tmp_path / "retriever"
  out_dir, counts = run(pieces, tmp_path / "out", factual_split="factual[:8]", retriever_dir="", text_encoder=str(bert),
                        save_retriever=str(saved_dir), retriever_steps=2, retriever_pairs=16, min_similarity=-1.0)
  builder, records = read(out_dir)
  assert counts.generated == 8 and len(records) == counts.kept > 0
  assert builder.info.metadata["settings"]["text_encoder"] != ""
  saved = dual_encoder.load(saved_dir)
  assert isinstance(saved.model.text_tower, dual_encoder.BertTower) and (saved_dir / "vocab.txt").is_file()
  for a, b in zip(jax.tree.leaves(saved.params["text_tower"]["bert"]),
                  jax.tree.leaves(checkpoint.load(bert, "bert").params), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # locked: the checkpoint's weights, unchanged
  _, stylized = augment_inputs.open_dataset("stylized_scenes/tiny", "train", pieces["data_dir"], "--stylized")
  bank = augment_inputs.stylized_bank(stylized, STYLE, None, "train")
  found = retrieve.Retriever(saved, bank_texts=[b.content for b in bank]).retrieve(
      "t2t", [r["factual_caption"].decode() for r in records], k=1, threshold=-1.0)
  assert [int(r["scene_id"]) for r in records] == [bank[i].scene_id for i in found.ids[:, 0]]
  np.testing.assert_allclose([r["similarity"] for r in records], found.scores[:, 0], rtol=1e-5, atol=1e-6)
