"""Synthetic scenes as data: the shapes, colours and sizes, the layout rules, and the sampler that draws a
random scene whose spatial relations are never a close call, in either domain (`DOMAINS`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond")
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

# The scene distributions. "plain" is synthetic_scenes' own: near-grey backgrounds, the radii above, 1-3 objects
# (20/40/40%). "vivid", the cross-domain one: pale tinted backgrounds (solid or striped), a wider gap between the
# sizes (5 and 14 px at 64 px), fewer objects (1-3 at 1/3, 1/2, 1/6). Shapes and colours are the same in both.
DOMAINS: tuple[str, ...] = ("plain", "vivid")
RADII: dict[str, dict[str, float]] = {"plain": BOUNDING_RADIUS, "vivid": {"small": 5 / 64, "large": 14 / 64}}
OBJECT_COUNTS: dict[str, tuple[int, ...]] = {"plain": (1, 2, 2, 3, 3), "vivid": (1, 1, 2, 2, 2, 3)}
# The vivid backgrounds: pale tints, named in its captions ("on a pink background"); none is one of COLOURS.
TINTS: dict[str, tuple[int, int, int]] = {
    "pink": (248, 205, 218),
    "mint": (200, 238, 212),
    "peach": (250, 222, 196),
    "lilac": (222, 208, 245),
    "cream": (246, 240, 214),
}

LEFT_OF, RIGHT_OF, ABOVE, BELOW = "to the left of", "to the right of", "above", "below"
RELATIONS: tuple[str, ...] = (LEFT_OF, RIGHT_OF, ABOVE, BELOW)
INVERSE_RELATION: dict[str, str] = {LEFT_OF: RIGHT_OF, RIGHT_OF: LEFT_OF, ABOVE: BELOW, BELOW: ABOVE}

# Layout rules (fractions of the image side). Between any two objects one axis of displacement dominates
# the other by RELATION_MARGIN, so that the relation `spatial_relation` reads off is never a close call.
RELATION_MARGIN = 5 / 64
# In three-object scenes the centres are also this far apart horizontally: captions list them left to right.
ORDER_GAP = 5 / 64
OBJECT_GAP = 3 / 64  # free space between the bounding circles of two objects
BORDER = 2 / 64  # free space between a bounding circle and the image edge


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
  """A background. plain: near-grey, `kind` solid, gradient or noise, `tone` light or dark. vivid: `kind` solid or
  stripes (bands of rgb and rgb_end across `direction`), `tone` the name of its tint in TINTS."""
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
  """What one image shows: its objects (in no particular order) and its background; `domain` (one of DOMAINS)
  gives the radius of each size (RADII)."""
  objects: tuple[SceneObject, ...]
  background: Background
  domain: str = "plain"


def spatial_relation(a: SceneObject, b: SceneObject) -> str:
  """How `a` stands to `b` along the dominant axis of their displacement: "a is <relation> b"."""
  dx, dy = b.x - a.x, b.y - a.y
  if abs(dx) >= abs(dy):
    return LEFT_OF if dx > 0 else RIGHT_OF
  return ABOVE if dy > 0 else BELOW


def is_unambiguous_layout(objects: Sequence[SceneObject], radius: Mapping[str, float] = BOUNDING_RADIUS) -> bool:
  """The generator's layout rules: no overlap, a clear dominant axis per pair, and a clear left-to-right order
  when there are three objects (`radius`: a domain's RADII)."""
  for a, b in itertools.combinations(objects, 2):
    dx, dy = abs(b.x - a.x), abs(b.y - a.y)
    if math.hypot(dx, dy) < radius[a.size] + radius[b.size] + OBJECT_GAP:
      return False
    if abs(dx - dy) < RELATION_MARGIN:
      return False
    if len(objects) >= 3 and dx < ORDER_GAP:
      return False
  return all(radius[o.size] + BORDER <= c <= 1 - radius[o.size] - BORDER
             for o in objects for c in (o.x, o.y))



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


def _sample_tinted_background(rng: np.random.Generator) -> Background:
  """A vivid background: a tint (jittered a little), solid or with stripes 25 levels darker."""
  kind = _pick(rng, ("solid", "solid", "solid", "stripes", "stripes"))
  tint = _pick(rng, tuple(TINTS))
  rgb = tuple(min(255, max(0, c + d)) for c, d in zip(TINTS[tint], rng.integers(-6, 7, size=3).tolist()))
  rgb_end = tuple(c - 25 for c in rgb) if kind == "stripes" else rgb
  direction = _pick(rng, ("horizontal", "vertical"))
  return Background(kind, tint, rgb, rgb_end, direction, 0)


def _place(rng: np.random.Generator, sizes: Sequence[str], radius: Mapping[str, float],
           candidates: int = 64) -> np.ndarray | None:
  """Centres (n, 2) for objects of these sizes that obey the layout rules, or None if a batch of random
  candidates holds none. Candidates are drawn and checked in bulk: rejection one at a time is slow."""
  radii = np.asarray([radius[s] for s in sizes])
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


def sample_scene(rng: np.random.Generator, num_objects: int | None = None, domain: str = "plain") -> Scene:
  """A random scene of `domain` whose layout satisfies `is_unambiguous_layout`; deterministic given the state of
  `rng`."""
  if domain not in DOMAINS:
    raise ValueError(f"unknown scene domain {domain!r}; expected one of {DOMAINS}")
  radius, counts = RADII[domain], OBJECT_COUNTS[domain]
  if num_objects is None:
    num_objects = counts[int(rng.integers(len(counts)))]
  if not 1 <= num_objects <= 3:
    raise ValueError(f"a scene holds one to three objects, not {num_objects}")
  while True:
    attributes = _sample_attributes(rng, num_objects)
    centres = _place(rng, [size for _, _, size in attributes], radius)
    if centres is None:
      continue
    objects = tuple(
        SceneObject(shape, colour, size, float(x), float(y))
        for (shape, colour, size), (x, y) in zip(attributes, centres))
    if is_unambiguous_layout(objects, radius):  # the same rules, checked once more in plain floats
      background = _sample_background(rng) if domain == "plain" else _sample_tinted_background(rng)
      return Scene(objects, background, domain)

