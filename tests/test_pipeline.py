"""grain training input: one random reference per example per epoch, static shapes, resumable iterators."""

import numpy as np

from capjax import config_util
from capjax.data import pipeline, preprocess
from capjax.data.vocab import build_vocabulary



def _source(n: int = 10):
  rng = np.random.default_rng(0)
  return [{"image": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
           "captions": np.asarray([f"caption {i} one".encode(), f"caption {i} two".encode(),
                                   f"caption {i} three".encode()], dtype=object)} for i in range(n)]


def _config(batch: int = 4):
  c = config_util.load("configs/t2t.py:shapes")
  c.batch_size = batch
  c.input.num_threads = 1
  return c


def _vocab(source):
  return build_vocabulary(pipeline.split_captions(source), min_count=1)


def test_batches_have_static_shapes_and_valid_tokens():
  source = _source()
  vocab = _vocab(source)
  it = pipeline.train_iterator(_config(), source, vocab, "image")
  for _ in range(5):
    b = next(it)
    assert b["image"].shape == (4, 64, 64, 3) and b["image"].dtype == np.uint8
    assert b["inputs"].shape == b["targets"].shape == (4, 16)
    assert (b["inputs"][:, 0] == 1).all()


def test_each_epoch_draws_a_reference_at_random_and_covers_every_example():
  source = _source(8)
  vocab = _vocab(source)
  it = pipeline.train_iterator(_config(batch=8), source, vocab, "image")
  chosen = {}
  for _ in range(12):  # 12 epochs of 8 examples
    b = next(it)
    words = [vocab.decode(t).split() for t in b["targets"]]
    assert sorted(int(w[1]) for w in words) == list(range(8))  # every example once per epoch
    for w in words:
      chosen.setdefault(w[1], set()).add(w[2])
  assert all(len(v) >= 2 for v in chosen.values())  # several references used over the epochs


def test_same_seed_same_stream_and_resume_from_state():
  source = _source()
  vocab = _vocab(source)
  a = pipeline.train_iterator(_config(), source, vocab, "image")
  for _ in range(3):
    next(a)
  state = a.get_state()
  expected = [next(a)["targets"] for _ in range(4)]
  b = pipeline.train_iterator(_config(), source, vocab, "image")
  b.set_state(state)
  for want in expected:
    np.testing.assert_array_equal(next(b)["targets"], want)


def test_the_shares_of_the_processes_make_up_the_single_process_batches(monkeypatch):
  # 3 processes x 2 examples each, stacked in process order, are the 1-process global batch of 6, over 4 epochs of
  # 10 examples (batches that straddle an epoch included), images and drawn references alike.
  source = _source()
  vocab = _vocab(source)
  single = pipeline.train_iterator(_config(batch=6), source, vocab, "image")
  expected = [next(single) for _ in range(7)]
  monkeypatch.setattr(pipeline.jax, "process_count", lambda: 3)
  shares = []
  for p in range(3):
    monkeypatch.setattr(pipeline.jax, "process_index", lambda p=p: p)
    it = pipeline.train_iterator(_config(batch=6), source, vocab, "image")
    shares.append([next(it) for _ in range(7)])
  for i, want in enumerate(expected):
    for key in ("image", "inputs", "targets"):
      assert all(s[i][key].shape[0] == 2 for s in shares)
      np.testing.assert_array_equal(np.concatenate([s[i][key] for s in shares]), want[key], err_msg=f"{i} {key}")


def test_eval_batches_pad_the_last_batch_with_minus_one():
  source = _source(10)
  batches = list(pipeline.eval_batches(source, 64, global_batch_size=4))
  index = np.concatenate([b["index"] for b in batches])
  np.testing.assert_array_equal(index, list(range(10)) + [-1, -1])
  assert (batches[-1]["image"][2:] == 0).all()


def test_random_crop_keeps_between_half_and_all_of_the_area():
  rng = np.random.default_rng(1)
  image = np.zeros((100, 100, 3), np.uint8)
  for _ in range(200):
    h, w = preprocess.random_crop(image, 0.5, rng).shape[:2]
    assert 0.5 * 0.85 <= h * w / 1e4 <= 1.0


def test_color_distortion_is_bounded_and_keeps_shape():
  rng = np.random.default_rng(2)
  image = np.full((8, 8, 3), 128, np.uint8)
  out = preprocess.color_distort(image, rng)
  assert out.shape == image.shape and out.dtype == np.uint8
  assert abs(int(out.mean()) - 128) <= 32 + 1
