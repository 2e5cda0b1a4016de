"""pycocoevalcap's PTB tokenization (CoreNLP 3.4.1's PTBTokenizer -preserveLines -lowerCase, then its
punctuation filter) re-stated in pure Python, token for token: the scanner, Java's lowercasing, the filter.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from capjax.metrics import ptb_rules

try:  # the parser behind `re`, used only to skip rules that cannot start at a character
  import re._constants as _sre
  import re._parser as _sre_parse
except ImportError:  # pragma: no cover - other Pythons: every rule is tried everywhere, just slower
  _sre = _sre_parse = None

# How: CoreNLP's tokenizer is a JFlex scanner. At every position the longest match over all rules wins, ties go
# to the earlier rule, and a rule `r1/r2` matches `r1` only where `r2` follows (the trailing context counts
# towards the length). `ptb_rules.rules()` re-states the 3.4.1 rules as Python regular expressions and `_scan`
# applies them under that discipline; tests/test_metrics_tokenizer.py checks it against the jar, live.
# Like pycocoevalcap, `ptb_tokenize` scans all captions of a call as one text, a caption a line, so a rule
# whose context crosses a line end ("etc." before a capitalized caption) acts as it does there, and the last
# caption meets the end of the text. Deliberate difference: pycocoevalcap replaces only \n inside a caption,
# so a \r, U+2028, U+2029, \v or \f there moves every later caption to the wrong image; here they are spaces.

K = TypeVar("K", bound=Hashable)

# pycocoevalcap.tokenizer.ptbtokenizer.PUNCTUATIONS: compared with the lowercased tokens, so the uppercase
# bracket names never match and "-lrb-"/"-rrb-" survive.
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-",
                          "--", "...", ";"])
# Characters CoreNLP treats as a line end (its NEWLINE macro); inside a caption they become spaces.
_LINE_BREAKS = re.compile("\r\n|[\r\n\u2028\u2029\x0b\x0c]")


class _Compiled(NamedTuple):
  """Some rules compiled into one pattern of optional lookaheads: one C-level call tries them all at a position."""
  rules: tuple[int, ...]  # indices into ptb_rules.rules()
  scan: re.Pattern[str]
  token_groups: tuple[int, ...]  # per rule, the group of its matched text
  end_groups: tuple[int, ...]  # per rule, the group whose end is the match end (the context's, if any)
  # (position in `rules`, the rule's whole pattern, its extent) for rules whose longest match Python may miss
  longest: tuple[tuple[int, re.Pattern[str], re.Pattern[str]], ...]


@functools.cache
def _compile(indices: tuple[int, ...]) -> _Compiled:
  rules, expanded = ptb_rules.rules(), ptb_rules.expanded()
  parts, token_groups, end_groups, longest = [], [], [], []
  group = 0
  for position, index in enumerate(indices):
    rule, (pattern, context) = rules[index], expanded[index]
    if rule.extent is not None:
      if context is not None:
        raise AssertionError(f"{rule.name}: an extent needs a rule without trailing context")
      longest.append((position, re.compile(pattern), re.compile(rule.extent)))
    group += 1
    token_groups.append(group)
    body = f"({pattern})"
    if context is not None:
      group += 1
      body += f"({context})"
    end_groups.append(group)
    parts.append(f"(?:(?={body})|)")
  scan = re.compile("".join(parts))
  if scan.groups != group:
    raise AssertionError("a rule pattern holds a capturing group")
  return _Compiled(indices, scan, tuple(token_groups), tuple(end_groups), tuple(longest))


def _starts(items: list, char: str, ignore_case: bool) -> tuple[bool, bool]:
  """Whether a parsed regex can match a text starting with `char`, and whether it can match the empty text.

  Over-approximates: anything it does not know counts as a possible start, so dispatching on it never drops a
  rule that could match.
  """
  possible = False
  for op, arg in items:
    if op is _sre.LITERAL:
      first, empty = _same_char(arg, char, ignore_case), False
    elif op is _sre.NOT_LITERAL:
      first, empty = ignore_case or chr(arg) != char, False
    elif op is _sre.ANY:
      first, empty = char != "\n", False
    elif op is _sre.IN:
      first, empty = _in_class(arg, char, ignore_case), False
    elif op is _sre.BRANCH:
      results = [_starts(branch, char, ignore_case) for branch in arg[1]]
      first, empty = any(r[0] for r in results), any(r[1] for r in results)
    elif op is _sre.SUBPATTERN:
      _, add_flags, del_flags, sub = arg
      case = (ignore_case or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE
      first, empty = _starts(sub, char, case)
    elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
      low, high, sub = arg
      first, empty = _starts(sub, char, ignore_case) if high else (False, True)
      empty = empty or low == 0
    elif op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):  # zero width: leaves the start to what follows
      first, empty = False, True
    else:
      first, empty = True, True
    possible = possible or first
    if not empty:
      return possible, False
  return possible, True


def _same_char(code: int, char: str, ignore_case: bool) -> bool:
  return chr(code) == char or (ignore_case and re.match(f"(?i:{re.escape(chr(code))})", char) is not None)


def _in_class(items: list, char: str, ignore_case: bool) -> bool:
  candidates = {char, char.lower()[:1], char.upper()[:1], char.casefold()[:1]} if ignore_case else {char}
  negate = bool(items) and items[0][0] is _sre.NEGATE
  if negate and ignore_case:
    return True
  hit = False
  for op, arg in items:
    if op is _sre.NEGATE:
      continue
    if op is _sre.LITERAL:
      hit = hit or any(ord(c) == arg for c in candidates)
    elif op is _sre.RANGE:
      hit = hit or any(arg[0] <= ord(c) <= arg[1] for c in candidates)
    elif op is _sre.CATEGORY and arg in _categories():
      hit = hit or any(_categories()[arg].match(c) for c in candidates)
    else:
      return True
  return hit != negate


@functools.cache
def _categories() -> dict[object, re.Pattern[str]]:
  escapes = {"DIGIT": r"\d", "NOT_DIGIT": r"\D", "SPACE": r"\s", "NOT_SPACE": r"\S", "WORD": r"\w",
             "NOT_WORD": r"\W"}
  return {getattr(_sre, prefix + name): re.compile(escape)
          for name, escape in escapes.items() for prefix in ("CATEGORY_", "CATEGORY_UNI_")}


@functools.cache
def _parsed() -> tuple[list, ...]:
  return tuple(_sre_parse.parse(pattern) for pattern, _ in ptb_rules.expanded())


_ASCII_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@functools.cache
def _dispatch(chars: str) -> _Compiled:
  """The rules that can match at any of `chars`, compiled together (shared by all keys with the same rules)."""
  if _sre_parse is None:
    return _compile(tuple(range(len(ptb_rules.rules()))))
  return _compile(tuple(i for i, parsed in enumerate(_parsed())
                        if any(_starts(list(parsed), char, False)[0] for char in chars)))


# Fast path for the commonest chunk, an ASCII word with maybe one punctuation mark before white space: no rule
# but WORD (or one that yields the same text) matches the word, and the mark is a token of its own, except for
# the words CoreNLP splits and, before a period, abbreviations (checked against the rules themselves).
_SPACES = re.compile("[ \t\u00a0\u2000-\u200a\u3000]+")
_PLAIN_WORD = re.compile(r"([A-Za-z]+)([,;:!?.]?)(?=[ \n]|\Z)")
_SPLIT_WORDS = frozenset(["cannot", "gonna", "gotta", "lemme", "gimme", "wanna"])
_PERIOD_RULES = ("ACRONYM_END", "ABBREV3", "PTY_LTD", "ABBREV1", "ABBREV2")  # (X_PERIOD rules need [,;:] next)


@functools.lru_cache(maxsize=1 << 16)
def _plain_before_period(word: str) -> bool:
  """Whether `word` followed by a period is just the word and a period (no abbreviation rule takes it)."""
  names = [rule.name for rule in ptb_rules.rules()]
  return not any(re.fullmatch(ptb_rules.expanded()[names.index(name)][0], word + ".") for name in _PERIOD_RULES)


def _longest_end(whole: re.Pattern[str], extent: re.Pattern[str], text: str, pos: int, found: int) -> int:
  """The end of the longest match of `whole` at `pos`, given one ending at `found` (JFlex takes the longest)."""
  for stop in range(extent.match(text, pos).end(), found, -1):
    if whole.fullmatch(text, pos, stop):
      return stop
  return found


def _scan(text: str) -> list[list[str]]:
  """CoreNLP's PTBLexer over `text`: the tokens of each line (tokenizeNLs, like -preserveLines)."""
  rules = ptb_rules.rules()
  lines: list[list[str]] = [[]]
  tokens = lines[0]
  pos, end = 0, len(text)
  while pos < end:
    char = text[pos]
    if char == " ":  # only SPACES starts with a space, and it takes the whole run of spaces
      pos = _SPACES.match(text, pos).end()
      continue
    plain = _PLAIN_WORD.match(text, pos) if char.isascii() and char.isalpha() else None
    if plain is not None:
      word, mark = plain.groups()
      if word.lower() not in _SPLIT_WORDS and (
          mark != "." or (not text.startswith(" .", plain.end()) and _plain_before_period(word))):
        tokens.append(word)
        if mark:
          tokens.append(mark)
        pos = plain.end()
        continue
    # ASCII letters share one compiled pattern (a compile costs more than trying a few extra rules)
    compiled = _dispatch(_ASCII_LETTERS if char.isascii() and char.isalpha() else char)
    if not compiled.rules:  # untokenizable: CoreNLP's default (firstDelete) drops the character
      pos += 1
      continue
    spans = compiled.scan.match(text, pos).regs
    ends = [spans[group][1] for group in compiled.end_groups]
    for position, whole, extent in compiled.longest:
      if ends[position] > pos:
        ends[position] = _longest_end(whole, extent, text, pos, ends[position])
    best_end = max(ends)
    if best_end <= pos:
      pos += 1
      continue
    best = ends.index(best_end)  # the earliest of the longest
    rule = rules[compiled.rules[best]]
    token_end = best_end if rule.extent is not None else spans[compiled.token_groups[best]][1]
    token = text[pos:token_end]
    if rule.kind == ptb_rules.SKIP:
      pos = token_end
      continue
    if rule.kind == ptb_rules.NEWLINE:
      tokens = []
      lines.append(tokens)
      pos = token_end
      continue
    if rule.kind == ptb_rules.PUSHBACK:
      token_end -= rule.pushback
      token = text[pos:token_end]
    elif rule.kind == ptb_rules.ACRONYM:
      token = ptb_rules.strip_space_end(token)
      token_end = pos + len(token) - 1  # the period is scanned again
      if len(token) == 2:  # "I." is a letter and a period
        token = token[:1]
    elif rule.kind == ptb_rules.ABBREV:
      token_end -= 1  # "etc." then "." again: the abbreviation also ends the sentence
    if rule.transform is not None:
      token = rule.transform(token)
    tokens.append(token)
    pos = token_end
  return lines


def _clean(caption: str) -> str:
  return _LINE_BREAKS.sub(" ", caption)


def _lower(token: str) -> str:
  """Java's String.toLowerCase(Locale.ENGLISH) of one token: Python's lower() but for Java's final sigma."""
  if "\u03a3" not in token:
    return token.lower()
  return "".join(("\u03c2" if _final_sigma(token, i) else "\u03c3") if c == "\u03a3" else c.lower()
                 for i, c in enumerate(token))


# Java counts these as cased too (Other_Lowercase / Other_Uppercase), with the letters of categories Ll, Lu, Lt.
_JAVA_CASED_EXTRA = re.compile("[\u02b0-\u02b8\u02c0\u02c1\u02e0-\u02e4\u0345\u037a\u1d2c-\u1d61\u2160-\u217f"
                               "\u24b6-\u24e9]")


def _java_cased(char: str) -> bool:
  return unicodedata.category(char) in ("Ll", "Lu", "Lt") or _JAVA_CASED_EXTRA.match(char) is not None


def _in_word(token: str, i: int) -> bool:
  """Whether token[i] belongs to the word around it, roughly by Java's word-break rules."""
  char, category = token[i], unicodedata.category(token[i])
  if category in ("Mn", "Mc", "Me"):  # a mark belongs to the character it follows
    return i > 0 and _in_word(token, i - 1)
  if char.isalnum() or category in ("Lm", "Pc") or _java_cased(char):
    return True
  return char in _MID_WORD and 0 < i < len(token) - 1 and token[i - 1].isalpha() and token[i + 1].isalpha()


# Punctuation that does not break a word between two letters ("a.b", "don't").
_MID_WORD = frozenset("-.'\u2018\u2019\u2024\ufe52\uff07\uff0e:\u00b7\u0387\u05f4\u2027\ufe13\ufe55\uff1a")


def _final_sigma(token: str, i: int) -> bool:
  """Java's rule: a cased character before the sigma and none after it, both within its word."""
  before = i - 1
  while before >= 0 and _in_word(token, before) and not _java_cased(token[before]):
    before -= 1
  if before < 0 or not _in_word(token, before):
    return False
  after = i + 1
  while after < len(token) and _in_word(token, after):
    if _java_cased(token[after]):
      return False
    after += 1
  return True


def _finish(tokens: Sequence[str]) -> str:
  """PTBTokenizer's -lowerCase output line, then pycocoevalcap's punctuation filter."""
  line = " ".join(_lower(t) for t in tokens).rstrip()
  return " ".join(w for w in line.split(" ") if w not in PUNCTUATIONS)


def ptb_tokenize(captions: Sequence[str]) -> list[str]:
  """What pycocoevalcap's PTBTokenizer makes of `captions` (one call, one caption a line), in order."""
  if not captions:
    return []
  lines = _scan("\n".join(_clean(c) for c in captions))
  if len(lines) != len(captions):
    raise RuntimeError(f"internal error: {len(captions)} captions gave {len(lines)} lines")
  return [_finish(tokens) for tokens in lines]


def ptb_tokens(caption: str) -> list[str]:
  """The raw CoreNLP 3.4.1 tokens of one caption (before lowercasing and punctuation removal)."""
  return [t for line in _scan(_clean(caption)) for t in line]


def tokenize(captions_for_image: Mapping[K, Sequence[str]]) -> dict[K, list[str]]:
  """pycocoevalcap's `PTBTokenizer().tokenize`, taking plain caption strings: {image: [tokenized captions]}."""
  flat = [caption for captions in captions_for_image.values() for caption in captions]
  tokenized = iter(ptb_tokenize(flat))
  return {image: [next(tokenized) for _ in captions] for image, captions in captions_for_image.items()}


if __name__ == "__main__":  # development aid: tokenize stdin lines like the jar does
  for tokenized_line in ptb_tokenize(sys.stdin.read().rstrip("\n").split("\n")):
    print(tokenized_line)
