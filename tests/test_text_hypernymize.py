"""Hypernymization, step by step, on realistic alt-texts; the paper's examples first."""

import pytest

from capjax.text.annotate import Annotator, normalize_text
from capjax.text.config import HypernymConfig
from capjax.text.filters import Reason
from capjax.text.hypernymize import Hypernymizer, indefinite_article, pluralize
from capjax.text.resolvers import PERSON, PLACE, Concept, ChainResolver, default_resolver


@pytest.fixture(scope="module")
def annotator():
  return Annotator()


@pytest.fixture(scope="module")
def hypernymizer(annotator):
  return Hypernymizer(HypernymConfig(), annotator)


@pytest.fixture(scope="module")
def run(annotator, hypernymizer):
  def run(text):
    result = hypernymizer(annotator.annotate(normalize_text(text)))
    return result.caption if result.reason is None else result.reason
  return run


def test_paper_example_actors_attend_the_premiere(annotator, hypernymizer):
  result = hypernymizer(annotator.annotate("Harrison Ford and Calista Flockhart attend the premiere at Hollywood"))
  assert result.caption == "actors attend the premiere"
  assert result.concepts == ("actor",)
  assert result.reason is None


def test_paper_example_airline_and_aircraft_maker_modify_the_aircraft(annotator, hypernymizer):
  result = hypernymizer(annotator.annotate(
      "A British Airways Airbus A319 aircraft takes off from Heathrow Airport on September 23, 2017."))
  assert result.caption == "an aircraft takes off from airport ."
  assert result.concepts == ("airport",)


def test_wordnet_and_first_names_alone_make_them_people(annotator):
  offline = Hypernymizer(HypernymConfig(use_seed_entities=False), annotator)
  result = offline(annotator.annotate("Harrison Ford and Calista Flockhart attend the premiere at Hollywood"))
  # "Harrison" is a first name, "Calista Flockhart" takes the role of its conjunct, Hollywood is a WordNet
  # city district whose place phrase is dropped.
  assert (result.caption, result.concepts) == ("people attend the premiere", ("person",))


@pytest.mark.parametrize("text, caption", [
    ("Two dogs play with a ball in the park.", "dogs play with a ball in the park ."),
    ("Three girls with 2 kg of apples at the market.", "girls with apples at the market ."),
    ("A woman holds a 500 ml bottle of water on the beach.", "a woman holds a bottle of water on the beach ."),
    ("A 3-bedroom house for sale on the hill.", "a bedroom house for sale on the hill ."),
])
def test_counts_and_measurement_units_are_dropped(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("President Barack Obama waves to the crowd at the airport in 2012.", "president waves to the crowd at the airport ."),
    ("The crowd at the stadium on Monday afternoon.", "the crowd at the stadium ."),
    ("The parade on the street, September 2017.", "the parade on the street ."),
    ("A car parked in the street of New York on 23rd of June.", "a car parked in the street of city ."),
])
def test_temporal_expressions_are_dropped(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Two dogs play with a ball in the park in Franklin, Tennessee.", "dogs play with a ball in the park ."),
    ("Fans wait outside the hotel in Los Angeles and New York.", "fans wait outside the hotel ."),
    ("Visitors at the Eiffel Tower in Paris (France).", "visitors at the tower ."),
    ("Crowds at the festival in Paris, France in 2017.", "crowds at the festival ."),
])
def test_place_phrases_are_dropped(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Tourists walk through the streets of Paris in the summer.", "tourists walk through the streets of city in the summer ."),
    ("Elvis Presley on stage in front of a crowd", "rock star on stage in front of a crowd"),
    ("The view of the Thames from the top of the tower.", "the view of the river from the top of the tower ."),
    ("A view of the Golden Gate Bridge from the water.", "a view of the bridge from the water ."),
    ("Students at Harvard University in the spring.", "students at university in the spring ."),
    ("Fans cheer for Manchester United at the stadium.", "fans cheer for football team at the stadium ."),
])
def test_named_entities_become_hypernyms(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Actor Tom Hanks arrives for the premiere of the film in London.", "actor arrives for the premiere of the film ."),
    ("The actor Harrison Ford signs autographs for fans.", "the actor signs autographs for fans ."),
    ("Model Emma Wilson performs at the premiere.", "model performs at the premiere ."),
    ("Singer Taylor Swift performs on stage during the concert.", "singer performs on stage during the concert ."),
])
def test_people_take_the_occupation_named_beside_them(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("A Boeing 747 at the gate.", "an aircraft at the gate ."),
    ("A BMW X5 parked in the street.", "a car parked in the street ."),
])
def test_a_makers_name_with_a_model_number_is_its_product(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Harrison Ford , Tom Hanks , and Meryl Streep at the gala", "actors at the gala"),
    ("People walk in the streets of Paris, London and Berlin.", "people walk in the streets of cities ."),
    ("Olivia and Emma play in the garden of the house.", "people play in the garden of the house ."),
    ("Elvis Presley and Harrison Ford at the gala.", "rock star and actor at the gala ."),
])
def test_coordinated_identical_hypernyms_merge_into_a_plural(run, text, caption):
  assert run(text) == caption


def test_proper_nouns_wordnet_knows_as_classes_stay_as_written(run):
  assert run("A Christmas tree in the living room of the house.") == "a christmas tree in the living room of the house ."


def test_punctuation_and_quotes_are_repaired(run):
  assert run('On Monday, the "big" parade moves through the street.') == "the big parade moves through the street ."


@pytest.mark.parametrize("text, reason", [
    ("The tower in Paris on May 5, 2016.", Reason.TOO_SHORT_AFTER_HYPERNYMIZATION),
    ("Ducks swim on the lake and in Paris", Reason.FRAGMENTED),
    ("Fans greet Zorblax Quenth at the airport.", Reason.UNRESOLVED_ENTITY),
])
def test_too_short_fragmented_or_unknown_results_are_discarded(run, text, reason):
  assert run(text) == reason


def test_a_knowledge_graph_backend_plugs_in_as_a_resolver(annotator):
  class KnowledgeGraph:
    def resolve(self, words):
      return {"Zorblax Quenth": Concept("astronaut", PERSON), "Hollywood": Concept("festival", PLACE)}.get(
          " ".join(words))

  resolver = default_resolver(annotator, knowledge_graph=KnowledgeGraph())
  hypernymizer = Hypernymizer(HypernymConfig(drop_place_concepts=("city",)), annotator, resolver)
  result = hypernymizer(annotator.annotate("Fans greet Zorblax Quenth at the premiere at Hollywood."))
  assert (result.caption, result.concepts) == ("fans greet astronaut at the premiere at festival .",
                                               ("astronaut", "festival"))


def test_an_empty_resolver_chain_leaves_every_entity_unresolved(annotator):
  hypernymizer = Hypernymizer(HypernymConfig(), annotator, ChainResolver([]))
  assert hypernymizer(annotator.annotate("Tourists walk through the streets of Paris.")).reason == (
      Reason.UNRESOLVED_ENTITY)
  keep = Hypernymizer(HypernymConfig(discard_unresolved=False), annotator, ChainResolver([]))
  assert keep(annotator.annotate("Tourists walk through the streets of Paris.")).caption == (
      "tourists walk through the streets of paris .")


@pytest.mark.parametrize("noun, plural", [
    ("actor", "actors"), ("person", "people"), ("city", "cities"), ("church", "churches"), ("woman", "women"),
    ("businessman", "businessmen"), ("football player", "football players"), ("day", "days"),
    # The hand-written rules this replaced gave "aircrafts", "sheeps", "serieses", "crisises", "analysises".
    ("aircraft", "aircraft"), ("sheep", "sheep"), ("series", "series"), ("crisis", "crises"), ("analysis", "analyses"),
])
def test_pluralize(noun, plural):
  assert pluralize(noun) == plural


@pytest.mark.parametrize("word, article", [
    ("aircraft", "an"), ("actor", "an"), ("city", "a"), ("university", "a"), ("hour", "an"), ("european", "a"),
    # The spelling rules this replaced gave "a urn", "a urgency", "an utensil", "an ukulele", "an UFO".
    ("urn", "an"), ("urgency", "an"), ("utensil", "a"), ("ukulele", "a"), ("UFO", "a"),
])
def test_indefinite_article(word, article):
  assert indefinite_article(word) == article
