"""ERG's generator: trained on stylized_scenes' training captions, it grafts a given style phrase onto held-out
factual captions and keeps their objects; the KV-cached search equals the full-pass one; bad input is one line."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

from capjax.erg import generate
from capjax.scenes import grammar, sample
from trained_models import stylized_split_pairs

OBJECT_WORDS = frozenset((*sample.SIZES, *sample.COLOURS, *sample.SHAPES, *grammar.PLURALS.values()))
split_pairs = stylized_split_pairs


@pytest.fixture(scope="module")
def generator(erg_generator) -> generate.Generator:
  """The session's tiny GPT-2 from scratch (tests/trained_models.py: 500 training images of stylized_scenes, their
  1,000 stylized captions, phrase and content from the spans)."""
  return erg_generator


@pytest.fixture(scope="module")
def held_out() -> list[generate.Pair]:
  """The test split's factual (canonical) captions, each with the style phrase planted in it by the dataset."""
  return split_pairs("test", 100)


def keeps_phrase_and_objects(output: str, pair: generate.Pair) -> bool:
  """The phrase as consecutive words, and every object word (size, colour, shape) of the factual caption as often."""
  words, phrase = output.split(), pair.phrase.split()
  has_phrase = any(words[i:i + len(phrase)] == phrase for i in range(len(words)))
  need = collections.Counter(w for w in pair.content.split() if w in OBJECT_WORDS)
  return has_phrase and not need - collections.Counter(w for w in words if w in OBJECT_WORDS)


def test_training_pairs_remove_the_planted_span():
  pair = split_pairs("train", 1)[0]
  assert pair.caption.split() != pair.content.split()
  assert pair.phrase in pair.caption and pair.phrase not in pair.content
  assert sorted(pair.caption.split()) == sorted(pair.content.split() + pair.phrase.split())


def test_special_tokens_are_added_ids_not_text(generator):
  vocab = generator.vocab
  assert vocab.encode("[CLS] [SEP]") == [generate.tokens.UNK_ID] * 2  # as text they are unknown words
  ids = generator.prompt_ids("in love", "a red circle")
  assert ids[0] == vocab.cls_id and ids[3] == vocab.sep_id and vocab.decode(ids[1:3]) == "in love"


def test_output_has_phrase_and_objects(generator, held_out):
  outputs = generator.generate(held_out)
  rate = np.mean([keeps_phrase_and_objects(o, p) for o, p in zip(outputs, held_out)])
  print(f"phrase and objects kept in {rate:.1%} of {len(held_out)} held-out captions")
  assert len(held_out) == 200
  assert rate >= 0.8


def test_beam_search_keeps_phrase_and_objects(generator, held_out):
  pairs = held_out[:32]
  outputs = generator.generate(pairs, beam_size=3)
  assert np.mean([keeps_phrase_and_objects(o, p) for o, p in zip(outputs, pairs)]) >= 0.8


def test_cached_decoding_equals_full_passes(generator, held_out):
  pairs = held_out[:16]
  cached = generator.generate_ids(pairs, cached=True)
  np.testing.assert_array_equal(cached, generator.generate_ids(pairs, cached=False))
  assert (cached[:, 0] != generate.tokens.EOS_ID).all()


def test_top_p_sampling(generator, held_out):
  pairs = held_out[:32]
  np.testing.assert_array_equal(generator.generate_ids(pairs, top_p=1e-6), generator.generate_ids(pairs))
  first = generator.generate(pairs, top_p=1.0, seed=0)
  assert generator.generate(pairs, top_p=1.0, seed=0) == first
  assert generator.generate(pairs, top_p=1.0, seed=1) != first  # the placement of the phrase is a coin toss
  assert np.mean([keeps_phrase_and_objects(o, p) for o, p in zip(generator.generate(pairs, top_p=0.9), pairs)]) >= 0.8
  with pytest.raises(generate.GeneratorError, match="outside"):
    generator.generate(pairs, top_p=0.0)


def test_nucleus_samples_only_the_nucleus_in_proportion():
  import jax
  import jax.numpy as jnp
  rows = 20_000
  probs = jnp.asarray([0.05, 0.5, 0.15, 0.3])  # nucleus at 0.7: 0.5 and 0.3 (0.8 before the third)
  fixed = generate.decode.StepFunctions(lambda x: x, lambda s, t, i: (jnp.tile(jnp.log(probs), (rows, 1)), s))
  logits, _ = generate.nucleus(fixed, jnp.float32(0.7), jax.random.key(0)).step(None, None, 3)
  counts = np.bincount(np.asarray(jnp.argmax(logits, -1)), minlength=4) / rows
  assert counts[0] == counts[2] == 0
  np.testing.assert_allclose(counts[[1, 3]], [0.625, 0.375], atol=0.015)


def test_save_load_and_command(generator, held_out, tmp_path, capsys):
  directory = generate.save(generator, tmp_path / "gen")
  loaded = generate.load(directory)
  pairs = held_out[:8]
  expected = generator.generate(pairs)
  assert loaded.generate(pairs) == expected
  inputs = tmp_path / "pairs.jsonl"
  inputs.write_text("".join(json.dumps({"phrase": p.phrase, "caption": p.content}) + "\n" for p in pairs))
  generate.main(["generate", f"--generator={directory}", f"--input={inputs}"])
  lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
  assert [line["stylized"] for line in lines] == expected
  tsv = tmp_path / "pairs.tsv"
  tsv.write_text("".join(f"{p.phrase}\t{p.content}\n" for p in pairs))
  generate.main(["generate", f"--generator={directory}", f"--input={tsv}", f"--output={tmp_path / 'out.jsonl'}"])
  assert [json.loads(line)["stylized"] for line in (tmp_path / "out.jsonl").read_text().splitlines()] == expected


def test_bad_input(generator):
  with pytest.raises(generate.GeneratorError, match="no .phrase, caption. pairs"):
    generator.generate([])
  with pytest.raises(generate.GeneratorError, match="empty phrase"):
    generator.generate([generate.Pair("  ", "a red circle")])
  too_long = " ".join(["a red circle"] * 10)
  with pytest.raises(generate.GeneratorError, match=f"longer than this generator's {generator.prompt_length}"):
    generator.generate([generate.Pair("in love", too_long)])
  with pytest.raises(generate.GeneratorError, match="no stylized captions to train on"):
    generate.train([])


def run_command(argv, capsys) -> str:
  with pytest.raises(SystemExit) as exit_info:
    generate.main(["generate", *argv])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: ") and " — " in err
  return err


def test_command_bad_input(generator, tmp_path, capsys):
  directory = generate.save(generator, tmp_path / "gen")
  empty = tmp_path / "empty.jsonl"
  empty.write_text("\n")
  assert "--input=x.jsonl does not exist" in run_command([f"--generator={directory}", "--input=x.jsonl"], capsys)
  assert "is not a generator checkpoint" in run_command([f"--generator={tmp_path}", f"--input={empty}"], capsys)
  assert "holds no (phrase, caption) pairs" in run_command([f"--generator={directory}", f"--input={empty}"], capsys)
  long = tmp_path / "long.tsv"
  long.write_text("in love\t" + " ".join(["a red circle"] * 10) + "\n")
  assert "longer than this generator's" in run_command([f"--generator={directory}", f"--input={long}"], capsys)
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"phrase": "in love"}\n')
  assert "line 1 is not a JSON object" in run_command([f"--generator={directory}", f"--input={bad}"], capsys)
  assert "needs --output" in run_command(["--train"], capsys)
  err = run_command(["--train", "--num_train=1", f"--output={tmp_path / 'o'}", f"--weights={directory}"], capsys)
  assert f"--weights={directory}: {directory / 'config.json'} is missing" in err


@pytest.fixture(scope="module")
def converted_gpt2(tmp_path_factory):
  """A converted GPT-2 directory as `convert_weights --format=hf_gpt2` writes it: a tiny random GPT-2 over a
  byte-level BPE with no merges (256 byte symbols and <|endoftext|>)."""
  import jax
  import jax.numpy as jnp
  from flax import linen as nn
  from capjax.text_models import checkpoint, gpt2, tokenizers
  root = tmp_path_factory.mktemp("gpt2")
  symbols = [tokenizers.bytes_to_unicode()[b] for b in range(256)]
  (root / "tok").mkdir()
  (root / "tok" / "vocab.json").write_text(json.dumps({**{s: i for i, s in enumerate(symbols)}, "<|endoftext|>": 256}))
  (root / "tok" / "merges.txt").write_text("#version: 0.2\n")
  config = gpt2.GPT2Config(vocab_size=257, n_positions=256, n_embd=32, n_layer=2, n_head=2)
  init = jax.jit(lambda key, ids: nn.meta.unbox(gpt2.GPT2(config).init(key, ids)["params"]))  # not op by op
  params = jax.tree.map(np.asarray, init(jax.random.key(1), jnp.zeros((1, 2), jnp.int32)))
  return checkpoint.save(root / "converted", "gpt2", config, params, {}, root / "tok"), params


def test_imported_gpt2_grows_its_embedding_and_decodes_with_the_cache(converted_gpt2, tmp_path):
  directory, imported = converted_gpt2
  pairs = split_pairs("train", 4)
  fresh = generate.new_generator(pairs, directory)
  vocab = fresh.vocab
  assert (vocab.cls_id, vocab.sep_id, vocab.bos_id, vocab.pad_id, vocab.eos_id) == (257, 258, 259, 260, 256)
  assert fresh.params["wte"]["embedding"].shape == (261, 32)
  np.testing.assert_array_equal(fresh.params["wte"]["embedding"][:257], imported["wte"]["embedding"])
  assert vocab.decode(fresh.prompt_ids("in love", "a red circle")[1:-13]) == "in love"
  # decode's PAD/BOS/EOS (0, 1, 2) are this model's 260, 259, 256: swapped both ways.
  assert [int(vocab.token_map[i]) for i in (0, 1, 2, 256, 259, 260, 3)] == [260, 259, 256, 2, 1, 0, 3]
  trained = generate.train(pairs, generate.PAPER, directory)
  cached = trained.generate_ids(pairs[:4])
  np.testing.assert_array_equal(cached, trained.generate_ids(pairs[:4], cached=False))
  loaded = generate.load(generate.save(trained, tmp_path / "gen"))
  assert isinstance(loaded.vocab, generate.BPEVocab)
  assert loaded.generate(pairs[:4]) == trained.generate(pairs[:4])


def test_pairs_are_read_one_a_line_at_line_endings_only(tmp_path):
  pairs = tmp_path / "pairs.tsv"
  pairs.write_text("in love\u2028forever\ta red circle\nwith joy\ta blue\x0csquare\n", encoding="utf-8")
  assert generate.read_pairs(str(pairs)) == [generate.Pair("in love\u2028forever", "a red circle"),
                                             generate.Pair("with joy", "a blue\x0csquare")]


def test_a_pairs_line_nested_past_the_parsers_depth_is_named(tmp_path):
  pairs = tmp_path / "pairs.jsonl"
  pairs.write_bytes(b'{"phrase": "in love", "caption": "a red circle"}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n")
  with pytest.raises(generate.GeneratorError, match="line 2 is not a JSON object .*RecursionError"):
    generate.read_pairs(str(pairs))
