"""Specification of the synthetic scenes: sampling, layout rules, rendering, caption templates and the
caption parser (round trip on every template, and hostile input)."""

import io
import itertools

import numpy as np
import pytest
from PIL import Image

from capjax import scenes
from capjax.scenes import grammar, render, sample
from capjax.scenes.grammar import CountStatement, Mention, Relation, Span, parse_caption
from capjax.scenes.sample import BOUNDING_RADIUS, Scene, SceneObject

PLAIN = sample.Background("solid", "light", (230, 230, 230), (230, 230, 230), "horizontal", 0)


def scene(*objects: tuple[str, str, str, float, float]) -> Scene:
  return Scene(tuple(SceneObject(*o) for o in objects), PLAIN)


@pytest.fixture(scope="module")
def many_scenes() -> list[tuple[Scene, list[str]]]:
  """1,500 scenes with their captions, as the builder draws them."""
  out = []
  for index in range(1500):
    rng = np.random.default_rng([0, 0, index])
    s = sample.sample_scene(rng)
    out.append((s, grammar.captions(s, rng)))
  return out


# -- Sampling and layout --------------------------------------------------------------------------------------


def test_same_seed_gives_same_scene_image_and_captions():
  first, second = np.random.default_rng([3, 1, 42]), np.random.default_rng([3, 1, 42])
  scene_a, scene_b = sample.sample_scene(first), sample.sample_scene(second)
  assert scene_a == scene_b
  assert render.render(scene_a).tobytes() == render.render(scene_b).tobytes()
  assert grammar.captions(scene_a, first) == grammar.captions(scene_b, second)


def test_make_example_depends_only_on_seed_split_and_index():
  example = scenes.make_example(0, 2, 17)
  assert example == scenes.make_example(0, 2, 17)
  assert scenes.make_examples(0, 2, 15, 18)[2] == example
  assert example != scenes.make_example(0, 1, 17)
  assert example != scenes.make_example(1, 2, 17)


def test_object_counts_are_one_to_three_in_the_stated_proportions(many_scenes):
  counts = np.bincount([len(s.objects) for s, _ in many_scenes], minlength=4)
  assert counts[0] == 0
  assert counts[1:].sum() == 1500
  assert abs(counts[1] / 1500 - 0.2) < 0.04 and abs(counts[2] / 1500 - 0.4) < 0.04


def test_every_attribute_value_occurs(many_scenes):
  objects = [o for s, _ in many_scenes for o in s.objects]
  assert {o.shape for o in objects} == set(sample.SHAPES)
  assert {o.colour for o in objects} == set(sample.COLOURS)
  assert {o.size for o in objects} == set(sample.SIZES)
  assert {s.background.description for s, _ in many_scenes} == {
      f"{tone} {kind}" for tone in ("light", "dark") for kind in ("solid", "gradient", "noise")}


def test_objects_never_overlap_and_stay_inside_the_image(many_scenes):
  for s, _ in many_scenes:
    for a, b in itertools.combinations(s.objects, 2):
      gap = np.hypot(a.x - b.x, a.y - b.y) - BOUNDING_RADIUS[a.size] - BOUNDING_RADIUS[b.size]
      assert gap >= 3 / 64
    for o in s.objects:
      assert BOUNDING_RADIUS[o.size] + 2 / 64 <= min(o.x, o.y, 1 - o.x, 1 - o.y)


def test_one_axis_of_every_displacement_dominates_by_the_margin(many_scenes):
  for s, _ in many_scenes:
    for a, b in itertools.combinations(s.objects, 2):
      assert abs(abs(a.x - b.x) - abs(a.y - b.y)) >= 5 / 64
      if len(s.objects) == 3:
        assert abs(a.x - b.x) >= 5 / 64


def test_spatial_relation_follows_the_dominant_axis():
  a = SceneObject("circle", "red", "small", 0.3, 0.5)
  assert sample.spatial_relation(a, SceneObject("square", "blue", "small", 0.8, 0.6)) == "to the left of"
  assert sample.spatial_relation(a, SceneObject("square", "blue", "small", 0.1, 0.4)) == "to the right of"
  assert sample.spatial_relation(a, SceneObject("square", "blue", "small", 0.4, 0.9)) == "above"
  assert sample.spatial_relation(a, SceneObject("square", "blue", "small", 0.2, 0.1)) == "below"


def test_sample_scene_honours_the_number_of_objects_and_rejects_four():
  rng = np.random.default_rng(0)
  assert [len(sample.sample_scene(rng, n).objects) for n in (1, 2, 3)] == [1, 2, 3]
  with pytest.raises(ValueError, match="one to three"):
    sample.sample_scene(rng, 4)


# -- Rendering ------------------------------------------------------------------------------------------------


def test_render_is_uint8_rgb_of_the_requested_size():
  s = sample.sample_scene(np.random.default_rng(5))
  assert render.render(s).shape == (64, 64, 3)
  assert render.render(s).dtype == np.uint8
  assert render.render(s, image_size=96).shape == (96, 96, 3)


def test_each_object_is_painted_in_its_colour_at_its_centre():
  s = scene(("circle", "red", "small", 0.2, 0.25), ("triangle", "blue", "large", 0.75, 0.3),
            ("diamond", "orange", "small", 0.45, 0.8))
  image = render.render(s)
  for o in s.objects:
    assert tuple(image[int(o.y * 64), int(o.x * 64)]) == sample.COLOURS[o.colour]
  assert tuple(image[0, 0]) == (230, 230, 230)
  assert tuple(image[63, 63]) == (230, 230, 230)


def test_large_objects_cover_about_three_times_the_pixels_of_small_ones():
  for shape in sample.SHAPES:
    small = render.render(scene((shape, "red", "small", 0.5, 0.5)))
    large = render.render(scene((shape, "red", "large", 0.5, 0.5)))
    covered_small = int((small != 230).any(-1).sum())
    covered_large = int((large != 230).any(-1).sum())
    assert 2.4 < covered_large / covered_small < 3.6, shape


def test_encode_png_decodes_to_the_same_pixels():
  image = render.render(sample.sample_scene(np.random.default_rng(11)))
  decoded = np.asarray(Image.open(io.BytesIO(render.encode_png(image))))
  np.testing.assert_array_equal(decoded, image)
  with pytest.raises(ValueError, match="uint8"):
    render.encode_png(image.astype(np.float32))


# -- Captions -------------------------------------------------------------------------------------------------


def test_canonical_caption_of_one_object():
  assert grammar.canonical_caption(scene(("circle", "red", "small", 0.5, 0.5))) == "a small red circle"


def test_canonical_caption_of_two_objects_names_the_left_one_first_whatever_their_order():
  left, right = ("circle", "red", "small", 0.2, 0.5), ("square", "blue", "large", 0.7, 0.4)
  expected = "a small red circle to the left of a large blue square"
  assert grammar.canonical_caption(scene(left, right)) == expected
  assert grammar.canonical_caption(scene(right, left)) == expected


def test_canonical_caption_of_a_stacked_pair_names_the_upper_one_first():
  lower, upper = ("triangle", "green", "large", 0.5, 0.75), ("diamond", "yellow", "small", 0.45, 0.2)
  assert grammar.canonical_caption(scene(lower, upper)) == "a small yellow diamond above a large green triangle"


def test_canonical_caption_of_three_objects_lists_them_left_to_right():
  s = scene(("square", "blue", "large", 0.5, 0.7), ("circle", "red", "small", 0.2, 0.2),
            ("triangle", "green", "small", 0.8, 0.25))
  assert grammar.canonical_caption(s) == "a small red circle , a large blue square and a small green triangle"


def test_paraphrases_of_two_objects():
  s = scene(("square", "blue", "large", 0.7, 0.4), ("circle", "red", "small", 0.2, 0.5))
  assert grammar.paraphrases(s) == [
      "there is a small red circle to the left of a large blue square",
      "the large blue square is to the right of the small red circle",
      "one small red circle and one large blue square",
      "small red circle to the left of large blue square",
      "an image of a small red circle to the left of a large blue square",
  ]


def test_paraphrases_of_three_objects_with_a_repeated_kind_add_a_count():
  s = scene(("circle", "red", "small", 0.2, 0.2), ("square", "orange", "large", 0.5, 0.7),
            ("circle", "red", "small", 0.8, 0.25))
  assert grammar.canonical_caption(s) == "a small red circle , a large orange square and a small red circle"
  assert grammar.paraphrases(s) == [
      "one small red circle , one large orange square and one small red circle",
      "small red circle , large orange square and small red circle",
      "the red circle , the orange square and the red circle",
      "an image of a red circle , an orange square and a red circle",
      "there is a red circle , an orange square and a red circle",
      "two small red circles and a large orange square",
  ]


def test_count_captions_state_the_size_only_when_the_group_shares_it():
  same = scene(("circle", "red", "small", 0.2, 0.5), ("circle", "red", "small", 0.7, 0.4))
  mixed = scene(("circle", "red", "small", 0.2, 0.5), ("circle", "red", "large", 0.7, 0.4))
  three = scene(("triangle", "blue", "small", 0.2, 0.2), ("triangle", "blue", "large", 0.5, 0.7),
                ("triangle", "blue", "small", 0.8, 0.25))
  assert grammar.paraphrases(same)[-1] == "two small red circles"
  assert grammar.paraphrases(mixed)[-1] == "two red circles"
  assert grammar.paraphrases(three)[-1] == "three blue triangles"


def test_captions_put_the_canonical_wording_first_then_three_distinct_paraphrases(many_scenes):
  for s, caps in many_scenes:
    assert len(caps) == 4
    assert caps[0] == grammar.canonical_caption(s)
    assert len(set(caps)) == 4
    assert set(caps[1:]) <= set(grammar.paraphrases(s))


def test_captions_are_short_lowercase_and_in_the_vocabulary(many_scenes):
  vocabulary = set(grammar.VOCABULARY)
  for _, caps in many_scenes:
    for caption in caps:
      words = caption.split(" ")
      assert caption == caption.lower() == " ".join(caption.split())
      assert len(words) <= 15
      assert set(words) <= vocabulary


def test_every_vocabulary_word_is_used(many_scenes):
  used = {w for _, caps in many_scenes for c in caps for w in c.split()}
  assert used == set(grammar.VOCABULARY)


def test_only_the_canonical_caption_starts_with_a(many_scenes):
  for _, caps in many_scenes:
    assert caps[0].startswith("a ")
    assert not any(c.split()[0] == "a" for c in caps[1:])


def test_every_paraphrase_occurs(many_scenes):
  starts = {" ".join(c.split()[:2]) for _, caps in many_scenes for c in caps[1:]}
  assert {"there is", "an image", "the picture", "one small", "small red", "two red", "three red"} <= starts


# -- Parsing: the templates -----------------------------------------------------------------------------------


def test_parse_relation_caption_exactly():
  parsed = parse_caption("the large blue square is to the right of the small red circle")
  square, circle = Mention("square", "blue", "large"), Mention("circle", "red", "small")
  assert parsed.objects == (square, circle)
  assert parsed.relations == (Relation(square, "to the right of", circle),)
  assert parsed.counts == ()
  assert parsed.unparsed == ()
  assert parsed.spans == (Span("the large blue square", "object", (0,)),
                          Span("is to the right of", "relation", (), 0),
                          Span("the small red circle", "object", (1,)))


def test_parse_count_caption_expands_into_objects_and_a_count_statement():
  parsed = parse_caption("two small red circles and a large orange square")
  circle = Mention("circle", "red", "small")
  assert parsed.objects == (circle, circle, Mention("square", "orange", "large"))
  assert parsed.counts == (CountStatement(2, circle),)
  assert parsed.spans == (Span("two small red circles", "count", (0, 1), 0), Span("and", "filler"),
                          Span("a large orange square", "object", (2,)))


def test_parse_list_caption_with_unstated_sizes_and_fillers():
  parsed = parse_caption("an image of a red circle , an orange square and a green triangle")
  assert parsed.objects == (Mention("circle", "red"), Mention("square", "orange"), Mention("triangle", "green"))
  assert parsed.relations == () and parsed.counts == () and parsed.unparsed == ()
  assert [s.kind for s in parsed.spans] == ["filler", "object", "filler", "object", "filler", "object"]


def _pairing_exists(mentions, objects) -> bool:
  return len(mentions) == len(objects) and any(
      all(m.matches(o) for m, o in zip(mentions, perm)) for perm in itertools.permutations(objects))


def test_every_caption_parses_back_to_the_scene(many_scenes):
  for s, caps in many_scenes:
    for caption in caps:
      parsed = parse_caption(caption)
      assert parsed.unparsed == (), caption
      assert all(m.colour is not None for m in parsed.objects), caption
      assert _pairing_exists(parsed.objects, s.objects), caption
      for r in parsed.relations:
        assert any(r.subject.matches(a) and r.object.matches(b) and sample.spatial_relation(a, b) == r.relation
                   for a, b in itertools.permutations(s.objects, 2)), caption
      for c in parsed.counts:
        assert sum(c.mention.matches(o) for o in s.objects) == c.count, caption


def test_canonical_caption_parses_back_to_every_attribute_and_the_relation(many_scenes):
  for s, caps in many_scenes:
    parsed = parse_caption(caps[0])
    stated = sorted((m.shape, m.colour, m.size) for m in parsed.objects)
    assert stated == sorted((o.shape, o.colour, o.size) for o in s.objects)
    if len(s.objects) == 2:
      first, relation, second = grammar.ordered_pair(s)
      assert parsed.relations == (Relation(Mention(first.shape, first.colour, first.size), relation,
                                           Mention(second.shape, second.colour, second.size)),)
    else:
      assert parsed.relations == ()


# -- Parsing: hostile input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_parse_of_nothing_is_empty(text):
  assert parse_caption(text) == grammar.ParsedCaption((), (), (), (), ())


def test_unknown_tokens_are_unparsed():
  parsed = parse_caption("<UNK> a small red circle <unk>")
  assert parsed.objects == (Mention("circle", "red", "small"),)
  assert parsed.unparsed == ("<unk>", "<unk>")


def test_incomplete_phrases_are_unparsed_word_by_word():
  assert parse_caption("a small red").unparsed == ("a", "small", "red")
  assert parse_caption("to the left of a red circle").unparsed == ("to", "the", "left", "of")
  assert parse_caption("a red circle above").unparsed == ("above",)
  assert parse_caption("a red circle above").relations == ()


def test_relation_binds_a_count_phrase_and_punctuation_is_split():
  parsed = parse_caption("Two red circles above a blue square.")
  assert parsed.counts == (CountStatement(2, Mention("circle", "red")),)
  assert parsed.relations == (Relation(Mention("circle", "red"), "above", Mention("square", "blue")),)
  assert parsed.unparsed == (".",)


def test_garbage_and_bytes_never_fail():
  for text in ["¿¡ xyz 123 ,,, ..", "circle circle above above", "a a a a", "two", "is is to the", "\x00\xff",
               b"a red circle \xff\xfe", "the picture shows", "there is there are"]:
    parsed = parse_caption(text)
    assert all(s.text for s in parsed.spans)
  assert parse_caption(b"a red circle").objects == (Mention("circle", "red"),)


def test_very_long_caption_parses_every_repetition():
  parsed = parse_caption("a red circle to the left of a blue square and " * 5000)
  assert len(parsed.objects) == 10000
  assert len(parsed.relations) == 5000
  assert parsed.unparsed == ()
