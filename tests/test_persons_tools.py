"""The memory tools by household mode: person parameters and memory_find_person only in multi mode."""

from __future__ import annotations

import asyncio
import json

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.integrations._tools import MemoryTools
from navi_memory.integrations.langchain import NaviMemoryRetriever, NaviMemoryToolkit
from navi_memory.integrations.llamaindex import NaviMemoryToolSpec

SINGLE = {"memory_search", "memory_add_note", "memory_save_fact", "memory_get", "memory_archive", "memory_forget",
          "memory_list_themes"}


def family(store: MemoryStore) -> None:
    store.add_person("Tom", user_id="u1")
    store.set_household_mode("multi", user_id="u1")
    store.add_person("Sarah", user_id="u1", aliases=["mom"], role="spouse")


def properties(tool: object) -> set[str]:
    return set(tool.get_input_schema().model_json_schema()["properties"])  # type: ignore[attr-defined]


def test_single_mode_hides_person_parameters(store: MemoryStore) -> None:
    store.add_person("Tom", user_id="u1")
    tools = {t.name: t for t in NaviMemoryToolkit(store=store, user_id="u1").get_tools()}
    assert set(tools) == SINGLE
    assert not any("person" in properties(t) for t in tools.values())
    spec = {t.metadata.name: t for t in NaviMemoryToolSpec(store, user_id="u1").to_tool_list()}
    assert set(spec) == SINGLE
    assert "person" not in spec["memory_search"].metadata.get_parameters_dict()["properties"]


def test_multi_mode_shows_person_parameters_and_find_person(store: MemoryStore) -> None:
    family(store)
    tools = {t.name: t for t in NaviMemoryToolkit(store=store, user_id="u1").get_tools()}
    assert set(tools) == SINGLE | {"memory_find_person"}
    for name in ("memory_search", "memory_add_note", "memory_save_fact"):
        assert "person" in properties(tools[name])
    found = json.loads(tools["memory_find_person"].invoke({"ref": "mom"}))
    assert found == {"person": {"display_name": "Sarah", "role": "spouse", "aliases": ["mom"]}}
    assert json.loads(tools["memory_find_person"].invoke({"ref": "grandpa"})) == {"person": None}

    note = json.loads(tools["memory_add_note"].invoke({"content": "Allergic to peanuts", "person": "mom"}))
    assert store.get(note["id"], user_id="u1").person == "Sarah"
    json.loads(tools["memory_save_fact"].invoke({"category": "profile", "key": "allergy", "value": "peanuts",
                                                 "person": "mom"}))
    assert store.get_fact("allergy", user_id="u1").person == "Sarah"
    tom = store.add(user_id="u1", content="Allergic to cats", person="Tom")
    results = json.loads(tools["memory_search"].invoke({"query": "allergic", "person": "Tom"}))["results"]
    assert results[0]["id"] == tom and results[0]["person"] == "Tom"

    spec = {t.metadata.name: t for t in NaviMemoryToolSpec(store, user_id="u1").to_tool_list()}
    assert "memory_find_person" in spec
    assert json.loads(spec["memory_find_person"].call(ref="Sarah").content)["person"]["display_name"] == "Sarah"


def test_explicit_mode_and_bad_mode(store: MemoryStore) -> None:
    assert "memory_find_person" in MemoryTools(store, "nobody", household="multi").specs
    with pytest.raises(ValueError, match="single"):
        MemoryTools(store, "u1", household="family")


def test_async_store_defaults_to_single_unless_told(db_url: str, fake_embeddings: object) -> None:
    async def run() -> None:
        astore = await AsyncMemoryStore.open(db_url, embeddings=fake_embeddings)
        try:
            await astore.add_person("Tom", user_id="u1")
            await astore.set_household_mode("multi", user_id="u1")
            await astore.add_person("Sarah", user_id="u1", aliases=["mom"])
            assert "memory_find_person" not in MemoryTools(None, "u1", async_store=astore).specs
            tools = MemoryTools(None, "u1", async_store=astore, household="multi")
            out = json.loads(await tools.arun("memory_find_person", ref="mom"))
            assert out["person"]["display_name"] == "Sarah"
        finally:
            await astore.close()

    asyncio.run(run())


def test_retriever_passes_person_hints(store: MemoryStore) -> None:
    family(store)
    store.add(user_id="u1", content="Birthday party on Saturday", person="Tom")
    sarah = store.add(user_id="u1", content="Birthday party on Saturday", person="Sarah")
    docs = NaviMemoryRetriever(store=store, user_id="u1", k=2).invoke("birthday party", person_hints=["mom"])
    assert docs[0].metadata["id"] == sarah


def test_each_turn_boosts_the_inferred_speaker(store: MemoryStore) -> None:
    from navi_memory.integrations._context import MemoryContextBuilder
    from navi_memory.integrations._tools import StoreCaller

    family(store)
    store.add(user_id="u1", content="Dinner plans: pasta on Friday", person="Sarah")
    tom = store.add(user_id="u1", content="Dinner plans: pasta on Friday", person="Tom")
    plain = MemoryContextBuilder(StoreCaller(store), k=2).build("what are the dinner plans?", user_id="u1")
    assert plain.results[0].person == "Sarah"  # a tie, broken by id
    by_text = MemoryContextBuilder(StoreCaller(store), k=2).build("my wife asks: what are the dinner plans?",
                                                                  user_id="u1")
    assert all(r.scores["person"] == pytest.approx(0.15) for r in by_text.results)  # Tom speaks, Sarah is named
    hinted = MemoryContextBuilder(StoreCaller(store), k=2, search_kwargs={"speaker": "Tom"})
    result = hinted.build("what are the dinner plans?", user_id="u1")
    assert result.results[0].id == tom and result.results[0].scores["person"] == pytest.approx(0.15)
    unknown = MemoryContextBuilder(StoreCaller(store), k=2, search_kwargs={"speaker": "Nobody"})
    assert unknown.build("what are the dinner plans?", user_id="u1").results[0].person == "Sarah"
