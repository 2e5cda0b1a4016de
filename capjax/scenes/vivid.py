"""The vivid domain's caption style: the second synthetic domain words its scenes without articles in the canonical
caption, with "little"/"big", "left of"/"over", and the background named ("on a pink background").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from capjax.scenes import grammar
from capjax.scenes.sample import INVERSE_RELATION, TINTS, Scene, SceneObject

SIZE_WORDS: dict[str, str] = {size: word for word, size in grammar.VIVID_SIZES.items()}  # "small" -> "little"

# Every word the vivid captions use, punctuation included.
VOCABULARY: tuple[str, ...] = (
    "a", "two", "three", *grammar.VIVID_SIZES, *grammar.COLOURS, *grammar.SHAPES, *grammar.PLURALS.values(),
    "left", "right", "of", "over", "under", "on", "background", "stripes", "with", "photo", "and", ",", *TINTS,
)  # yapf: disable


def noun_phrase(obj: SceneObject, determiner: str | None = None, with_size: bool = True) -> list[str]:
  """["big", "red", "circle"]; ["a", "big", "red", "circle"] with a determiner; no size word without with_size."""
  words = ([SIZE_WORDS[obj.size]] if with_size else []) + [obj.colour, obj.shape]
  if determiner == "a" and words[0][0] in "aeiou":
    determiner = "an"
  return words if determiner is None else [determiner] + words


def _count_phrase(group: Sequence[SceneObject]) -> list[str]:
  """["two", "little", "red", "circles"]: the size is stated only when the whole group shares it."""
  sizes = {o.size for o in group}
  return ([{2: "two", 3: "three"}[len(group)]] + ([SIZE_WORDS[group[0].size]] if len(sizes) == 1 else []) +
          [group[0].colour, grammar.PLURALS[group[0].shape]])


def setting(scene: Scene) -> list[str]:
  """Where the objects are: ["on", "a", "pink", "background"] or ["on", "pink", "stripes"]."""
  tint = scene.background.tone
  return ["on", "a", tint, "background"] if scene.background.kind == "solid" else ["on", tint, "stripes"]


def _join(phrases: Sequence[list[str]]) -> list[str]:
  """Phrases as "x", "x and y" or "x , y and z"."""
  words = list(phrases[0])
  for k, phrase in enumerate(phrases[1:], start=1):
    words += ([","] if k < len(phrases) - 1 else ["and"]) + phrase
  return words


def _setting_with(scene: Scene) -> list[str]:
  """["a", "pink", "background", "with"] or ["pink", "stripes", "with"]: the setting leading the caption."""
  return setting(scene)[1:] + ["with"]


def _objects(scene: Scene, determiner: str | None = None, with_size: bool = True) -> list[str]:
  """The objects as one phrase: a relation for two ("big red circle left of little blue square"), a list left to
  right for one or three. Three objects take no article (a caption stays within 15 words, as the plain ones)."""
  if len(scene.objects) == 3:
    determiner = None
  if len(scene.objects) == 2:
    first, relation, second = grammar.ordered_pair(scene)
    return (noun_phrase(first, determiner, with_size) + grammar.VIVID_RELATIONS[relation].split() +
            noun_phrase(second, determiner, with_size))
  ordered = sorted(scene.objects, key=lambda o: o.x)
  return _join([noun_phrase(o, determiner, with_size) for o in ordered])


def canonical_caption(scene: Scene) -> str:
  """"big red circle left of little blue square on a pink background": the wording every reference set holds."""
  return " ".join(_objects(scene) + setting(scene))


def paraphrases(scene: Scene) -> list[str]:
  """The other wordings: four, and a count caption when a colour and shape repeat. Every reference set holds the
  canonical wording but only some of these, so it is the most frequent one for every kind of image."""
  forms = [
      ["photo", "of"] + _objects(scene, "a"),
      _setting_with(scene) + _objects(scene, "a"),
      _objects(scene, None, with_size=False) + setting(scene),
      _objects(scene),
  ]
  if len(scene.objects) == 2:  # the pair from the other side: "little blue square right of big red circle"
    first, relation, second = grammar.ordered_pair(scene)
    forms[3] = noun_phrase(second) + grammar.VIVID_RELATIONS[INVERSE_RELATION[relation]].split() + noun_phrase(first)
  groups: dict[tuple[str, str], list[SceneObject]] = {}
  for obj in sorted(scene.objects, key=lambda o: o.x):
    groups.setdefault((obj.colour, obj.shape), []).append(obj)
  ordered_groups = sorted(groups.values(), key=lambda g: (len(g) == 1, g[0].x))
  if len(ordered_groups[0]) > 1:
    forms.append(_join([_count_phrase(g) if len(g) > 1 else noun_phrase(g[0])
                                for g in ordered_groups]) + setting(scene))
  return [" ".join(words) for words in forms]


def captions(scene: Scene, rng: np.random.Generator, num_paraphrases: int = 3) -> list[str]:
  """The canonical caption first, then `num_paraphrases` of `paraphrases` (as `grammar.captions`)."""
  pool = paraphrases(scene)
  chosen = rng.choice(len(pool), size=min(num_paraphrases, len(pool)), replace=False)
  return [canonical_caption(scene)] + [pool[k] for k in chosen]
