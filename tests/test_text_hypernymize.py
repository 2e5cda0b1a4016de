"""Hypernymization, step by step, on realistic alt-texts; the paper's examples first."""

import pytest

from capjax.text.annotate import Annotator, normalize_text
from capjax.text.config import HypernymConfig
from capjax.text.filters import Reason
from capjax.text.hypernymize import Hypernymizer
from capjax.text.resolvers import PERSON, PLACE, Concept, ChainResolver, default_resolver
from capjax.text.surface import indefinite_article, pluralize


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
      "A British Airways Airbus A319 aircraft at the gate of Heathrow Airport on September 23, 2017."))
  assert result.caption == "an aircraft at the gate of airport ."
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
    ("President Barack Obama waves to the crowd at the airport in 2012.",
     "president waves to the crowd at the airport ."),
    ("The crowd at the stadium on Monday afternoon.", "the crowd at the stadium ."),
    ("The parade on the street, September 2017.", "the parade on the street ."),
    ("A car parked in the street of New York on 23rd of June.", "a car parked in the street of city ."),
])
def test_temporal_expressions_are_dropped(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Two dogs play with a ball in the park in Franklin, France.", "dogs play with a ball in the park ."),
    ("Fans wait outside the hotel in Los Angeles and New York.", "fans wait outside the hotel ."),
    ("Visitors at the Eiffel Tower in Paris (France).", "visitors at the tower ."),
    ("Crowds at the festival in Paris, France in 2017.", "crowds at the festival ."),
])
def test_place_phrases_are_dropped(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Tourists walk through the streets of Paris in the summer.",
     "tourists walk through the streets of city in the summer ."),
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
  assert run("A Christmas tree in the living room of the house.") == (
      "a christmas tree in the living room of the house .")


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


# The paper's five published examples (Table 1, Fig. 1), in CC3M's released form. WordNet has no "pop artist":
# the occupation written beside the name ("Musician") stands in for the Knowledge Graph's type.
PAPER_EXAMPLES = [
    ("A Pakistani worker helps to clear the debris from the Taj Mahal Hotel November 7, 2005 in Balakot, Pakistan.",
     "a worker helps to clear the debris ."),
    ("Musician Justin Timberlake performs at the 2017 Pilgrimage Music & Cultural Festival on September 23, 2017 in "
     "Franklin, Tennessee.", "musician performs at the festival in a city ."),
    ("Harrison Ford and Calista Flockhart attend the premiere of 'Hollywood Homicide' at the 29th American Film "
     "Festival September 5, 2003 in Deauville, France.", "actors attend the premiere at festival ."),
    ("Side view of a British Airways Airbus A319 aircraft on approach to land with landing gear down - Stock Image",
     "side view of an aircraft on approach to land with landing gear down"),
    ("Two sculptures by artist Duncan McKellar adorn trees outside the derelict Norwich Union offices in Bristol, UK - "
     "Stock Image", "sculptures by person adorn trees outside the derelict offices"),
]


@pytest.fixture(scope="module")
def text_pipeline(annotator):
  from capjax.text.pipeline import TextPipeline

  return TextPipeline(annotator=annotator)


@pytest.mark.parametrize("text, caption", PAPER_EXAMPLES)
def test_the_papers_examples_exactly(text_pipeline, text, caption):
  record = text_pipeline.process("paper", text)
  assert (record.kept, record.caption) == (True, caption)


@pytest.mark.parametrize("text, caption", [
    ("Fireworks over the river during the 2015 summer festival.",
     "fireworks over the river during the summer festival ."),
    ("Visitors at the 2018 flower show in the park.", "visitors at the flower show in the park ."),
    ("A family walks in the park for two hours.", "a family walks in the park ."),
    ("The team trained for 3 weeks before the 2014 tournament.", "the team trained before the tournament ."),
    ("Guests at the 29th annual Film Festival gala.", "guests at gala ."),
    # Before a common noun an ordinal stays, as in the released captions.
    ("A woman celebrates her 80th birthday with friends at the party.",
     "a woman celebrates her 80th birthday with friends at the party ."),
    # A counted duration goes; "for a week" stays, as in the released captions.
    ("A dog waits for a week at the station.", "a dog waits for a week at the station ."),
    ("Fashion of the 1960s on display at the museum.", "fashion on display at the museum ."),
])
def test_dates_and_durations_as_modifiers_go_and_the_article_stays_when_it_should(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Musician Justin Timberlake performs on stage.", "musician performs on stage ."),
    ("Footballer Cristiano Ronaldo celebrates a goal with his teammates.",
     "footballer celebrates a goal with his teammates ."),
    ("A portrait of the writer Mark Twain at his desk.", "a portrait of the writer at his desk ."),
    # After a preposition a bare occupation goes and the name speaks for itself (the paper's "by person") ...
    ("A portrait of the singer by photographer Tom Wood.", "a portrait of the singer by person ."),
    # ... unless nothing resolves the name: then the occupation replaces it.
    ("A portrait of the singer by photographer Zorblax Quenth.", "a portrait of the singer by photographer ."),
])
def test_an_occupation_beside_a_name_whatever_its_tag(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("A Pakistani worker helps to clear the debris.", "a worker helps to clear the debris ."),
    ("British actor Hugh Jackman poses for photographers at the gala.", "actor poses for photographers at the gala ."),
    ("French President Emmanuel Macron speaks during a press conference.",
     "president speaks during a press conference ."),
    ("A Japanese garden with a pond and a bridge.", "a japanese garden with a pond and a bridge ."),
])
def test_nationality_adjectives_before_a_person_go(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ('Actors attend the premiere of "The Last Stand" at the cinema.', "actors attend the premiere at the cinema ."),
    ("The band performs songs from their album 'Blue Skies' on stage.",
     "the band performs songs from their album on stage ."),
    ("Children watch a screening of Finding Nemo at the cinema.", "children watch a screening at the cinema ."),
    ('The sign says "welcome" at the entrance of the park.', "the sign says welcome at the entrance of the park ."),
])
def test_titles_of_works_go_with_their_preposition(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Guests arrive for dinner at the Ritz Hotel in London.", "guests arrive for dinner ."),
    ("A worker clears the debris from the Taj Mahal Hotel.", "a worker clears the debris ."),
    # Dropping the venue would leave a fragment: its head noun stays.
    ("Jimmy Barnes performs at the Sydney Entertainment Centre.", "person performs at the centre ."),
    ("Protesters outside the White House on Saturday.", "protesters outside the residence ."),
    # Not venues: events and institutions keep their head noun.
    ("Students at Harvard University in the spring.", "students at university in the spring ."),
    ("Jennifer Lawrence arrives at the Academy Awards.", "actor arrives at the awards ."),
])
def test_venue_phrases_go_unless_that_leaves_a_fragment(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("Sydney and her sister play on the beach.", "person and her sister play on the beach ."),
    ("Boats in the harbour of Sydney at sunset.", "boats in the harbour of city at sunset ."),
    ("The harbor in Sydney at sunset.", "the harbor at sunset ."),
    ("A view of the cathedral in Florence, Italy.", "a view of the cathedral ."),
    ("Florence Welch sings on stage at the festival.", "person sings on stage at the festival ."),
    ("Portrait of Peter in the park.", "portrait of person in the park ."),
])
def test_names_that_are_places_and_first_names_follow_their_context(run, text, caption):
  assert run(text) == caption


@pytest.mark.parametrize("text, caption", [
    ("A 2018 Toyota Camry parked on the street.", "a car parked on the street ."),
    ("A vintage Ford Mustang at the car show.", "a vintage car at the car show ."),
    ("A Tesla Model S charges at the station.", "a car charges at the station ."),
    ("A Ferrari on the track during the race.", "a car on the track during the race ."),
    ("An iPhone on a wooden table with a cup of coffee.", "a smartphone on a wooden table with a cup of coffee ."),
    ("Police officers guard the entrance of the United Nations building.",
     "police officers guard the entrance of the building ."),
])
def test_names_resolved_by_a_make_or_the_type_noun_after_them(run, text, caption):
  assert run(text) == caption


def test_an_unresolved_name_is_named_in_the_discard(annotator, hypernymizer):
  result = hypernymizer(annotator.annotate("Fans greet Zorblax Quenth at the airport."))
  assert (result.reason, result.unresolved) == (Reason.UNRESOLVED_ENTITY, "Zorblax Quenth")
