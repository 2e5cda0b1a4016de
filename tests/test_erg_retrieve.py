"""ERG's retriever: on a bank whose nearest neighbours are known by construction, every mode and backend returns
exactly them; 8 devices give what 1 gives; the threshold counts queries without a neighbour; bad input is one line.
"""

from __future__ import annotations

import jax
import ml_collections
import numpy as np
import pytest

from capjax import sharding
from capjax.erg import retrieve
import helpers

DIM = 256   # 16 x 16 "images"
N_BANK = 203  # not a multiple of 8: the last shard is padded
WEIGHTS = np.asarray([0.8, 0.5, 0.3])  # each query's parts along its three target rows: the known ranking
K = len(WEIGHTS)


def known_bank(seed: int = 0, n_queries: int = 40):
  """Orthonormal bank rows; query q = sum_j WEIGHTS[j] * bank[targets[q, j]] + an orthogonal part of length
  extra[q], so its cosine with bank row targets[q, j] is exactly WEIGHTS[j] / |q| and 0 with every other row."""
  rng = np.random.default_rng(seed)
  basis, _ = np.linalg.qr(rng.normal(size=(DIM, DIM)))
  bank, outside = basis[:, :N_BANK].T, basis[:, N_BANK:].T  # rows; `outside` is orthogonal to every bank row
  targets = np.stack([rng.choice(N_BANK, K, replace=False) for _ in range(n_queries)])
  extra = np.where(np.arange(n_queries) % 4 == 0, 1.5, 0.2)  # every 4th query: its best cosine is 0.8/1.7 < 0.6
  queries = WEIGHTS @ bank[targets] + extra[:, None] * outside[np.arange(n_queries) % len(outside)]
  cosines = WEIGHTS[None, :] / np.linalg.norm(queries, axis=1, keepdims=True)
  return bank.astype(np.float32), queries.astype(np.float32), targets, cosines


class TableEncoder:
  """A deterministic encoder: an image is its 16 x 16 pixels flattened; a text is looked up in a table."""

  def __init__(self, table: dict[str, np.ndarray]):
    self.table = table

  def embed_images(self, batch) -> np.ndarray:
    batch = np.asarray(batch, np.float32)
    return batch.reshape(len(batch), -1)

  def embed_texts(self, texts: list[str]) -> np.ndarray:
    return np.stack([self.table[t] for t in texts])


def sides(bank: np.ndarray, queries: np.ndarray):
  """The bank and the queries as images (16 x 16 arrays) and as texts, all four embedding to the given vectors."""
  table = {f"scene {i}": v for i, v in enumerate(bank)} | {f"query {i}": v for i, v in enumerate(queries)}
  return (TableEncoder(table), {"image": bank.reshape(-1, 16, 16), "text": [f"scene {i}" for i in range(len(bank))]},
          {"image": queries.reshape(-1, 16, 16), "text": [f"query {i}" for i in range(len(queries))]})


def faiss_or_skip():
  return helpers.import_extra("faiss", "`pip install -e '.[faiss]'` (or `pip install -c constraints.txt "
                              "faiss-cpu==1.15.1`) to test the faiss backend")


@pytest.mark.parametrize("backend", retrieve.BACKENDS)
def test_all_four_modes_return_exactly_the_known_top_k(backend):
  if backend == "faiss":
    faiss_or_skip()
  bank, queries, targets, cosines = known_bank()
  encoder, bank_side, query_side = sides(bank, queries)
  options = {"chunk": 7, "query_batch": 16} if backend == "jax" else {}  # several chunks per shard, 3 query batches
  retriever = retrieve.Retriever(encoder, bank_side["image"], bank_side["text"], backend=backend, **options)
  assert jax.device_count() == 8 and (backend == "faiss" or retriever.banks["text"].shards == 8)
  for mode, (query, _) in retrieve.MODES.items():
    got = retriever.retrieve(mode, query_side[query], k=K, threshold=-1.0)
    np.testing.assert_array_equal(got.ids, targets, err_msg=mode)
    np.testing.assert_allclose(got.scores, cosines, atol=2e-6, err_msg=mode)


def test_the_threshold_keeps_only_neighbours_above_it_and_counts_queries_without_one():
  bank, queries, targets, cosines = known_bank()
  got = retrieve.Bank(bank).search(queries, k=K)  # the paper's 0.6
  assert got.threshold == retrieve.THRESHOLD == 0.6
  # |q| = sqrt(0.98 + extra^2): cosines 0.792, 0.495, 0.297 (extra 0.2) and 0.445, 0.278, 0.167 (extra 1.5).
  np.testing.assert_array_equal(got.kept, cosines > 0.6)
  assert got.kept.sum() == 30 and got.num_without_neighbour == 10  # one neighbour for 30 queries, none for 10
  np.testing.assert_array_equal(got.ids[:, 0], np.where(np.arange(40) % 4 == 0, retrieve.NO_NEIGHBOUR, targets[:, 0]))
  assert (got.ids[:, 1:] == retrieve.NO_NEIGHBOUR).all()
  np.testing.assert_allclose(got.scores, cosines, atol=2e-6)  # scores are reported whether kept or not
  assert retrieve.Bank(bank).search(queries, k=1, threshold=0.4).num_without_neighbour == 0


def test_ties_go_to_the_lower_bank_index_on_any_device_count():
  bank, _, _, _ = known_bank()
  bank[[40, 150, 202]] = bank[5]  # four equal rows on four different shards of 8 (26 rows each)
  one = retrieve.Bank(bank, sharding.data_mesh(jax.devices()[:1]))
  eight = retrieve.Bank(bank, chunk=4)
  for searcher in (one, eight):
    got = searcher.search(bank[[150, 5]], k=4, threshold=-1.0)
    np.testing.assert_array_equal(got.ids, [[5, 40, 150, 202]] * 2)


def test_eight_devices_give_the_same_ids_and_scores_as_one():
  rng = np.random.default_rng(1)
  bank, queries = rng.normal(size=(3001, 48)), rng.normal(size=(300, 48))
  one = retrieve.Bank(bank, sharding.data_mesh(jax.devices()[:1]), query_batch=128)
  eight = retrieve.Bank(bank, sharding.data_mesh(jax.devices()), chunk=100, query_batch=128)
  # One device: one chunk of 3072 rows; eight: 376 rows a shard in three chunks of 128 (100 rounded up to a tile).
  assert (one.shards, one.chunk, eight.shards, eight.chunk) == (1, 3072, 8, 128) and eight.rows.shape[0] == 3072
  a, b = one.search(queries, k=10, threshold=0.45), eight.search(queries, k=10, threshold=0.45)
  np.testing.assert_array_equal(a.ids, b.ids)
  np.testing.assert_array_equal(a.scores, b.scores)
  # A training run's (data=4, model=2) mesh: the bank on 4 shards, replicated over `model`; the same again.
  mesh = sharding.make_mesh(ml_collections.ConfigDict({"mesh": {"data": 4, "model": 2}}))
  c = retrieve.Bank(bank, mesh, chunk=128, query_batch=128).search(queries, k=10, threshold=0.45)
  np.testing.assert_array_equal(a.ids, c.ids)
  np.testing.assert_array_equal(a.scores, c.scores)
  exact = retrieve.normalize(queries) @ retrieve.normalize(bank).T  # and both are the exact search
  order = np.argsort(-exact, axis=1, kind="stable")[:, :10]
  np.testing.assert_array_equal(b.ids, np.where(np.take_along_axis(exact, order, 1) > 0.45, order, -1))
  assert a.num_without_neighbour == b.num_without_neighbour == int(np.sum(exact.max(axis=1) <= 0.45)) > 0


def test_jax_and_faiss_agree_on_exact_search():
  faiss_or_skip()
  rng = np.random.default_rng(2)
  bank, queries = rng.normal(size=(5000, 64)), rng.normal(size=(200, 64))
  jax_result = retrieve.Bank(bank, chunk=256).search(queries, k=20, threshold=0.45)
  faiss_result = retrieve.faiss_search(queries, bank, k=20, threshold=0.45)
  np.testing.assert_array_equal(jax_result.ids, faiss_result.ids)
  np.testing.assert_allclose(jax_result.scores, faiss_result.scores, atol=1e-5)
  assert jax_result.num_without_neighbour == faiss_result.num_without_neighbour > 0


@pytest.mark.parametrize("call, message", [
    (lambda: retrieve.Bank(np.zeros((0, 8))), "the bank is empty"),
    (lambda: retrieve.Bank(np.ones((4, 8))).search(np.ones((2, 9))), "dimension 8"),
    (lambda: retrieve.Bank(np.ones((4, 8))).search(np.ones((2, 8)), k=5), "k=5 is outside 1..4"),
    (lambda: retrieve.Bank(np.eye(3)[[0, 1, 2, 2]] * [[1], [1], [0], [1]]), "row 2 is zero"),
    (lambda: retrieve.Retriever(TableEncoder({}), bank_images=np.zeros((0, 16, 16))), "images are empty"),
    (lambda: retrieve.Retriever(TableEncoder({"a": np.ones(4)}), bank_texts=["a"]).retrieve("i2i", np.ones((1, 2, 2))),
     "this retriever has none"),
    (lambda: retrieve.Retriever(TableEncoder({"a": np.ones(4)}), bank_texts=["a"]).retrieve("x2t", ["a"]),
     "mode 'x2t' is unknown"),
])
def test_bad_input_is_one_clear_line(call, message):
  with pytest.raises(ValueError) as error:
    call()
  text = str(error.value)
  assert message in text and " — " in text and "\n" not in text, text


def test_faiss_backend_rejects_what_the_jax_backend_rejects():
  faiss_or_skip()
  for call, message in [(lambda: retrieve.faiss_search(np.ones((2, 9)), np.ones((4, 8))), "dimension 8"),
                        (lambda: retrieve.faiss_search(np.ones((2, 8)), np.zeros((0, 8))), "the bank is empty")]:
    with pytest.raises(ValueError, match=message):
      call()


def test_info_nce_is_log_batch_for_indistinct_pairs_and_near_zero_for_separated_ones():
  from capjax.erg import dual_encoder
  same = np.ones((8, 4)) / 2.0
  assert float(dual_encoder.info_nce(same, same, 10.0)) == pytest.approx(np.log(8), rel=1e-6)
  eye = np.eye(8)
  assert float(dual_encoder.info_nce(eye, eye, 100.0)) == pytest.approx(7 * np.exp(-100.0), abs=1e-30)


def test_the_text_tower_ignores_what_the_mask_hides():
  from capjax.erg import dual_encoder
  tower = dual_encoder.TextTransformer(vocab_size=20, width=16, num_layers=1, num_heads=2, mlp_dim=32, max_len=6)
  ids = np.asarray([[5, 6, 7, 0, 0, 0], [5, 6, 7, 9, 9, 9]], np.int32)
  mask = np.asarray([[1, 1, 1, 0, 0, 0]] * 2, bool)
  params = jax.jit(tower.init)(jax.random.key(0), ids, mask)  # jitted: op by op, Flax init and apply take seconds
  apply = jax.jit(tower.apply)
  out = np.asarray(apply(params, ids, mask))
  np.testing.assert_allclose(out[0], out[1], atol=1e-6)
  longer = np.asarray(apply(params, ids, np.ones_like(mask)))
  assert np.abs(longer[0] - longer[1]).max() > 1e-3  # unmasked, the extra words count


@pytest.fixture(scope="module")
def scenes_pairs(tmp_path_factory):
  """stylized_scenes' factual split (1,024 images, four factual captions each) to train on, and its test split (64
  images) held out, at 32 x 32 pixels (2 x 2 means of the 64 x 64 renders: a quarter of the conv work)."""
  import tensorflow_datasets as tfds
  import tfds_builders.stylized_scenes  # noqa: F401 (registers the builder)
  from tfds_builders.stylized_scenes.stylized_scenes_dataset_builder import StylizedScenesConfig
  from capjax.strings import as_str
  config = StylizedScenesConfig(name="erg_retrieval", num_train=8, num_validation=8, num_test=64, num_factual=1024)
  builder = tfds.builder("stylized_scenes", config=config, data_dir=str(tmp_path_factory.mktemp("tfds")))
  builder.download_and_prepare(file_format="array_record")

  def load(split):
    source = builder.as_data_source(split=split)
    records = [source[i] for i in range(len(source))]
    images = np.stack([r["image"] for r in records]).reshape(-1, 32, 2, 32, 2, 3).mean(axis=(2, 4))
    return images.round().astype(np.uint8), [[as_str(c) for c in r["captions"]] for r in records]
  return load("factual"), load("test")


@pytest.mark.slow  # trains (conftest.py: the slow rule)
def test_a_dual_encoder_trained_on_factual_pairs_retrieves_held_out_captions(scenes_pairs):
  from capjax.data.vocab import build_vocabulary
  from capjax.erg import dual_encoder
  (images, captions), (test_images, test_captions) = scenes_pairs
  vocab = build_vocabulary((c for cs in captions for c in cs), min_count=1)
  model = dual_encoder.default_model(len(vocab), width=64, embed_dim=64, conv_widths=(16, 32, 64))
  encoder, losses = dual_encoder.train(images, captions, model=model, tokenizer=dual_encoder.WordTokenizer(vocab, 32),
                                       steps=200, batch_size=64, learning_rate=3e-3)
  assert losses[0] > np.log(64) - 0.5 and np.mean(losses[-20:]) < 2.0  # from chance (4.16) to 1.59 measured
  bank_texts = [c[0] for c in test_captions]  # each held-out image's canonical caption
  assert len(set(bank_texts)) == 62  # two captions repeat earlier ones (ties go to the earlier): recall@1 <= 62/64
  retriever = retrieve.Retriever(encoder, test_images, bank_texts)
  i2t = retriever.retrieve("i2t", test_images, k=5, threshold=-1.0)
  t2i = retriever.retrieve("t2i", bank_texts, k=5, threshold=-1.0)
  truth = np.arange(64)
  # Chance is 1/64 = 0.016. Measured (seed 0, jax 0.10.2 CPU): i2t recall@1 0.44 (28/64), @5 0.91; t2i @1 0.52.
  # The bounds, 16x chance at @1, leave room for float drift across XLA builds without admitting a broken model.
  assert dual_encoder.recall_at_k(i2t.ids, truth, 1) >= 0.25
  assert dual_encoder.recall_at_k(i2t.ids, truth, 5) >= 0.6
  assert dual_encoder.recall_at_k(t2i.ids, truth, 1) >= 0.25


def test_the_feature_tower_learns_pairs_from_pooled_features():
  """The image tower on pre-extracted pooled features (as the IRv2 variants give): 24 images whose features are
  their caption's bag of words plus noise; after training, each image's own caption is its nearest text."""
  from capjax.data.vocab import build_vocabulary
  from capjax.erg import dual_encoder
  rng = np.random.default_rng(0)
  words = ["red", "blue", "green", "circle", "square", "triangle", "small", "large"]
  captions = [f"a {words[6 + i % 2]} {words[i // 2 % 3]} {words[3 + i // 6 % 3]}" for i in range(24)]
  assert len(set(captions)) == 18  # images 18..23 repeat captions of 0..5: the recall below counts either
  vocab = build_vocabulary(captions, min_count=1)
  bags = np.stack([[c.split().count(w) for w in words] for c in captions]).astype(np.float32)
  features = np.concatenate([bags, rng.normal(scale=0.1, size=(24, 8))], axis=1).astype(np.float32)
  model = dual_encoder.DualEncoder(
      dual_encoder.ImageTower("features"),
      dual_encoder.TextTransformer(len(vocab), width=32, num_layers=1, num_heads=2, mlp_dim=64, max_len=8), 32)
  encoder, _ = dual_encoder.train(features, [[c] for c in captions], model=model,
                                  tokenizer=dual_encoder.WordTokenizer(vocab, 8), steps=150, batch_size=12,
                                  learning_rate=1e-2)
  found = retrieve.Retriever(encoder, bank_texts=captions).retrieve("i2t", features, k=1, threshold=-1.0)
  assert [captions[i] for i in found.ids[:, 0]] == captions
