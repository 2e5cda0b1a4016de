r"""The paper's T2T captioner (Sharma et al. 2018): 6+6 layers, d=512, 8 heads, tied embeddings, Adagrad 0.01.

Variants (`--config=configs/t2t.py:VARIANTS`, comma separated):
  (none) / 8x8   Conceptual Captions, Inception-ResNet-v2 features as an 8x8 grid (the paper's best model).
  1x1            one pooled feature vector instead of the grid.
  shapes         the embedded synthetic scenes dataset and a small model that trains in ~10 min on a CPU;
                 `domain=vivid` trains and scores on its second domain (`synthetic_scenes/vivid`: other backgrounds,
                 sizes and caption style) instead of the plain one (`domain=plain`, the default): the cross-domain
                 experiment in miniature.
  coco           the paper's COCO models (Tables 4-7): Karpathy's COCO splits (`karpathy/coco`, on its IRv2 features),
                 trained on train + restval, the best checkpoint by val CIDEr-D, scored on test; the paper's text
                 handling (15 tokens, words seen < 4 times -> <UNK>), Adagrad 0.01, batch 25 and beam 4, as for CC3M.
  cc12m          CC12M's LLaVA-NeXT recaptions (`cc12m_llavanext/clean`), short captions by default.
  stylized       ERG's stylized captioner (Table 2): `shapes`' model on the embedded stylized_scenes, trained on the
                 stylized captions of one style (`style=romantic|humorous`, default romantic), alone or followed by
                 an augmented dataset of `python -m capjax.erg.augment` (`augmented=NAME`), and scored on that
                 style's test captions with BLEU-1/3, METEOR, CIDEr, and cls and ppl (`eval.style_model`,
                 `eval.style_lm`). `python -m capjax.erg.demo` runs both trainings and compares them.
  debug          local CPU debugging: tiny model, a few steps, NaN checks (combine with `shapes`).
  scst           self-critical sequence training (Rennie et al. 2017) of the variants' model from the best
                 checkpoint of its MLE run (`--config.init_from=WORKDIR`): n sampled captions per image
                 (`scst.num_samples`, temperature, top_k, top_p), rewarded by CIDEr-D against the image's references,
                 against a baseline (`scst.baseline`: mean of the other samples, or greedy), e.g.
                 `configs/t2t.py:shapes,scst`.
Plus `key=value` pairs: `steps=N`, `batch=N`, with shapes `domain=plain|vivid`, with cc12m
`field=caption_llava_short|caption_llava|alt_text`, and with
stylized `style=S`, `augmented=NAME` and `factual=N` (also train on N images' factual captions, style-conditioned).
Any field can be overridden with `--config.field=value`; `--config.init_from=WORKDIR` fine-tunes that run's model on
this config's dataset (docs/training.md, "Fine-tuning from a pretrained run").
"""

import ml_collections

from capjax.config_util import int_value, parse_arg

VARIANTS = ("8x8", "1x1", "shapes", "coco", "cc12m", "stylized", "debug", "scst")

# cc12m: max_caption_tokens per caption field, in the tokens the model reads (Penn Treebank tokens: words and
# punctuation; capjax.data.sources.reference_text). The paper's 15 words would cut most short captions, which the
# dataset card bounds at 30 words. None of these was measured on CC12M (no copy of it here):
#   caption_llava_short  32: the card's 30 words plus a final period and one comma. On the only data here,
#                        dummy_data/'s 4 captions in `clean`, it keeps 100% whole (their 95th percentile: 14).
#   caption_llava        160 and alt_text 48: estimates, for long multi-sentence captions and for alt-texts.
# After a build, measure the 95th percentile and set these to it:
#   python -m capjax.text.stats --dataset=cc12m_llavanext/clean --split=train --tokenizer=treebank \
#       --field=caption_llava_short,caption_llava,alt_text    # tokens_p95 of each field
CC12M_MAX_TOKENS = {"caption_llava_short": 32, "caption_llava": 160, "alt_text": 48}
CC12M_HELD_OUT = 10_000  # CC12M is released as one split: its first 10,000 examples (TFDS order) are held out
# shapes' domain=... -> the synthetic_scenes builder config ("" -> its default, the plain domain)
SCENE_DOMAINS = {"plain": "", "vivid": "vivid"}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variants, values = parse_arg(arg, VARIANTS)
  if {"8x8", "1x1"} <= variants:
    raise ValueError("the 8x8 and 1x1 variants exclude each other — choose one of them")
  c = ml_collections.ConfigDict()
  c.seed = 0

  # Data: Conceptual Captions with pre-extracted Inception-ResNet-v2 features.
  c.dataset = ml_collections.ConfigDict()
  c.dataset.name = "cc3m"                 # TFDS name; see capjax.data.sources.KNOWN_BUILDERS
  c.dataset.builder_config = "unlabeled"  # TFDS builder config ("" -> the builder's default). Named, because
  # the feature variant (cc3m_irv2/unlabeled) is read from its files, which do not record a default config.
  c.dataset.data_dir = ""                 # TFDS data dir ("" -> $TFDS_DATA_DIR or ~/tensorflow_datasets)
  c.dataset.auto_build = False            # build on first use (only for datasets that need no download)
  c.dataset.train_split = "train"
  c.dataset.eval_split = "validation"     # picks the best checkpoint (validation CIDEr-D)
  # Released CC3M has train and validation only (the paper's test sets were never released), so the final
  # score reads validation too: the split the paper's dev-set figures come from. `shapes` has its own test split.
  c.dataset.test_split = "validation"
  c.dataset.caption_field = ""            # the text field to train on ("" -> `captions`): see the cc12m variant
  c.dataset.style = ""                    # train and score on the records' stylized captions of this style
  c.dataset.augmented = ""                # an ERG augmented dataset (capjax.erg.augment) added to the training split
  c.dataset.augmented_data_dir = ""       # where it is ("" -> data_dir)
  # With `style`: a split of factual captions trained on too (e.g. "factual[:4000]"), each caption started with a
  # style tag instead of BOS (the style's or the factual one), and decoding started from the style's tag.
  c.dataset.factual_split = ""
  c.dataset.image_size = 299
  # Pre-extracted Inception-ResNet-v2 features: the `cc3m_irv2` variant written by
  # `python -m capjax.tools.extract_tfds_features --dataset=cc3m --weights=DIR` ("" reads pixels).
  c.dataset.features = "irv2"
  c.dataset.feature_key = "pooled" if "1x1" in variants else "grid"  # 1x1 reads the 1536-d pooled vector
  c.dataset.feature_shape = (8, 8, 1536)  # the grid at 299x299 pixels
  # Rarer training-caption words -> <UNK>. extend (fine-tuning, `init_from`): the pretrained vocabulary keeps its ids
  # and the new captions' words seen min_count times are appended (False: they read as <UNK>).
  c.vocab = ml_collections.ConfigDict({"min_count": 4, "extend": True})
  c.max_caption_tokens = 15               # captions truncated to 15 words
  c.augment = ml_collections.ConfigDict({"crop": False, "crop_min_scale": 0.5, "color": False})
  c.input = ml_collections.ConfigDict({"num_threads": 2, "prefetch": 4})

  # Model: tensor2tensor's transformer_base on visual tokens.
  c.model = ml_collections.ConfigDict()
  c.model.name = "t2t"
  c.model.grid = "1x1" if "1x1" in variants else "8x8"
  c.model.d_model = 512
  c.model.num_heads = 8
  c.model.mlp_dim = 2048
  c.model.encoder_layers = 6
  c.model.decoder_layers = 6
  c.model.dropout_rate = 0.1
  c.model.vocab_multiple = 64             # embedding rows padded to a multiple (the model axis must divide it)
  # Compute type of the layers: bfloat16 on accelerators (parameters, optimizer state, the residual stream, the
  # logits and the loss stay float32). On CPU float32 is faster.
  c.model.dtype = "float32"
  # features: frozen pre-extracted grids (dataset.features); irv2: Inception-ResNet-v2 fine-tuned on pixels;
  # conv: a small CNN (the synthetic scenes). `weights` (converted by capjax.tools.convert_weights) lets
  # `--mode=caption` run a features model on image files.
  c.model.encoder = ml_collections.ConfigDict({
      "name": "features", "widths": (32, 64, 128), "out_features": 128, "weights": ""})

  # Optimisation: Adagrad at 0.01, batch 25, as the paper.
  c.batch_size = 25                       # global batch, split over the mesh's data axis
  c.num_train_steps = 1_000_000
  c.label_smoothing = 0.1
  c.optimizer = ml_collections.ConfigDict()
  c.optimizer.name = "adagrad"            # adagrad | adam
  c.optimizer.learning_rate = 0.01
  c.optimizer.schedule = "constant"       # constant | cosine (after warm-up)
  c.optimizer.warmup_steps = 0
  c.optimizer.initial_accumulator_value = 0.1  # TF's Adagrad default
  c.optimizer.eps = 1e-7                  # optax: inside the sqrt (see capjax.optimizer.make_optimizer)
  c.optimizer.b1 = 0.9                    # adam only
  c.optimizer.b2 = 0.98                   # adam only
  c.optimizer.grad_clip_norm = 0.0        # 0: no clipping
  # Gradient accumulation: the batch in k micro-batches, one after another, gradients summed before one update (the
  # same update as the whole batch, to float rounding, with a k-th of the activation memory; dropout draws its own
  # masks per micro-batch).
  c.optimizer.accumulate_steps = 1
  # Parameter EMA: the train state also keeps the debiased exponential moving average of the parameters
  # (capjax.ema), which evaluation decodes with while eval.use_ema is True; 0 = off (no average kept), e.g. 0.999.
  c.optimizer.ema_decay = 0.0

  # Mesh (capjax.sharding): axis sizes within a slice, one of them -1 for the devices left, and across the slices
  # of a multi-slice TPU (dcn_*). `rules` picks the table that places parameters and activations on the axes:
  # dp (data parallel), fsdp (parameters and optimizer state sharded over `fsdp`), tp (tensor parallel on
  # `model`: the default, data parallel while model is 1), fsdp_tp. See docs/training.md, "Choosing a mesh and rules".
  c.mesh = ml_collections.ConfigDict({
      "data": -1, "fsdp": 1, "model": 1, "dcn_data": 1, "dcn_fsdp": 1, "dcn_model": 1, "rules": "tp"})

  # Logging, evaluation, checkpoints.
  c.log_every = 100
  c.eval_every = 5000
  c.checkpoint_every = 1000
  c.keep_checkpoints = 2                  # latest N, plus the best by validation CIDEr-D
  c.async_checkpointing = True
  c.eval = ml_collections.ConfigDict({
      "batch_size": 256,          # global decoding batch
      "num_examples": 2048,       # validation examples scored during training (picks the best checkpoint)
      "gallery_size": 12,         # images in gallery.png
      "rating_sheet_size": 100,   # images in rating_sheet.html (3-rater GOOD/BAD, as the paper's study)
      # With dataset.style, the final evaluation adds the stylized metrics: `cls` with a style classifier directory
      # (`python -m capjax.text_models.style_classifier`; "" -> no cls) and `ppl` under a style LM file
      # (`python -m capjax.metrics.stylized_lm`; "" -> a trigram LM of the training split's captions of the style).
      "style_model": "",
      "style_lm": "",
      # With optimizer.ema_decay > 0: validations (so the best checkpoint), the test evaluation and --mode=eval and
      # caption decode with the EMA parameters (False: with the trained ones). Without EMA it changes nothing.
      "use_ema": True,
  })
  c.decode = ml_collections.ConfigDict({"method": "beam", "beam_size": 4, "alpha": 0.6})  # the paper's beam 4
  c.debug_nans = False
  # Fine-tuning (docs/training.md): start from this trained workdir's model (its best checkpoint by validation CIDEr-D,
  # or init_step's) with a fresh optimizer; "" trains from random parameters. `scst` starts from one too.
  c.init_from = ""
  c.init_step = -1                        # -1: the best checkpoint
  c.freeze = ""                           # encoder: train the decoder only (the image side stays as pretrained)
  # Steps the host may dispatch ahead of the device: the loop waits for step N - max_steps_ahead before running on,
  # so a stop (SIGTERM) saves its checkpoint within about that many step times.
  c.max_steps_ahead = 1
  # clu's profiler hook: trace this many train steps (from step 10 of the run, then hourly) into the workdir for
  # TensorBoard's profile tab (or xprof); 0 = off.
  c.profile_steps = 0

  if len({"shapes", "coco", "cc12m", "stylized"} & variants) > 1:
    raise ValueError("choose one of the shapes, coco, cc12m and stylized variants")
  if "field" in values and "cc12m" not in variants:
    raise ValueError("field=... chooses a caption field of the cc12m variant: add cc12m")
  if "domain" in values and "shapes" not in variants:
    raise ValueError("domain=... chooses a synthetic scenes domain of the shapes variant: add shapes")
  if "shapes" in variants:
    _shapes(c)
    _scenes_domain(c, values.pop("domain", "plain"))
  if "coco" in variants:
    _coco(c)
  if "cc12m" in variants:
    _cc12m(c, values.pop("field", "caption_llava_short"))
  stylized_values = {k for k in ("style", "augmented", "factual") if k in values}
  if stylized_values and "stylized" not in variants:
    raise ValueError(f"{'/'.join(sorted(stylized_values))}=... go with the stylized variant: add stylized")
  if "stylized" in variants:
    factual = int_value(values, "factual") if "factual" in values else 0
    _stylized(c, values.pop("style", "romantic"), values.pop("augmented", ""), factual)
  if "debug" in variants:
    _debug(c)
  if "scst" in variants:
    _scst(c, short="debug" in variants)
  if "steps" in values:
    c.num_train_steps = int_value(values, "steps")
  if "batch" in values:
    c.batch_size = int_value(values, "batch")
  if values:
    raise ValueError(f"unknown config arguments {sorted(values)} — use steps=N, batch=N or --config.field=value")
  return c


def _shapes(c: ml_collections.ConfigDict) -> None:
  """The embedded synthetic scenes and a small model: trains in ~10 minutes on a 2-core CPU."""
  c.dataset.name = "synthetic_scenes"
  c.dataset.builder_config = ""
  c.dataset.test_split = "test"
  c.dataset.auto_build = True
  c.dataset.features = ""
  c.dataset.image_size = 64
  c.model.encoder.name = "conv"
  c.model.d_model = 128
  c.model.num_heads = 4
  c.model.mlp_dim = 512
  c.model.encoder_layers = 1   # two layers: 1.45x the time per step (measured), fewer steps in the budget
  c.model.decoder_layers = 2
  c.model.dropout_rate = 0.0
  c.label_smoothing = 0.0
  c.batch_size = 64
  c.num_train_steps = 2000
  # The demo may tune its optimizer (docs/benchmarks.md's table); the paper's Adagrad 0.01 learns far slower here.
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 1e-3
  c.optimizer.warmup_steps = 100
  c.optimizer.schedule = "cosine"
  c.log_every = 50
  c.eval_every = 500
  c.checkpoint_every = 250
  c.eval.batch_size = 256
  c.eval.num_examples = 500
  c.eval.gallery_size = 12
  c.decode.method = "greedy"  # the canonical wording is the most likely one: greedy finds it, 4x cheaper


def _scenes_domain(c: ml_collections.ConfigDict, domain: str) -> None:
  """synthetic_scenes' plain domain (its default config) or the vivid one (its `vivid` config)."""
  if domain not in SCENE_DOMAINS:
    raise ValueError(f"domain={domain}: synthetic_scenes has the domains {', '.join(SCENE_DOMAINS)}")
  c.dataset.builder_config = SCENE_DOMAINS[domain]


def _stylized(c: ml_collections.ConfigDict, style: str, augmented: str, factual: int) -> None:
  """ERG's Table 2 captioner on the embedded stylized_scenes: `shapes`' model and optimizer on one style's captions
  (1,000 training images, one caption each, plus the augmented pairs): 5-6 minutes on an idle 2-core CPU (measured
  by the ERG demo).
  With `factual` > 0 it is style-conditioned, as multi-style captioners are: it trains on the factual captions of
  the first `factual` images of the factual split as well, each caption after its style's tag."""
  from capjax.scenes.stylized import STYLES  # noqa: PLC0415
  if style not in STYLES:
    raise ValueError(f"style={style}: stylized_scenes has {', '.join(STYLES)}")
  if factual < 0:
    raise ValueError(f"factual={factual}: give a number of factual images, or 0 for none")
  c.dataset.factual_split = f"factual[:{factual}]" if factual else ""
  _shapes(c)
  c.dataset.name = "stylized_scenes"
  c.dataset.builder_config = "default"
  c.dataset.style = style
  c.dataset.augmented = augmented
  c.max_caption_tokens = 24   # the canonical caption and a phrase of up to four words
  c.vocab.min_count = 1       # the 12 phrases of a style are few: each of their words must stay a word
  c.num_train_steps = 1000    # at 300 both Table 2 captioners still say near-constant captions (objects ~7% right)
  c.optimizer.warmup_steps = 30
  c.eval_every = 100
  c.checkpoint_every = 100
  c.eval.num_examples = 100   # the whole validation split
  c.eval.rating_sheet_size = 0


def _coco(c: ml_collections.ConfigDict) -> None:
  """The paper's COCO-trained models: Karpathy's COCO splits as `karpathy/coco` reads them from dataset_coco.json (train
  82,783 + restval 30,504 images to train on, as is usual; val 5,000 picks the best checkpoint; test 5,000), on the
  IRv2 features of `python -m capjax.tools.extract_tfds_features --dataset=karpathy/coco`. The paper's COCO text
  handling is the default one: captions cut at 15 tokens (`max_caption_tokens`), training words seen fewer than 4
  times read as <UNK> (`vocab.min_count`); Adagrad 0.01, batch 25, beam 4 as for Conceptual Captions."""
  c.dataset.name = "karpathy"
  c.dataset.builder_config = "coco"
  c.dataset.train_split = "train+restval"
  c.dataset.eval_split = "val"
  c.dataset.test_split = "test"
  c.eval.num_examples = 5000  # the whole val split: the paper picks its checkpoint by COCO validation CIDEr


def _cc12m(c: ml_collections.ConfigDict, field: str) -> None:
  """The paper's T2T on CC12M's LLaVA-NeXT recaptions (`cc12m_llavanext/clean`: flagged captions dropped), on the
  IRv2 features of `python -m capjax.tools.extract_tfds_features --dataset=cc12m_llavanext/clean`."""
  if field not in CC12M_MAX_TOKENS:
    raise ValueError(f"field={field}: choose one of {', '.join(CC12M_MAX_TOKENS)}")
  c.dataset.name = "cc12m_llavanext"
  c.dataset.builder_config = "clean"
  c.dataset.caption_field = field
  c.dataset.train_split = f"train[{CC12M_HELD_OUT}:]"
  c.dataset.eval_split = f"train[:{CC12M_HELD_OUT}]"
  c.dataset.test_split = f"train[:{CC12M_HELD_OUT}]"  # as cc3m: no test split released, the held-out part scored
  c.max_caption_tokens = CC12M_MAX_TOKENS[field]


def _scst(c: ml_collections.ConfigDict, short: bool) -> None:
  """Self-critical sequence training from an MLE run of the same model (`init_from`: its workdir; its best
  checkpoint by validation CIDEr-D, its vocabulary). The optimizer stays the MLE run's kind (its state's shape), at
  a small constant rate: Adam at 5e-5 as Rennie et al.; Adagrad at 1e-3, a guess (unmeasured). On the synthetic
  scenes, the setting that won docs/training.md's equal-compute table on both domains (T2T): 3 samples for each of 16
  images a step (48 captions, about an MLE step's 64), Adam 7e-5, 414 steps (the compute of 240 MLE steps)."""
  c.scst = ml_collections.ConfigDict({
      "num_samples": 5,      # captions sampled per image
      "temperature": 1.0,
      "top_k": 0,            # 0: every token
      "top_p": 1.0,          # 1: every token
      "baseline": "mean",    # mean: the image's other samples' mean reward (Luo 2020); greedy: the greedy caption's
      "drop_worst": False,   # the worst sample of each image gets no gradient
  })
  scenes = c.dataset.name in ("synthetic_scenes", "stylized_scenes")
  c.optimizer.learning_rate = (7e-5 if scenes else 5e-5) if c.optimizer.name == "adam" else 1e-3
  c.optimizer.schedule = "constant"
  c.optimizer.warmup_steps = 0
  c.label_smoothing = 0.0
  if short:
    return
  if scenes:
    c.scst.num_samples, c.batch_size = 3, 16
  c.num_train_steps = 414 if scenes else 50_000
  c.eval_every = c.checkpoint_every = 138 if scenes else 1000
  c.log_every = 23 if scenes else c.log_every


def _debug(c: ml_collections.ConfigDict) -> None:
  """Local CPU debugging: a tiny model, a few steps, NaN checks on."""
  c.model.d_model = 32
  c.model.num_heads = 2
  c.model.mlp_dim = 64
  c.model.encoder_layers = 1
  c.model.decoder_layers = 1
  c.model.encoder.widths = (8, 16, 16)
  c.model.encoder.out_features = 32
  c.batch_size = 16
  c.num_train_steps = 20
  c.optimizer.warmup_steps = 2
  c.log_every = 5
  c.eval_every = 10
  c.checkpoint_every = 5
  c.eval.batch_size = 32
  c.eval.num_examples = 64
  c.eval.gallery_size = 4
  c.debug_nans = True
