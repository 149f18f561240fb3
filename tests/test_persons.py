"""The household on both backends: persons, references, modes, speaker inference, person hints."""

from __future__ import annotations

import asyncio
from datetime import date

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.errors import NotFoundError, ValidationError
from navi_memory.core.persons import Person, infer_speaker

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


U = "family"


def household(store: MemoryStore, user: str = U) -> None:
    store.add_person("Tom", user_id=user)
    store.set_household_mode("multi", user_id=user)
    store.add_person("Sarah Miller", user_id=user, aliases=["mom", "wife"], role="spouse", pronouns="she/her",
                     birth_date="1985-04-02", notes="vegetarian")
    store.add_person("Leo", user_id=user, role="child", aliases=["kiddo"])


def test_person_fields_round_trip(store: MemoryStore) -> None:
    household(store)
    sarah = store.get_person("Sarah Miller", user_id=U)
    assert (sarah.pronouns, sarah.role, sarah.aliases, sarah.birth_date, sarah.notes) == \
        ("she/her", "spouse", ["mom", "wife"], "1985-04-02", "vegetarian")
    assert [p.display_name for p in store.list_persons(user_id=U)] == ["Tom", "Sarah Miller", "Leo"]
    assert store.list_persons(user_id="someone-else") == []


def test_resolve_by_name_alias_first_name_and_role(store: MemoryStore) -> None:
    household(store)
    for ref in ("Sarah Miller", "sarah miller", "Sarah", "MOM", "wife", "spouse"):
        assert store.resolve_person_ref(ref, user_id=U).display_name == "Sarah Miller", ref
    assert store.resolve_person_ref("child", user_id=U).display_name == "Leo"
    assert store.resolve_person_ref("primary", user_id=U).display_name == "Tom"
    assert store.resolve_person_ref("grandma", user_id=U) is None
    assert store.resolve_person_ref("mom", user_id="someone-else") is None


def test_ambiguous_reference_is_none(store: MemoryStore) -> None:
    household(store)
    store.add_person("Mia", user_id=U, role="child")
    assert store.resolve_person_ref("child", user_id=U) is None  # Leo and Mia
    store.update_person("Leo", user_id=U, aliases=["kiddo", "little one"])
    store.update_person("Mia", user_id=U, aliases=["little one"])
    assert store.resolve_person_ref("little one", user_id=U) is None
    assert store.resolve_person_ref("kiddo", user_id=U).display_name == "Leo"
    with pytest.raises(NotFoundError, match="ambiguous"):
        store.get_person("child", user_id=U)


def test_names_must_stay_distinct(store: MemoryStore) -> None:
    household(store)
    with pytest.raises(ValidationError, match="already exists"):
        store.add_person("tom", user_id=U)
    with pytest.raises(ValidationError, match="name of another person"):
        store.add_person("Ann", user_id=U, aliases=["Leo"])
    with pytest.raises(ValidationError, match="birth_date"):
        store.add_person("Ann", user_id=U, birth_date="April 2nd")
    assert store.add_person("Ann", user_id=U, birth_date=date(2020, 1, 2)).birth_date == "2020-01-02"


def test_single_mode_holds_one_person(store: MemoryStore) -> None:
    assert store.household_mode(user_id=U) == "single"
    store.add_person("Tom", user_id=U, role="guest")
    with pytest.raises(ValidationError, match="single mode"):
        store.add_person("Sarah", user_id=U)


def test_single_to_multi_makes_the_person_primary(store: MemoryStore) -> None:
    store.add_person("Tom", user_id=U, role="guest")
    assert store.set_household_mode("multi", user_id=U) == "multi"
    assert store.household_mode(user_id=U) == "multi"
    assert store.get_person("Tom", user_id=U).role == "primary"


def test_multi_to_single_only_with_one_person_left(store: MemoryStore) -> None:
    household(store)
    with pytest.raises(ValidationError, match="remove all but one"):
        store.set_household_mode("single", user_id=U)
    assert store.household_mode(user_id=U) == "multi"
    store.remove_person("Leo", user_id=U)
    store.remove_person("mom", user_id=U)
    assert store.set_household_mode("single", user_id=U) == "single"
    with pytest.raises(ValidationError):
        store.set_household_mode("family", user_id=U)


def test_rename_carries_to_items_and_facts(store: MemoryStore) -> None:
    household(store)
    item = store.add(content="Leo loves dinosaurs", user_id=U, person="kiddo")
    assert store.get(item, user_id=U).person == "Leo"
    store.upsert_fact(user_id=U, category="preferences", key="favourite_toy", value="T-rex", person="child")
    assert store.get_fact("favourite_toy", user_id=U).person == "Leo"
    other = store.add(content="Met the neighbour", user_id=U, person="Mrs Green")
    assert store.get(other, user_id=U).person == "Mrs Green"  # not in the household: kept as given
    assert store.update(other, user_id=U, person="kiddo").person == "Leo"
    store.update_person("Leo", user_id=U, display_name="Leonard")
    assert store.get(item, user_id=U).person == "Leonard"
    assert store.get_fact("favourite_toy", user_id=U).person == "Leonard"
    assert store.resolve_person_ref("kiddo", user_id=U).display_name == "Leonard"


def test_person_filter_resolves_like_the_writes_do(store: MemoryStore) -> None:
    """Writes store the display name an alias names, so the search filter must resolve it too
    (it compared the raw text: ``person="kiddo"`` found nothing after ``add(person="kiddo")``)."""
    household(store)
    item = store.add(content="Leo loves dinosaurs", user_id=U, person="kiddo")
    store.add(content="Met the neighbour about dinosaurs", user_id=U, person="Mrs Green")
    for ref in ("kiddo", "Leo", "leo", "child"):
        assert [r.id for r in store.search("dinosaurs", user_id=U, person=ref)] == [item], ref
    assert [r.content for r in store.search("dinosaurs", user_id=U, person="Mrs Green")] == [
        "Met the neighbour about dinosaurs"]  # outside the household: the name as given
    assert store.search("dinosaurs", user_id="someone-else", person="kiddo") == []


def test_forget_deletes_persons(store: MemoryStore) -> None:
    household(store)
    counts = store.forget(user_id=U)
    assert counts["persons"] == 3
    assert store.list_persons(user_id=U) == []
    assert store.household_mode(user_id=U) == "single"


# -- speaker inference ---------------------------------------------------------------------------


def test_speaker_single_mode_fast_path(store: MemoryStore) -> None:
    store.add_person("Tom", user_id=U)
    found = store.infer_speaker("my wife is cooking", user_id=U)
    assert (found.speaker.display_name, found.confidence, found.reason) == ("Tom", "high", "single household")
    assert found.hints == ["Tom"]


def test_speaker_hint_wins(store: MemoryStore) -> None:
    household(store)
    found = store.infer_speaker("what's for dinner?", user_id=U, hint="mom")
    assert (found.speaker.display_name, found.confidence, found.reason) == ("Sarah Miller", "high", "hint")
    leo = store.get_person("Leo", user_id=U)
    assert store.infer_speaker(None, user_id=U, hint=leo.id).speaker.display_name == "Leo"


def test_first_person_parser_in_the_store(store: MemoryStore) -> None:
    store.add_person("Tom", user_id=U)
    store.set_household_mode("multi", user_id=U)
    store.add_person("Sarah Miller", user_id=U, aliases=["wife"], role="spouse")
    found = store.infer_speaker("my wife is cooking", user_id=U)
    assert found.speaker.display_name == "Tom"  # the wife is mentioned, so it is the other one
    assert found.confidence == "medium"
    assert found.hints == ["Tom", "Sarah Miller"]


PEOPLE = [Person(1, U, "Tom", role="primary"), Person(2, U, "Sarah Miller", role="spouse", aliases=["mom"]),
          Person(3, U, "Leo", role="child"), Person(4, U, "Mia", role="child")]


@pytest.mark.parametrize("text, speaker, mentioned", [
    ("my wife is cooking", None, ["Sarah Miller"]),  # three others could be speaking
    ("our kids are asleep", None, ["Leo", "Mia"]),
    ("I'm Sarah, what's on the calendar?", "Sarah Miller", []),
    ("This is Leo and Mia is annoying me", "Leo", ["Mia"]),
    ("I'm Sarah's husband", None, ["Sarah Miller"]),  # a possessive is a mention, not a name
    ("Leo wants pizza", None, ["Leo"]),
    ("mom said hi", None, ["Sarah Miller"]),
    ("I am cooking tonight", None, []),
    ("my child is sick", None, []),  # two children: ambiguous, nobody
    ("hello", None, []),
])
def test_first_person_parser(text: str, speaker: str | None, mentioned: list[str]) -> None:
    found = infer_speaker(PEOPLE, "multi", text)
    assert (found.speaker.display_name if found.speaker else None) == speaker
    assert sorted(p.display_name for p in found.mentioned) == sorted(mentioned)
    assert found.hints == ([speaker] if speaker else []) + [p.display_name for p in found.mentioned]


def test_mentioned_person_is_not_the_speaker_in_a_couple() -> None:
    couple = PEOPLE[:2]
    assert infer_speaker(couple, "multi", "my wife is cooking").speaker.display_name == "Tom"
    assert infer_speaker(couple, "multi", "Tom forgot his keys").speaker.display_name == "Sarah Miller"
    assert infer_speaker(couple, "multi", "nice weather").speaker is None


# -- person hints in search ----------------------------------------------------------------------


def test_person_hint_changes_ranking(store: MemoryStore) -> None:
    household(store)
    tom = store.add(content="Pizza night plans: margherita for dinner", user_id=U, person="Tom")
    sarah = store.add(content="Pizza night plans: margherita for dinner", user_id=U, person="Sarah Miller")
    plain = store.search("pizza dinner", user_id=U, recency="neutral")
    assert [r.id for r in plain][:2] == [tom, sarah]  # a tie, broken by id
    assert "person" not in plain[0].scores
    boosted = store.search("pizza dinner", user_id=U, person_hints=["Sarah Miller"], recency="neutral")
    assert [r.id for r in boosted][:2] == [sarah, tom]
    assert boosted[0].scores["person"] == pytest.approx(0.15)
    assert boosted[0].scores["rank"] == pytest.approx(plain[1].scores["rank"] + 0.15)  # the order; the score is relevance
    by_alias = store.search("pizza dinner", user_id=U, person_hints=["mom"], recency="neutral")
    assert by_alias[0].id == sarah and by_alias[0].scores["person"] == pytest.approx(0.15)


def test_query_naming_an_alias_hints_the_person(store: MemoryStore) -> None:
    household(store)
    tom = store.add(content="Dentist appointment on Friday", user_id=U, person="Tom")
    sarah = store.add(content="Dentist appointment on Friday", user_id=U, person="Sarah Miller")
    assert store.search("when is the dentist appointment", user_id=U, recency="neutral")[0].id == tom
    results = store.search("when is mom's dentist appointment", user_id=U, recency="neutral")
    assert results[0].id == sarah and "person" in results[0].scores


def test_async_store_has_the_person_operations(db_url: str, fake_embeddings: object) -> None:
    async def run() -> None:
        store = await AsyncMemoryStore.open(db_url, embeddings=fake_embeddings)
        try:
            await store.add_person("Tom", user_id=U)
            await store.set_household_mode("multi", user_id=U)
            await store.add_person("Sarah", user_id=U, aliases=["mom"])
            assert (await store.resolve_person_ref("mom", user_id=U)).display_name == "Sarah"
            assert (await store.infer_speaker("I'm Sarah", user_id=U)).speaker.display_name == "Sarah"
        finally:
            await store.close()

    asyncio.run(run())


def test_concurrent_household_puts_of_the_same_new_member_make_one_person(store):
    """Each put read the household, found Ann missing and inserted her: on PostgreSQL the others
    met a unique violation (a 500 over REST). One transaction under the user's write lock now."""
    from concurrent.futures import ThreadPoolExecutor

    def put(_: int) -> dict:
        return store.put_household(user_id="hh", mode="multi", members=[{"display_name": "Ann", "aliases": ["mum"]}])

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(put, range(8)))
    assert all([p["display_name"] for p in r["persons"]] == ["Ann"] for r in results)
    assert [p.display_name for p in store.list_persons(user_id="hh")] == ["Ann"]
