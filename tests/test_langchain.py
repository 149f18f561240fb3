"""LangChain adapters: retriever documents, per-call k and filters, native async, the toolkit."""

from __future__ import annotations

import json

import pytest
from langchain_core.documents import Document

from navi_memory import AsyncMemoryStore, StorageError
from navi_memory.integrations.langchain import NaviMemoryRetriever, NaviMemoryToolkit

from .fakes import FakeEmbeddings


@pytest.fixture
def seeded(store):
    ids = [store.add(user_id="u1", content=f"coffee note {n}: oat milk latte", theme="coffee") for n in range(6)]
    ids.append(store.add(user_id="u1", content="the train leaves at 8:15", theme="commute"))
    store.add(user_id="u2", content="u2 also likes coffee", theme="coffee")
    return ids


def test_retriever_returns_documents_with_metadata(store, seeded):
    docs = NaviMemoryRetriever(store=store, user_id="u1").invoke("oat milk coffee")
    assert docs and all(isinstance(d, Document) for d in docs)
    assert {d.metadata["id"] for d in docs} <= set(seeded)  # only u1's rows
    assert all(d.metadata["theme"] == "coffee" for d in docs[:6])
    first = docs[0]
    assert first.id == str(first.metadata["id"]) and first.metadata["id"] in seeded
    assert set(first.metadata) >= {"id", "score", "signals", "theme", "type", "created_at"}
    assert first.metadata["theme"] == "coffee" and first.metadata["type"] == "note"
    assert first.metadata["signals"]["fts"] is True
    assert first.metadata["created_at"].startswith("2025-01-15")


def test_retriever_k_and_filters_per_call(store, seeded):
    retriever = NaviMemoryRetriever(store=store, user_id="u1", k=4)
    assert len(retriever.invoke("coffee")) == 4
    assert len(retriever.invoke("coffee", k=2)) == 2
    assert [d.metadata["theme"] for d in retriever.invoke("*", theme="commute")] == ["commute"]
    assert [d.metadata["theme"] for d in NaviMemoryRetriever(store=store, user_id="u1", theme="commute")
            .invoke("*")] == ["commute"]
    with pytest.raises(TypeError, match="unknown search argument"):
        retriever.invoke("coffee", colour="red")


def test_retriever_fact_metadata(store):
    store.upsert_fact(user_id="u1", category="profile", key="home_city", value="Berlin")
    (doc,) = NaviMemoryRetriever(store=store, user_id="u1", k=1).invoke("home city Berlin")
    assert doc.metadata["kind"] == "fact"
    assert doc.metadata["fact"]["value"] == "Berlin"


async def test_retriever_ainvoke_with_a_blocking_store(store, seeded):
    docs = await NaviMemoryRetriever(store=store, user_id="u1", k=3).ainvoke("coffee")
    assert len(docs) == 3


async def test_retriever_native_async(db_url, clock, seeded, store):
    astore = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock)
    try:
        retriever = NaviMemoryRetriever(store=astore, user_id="u1", k=2)
        docs = await retriever.ainvoke("oat milk", k=5)
        assert len(docs) == 5 and all(d.metadata["id"] in seeded for d in docs)
        with pytest.raises(RuntimeError, match="async"):
            retriever.invoke("oat milk")
        both = NaviMemoryRetriever(store=store, async_store=astore, user_id="u1")
        assert [d.id for d in both.invoke("train")] == [d.id for d in await both.ainvoke("train")]
    finally:
        await astore.close()


def test_retriever_needs_a_store():
    with pytest.raises(ValueError, match="required"):
        NaviMemoryRetriever(user_id="u1")


def tools_by_name(store, user_id="u1", **kwargs):
    return {t.name: t for t in NaviMemoryToolkit(store=store, user_id=user_id, **kwargs).get_tools()}


def test_toolkit_tools_never_take_a_user_id(store):
    tools = tools_by_name(store)
    assert set(tools) == {"memory_search", "memory_add_note", "memory_save_fact", "memory_get", "memory_archive",
                          "memory_forget", "memory_list_themes"}
    for tool in tools.values():
        assert tool.description
        assert not {"user_id", "user", "all_users"} & set(tool.get_input_schema().model_json_schema()["properties"])
    assert set(tools_by_name(store, include=["memory_search"])) == {"memory_search"}
    with pytest.raises(ValueError, match="unknown memory tool"):
        NaviMemoryToolkit(store=store, user_id="u1", include=["memory_drop_database"])


def test_toolkit_round_trip(store):
    tools = tools_by_name(store)
    added = json.loads(tools["memory_add_note"].invoke({"content": "Dog is called Rex", "theme": "Pets"}))
    item_id = added["id"]
    assert added["status"] == "added" and added["embedding"] == "ready"  # the spec's "whether it is pending"
    assert store.get(item_id, user_id="u1").source == "tool_call"
    found = json.loads(tools["memory_search"].invoke({"query": "dog Rex"}))["results"]
    assert found[0]["id"] == item_id and found[0]["theme"] == "pets" and "Rex" in found[0]["content_snippet"]
    assert set(found[0]) >= {"id", "theme", "type", "content_snippet", "created_at", "score", "signals"}
    got = json.loads(tools["memory_get"].invoke({"item_id": item_id}))
    assert got["content"] == "Dog is called Rex" and got["status"] == "active" and got["embedding"] == "ready"
    assert json.loads(tools["memory_archive"].invoke({"item_id": item_id})) == {"id": item_id, "status": "archived"}
    assert json.loads(tools["memory_search"].invoke({"query": "dog Rex"}))["results"] == []
    assert json.loads(tools["memory_search"].invoke({"query": "dog Rex", "status": "any"}))["results"]
    themes = json.loads(tools["memory_list_themes"].invoke({}))["themes"]
    assert {"theme": "pets", "name": "Pets", "active_count": 0, "description": None} in themes

    saved = json.loads(tools["memory_save_fact"].invoke({"category": "profile", "key": "home_city",
                                                         "value": "Berlin"}))
    assert saved["action"] == "added"
    fact = store.get_fact("home_city", user_id="u1")
    assert fact.value == "Berlin" and fact.source == "user_explicit" and fact.confidence == 90  # the user said it
    again = json.loads(tools["memory_save_fact"].invoke({"category": "profile", "key": "home_city",
                                                         "value": "Paris"}))
    assert again["action"] == "updated" and again["previous_value"] == "Berlin"
    assert json.loads(tools["memory_forget"].invoke({"key": "home_city"})) == {"deleted": 1, "key": "home_city"}
    assert store.get_all_facts(user_id="u1") == []


def test_tools_stay_inside_their_user(store):
    other = store.add(user_id="u2", content="u2's secret", theme="private")
    tools = tools_by_name(store)
    assert "error" in json.loads(tools["memory_get"].invoke({"item_id": other}))
    assert "error" in json.loads(tools["memory_archive"].invoke({"item_id": other}))
    assert store.get(other, user_id="u2").status == "active"
    assert json.loads(tools["memory_search"].invoke({"query": "secret"}))["results"] == []


def test_tool_errors_are_returned_not_raised(store, monkeypatch):
    tools = tools_by_name(store)
    assert "no fact" in json.loads(tools["memory_forget"].invoke({"key": "nothing"}))["error"]
    assert "error" in json.loads(tools["memory_add_note"].invoke({"content": "   "}))

    def down(*args, **kwargs):
        raise StorageError("connection refused")

    monkeypatch.setattr(store._backend, "list_themes", down)
    out = json.loads(tools["memory_list_themes"].invoke({}))
    assert out["error"].startswith("memory unavailable")


async def test_tools_async(store, db_url, clock):
    tools = tools_by_name(store)
    added = json.loads(await tools["memory_add_note"].ainvoke({"content": "Async note about kayaks"}))
    astore = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock)
    try:
        atools = tools_by_name(astore)
        found = json.loads(await atools["memory_search"].ainvoke({"query": "kayaks"}))["results"]
        assert [r["id"] for r in found] == [added["id"]]
        with pytest.raises(RuntimeError, match="async"):
            atools["memory_list_themes"].invoke({})
    finally:
        await astore.close()



def test_retriever_passes_the_users_time_zone(store, seeded):
    from navi_memory import ValidationError

    retriever = NaviMemoryRetriever(store=store, user_id="u1", timezone="America/Los_Angeles", min_score=0)
    assert retriever.invoke("coffee I had yesterday") and retriever.invoke("coffee", timezone="UTC")
    with pytest.raises(ValidationError, match="timezone"):
        retriever.invoke("coffee", timezone="Mars/Olympus")
    with pytest.raises(ValidationError, match="timezone"):
        NaviMemoryRetriever(store=store, user_id="u1", timezone="Mars/Olympus").invoke("coffee")
