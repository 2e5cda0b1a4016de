"""Synthetic scenes as words: the plain domain's caption templates (the canonical wording and its paraphrases) and
the parser that reads captions of either domain (`vivid` words the other), generated or predicted, back into objects,
relations and counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from capjax.scenes.sample import (ABOVE, BELOW, COLOURS, INVERSE_RELATION, LEFT_OF, RELATIONS, RIGHT_OF, SHAPES,
                                  SIZES, TINTS, Scene, SceneObject, spatial_relation)
from capjax.strings import as_str

PLURALS: dict[str, str] = {shape: shape + "s" for shape in SHAPES}
NUMBERS: dict[str, int] = {"two": 2, "three": 3}

# The vivid domain's wording of sizes and relations (capjax.scenes.vivid), which the parser reads as these.
VIVID_SIZES: dict[str, str] = {"little": "small", "big": "large"}
VIVID_RELATIONS: dict[str, str] = {LEFT_OF: "left of", RIGHT_OF: "right of", ABOVE: "over", BELOW: "under"}

# Every word the plain captions use, punctuation included (the parser also accepts "there are").
VOCABULARY: tuple[str, ...] = (
    "a", "an", "one", "two", "three", "the",
    *SIZES, *COLOURS, *SHAPES, *PLURALS.values(),
    "to", "left", "right", "of", "above", "below", "is",
    "there", "image", "picture", "shows", "and", ",",
)  # yapf: disable


# -- Templates ------------------------------------------------------------------------------------------------


def _article(determiner: str, next_word: str) -> str:
  if determiner == "a" and next_word[0] in "aeiou":
    return "an"
  return determiner


def noun_phrase(obj: SceneObject, determiner: str | None = "a", with_size: bool = True) -> list[str]:
  """["a", "small", "red", "circle"]; no determiner for None, no size word when with_size is False."""
  words = ([obj.size] if with_size else []) + [obj.colour, obj.shape]
  return words if determiner is None else [_article(determiner, words[0])] + words


def _count_phrase(group: Sequence[SceneObject]) -> list[str]:
  """["two", "small", "red", "circles"]: the size is stated only when the whole group shares it."""
  number = {2: "two", 3: "three"}[len(group)]
  sizes = {o.size for o in group}
  return [number] + (list(sizes) if len(sizes) == 1 else []) + [group[0].colour, PLURALS[group[0].shape]]


def _join(phrases: Sequence[list[str]]) -> list[str]:
  """Phrases as "x", "x and y" or "x , y and z"."""
  words = list(phrases[0])
  for k, phrase in enumerate(phrases[1:], start=1):
    words += ([","] if k < len(phrases) - 1 else ["and"]) + phrase
  return words


def ordered_pair(scene: Scene) -> tuple[SceneObject, str, SceneObject]:
  """(first, relation, second) for a two-object scene: first is the left object ("to the left of") or, when
  the pair is stacked, the upper one ("above")."""
  a, b = scene.objects
  relation = spatial_relation(a, b)
  if relation in (RIGHT_OF, BELOW):
    return b, INVERSE_RELATION[relation], a
  return a, relation, b


def _left_to_right(scene: Scene) -> list[SceneObject]:
  return sorted(scene.objects, key=lambda o: o.x)


def _groups(scene: Scene) -> list[list[SceneObject]]:
  """Objects grouped by (colour, shape): groups of two or more first, then by their leftmost member."""
  groups: dict[tuple[str, str], list[SceneObject]] = {}
  for obj in _left_to_right(scene):
    groups.setdefault((obj.colour, obj.shape), []).append(obj)
  return sorted(groups.values(), key=lambda g: (len(g) == 1, g[0].x))


def _count_caption(scene: Scene) -> list[str] | None:
  """"two red circles and a large green square"; None when no colour and shape repeats."""
  groups = _groups(scene)
  if len(groups[0]) < 2:
    return None
  return _join([_count_phrase(g) if len(g) > 1 else noun_phrase(g[0]) for g in groups])


def canonical_caption(scene: Scene) -> str:
  """The one wording every reference set contains (and so the one a greedy decoder learns):

  1 object:  "a small red circle"
  2 objects: "a small red circle to the left of a large blue square" (left object first; "above" when stacked)
  3 objects: "a small red circle , a large blue square and a small green triangle" (left to right)
  """
  if len(scene.objects) == 2:
    first, relation, second = ordered_pair(scene)
    return " ".join(noun_phrase(first) + relation.split() + noun_phrase(second))
  return " ".join(_join([noun_phrase(o) for o in _left_to_right(scene)]))


def paraphrases(scene: Scene) -> list[str]:
  """Every other wording of the scene. No paraphrase starts with "a", the first word of every canonical
  caption, so a model that picks "a" first has only the canonical wording left to follow."""
  objects = scene.objects
  forms: list[list[str]] = []
  if len(objects) == 1:
    (obj,) = objects
    forms = [
        ["there", "is"] + noun_phrase(obj),
        noun_phrase(obj, "one"),
        noun_phrase(obj, None),
        ["an", "image", "of"] + noun_phrase(obj),
        ["the", "picture", "shows"] + noun_phrase(obj),
    ]
  elif len(objects) == 2:
    first, relation, second = ordered_pair(scene)
    rel, inverse = relation.split(), INVERSE_RELATION[relation].split()
    forms = [
        ["there", "is"] + noun_phrase(first) + rel + noun_phrase(second),
        noun_phrase(second, "the") + ["is"] + inverse + noun_phrase(first, "the"),
        _join([noun_phrase(first, "one"), noun_phrase(second, "one")]),
        noun_phrase(first, None) + rel + noun_phrase(second, None),
        ["an", "image", "of"] + noun_phrase(first) + rel + noun_phrase(second),
    ]
  else:
    ordered = _left_to_right(scene)
    forms = [
        _join([noun_phrase(o, "one") for o in ordered]),
        _join([noun_phrase(o, None) for o in ordered]),
        _join([noun_phrase(o, "the", with_size=False) for o in ordered]),
        ["an", "image", "of"] + _join([noun_phrase(o, "a", with_size=False) for o in ordered]),
        ["there", "is"] + _join([noun_phrase(o, "a", with_size=False) for o in ordered]),
    ]
  count = _count_caption(scene)
  if count is not None:
    forms.append(count)
  return [" ".join(words) for words in forms]


def captions(scene: Scene, rng: np.random.Generator, num_paraphrases: int = 3) -> list[str]:
  """Reference captions: the canonical one first, then `num_paraphrases` paraphrases drawn from the five or
  six of `paraphrases`. Every reference set holds the canonical wording but only some of the paraphrases,
  so the canonical wording is the most frequent one for every kind of image."""
  pool = paraphrases(scene)
  chosen = rng.choice(len(pool), size=min(num_paraphrases, len(pool)), replace=False)
  return [canonical_caption(scene)] + [pool[k] for k in chosen]


# -- Parsing --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mention:
  """An object a caption mentions; an attribute the caption leaves out is None."""
  shape: str
  colour: str | None = None
  size: str | None = None

  def matches(self, obj: SceneObject) -> bool:
    return (self.shape == obj.shape and self.colour in (None, obj.colour) and self.size in (None, obj.size))


@dataclasses.dataclass(frozen=True)
class Relation:
  """"subject <relation> object", e.g. (small red circle, "to the left of", large blue square)."""
  subject: Mention
  relation: str
  object: Mention


@dataclasses.dataclass(frozen=True)
class CountStatement:
  """"two red circles": exactly `count` objects match `mention`."""
  count: int
  mention: Mention


@dataclasses.dataclass(frozen=True)
class Span:
  """A run of caption words and what it says. kind: "object" (objects = its one mention), "count" (statement
  indexes `counts`, objects = the mentions it expands into), "relation" (statement indexes `relations`),
  "filler" (words that state nothing: "there is", ",", "and") or "unparsed"."""
  text: str
  kind: str
  objects: tuple[int, ...] = ()
  statement: int = -1


@dataclasses.dataclass(frozen=True)
class ParsedCaption:
  """All a caption states: mentioned objects (a count phrase contributes one per counted object), relations,
  count statements, the words left unparsed, and the spans that cover the caption in reading order."""
  objects: tuple[Mention, ...]
  relations: tuple[Relation, ...]
  counts: tuple[CountStatement, ...]
  unparsed: tuple[str, ...]
  spans: tuple[Span, ...]


# Fillers state nothing the grounded metrics check: the vivid background phrases ("on a pink background", "pink
# stripes with") included.
_FILLERS: tuple[tuple[str, ...], ...] = (
    ("an", "image", "of"), ("the", "picture", "shows"), ("there", "is"), ("there", "are"), ("and",), (",",),
    ("photo", "of"),
    *((*prefix, tint, kind, *suffix) for tint in TINTS for prefix, kind, suffix in (
        (("on", "a"), "background", ()), (("on",), "stripes", ()), (("a",), "background", ("with",)),
        ((), "stripes", ("with",)))))
_RELATION_WORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    *((tuple(prefix) + tuple(relation.split()), relation) for relation in RELATIONS for prefix in (("is",), ())),
    *((tuple(words.split()), relation) for relation, words in VIVID_RELATIONS.items()))
_SIZE_OF_WORD: dict[str, str] = {**{s: s for s in SIZES}, **VIVID_SIZES}
_SINGULAR_DETERMINERS = frozenset({"a", "an", "one", "the"})
_SHAPE_OF_NOUN: dict[str, str] = {**{s: s for s in SHAPES}, **{p: s for s, p in PLURALS.items()}}
_PUNCTUATION = ",;:.!?"


def tokenize(text: str) -> list[str]:
  """Lowercased words with punctuation split off: "A red circle, and" -> ["a", "red", "circle", ",", "and"]."""
  for mark in _PUNCTUATION:
    text = text.replace(mark, f" {mark} ")
  return text.lower().split()


def _starts_with(tokens: Sequence[str], i: int, phrase: tuple[str, ...]) -> bool:
  return tuple(tokens[i:i + len(phrase)]) == phrase


def _noun_phrase_at(tokens: Sequence[str], i: int) -> tuple[int, int, Mention] | None:
  """(length, count, mention) of "[determiner|number] [size] [colour] shape" at i; count is 1 unless a number
  leads. Number agreement ("two circle", "a circles") is not checked: the meaning is clear either way."""
  j, count = i, 1
  if j < len(tokens) and (tokens[j] in _SINGULAR_DETERMINERS or tokens[j] in NUMBERS):
    count = NUMBERS.get(tokens[j], 1)
    j += 1
  size = colour = None
  if j < len(tokens) and tokens[j] in _SIZE_OF_WORD:
    size, j = _SIZE_OF_WORD[tokens[j]], j + 1
  if j < len(tokens) and tokens[j] in COLOURS:
    colour, j = tokens[j], j + 1
  if j < len(tokens) and tokens[j] in _SHAPE_OF_NOUN:
    return j + 1 - i, count, Mention(_SHAPE_OF_NOUN[tokens[j]], colour, size)
  return None


def parse_caption(text: str | bytes) -> ParsedCaption:
  """Reads a caption in either domain's vocabulary back into mentioned objects, relations and counts.

  Noun phrases ("a small red circle", "the blue square", "two red circles"; vivid "big red circle") are objects;
  a count phrase expands into that many objects and a count statement. A relation ("[is] to the left of",
  "above", ...; vivid "left of", "over", ...) binds the noun phrase right before it to the one right after it.
  "there is", "an image of", "the picture shows", "," and "and" are fillers, and so are the vivid "photo of" and
  background phrases ("on a pink background", "mint stripes with"). Anything else, including a relation with no
  noun phrase on either side, is kept as unparsed: the parser never fails.
  """
  tokens = tokenize(as_str(text, errors="replace"))
  objects: list[Mention] = []
  relations: list[Relation] = []
  counts: list[CountStatement] = []
  spans: list[Span] = []

  def noun_phrase_span(i: int) -> tuple[int, Mention] | None:
    found = _noun_phrase_at(tokens, i)
    if found is None:
      return None
    length, count, mention = found
    indices = tuple(range(len(objects), len(objects) + count))
    objects.extend([mention] * count)
    words = " ".join(tokens[i:i + length])
    if count == 1:
      spans.append(Span(words, "object", indices))
    else:
      counts.append(CountStatement(count, mention))
      spans.append(Span(words, "count", indices, len(counts) - 1))
    return length, mention

  i = 0
  while i < len(tokens):
    filler = next((f for f in _FILLERS if _starts_with(tokens, i, f)), None)
    if filler is not None:
      spans.append(Span(" ".join(filler), "filler"))
      i += len(filler)
      continue
    relation_words = next(((w, r) for w, r in _RELATION_WORDS if _starts_with(tokens, i, w)), None)
    if relation_words is not None:
      words, relation = relation_words
      follower = _noun_phrase_at(tokens, i + len(words))
      if spans and spans[-1].kind in ("object", "count") and follower is not None:
        subject = objects[spans[-1].objects[0]]
        relation_span = len(spans)
        spans.append(Span(" ".join(words), "relation"))
        length, mention = noun_phrase_span(i + len(words))
        relations.append(Relation(subject, relation, mention))
        spans[relation_span] = dataclasses.replace(spans[relation_span], statement=len(relations) - 1)
        i += len(words) + length
        continue
    found = noun_phrase_span(i)
    if found is not None:
      i += found[0]
      continue
    spans.append(Span(tokens[i], "unparsed"))
    i += 1
  return ParsedCaption(
      objects=tuple(objects),
      relations=tuple(relations),
      counts=tuple(counts),
      unparsed=tuple(s.text for s in spans if s.kind == "unparsed"),
      spans=tuple(spans))

