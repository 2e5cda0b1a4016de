"""Synthetic "scenes": one to three coloured shapes on a plain background, their reference captions,
and the parser that reads such captions (generated or predicted) back into objects, relations and counts.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import struct
import zlib
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond")
PLURALS: dict[str, str] = {shape: shape + "s" for shape in SHAPES}
# Saturated, well-separated hues; backgrounds are near-grey so that none of them clashes with these.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 70),
    "blue": (40, 90, 225),
    "yellow": (245, 205, 30),
    "purple": (150, 60, 200),
    "orange": (245, 135, 25),
}
SIZES: tuple[str, ...] = ("small", "large")
# Radius of the circle each shape is drawn inside, as a fraction of the image side (7 and 12 px at 64 px).
BOUNDING_RADIUS: dict[str, float] = {"small": 7 / 64, "large": 12 / 64}

LEFT_OF, RIGHT_OF, ABOVE, BELOW = "to the left of", "to the right of", "above", "below"
RELATIONS: tuple[str, ...] = (LEFT_OF, RIGHT_OF, ABOVE, BELOW)
INVERSE_RELATION: dict[str, str] = {LEFT_OF: RIGHT_OF, RIGHT_OF: LEFT_OF, ABOVE: BELOW, BELOW: ABOVE}
NUMBERS: dict[str, int] = {"two": 2, "three": 3}

# Layout rules (fractions of the image side). Between any two objects one axis of displacement dominates
# the other by RELATION_MARGIN, so that the relation `spatial_relation` reads off is never a close call.
RELATION_MARGIN = 5 / 64
# In three-object scenes the centres are also this far apart horizontally: captions list them left to right.
ORDER_GAP = 5 / 64
OBJECT_GAP = 3 / 64  # free space between the bounding circles of two objects
BORDER = 2 / 64  # free space between a bounding circle and the image edge

# Every word the captions use, punctuation included (the parser also accepts "there are").
VOCABULARY: tuple[str, ...] = (
    "a", "an", "one", "two", "three", "the",
    *SIZES, *COLOURS, *SHAPES, *PLURALS.values(),
    "to", "left", "right", "of", "above", "below", "is",
    "there", "image", "picture", "shows", "and", ",",
)  # yapf: disable


@dataclasses.dataclass(frozen=True)
class SceneObject:
  """One shape in a scene; (x, y) is its centre as fractions of the image width and height, y downwards."""
  shape: str
  colour: str
  size: str
  x: float
  y: float

  def as_dict(self) -> dict[str, str | float]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Background:
  """A near-grey background: `kind` is solid, gradient or noise; `tone` is light or dark."""
  kind: str
  tone: str
  rgb: tuple[int, int, int]
  rgb_end: tuple[int, int, int]  # the far end of a gradient (equal to rgb for the other kinds)
  direction: str  # "horizontal" or "vertical": the axis a gradient runs along
  noise_seed: int  # seeds the pixel noise of the "noise" kind

  @property
  def description(self) -> str:
    return f"{self.tone} {self.kind}"


@dataclasses.dataclass(frozen=True)
class Scene:
  """What one image shows: its objects (in no particular order) and its background."""
  objects: tuple[SceneObject, ...]
  background: Background


def spatial_relation(a: SceneObject, b: SceneObject) -> str:
  """How `a` stands to `b` along the dominant axis of their displacement: "a is <relation> b"."""
  dx, dy = b.x - a.x, b.y - a.y
  if abs(dx) >= abs(dy):
    return LEFT_OF if dx > 0 else RIGHT_OF
  return ABOVE if dy > 0 else BELOW


def is_unambiguous_layout(objects: Sequence[SceneObject]) -> bool:
  """The generator's layout rules: no overlap, a clear dominant axis per pair, and a clear left-to-right order
  when there are three objects."""
  for a, b in itertools.combinations(objects, 2):
    dx, dy = abs(b.x - a.x), abs(b.y - a.y)
    if math.hypot(dx, dy) < BOUNDING_RADIUS[a.size] + BOUNDING_RADIUS[b.size] + OBJECT_GAP:
      return False
    if abs(dx - dy) < RELATION_MARGIN:
      return False
    if len(objects) >= 3 and dx < ORDER_GAP:
      return False
  return all(BOUNDING_RADIUS[o.size] + BORDER <= c <= 1 - BOUNDING_RADIUS[o.size] - BORDER
             for o in objects for c in (o.x, o.y))


# -- Sampling -------------------------------------------------------------------------------------------------


def _pick(rng: np.random.Generator, options: Sequence[str]) -> str:
  return options[int(rng.integers(len(options)))]


def _sample_attributes(rng: np.random.Generator, num_objects: int) -> list[tuple[str, str, str]]:
  """(shape, colour, size) per object; shape and colour repeat often enough to make count captions common."""
  colours = tuple(COLOURS)
  kinds = [(_pick(rng, SHAPES), _pick(rng, colours)) for _ in range(num_objects)]
  if num_objects == 2 and rng.random() < 0.3:
    kinds[1] = kinds[0]
  elif num_objects == 3:
    u = rng.random()
    if u < 0.1:
      kinds = [kinds[0]] * 3
    elif u < 0.4:
      kinds[1] = kinds[0]
  return [(shape, colour, _pick(rng, SIZES)) for shape, colour in kinds]


def _sample_background(rng: np.random.Generator) -> Background:
  kind = _pick(rng, ("solid", "solid", "solid", "gradient", "gradient", "noise", "noise"))
  tone = "light" if rng.random() < 0.6 else "dark"
  low, high = (200, 245) if tone == "light" else (15, 60)

  def grey() -> tuple[int, int, int]:
    level = int(rng.integers(low, high + 1))
    r, g, b = (min(255, max(0, level + tint)) for tint in rng.integers(-8, 9, size=3).tolist())
    return r, g, b

  rgb = grey()
  rgb_end = grey() if kind == "gradient" else rgb
  direction = _pick(rng, ("horizontal", "vertical"))
  return Background(kind, tone, rgb, rgb_end, direction, int(rng.integers(2**31)))


def _place(rng: np.random.Generator, sizes: Sequence[str], candidates: int = 64) -> np.ndarray | None:
  """Centres (n, 2) for objects of these sizes that obey the layout rules, or None if a batch of random
  candidates holds none. Candidates are drawn and checked in bulk: rejection one at a time is slow."""
  radii = np.asarray([BOUNDING_RADIUS[s] for s in sizes])
  lo = (radii + BORDER)[None, :, None]
  xy = rng.uniform(lo, 1 - lo, size=(candidates, len(sizes), 2))
  ok = np.ones(candidates, bool)
  for a, b in itertools.combinations(range(len(sizes)), 2):
    dx, dy = np.abs(xy[:, b, 0] - xy[:, a, 0]), np.abs(xy[:, b, 1] - xy[:, a, 1])
    ok &= np.hypot(dx, dy) >= radii[a] + radii[b] + OBJECT_GAP
    ok &= np.abs(dx - dy) >= RELATION_MARGIN
    if len(sizes) >= 3:
      ok &= dx >= ORDER_GAP
  return xy[np.argmax(ok)] if ok.any() else None


def sample_scene(rng: np.random.Generator, num_objects: int | None = None) -> Scene:
  """A random scene whose layout satisfies `is_unambiguous_layout`; deterministic given the state of `rng`."""
  if num_objects is None:
    num_objects = (1, 2, 2, 3, 3)[int(rng.integers(5))]
  if not 1 <= num_objects <= 3:
    raise ValueError(f"a scene holds one to three objects, not {num_objects}")
  while True:
    attributes = _sample_attributes(rng, num_objects)
    centres = _place(rng, [size for _, _, size in attributes])
    if centres is None:
      continue
    objects = tuple(
        SceneObject(shape, colour, size, float(x), float(y))
        for (shape, colour, size), (x, y) in zip(attributes, centres))
    if is_unambiguous_layout(objects):  # the same rules, checked once more in plain floats
      return Scene(objects, _sample_background(rng))


# -- Rendering ------------------------------------------------------------------------------------------------

_SUPERSAMPLE = 4  # shapes are drawn at 4x and box-filtered down: anti-aliased edges


def _background_pixels(background: Background, image_size: int) -> np.ndarray:
  pixels = np.empty((image_size, image_size, 3), np.float32)
  pixels[...] = background.rgb
  if background.kind == "gradient":
    ramp = np.linspace(0.0, 1.0, image_size, dtype=np.float32)[:, None]
    ramp = ramp * (np.asarray(background.rgb_end, np.float32) - np.asarray(background.rgb, np.float32))
    pixels += ramp[None, :, :] if background.direction == "horizontal" else ramp[:, None, :]
  elif background.kind == "noise":
    rng = np.random.default_rng(background.noise_seed)
    pixels += 6.0 * rng.standard_normal(pixels.shape, dtype=np.float32)
  return pixels


def _outline(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]] | None:
  """The polygon of a shape inside the bounding circle (cx, cy, r); None for the circle."""
  if shape == "circle":
    return None
  if shape == "square":
    h = 0.7 * r
    return [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
  if shape == "triangle":  # equilateral, apex up
    return [(cx + r * math.cos(a), cy + r * math.sin(a)) for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
  if shape == "diamond":  # a rhombus, narrower than tall: never a rotated square
    return [(cx, cy - r), (cx + 0.75 * r, cy), (cx, cy + r), (cx - 0.75 * r, cy)]
  raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")


def _paint(pixels: np.ndarray, obj: SceneObject) -> None:
  """Blends the object into `pixels` (H, W, 3) float32 in place, with anti-aliased edges. Only the window
  around the object is drawn: it starts on a pixel boundary, so the box filter gives the same coverage as a
  full-size mask would."""
  image_size = pixels.shape[0]
  cx, cy, r = obj.x * image_size, obj.y * image_size, BOUNDING_RADIUS[obj.size] * image_size
  x0, y0 = max(0, math.floor(cx - r) - 1), max(0, math.floor(cy - r) - 1)
  x1, y1 = min(image_size, math.ceil(cx + r) + 1), min(image_size, math.ceil(cy + r) + 1)
  mask = Image.new("L", ((x1 - x0) * _SUPERSAMPLE, (y1 - y0) * _SUPERSAMPLE), 0)
  draw = ImageDraw.Draw(mask)
  cx, cy, r = (cx - x0) * _SUPERSAMPLE, (cy - y0) * _SUPERSAMPLE, r * _SUPERSAMPLE
  polygon = _outline(obj.shape, cx, cy, r)
  if polygon is None:
    draw.ellipse([cx - 0.9 * r, cy - 0.9 * r, cx + 0.9 * r, cy + 0.9 * r], fill=255)
  else:
    draw.polygon(polygon, fill=255)
  alpha = np.asarray(mask.resize((x1 - x0, y1 - y0), Image.Resampling.BOX), np.float32)[..., None] / 255.0
  window = pixels[y0:y1, x0:x1]
  window[...] = window * (1.0 - alpha) + np.asarray(COLOURS[obj.colour], np.float32) * alpha


def render(scene: Scene, image_size: int = 64) -> np.ndarray:
  """The scene as an (image_size, image_size, 3) uint8 RGB image."""
  pixels = _background_pixels(scene.background, image_size)
  for obj in scene.objects:
    _paint(pixels, obj)
  return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def encode_png(image: np.ndarray, compression: int = 6) -> bytes:
  """An (H, W, 3) uint8 image as a PNG file (8-bit RGB, no row filters, zlib). Four times faster than
  PIL's encoder on small images, and about as compact on these flat ones."""
  height, width, channels = image.shape
  if image.dtype != np.uint8 or channels != 3:
    raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.dtype} {image.shape}")
  rows = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, width * 3)], axis=1)

  def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

  header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, no filter, no interlace
  pixels = zlib.compress(rows.tobytes(), compression)
  return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


# -- Captions -------------------------------------------------------------------------------------------------


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


_FILLERS: tuple[tuple[str, ...], ...] = (
    ("an", "image", "of"), ("the", "picture", "shows"), ("there", "is"), ("there", "are"), ("and",), (",",))
_RELATION_WORDS: tuple[tuple[tuple[str, ...], str], ...] = tuple(
    (tuple(prefix) + tuple(relation.split()), relation) for relation in RELATIONS for prefix in (("is",), ()))
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
  if j < len(tokens) and tokens[j] in SIZES:
    size, j = tokens[j], j + 1
  if j < len(tokens) and tokens[j] in COLOURS:
    colour, j = tokens[j], j + 1
  if j < len(tokens) and tokens[j] in _SHAPE_OF_NOUN:
    return j + 1 - i, count, Mention(_SHAPE_OF_NOUN[tokens[j]], colour, size)
  return None


def parse_caption(text: str | bytes) -> ParsedCaption:
  """Reads a caption in the dataset's vocabulary back into mentioned objects, relations and counts.

  Noun phrases ("a small red circle", "the blue square", "two red circles") are objects; a count phrase
  expands into that many objects and a count statement. A relation ("[is] to the left of", "above", ...)
  binds the noun phrase right before it to the one right after it. "there is", "an image of", "the picture
  shows", "," and "and" are fillers. Anything else, including a relation with no noun phrase on either side,
  is kept as unparsed: the parser never fails.
  """
  if isinstance(text, bytes):
    text = text.decode("utf-8", errors="replace")
  tokens = tokenize(text)
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


# -- Dataset examples -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Example:
  scene: Scene
  png: bytes  # the rendered scene, PNG-encoded
  captions: list[str]


def make_example(seed: int, split_index: int, index: int, image_size: int = 64) -> Example:
  """Example `index` of a split, drawn from `np.random.default_rng([seed, split_index, index])` alone: the
  content of a split never depends on how its generation is sharded or ordered."""
  rng = np.random.default_rng([seed, split_index, index])
  scene = sample_scene(rng)
  return Example(scene, encode_png(render(scene, image_size)), captions(scene, rng))


def make_examples(seed: int, split_index: int, start: int, stop: int, image_size: int = 64) -> list[Example]:
  """Examples start .. stop - 1 of a split (one task of a process pool: this module imports no TensorFlow)."""
  return [make_example(seed, split_index, index, image_size) for index in range(start, stop)]
