"""Grounded metrics for synthetic scenes: a caption is parsed back into objects, relations and counts, and
each of them is checked against the objects actually in the image (precision, recall, CHAIR, exact match).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from capjax.scenes.grammar import CountStatement, Mention, ParsedCaption, Relation, parse_caption
from capjax.scenes.sample import SceneObject, spatial_relation
from capjax.strings import as_str

# What a scene's ground truth may look like: a list of object dicts {"shape", "colour", "size", "x", "y"}
# (str or bytes values), the columnar dict of lists that `tfds.data_source` returns for the "objects"
# feature, or SceneObjects.
Objects = Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]] | Sequence[SceneObject]


def as_scene_objects(objects: Objects) -> list[SceneObject]:
  """Ground truth in any of the forms `Objects` allows, as SceneObjects."""
  if isinstance(objects, Mapping):  # columnar: {"shape": [...], "colour": [...], ...}
    columns = {key: list(values) for key, values in objects.items()}
    objects = [dict(zip(columns, row)) for row in zip(*columns.values())]
  return [
      o if isinstance(o, SceneObject) else SceneObject(
          as_str(o["shape"]), as_str(o["colour"]), as_str(o["size"]), float(o["x"]), float(o["y"]))
      for o in objects
  ]


@dataclasses.dataclass(frozen=True)
class Grounding:
  """One caption checked against one image.

  matched: for each mentioned object, the index of the image object it is paired with (one image object per
    mention at most, as many pairs as possible), or None.
  hallucinated: for each mentioned object, whether no image object at all has its stated attributes.
  relations_hold, counts_hold: the truth of each relation and count statement.
  """
  parsed: ParsedCaption
  num_image_objects: int
  matched: tuple[int | None, ...]
  hallucinated: tuple[bool, ...]
  relations_hold: tuple[bool, ...]
  counts_hold: tuple[bool, ...]

  @property
  def num_matched(self) -> int:
    return sum(m is not None for m in self.matched)

  @property
  def exact(self) -> bool:
    """Every mention is a distinct image object, every image object is mentioned, every statement holds and
    every word was understood."""
    return (self.num_matched == len(self.matched) == self.num_image_objects and all(self.relations_hold)
            and all(self.counts_hold) and not self.parsed.unparsed)


def _match(mentions: Sequence[Mention], objects: Sequence[SceneObject]) -> list[int | None]:
  """A maximum one-to-one pairing of mentions with compatible objects (augmenting paths, mentions in order)."""
  compatible = [[k for k, o in enumerate(objects) if m.matches(o)] for m in mentions]
  owner: dict[int, int] = {}  # image object -> mention

  def augment(mention: int, seen: set[int]) -> bool:
    for k in compatible[mention]:
      if k not in seen:
        seen.add(k)
        if k not in owner or augment(owner[k], seen):
          owner[k] = mention
          return True
    return False

  for mention in range(len(mentions)):
    augment(mention, set())
  matched: list[int | None] = [None] * len(mentions)
  for k, mention in owner.items():
    matched[mention] = k
  return matched


def relation_holds(relation: Relation, objects: Sequence[SceneObject]) -> bool:
  """True when two distinct image objects fit the subject and the object and stand in that relation, by the
  rule the generator lays scenes out with (`capjax.scenes.sample.spatial_relation`)."""
  return any(
      a is not b and relation.subject.matches(a) and relation.object.matches(b) and
      spatial_relation(a, b) == relation.relation for a in objects for b in objects)


def count_holds(count: CountStatement, objects: Sequence[SceneObject]) -> bool:
  """True when exactly `count.count` image objects have the stated attributes."""
  return sum(count.mention.matches(o) for o in objects) == count.count


def ground(prediction: str | bytes, objects: Objects) -> Grounding:
  """Parses one caption and checks all it states against one image's objects."""
  parsed = parse_caption(prediction)
  image_objects = as_scene_objects(objects)
  return Grounding(
      parsed=parsed,
      num_image_objects=len(image_objects),
      matched=tuple(_match(parsed.objects, image_objects)),
      hallucinated=tuple(not any(m.matches(o) for o in image_objects) for m in parsed.objects),
      relations_hold=tuple(relation_holds(r, image_objects) for r in parsed.relations),
      counts_hold=tuple(count_holds(c, image_objects) for c in parsed.counts))


def _ratio(numerator: int, denominator: int) -> float:
  return numerator / denominator if denominator else 0.0


def grounded_metrics(predictions: Sequence[str | bytes], scenes: Sequence[Objects]) -> dict[str, float]:
  """Pooled grounded metrics of captions against their images' objects (`scenes`: one `Objects` each).

  object_precision: mentioned objects paired with a distinct image object having every stated attribute
    (unstated attributes match anything), over all mentioned objects.
  object_recall: image objects paired with a mention, over all image objects.
  relation_accuracy: relation and count statements that hold, over all such statements.
  exact_match: captions for which `Grounding.exact` is true, over all captions.
  chair_i: hallucinated mentions (no image object has the stated attributes at all: CHAIR's "object not in
    the image"), over all mentions. Unlike 1 - precision, it does not count a repeated mention of an object
    the image holds once.
  chair_s: captions with at least one hallucinated mention, over all captions.
  Every ratio whose denominator is zero (no mentions, no statements, no captions) is 0.0: a model that states
  nothing gets no credit for precision or relations, and a hallucination rate of 0.
  """
  if len(predictions) != len(scenes):
    raise ValueError(f"{len(predictions)} predictions for {len(scenes)} scenes: pass one caption per scene")
  groundings = [ground(p, o) for p, o in zip(predictions, scenes)]
  mentions = sum(len(g.matched) for g in groundings)
  matched = sum(g.num_matched for g in groundings)
  statements = sum(len(g.relations_hold) + len(g.counts_hold) for g in groundings)
  true_statements = sum(sum(g.relations_hold) + sum(g.counts_hold) for g in groundings)
  hallucinated = sum(sum(g.hallucinated) for g in groundings)
  return {
      "object_precision": _ratio(matched, mentions),
      "object_recall": _ratio(matched, sum(g.num_image_objects for g in groundings)),
      "relation_accuracy": _ratio(true_statements, statements),
      "exact_match": _ratio(sum(g.exact for g in groundings), len(groundings)),
      "chair_i": _ratio(hallucinated, mentions),
      "chair_s": _ratio(sum(any(g.hallucinated) for g in groundings), len(groundings)),
  }


def annotate_caption(prediction: str | bytes, objects: Objects) -> list[tuple[str, bool]]:
  """The caption as (span, correct) pairs in reading order, for galleries that colour mistakes.

  An object span is correct when its mention is paired with an image object; a count span when the count
  holds and all the objects it mentions are paired; a relation span when the relation holds. Fillers
  ("there is", ",", "and") are correct; unparsed words are not.
  """
  grounding = ground(prediction, objects)
  annotated = []
  for span in grounding.parsed.spans:
    paired = all(grounding.matched[k] is not None for k in span.objects)
    if span.kind == "object":
      correct = paired
    elif span.kind == "count":
      correct = paired and grounding.counts_hold[span.statement]
    elif span.kind == "relation":
      correct = grounding.relations_hold[span.statement]
    else:
      correct = span.kind == "filler"
    annotated.append((span.text, correct))
  return annotated
