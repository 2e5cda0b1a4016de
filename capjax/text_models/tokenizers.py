"""The tokenizers of the converted checkpoints: BERT's WordPiece (Hugging Face's basic splitting, then
tensorflow-text's WordPiece over `vocab.txt`), GPT-2's byte-level BPE (`vocab.json` + `merges.txt`: the
algorithm of OpenAI's encoder.py, which Hugging Face's GPT-2 tokenizer also implements; `regex` gives the
\\p{L}/\\p{N} classes of its pre-tokenizer) and CLIP's (the same BPE over lowercased words that end in `</w>`).
tests/fixtures/text_models holds the Hugging Face tokenizers' ids for a test list; all three agree with them.
"""

from __future__ import annotations

import functools
import json
import pathlib
import unicodedata
from collections.abc import Sequence

import numpy as np
import regex

from capjax import cli
from capjax.text.lines import split_lines

PathLike = str | pathlib.Path


class TokenizerError(ValueError):
  """Unreadable or inconsistent tokenizer files."""


@functools.cache
def _tf_text():
  with cli.quiet_native_startup():  # TensorFlow's oneDNN, CPU-instruction and CUDA-probe lines, whatever the level
    import tensorflow as tf  # noqa: PLC0415 (TensorFlow loads slowly: only WordPiece needs it)
    import tensorflow_text  # noqa: PLC0415
    tf.config.set_visible_devices([], "GPU")  # tokenization is host work; the accelerator stays JAX's
  return tf, tensorflow_text


SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")
MAX_WORD_CHARS = 100  # Hugging Face's max_input_chars_per_word: a longer word is one [UNK]


def _is_punctuation(char: str) -> bool:
  """BERT's punctuation: every ASCII non-alphanumeric symbol (so "$", "^", "`" too) and Unicode's P categories."""
  cp = ord(char)
  return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
          or unicodedata.category(char).startswith("P"))


def _is_cjk(cp: int) -> bool:
  return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
          or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
          or 0x2F800 <= cp <= 0x2FA1F)


def lower(text: str) -> str:
  """BERT's uncased normalization: accents stripped (NFD, then no nonspacing marks), then lowercased."""
  return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn").lower()


def basic_split(text: str, lower_case: bool) -> list[str]:
  """BERT's pre-tokenization as Hugging Face does it: control characters, NUL and U+FFFD dropped, whitespace
  (Unicode's Zs too) separates words, CJK ideographs and punctuation are words of their own, optional lowercasing."""
  chars = []
  for char in text:
    category = unicodedata.category(char)
    if char in "\x00\ufffd" or (char not in "\t\n\r" and category.startswith("C")):
      continue
    if char in " \t\n\r" or category == "Zs":
      chars.append(" ")
    else:
      chars.append(f" {char} " if _is_cjk(ord(char)) else char)
  words = []
  for word in "".join(chars).split():
    if lower_case:
      word = lower(word)
    start = 0
    for i, char in enumerate(word):
      if _is_punctuation(char):
        words.extend(w for w in (word[start:i], char) if w)
        start = i + 1
    if word[start:]:
      words.append(word[start:])
  return words


class WordPiece:
  """BERT's tokenizer: Hugging Face's basic splitting (`basic_split`; special tokens written in the text, such as
  "[SEP]", stay those tokens, as in Hugging Face), then tensorflow-text's greedy longest-match WordPiece with `##`
  continuations; [CLS] ... [SEP] around each text.

  tensorflow-text's `BertTokenizer` is not used whole: its lower_case is an NFKC case fold (it rewrites "™" as "tm"
  and "½" as "1⁄2"), it keeps zero-width and other format characters, and it limits words in bytes rather than
  characters, so its ids differ from the reference tokenizer's on such text."""

  def __init__(self, vocab_path: PathLike, lower_case: bool):
    try:
      words = split_lines(pathlib.Path(vocab_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
      raise TokenizerError(f"{vocab_path} is not a readable UTF-8 vocabulary ({error})") from error
    self.vocab = {word: i for i, word in reversed(list(enumerate(words)))}  # the first of duplicates wins, as in HF
    for special in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"):
      if special not in self.vocab:
        raise TokenizerError(f"{vocab_path} has no {special} token: it is not a BERT vocabulary")
    self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]
    self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
    self.lower_case = lower_case
    self._specials = regex.compile("(" + "|".join(regex.escape(t) for t in SPECIAL_TOKENS if t in self.vocab) + ")")
    tf, text = _tf_text()
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(words), tf.range(len(words), dtype=tf.int64)), 1)
    self._wordpiece = text.WordpieceTokenizer(table, token_out_type=tf.int64, unknown_token="[UNK]",
                                              max_bytes_per_word=4 * MAX_WORD_CHARS)

  def words(self, text: str) -> list[str]:
    """The words WordPiece splits further: special tokens whole, a word over 100 characters as [UNK]."""
    result = []
    for i, part in enumerate(self._specials.split(text)):
      if i % 2:
        result.append(part)
      else:
        result.extend(w if len(w) <= MAX_WORD_CHARS else "[UNK]" for w in basic_split(part, self.lower_case))
    return result

  def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
    """Word-piece ids of each text, without [CLS]/[SEP]."""
    if not texts:
      return []
    tf, _ = _tf_text()
    words = tf.ragged.constant([self.words(t) for t in texts], dtype=tf.string, ragged_rank=1, inner_shape=())
    ragged = self._wordpiece.tokenize(words).merge_dims(-2, -1)
    return [[int(i) for i in row] for row in ragged.to_list()]

  def encode(self, texts: Sequence[str]) -> list[list[int]]:
    """[CLS] + word pieces + [SEP] for each text."""
    return [[self.cls_id, *ids, self.sep_id] for ids in self.tokenize(texts)]


def bytes_to_unicode() -> dict[int, str]:
  """GPT-2's reversible map of the 256 bytes to printable characters (bytes that print stay themselves)."""
  kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
  chars, extra = list(kept), 0
  for b in range(256):
    if b not in kept:
      kept.append(b)
      chars.append(256 + extra)
      extra += 1
  return dict(zip(kept, map(chr, chars)))


# GPT-2's pre-tokenizer: English contractions, letters, numbers, other symbols (each with one leading space), spaces.
GPT2_PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


class ByteLevelBPE:
  """GPT-2's tokenizer: bytes -> printable characters, then merges in rank order within each pre-token."""

  end_of_word = ""  # appended to a pre-token's last symbol before merging (CLIP's "</w>")

  def __init__(self, vocab_path: PathLike, merges_path: PathLike, unk_token: str = "<|endoftext|>"):
    try:
      self.vocab = json.loads(pathlib.Path(vocab_path).read_text(encoding="utf-8"))
      lines = split_lines(pathlib.Path(merges_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
      raise TokenizerError(f"{vocab_path} / {merges_path} are not readable GPT-2 tokenizer files ({error})") from error
    if not isinstance(self.vocab, dict) or not all(type(i) is int for i in self.vocab.values()):
      raise TokenizerError(f"{vocab_path} must map tokens to integer ids")
    if lines and lines[0].startswith("#version"):
      lines = lines[1:]
    merges = [tuple(line.split(" ")) for line in lines if line.strip()]
    if bad := next((m for m in merges if len(m) != 2), None):
      raise TokenizerError(f"{merges_path}: a merge is two symbols separated by one space, got {' '.join(bad)!r}")
    self.ranks = {pair: i for i, pair in reversed(list(enumerate(merges)))}
    self.decoder = {i: token for token, i in self.vocab.items()}
    self.byte_encoder = bytes_to_unicode()
    self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
    self.unk_token, self.unk_id = unk_token, self.vocab.get(unk_token)
    self._cache: dict[str, tuple[str, ...]] = {}

  def bpe(self, token: str) -> tuple[str, ...]:
    """The merged symbols of one pre-token (already in byte characters)."""
    if token in self._cache:
      return self._cache[token]
    word = (*token[:-1], token[-1] + self.end_of_word) if token else ()
    while len(word) > 1:
      pairs = set(zip(word, word[1:]))
      best = min(pairs, key=lambda pair: self.ranks.get(pair, float("inf")))
      if best not in self.ranks:
        break
      merged, i = [], 0
      while i < len(word):
        if i < len(word) - 1 and (word[i], word[i + 1]) == best:
          merged.append(word[i] + word[i + 1])
          i += 2
        else:
          merged.append(word[i])
          i += 1
      word = tuple(merged)
    self._cache[token] = word
    return word

  def encode(self, text: str) -> list[int]:
    """Token ids; "<|endoftext|>" written in the text is that special token, as in Hugging Face's tokenizer."""
    if self.unk_id is None:
      return self._encode(text)
    ids = []
    for i, part in enumerate(text.split(self.unk_token)):
      ids.extend(([self.unk_id] if i else []) + self._encode(part))
    return ids

  def _encode(self, text: str) -> list[int]:
    ids = []
    for piece in self.pieces(text):
      for symbol in self.bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))):
        token_id = self.vocab.get(symbol, self.unk_id)
        if token_id is None:
          raise TokenizerError(f"{symbol!r} is not in the vocabulary and it has no <|endoftext|> to stand for it")
        ids.append(token_id)
    return ids

  def pieces(self, text: str) -> list[str]:
    """The pre-tokens that BPE merges within."""
    return GPT2_PATTERN.findall(text)

  def decode(self, ids: Sequence[int]) -> str:
    text = "".join(self.decoder[int(i)] for i in ids)
    return bytes(self.byte_decoder[c] for c in text).decode("utf-8", errors="replace")


# CLIP's pre-tokenizer (OpenAI's simple_tokenizer.py, Hugging Face's CLIPTokenizer): its special tokens, English
# contractions, letters, single digits, other symbols; whitespace only separates.
CLIP_PATTERN = regex.compile(
    r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""")


class CLIPTokenizer(ByteLevelBPE):
  """CLIP's tokenizer as Hugging Face's CLIPTokenizer runs it: "<|startoftext|>" and "<|endoftext|>" written in the
  text are those tokens; the rest is NFC-normalized and lowercased character by character (so no final sigma),
  split by CLIP_PATTERN and then by GPT-2's pattern (Hugging Face's byte-level step splits "<|endoftext|>" written
  in capitals into "<|", "endoftext", "|>"), and each piece's bytes merged by rank with `</w>` on its last symbol;
  `encode` puts
  <|startoftext|> ... <|endoftext|> around the ids. OpenAI's own tokenizer also runs ftfy and unescapes HTML
  ("&amp;"): Hugging Face's does not, nor does this one."""

  end_of_word = "</w>"
  specials = regex.compile(r"(<\|startoftext\|>|<\|endoftext\|>)")

  def __init__(self, vocab_path: PathLike, merges_path: PathLike):
    super().__init__(vocab_path, merges_path)
    missing = [t for t in ("<|startoftext|>", "<|endoftext|>") if t not in self.vocab]
    if missing:
      raise TokenizerError(f"{vocab_path} has no {missing[0]} token: it is not a CLIP vocabulary")
    self.bos_id, self.eos_id = self.vocab["<|startoftext|>"], self.vocab["<|endoftext|>"]

  def pieces(self, text: str) -> list[str]:
    text = "".join(c.lower() for c in unicodedata.normalize("NFC", text))
    return [piece for word in CLIP_PATTERN.findall(text) for piece in GPT2_PATTERN.findall(word)]

  def tokenize(self, text: str) -> list[int]:
    """The ids of `text`, without <|startoftext|> and <|endoftext|> around them."""
    ids = []
    for i, part in enumerate(self.specials.split(text)):
      ids.extend([self.vocab[part]] if i % 2 else self._encode(part))
    return ids

  def encode(self, text: str) -> list[int]:
    return [self.bos_id, *self.tokenize(text), self.eos_id]

  def decode(self, ids: Sequence[int]) -> str:
    """The lowercased text back, words separated by single spaces (CLIP's decoding)."""
    return " ".join(super().decode(ids).replace(self.end_of_word, " ").split())


def pad(sequences: Sequence[Sequence[int]], max_length: int, pad_id: int, end_id: int | None = None,
        multiple: int = 8) -> tuple[np.ndarray, np.ndarray, list[int]]:
  """(ids (B, T) int32, mask (B, T) int32, indices of the truncated sequences).

  Sequences longer than `max_length` are cut to it, keeping `end_id` (BERT's [SEP]) as their last token when
  given, as Hugging Face's truncation does. T is the longest length rounded up to `multiple` (at most max_length),
  so that a jitted model compiles for a few shapes only."""
  cut = [i for i, s in enumerate(sequences) if len(s) > max_length]
  rows = [list(s[:max_length]) for s in sequences]
  if end_id is not None:
    for i in cut:
      rows[i][-1] = end_id
  longest = max((len(r) for r in rows), default=1)
  width = min(max_length, -(-max(longest, 1) // multiple) * multiple)
  ids = np.full((len(rows), width), pad_id, np.int32)
  mask = np.zeros((len(rows), width), np.int32)
  for i, row in enumerate(rows):
    ids[i, :len(row)] = row
    mask[i, :len(row)] = 1
  return ids, mask, cut
