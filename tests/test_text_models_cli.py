"""Specification of the text-model commands on bad input: `convert_weights --format=hf_bert|hf_gpt2` refuses a
checkpoint whose config.json does not match its weights in one `error:` line, and `capjax.text_models.embed`
writes sentence-transformers' mean-pooled embeddings, names an empty line, truncates a 10k-token sentence with a
warning, and refuses weights it cannot use in one line.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import jax
import numpy as np
import pytest

from capjax.text_models import bert, checkpoint, embed
from capjax.tools import convert_weights as cw

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "text_models"
ADVICE = "give a Hugging Face {} checkpoint whose config.json was saved with its weights"


@pytest.fixture(autouse=True)
def float32_matmuls():
  """Full float32 matmuls: on GPUs and TPUs JAX's default precision (TF32, bfloat16 passes) is far from 1e-4."""
  with jax.default_matmul_precision("float32"):
    yield


def run(main, argv: list[str], capsys) -> tuple[int, str, str]:
  """(exit status, stdout, stderr) of a command's main."""
  try:
    main(argv)
    status = 0
  except SystemExit as exit_info:
    status = exit_info.code
  captured = capsys.readouterr()
  return status, captured.out, captured.err


def edited_copy(tmp_path: pathlib.Path, kind: str, **config_changes) -> pathlib.Path:
  """The fixture checkpoint with config.json fields changed."""
  directory = tmp_path / f"{kind}-edited"
  shutil.copytree(FIXTURES / kind, directory)
  config = json.loads((directory / "config.json").read_text())
  (directory / "config.json").write_text(json.dumps({**config, **config_changes}))
  return directory


def convert(kind: str, source: pathlib.Path, output: pathlib.Path, capsys) -> tuple[int, str, str]:
  return run(cw.main, ["convert_weights", f"--format=hf_{kind}", f"--input={source}", f"--output={output}"], capsys)


@pytest.mark.parametrize("kind, change, message", [
    ("bert", {"hidden_size": 48},
     "tensor 'embeddings.LayerNorm.bias' has shape (32,) but config.json implies (48,) (config.json: vocab_size=190, "
     "hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, hidden_act=gelu, "
     "max_position_embeddings=64, type_vocab_size=2, pooler=True)"),
    ("bert", {"num_hidden_layers": 3},
     "missing tensor 'encoder.layer.2.attention.self.key.bias', needed for layer_2/attention/key/bias"),
    ("bert", {"num_hidden_layers": 1}, "unexpected tensor 'encoder.layer.1.attention.output.LayerNorm.bias'"),
    ("bert", {"vocab_size": 30522}, "tensor 'embeddings.word_embeddings.weight' has shape (190, 32) but config.json "
                                    "implies (30522, 32)"),
    ("bert", {"num_attention_heads": 5}, "config.json hidden_size=32 is not divisible by num_attention_heads=5"),
    ("bert", {"hidden_act": "swish"}, "config.json field 'hidden_act' is 'swish'"),
    ("gpt2", {"n_inner": 96}, "tensor 'transformer.h.0.mlp.c_fc.bias' has shape (128,)"),
    ("gpt2", {"n_positions": 1024}, "tensor 'transformer.wpe.weight' has shape (64, 32) but config.json implies "
                                    "(1024, 32)"),
    ("gpt2", {"model_type": "bert"}, "has model_type 'bert', not 'gpt2'"),
])
def test_config_that_does_not_match_the_weights_is_one_error_line(kind, change, message, tmp_path, capsys):
  status, out, err = convert(kind, edited_copy(tmp_path, kind, **change), tmp_path / "out", capsys)
  assert status == 2 and out == ""
  assert err.startswith(f"error: --input={tmp_path / f'{kind}-edited'}: ") and err.count("\n") == 1
  assert message in err and err.endswith(f" — {ADVICE.format(kind)}\n")


def test_missing_tokenizer_file_is_named(tmp_path, capsys):
  source = edited_copy(tmp_path, "gpt2")
  (source / "merges.txt").unlink()
  status, _, err = convert("gpt2", source, tmp_path / "out", capsys)
  assert status == 2 and f"{source / 'merges.txt'} is missing" in err and err.count("\n") == 1


def test_untied_lm_head_is_refused(tmp_path, capsys):
  source = edited_copy(tmp_path, "gpt2")
  tensors = cw.read_safetensors(source / "model.safetensors")
  cw.write_safetensors(source / "model.safetensors",
                       {**tensors, "lm_head.weight": tensors["transformer.wte.weight"] + 1})
  status, _, err = convert("gpt2", source, tmp_path / "out", capsys)
  assert status == 2 and "lm_head.weight differs from wte.weight" in err


def test_input_that_is_a_file_is_refused(tmp_path, capsys):
  status, _, err = convert("bert", FIXTURES / "bert" / "model.safetensors", tmp_path / "out", capsys)
  assert status == 2 and err.startswith(f"error: --input={FIXTURES / 'bert' / 'model.safetensors'} is not a directory")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> pathlib.Path:
  output = tmp_path_factory.mktemp("bert") / "converted"
  cw.convert_hf("hf_bert", FIXTURES / "bert", output)
  return output


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
  with np.load(FIXTURES / "outputs.npz") as data:
    return dict(data)


SENTENCES = ["a dog running in the park", "the cat"]  # rows 0 and 2 of the fixture batch (token type 0 throughout)


def embed_cli(weights: pathlib.Path, lines: str | bytes, tmp_path: pathlib.Path, capsys, *flags: str):
  source = tmp_path / "lines.txt"
  (source.write_bytes if isinstance(lines, bytes) else source.write_text)(lines)
  status, out, err = run(embed.main, ["embed", f"--weights={weights}", f"--input={source}",
                                      f"--output={tmp_path / 'out.npz'}", *flags], capsys)
  return status, out, err, source


def test_embed_writes_mean_pooled_last_hidden_states(bert_dir, reference, tmp_path, capsys):
  status, out, err, _ = embed_cli(bert_dir, "\n".join(SENTENCES) + "\n", tmp_path, capsys)
  assert (status, err) == (0, "") and out == f"wrote 2 embeddings of dimension 32 to {tmp_path / 'out.npz'}\n"
  with np.load(tmp_path / "out.npz") as data:
    assert list(data) == ["embeddings"]
    embeddings = data["embeddings"]
  mask = reference["bert_attention_mask"][[0, 2], :, None]
  expected = (reference["bert_last_hidden_state"][[0, 2]] * mask).sum(1) / mask.sum(1)
  assert embeddings.dtype == np.float32 and embeddings.shape == (2, 32)
  assert np.linalg.norm(embeddings - expected) / np.linalg.norm(expected) <= 1e-4

  status, _, _, _ = embed_cli(bert_dir, "\n".join(SENTENCES), tmp_path, capsys, "--normalize")
  with np.load(tmp_path / "out.npz") as data:
    normalized = data["embeddings"]
  np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(normalized, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-5)


@pytest.mark.parametrize("lines, message", [("a dog\n\nthe cat\n", "line 2 is empty"),
                                            ("a dog\nthe cat\n \t\n", "line 3 is blank"),
                                            ("", "has no lines")])
def test_embed_names_an_empty_line(bert_dir, lines, message, tmp_path, capsys):
  status, out, err, source = embed_cli(bert_dir, lines, tmp_path, capsys)
  assert status == 2 and out == "" and err.count("\n") == 1
  assert err.startswith(f"error: --input={source}") and message in err
  assert not (tmp_path / "out.npz").exists()


def test_embed_truncates_a_10k_token_sentence_with_a_warning(bert_dir, tmp_path, capsys):
  long_sentence = " ".join(["dog"] * 10_000)
  status, _, err, _ = embed_cli(bert_dir, f"the cat\n{long_sentence}\n", tmp_path, capsys)
  assert status == 0
  assert err == ("warning: 1 of 2 lines are longer than max_position_embeddings=64 tokens and were truncated "
                 "(first: line 2)\n")
  model = checkpoint.load(bert_dir, "bert")
  dog = embed.Embedder(model).tokenizer.encode(["dog"])[0]
  ids = np.asarray([dog[:1] + (dog[1:-1] * 62)[:62] + dog[-1:]], np.int32)  # [CLS], dog's pieces, [SEP]: 64
  hidden = model.module().apply({"params": model.params}, ids).last_hidden_state
  with np.load(tmp_path / "out.npz") as data:
    np.testing.assert_allclose(data["embeddings"][1], np.asarray(hidden).mean(axis=1)[0], rtol=1e-5, atol=1e-5)


def test_lowercasing_comes_from_the_checkpoint(tmp_path):
  cased = edited_copy(tmp_path, "bert")
  (cased / "tokenizer_config.json").write_text('{"do_lower_case": false}')
  cw.convert_hf("hf_bert", cased, tmp_path / "cased")
  assert json.loads((tmp_path / "cased" / "config.json").read_text())["do_lower_case"] is False
  embedder = embed.Embedder.load(tmp_path / "cased")
  assert embedder.tokenizer.encode(["Dog dog"])[0][1:-1] != embedder.tokenizer.encode(["dog dog"])[0][1:-1]
  upper, lower = embedder.embed(["A Dog"])[0], embedder.embed(["a dog"])[0]
  assert not np.allclose(upper, lower)


def test_embed_refuses_weights_it_cannot_use(bert_dir, tmp_path, capsys):
  gpt2_dir = tmp_path / "gpt2"
  cw.convert_hf("hf_gpt2", FIXTURES / "gpt2", gpt2_dir)
  status, _, err, _ = embed_cli(gpt2_dir, "a dog\n", tmp_path, capsys)
  assert status == 2 and err.count("\n") == 1 and "holds a gpt2 model, not a bert one" in err

  status, _, err, _ = embed_cli(tmp_path / "nothing", "a dog\n", tmp_path, capsys)
  assert status == 2 and f"{tmp_path / 'nothing' / 'config.json'} is missing — convert it with" in err

  edited = tmp_path / "edited"  # a converted directory whose config.json was changed afterwards
  shutil.copytree(bert_dir, edited)
  config = json.loads((edited / "config.json").read_text())
  (edited / "config.json").write_text(json.dumps({**config, "intermediate_size": 128}))
  status, _, err, _ = embed_cli(edited, "a dog\n", tmp_path, capsys)
  assert status == 2 and err.count("\n") == 1
  assert f"{edited / 'variables'} does not hold the parameters {edited / 'config.json'} describes" in err


def test_embed_refuses_text_that_is_not_utf8(bert_dir, tmp_path, capsys):
  status, _, err, source = embed_cli(bert_dir, b"caf\xe9\n", tmp_path, capsys)
  assert status == 2 and err.startswith(f"error: --input={source} line 1: byte 4 (0xe9) is not UTF-8 — ")


def test_mean_pool_ignores_padding():
  hidden = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
  np.testing.assert_array_equal(bert.mean_pool(hidden, np.asarray([[1, 1, 0]])), [[2, 3, 4, 5]])
