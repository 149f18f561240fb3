"""The stable part of an injected prompt names the user's household members and time zone (the
spec's "member list in the stable half"), so the model knows who "mom" is and which day "today" is."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from navi_memory import prompt
from navi_memory.core.persons import Person
from navi_memory.integrations.langchain import NaviMemoryRunnable

U = "u1"


def person(name: str, **fields) -> Person:
    return Person(id=1, user_id=U, display_name=name, **fields)


def test_the_block_lists_members_and_the_time_zone():
    assert prompt.household_block(None) is None
    assert prompt.household_block({"mode": "single", "timezone": None, "persons": []}) is None
    only_zone = prompt.household_block({"mode": "single", "timezone": "Europe/Lisbon", "persons": []})
    assert only_zone == f'{prompt.HOUSEHOLD_HEADING}\n\n<memory kind="household">\nTime zone: Europe/Lisbon\n</memory>'
    family = prompt.household_block({"mode": "multi", "timezone": None, "persons": [
        person("Sarah Miller", role="spouse", pronouns="she/her", aliases=["mom", "Sarah"], birth_date="1979-03-14",
               notes="allergic to nuts"),
        person("Leo", role="child")]})
    assert family.splitlines()[3:6] == [
        "Several people share the assistant; each turn's speaker may differ:",
        "- Sarah Miller (spouse; she/her; also called mom, Sarah; born 1979-03-14; allergic to nuts)",
        "- Leo (child)"]
    one = prompt.household_block({"mode": "single", "timezone": None, "persons": [person("Eugene")]})
    assert "The person using the assistant:\n- Eugene\n</memory>" in one


def test_long_notes_and_many_members_are_cut():
    many = [person(f"P{n}", notes="x" * 500) for n in range(prompt.HOUSEHOLD_PERSONS + 3)]
    text = prompt.household_block({"mode": "multi", "timezone": None, "persons": many})
    assert f"- P0 ({'x' * prompt.PERSON_NOTES}…)" in text and "- P20" not in text and "(and 3 more)" in text


def test_the_injected_prompt_carries_the_household(store):
    store.put_household(user_id=U, mode="multi", timezone="Asia/Tokyo", members=[
        {"display_name": "Sarah", "aliases": ["mom"], "role": "spouse"}, {"display_name": "Leo", "role": "child"}])
    store.set_summary("The user lives in Tokyo.", user_id=U)
    out = NaviMemoryRunnable(store=store, user_id=U).invoke([SystemMessage("You help."), HumanMessage("Hi!")])
    stable = out[1].content
    assert stable.startswith(prompt.SUMMARY_HEADING) and prompt.HOUSEHOLD_HEADING in stable
    assert "Time zone: Asia/Tokyo" in stable and "- Sarah (spouse; also called mom)" in stable
    assert "- Leo (child)" in stable
    bare = NaviMemoryRunnable(store=store, user_id="u2").invoke([SystemMessage("You help."), HumanMessage("Hi!")])
    assert [m.content for m in bare] == ["You help.", "Hi!"]  # nothing recorded: nothing added


def test_the_zone_named_is_the_one_memories_are_dated_in(store, db_url, fake_embeddings, clock):
    from navi_memory import MemoryStore, Settings

    ask = [SystemMessage("You help."), HumanMessage("Hi!")]
    store.set_summary("Likes tea.", user_id=U)
    assert prompt.HOUSEHOLD_HEADING not in NaviMemoryRunnable(store=store, user_id=U).invoke(ask)[1].content  # UTC
    preset = NaviMemoryRunnable(store=store, user_id=U, search_kwargs={"timezone": "America/Denver"})
    assert "Time zone: America/Denver" in preset.invoke(ask)[1].content
    berlin = Settings(url=db_url, timezone="Europe/Berlin")  # a store-wide zone an operator chose
    with MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock, settings=berlin) as other:
        assert "Time zone: Europe/Berlin" in NaviMemoryRunnable(store=other, user_id=U).invoke(ask)[1].content


def test_a_turn_reads_the_household_once_and_infers_the_speaker_from_it(store):
    from navi_memory.integrations._context import MemoryContextBuilder
    from navi_memory.integrations._tools import StoreCaller

    class Recording(StoreCaller):
        def __init__(self, store) -> None:
            super().__init__(store)
            self.names: list[str] = []

        def call(self, request):
            self.names.append(request.method)
            self.last = request.kwargs
            return super().call(request)

    store.add(user_id=U, content="Tom plays chess on Sundays.")
    caller = Recording(store)
    builder = MemoryContextBuilder(caller, min_similarity=0)  # the fake embeddings are not similar
    assert builder.build("what does Tom play?", user_id=U).results
    assert caller.names == ["household", "get_summary", "promoted_facts", "search"]
    store.put_household(user_id=U, mode="multi", members=[{"display_name": "Tom"}, {"display_name": "Ann"}])
    caller.names.clear()
    context = builder.build("I'm Ann. What does Tom play?", user_id=U)
    assert caller.names == ["household", "get_summary", "promoted_facts", "search"]  # inferred from the household
    assert context.results and context.results[0].content == "Tom plays chess on Sundays."
    assert caller.last["person_hints"] == ["Ann", "Tom"]  # the speaker, then the person named
    speaker = MemoryContextBuilder(caller, min_similarity=0, search_kwargs={"speaker": "Tom"})
    speaker.build("what do I play?", user_id=U)
    assert caller.last["person_hints"] == ["Tom"]  # the device's person
    unknown = MemoryContextBuilder(caller, min_similarity=0, search_kwargs={"speaker": " "})
    assert unknown.build("what do I play?", user_id=U).available  # a bad hint costs nothing
