"""ERG's settings that its command and its library share: the paper's thresholds and retrieval modes, without the
libraries (JAX) that the retriever, the filters and the augmentation job load, so that `python -m
capjax.erg.augment --help` answers at once."""

from __future__ import annotations

THRESHOLD = 0.6  # the paper's: a retrieved scene counts only with cosine similarity above it
MODES: dict[str, tuple[str, str]] = {  # mode -> (query side, bank side)
    "i2i": ("image", "image"), "i2t": ("image", "text"), "t2i": ("text", "image"), "t2t": ("text", "text"),
}
MAX_PERPLEXITY = 80.0  # the paper's: a generated caption must read as the style's language (trigram ppl < 80)
MIN_SIMILARITY = THRESHOLD  # the paper's 0.6, the retriever's own threshold
MIN_CONTENT = 0.0  # the content filter is off unless asked for: the paper has none
DEFAULT_EXAMPLES_PER_SHARD = 1024  # factual examples per shard of an augmentation job
