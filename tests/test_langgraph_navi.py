"""What only ``NaviStore`` has: whose memory a call reaches (the run's user, the bound user, or a
namespace label), the value kept as item metadata, the async store, and LangMem with ``user_label``.
The BaseStore behaviour shared with LangGraph's own stores is in test_langgraph_store.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langgraph.store.base import GetOp, PutOp, SearchOp

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.errors import ValidationError
from navi_memory.integrations.langgraph import NaviStore

from .fakes import FakeEmbeddings
from .langgraph_support import ToolChat, call
from .test_langgraph_agents import check_langmem_runs, langmem_script, langmem_tools, user


@pytest.fixture
def memory(store: MemoryStore) -> MemoryStore:
    return store


def test_a_call_needs_a_user_and_says_both_ways(memory: MemoryStore) -> None:
    navi = NaviStore(memory)
    with pytest.raises(ValidationError, match=r"configurable\.user_id.*user_id=") as caught:
        navi.put(("memories",), "k", {"text": "x"})
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ValidationError, match="user"):
        navi.search(("memories",))


def test_bound_user_label_user_and_isolation(memory: MemoryStore) -> None:
    NaviStore(memory, user_id="alice").put(("memories",), "k", {"text": "alice's"})
    NaviStore(memory, user_id="bob").put(("memories",), "k", {"text": "bob's"})
    assert NaviStore(memory, user_id="alice").get(("memories",), "k").value == {"text": "alice's"}
    assert [i.value for i in NaviStore(memory, user_id="bob").search(("memories",))] == [{"text": "bob's"}]
    # the memory is the user's own, visible to the store's other doors; without an index its
    # content is its key (never searched: NaviStore marks it in its private metadata key)
    item = memory.get_keyed(user_id="alice", namespace=("memories",), key="k")
    assert (item.metadata, item.content) == ({"text": "alice's", "_langgraph": {"index": False}}, "k")

    for label in (1, -1):
        labelled = NaviStore(memory, user_label=label)
        labelled.put(("prefs", "carol"), "seat", {"text": "window"})
        assert labelled.get(("prefs", "carol"), "seat").value == {"text": "window"}
        assert memory.get_keyed(user_id="carol", namespace=("prefs", "carol"), key="seat") is not None
        assert [i.key for i in labelled.search(("prefs", "carol"))] == ["seat"]
    with pytest.raises(ValidationError, match="no label 3"):
        NaviStore(memory, user_label=3).put(("prefs", "carol"), "seat", {"text": "x"})


def test_value_round_trips_exactly_and_the_private_key_is_refused(memory: MemoryStore) -> None:
    navi = NaviStore(memory, user_id="u1", index={"fields": ["text"]})
    value = {"text": "I drink oat milk", "n": 1.5, "list": [1, "a", None, {"x": []}], "unicode": "żółw ✓"}
    navi.put(("docs",), "k", value, ttl=30)
    assert navi.get(("docs",), "k").value == value
    assert navi.search(("docs",), query="oat milk")[0].value == value
    with pytest.raises(ValidationError, match="_langgraph"):
        navi.put(("docs",), "k2", {"_langgraph": 1})


def test_index_takes_only_fields() -> None:
    with pytest.raises(ValidationError, match="embedder"):
        NaviStore(object.__new__(MemoryStore), index={"dims": 64, "embed": "openai:x", "fields": ["text"]})


def test_query_search_is_the_hybrid_search(memory: MemoryStore) -> None:
    navi = NaviStore(memory, user_id="u1", index={"fields": ["text"]})
    navi.put(("docs",), "train", {"text": "My train to Berlin leaves at nine"})
    navi.put(("docs",), "coffee", {"text": "I drink oat milk lattes"})
    found = navi.search(("docs",), query="Berlin")
    direct = memory.search("Berlin", user_id="u1", namespace_prefix=("docs",))
    assert [i.key for i in found] == [r.key for r in direct]
    assert [i.score for i in found] == [pytest.approx(r.score) for r in direct]
    assert found[0].key == "train"


def test_batch_in_a_run_uses_the_runs_user(memory: MemoryStore) -> None:
    from langchain_core.runnables import RunnableLambda

    navi = NaviStore(memory, user_id="fallback")
    put = RunnableLambda(lambda _: navi.batch([PutOp(("notes",), "k", {"text": "hi"}), GetOp(("notes",), "k")]))
    put.invoke(None, {"configurable": {"user_id": "dana"}})
    put.invoke(None, {"configurable": {"langgraph_user_id": "erin"}})
    assert memory.get_keyed(user_id="dana", namespace=("notes",), key="k") is not None
    assert memory.get_keyed(user_id="erin", namespace=("notes",), key="k") is not None
    assert navi.batch([SearchOp(("notes",))]) == [[]]  # outside a run: the bound user


def test_async_store_is_native_and_blocking_calls_are_refused(db_url: str) -> None:
    async def run() -> tuple:
        async_memory = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings())
        try:
            navi = NaviStore(async_memory, user_id="u1", index={"fields": ["text"]})
            await navi.aput(("docs",), "k", {"text": "oat milk lattes"})
            got = await navi.aget(("docs",), "k")
            found = await navi.asearch(("docs",), query="oat milk")
            with pytest.raises(RuntimeError, match="async"):
                navi.get(("docs",), "k")
            return got, found
        finally:
            await async_memory.close()

    got, found = asyncio.run(run())
    assert got.value == {"text": "oat milk lattes"} and [i.key for i in found] == ["k"]


def test_langmem_with_user_label(memory: MemoryStore) -> None:
    navi = NaviStore(memory, user_label=-1, index={"fields": ["content"]})
    model = ToolChat(script=langmem_script())
    agent = create_agent(model, tools=langmem_tools(), store=navi)
    ask = {"messages": [{"role": "user", "content": "Which seat do I like?"}]}
    check_langmem_runs([agent.invoke({"messages": [{"role": "user", "content": "I like window seats"}]},
                                     user("alice", "1")),
                        agent.invoke(ask, user("alice", "2")), agent.invoke(ask, user("bob", "3"))])
    [item] = memory.list_items(user_id="alice", namespace_prefix=("memories",))
    assert item.content == "Prefers window seats on trains" and item.namespace == ("memories", "alice")


def test_the_docs_example_runs(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    doc = (Path(__file__).parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = doc.split("## LangGraph store", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NAVI_MEMORY_EMBEDDINGS", "hashing")
    model = ToolChat(script=[call("manage_memory", {"content": "Prefers window seats"}), "Noted."])
    namespace: dict = {"model": model}
    exec(compile(code, "docs/integrations.md", "exec"), namespace)
    namespace["memory"].close()
    assert capsys.readouterr().out == "Prefers window seats\n" and model.script == []


def test_user_label_prefixes(memory: MemoryStore) -> None:
    first, last = NaviStore(memory, user_label=1, user_id="bound"), NaviStore(memory, user_label=-1)
    first.put(("memories", "alice"), "k", {"text": "a"})
    first.put(("memories", "bob", "work"), "k", {"text": "b"})
    assert [i.value for i in first.search(("memories", "alice"))] == [{"text": "a"}]
    assert [i.value for i in last.search(("memories", "alice"))] == [{"text": "a"}]
    assert first.search(("memories",)) == []  # too short: the bound user, who has nothing
    assert first.list_namespaces(prefix=("memories", "bob")) == [("memories", "bob", "work")]
    assert first.list_namespaces(prefix=("memories",)) == []
    with pytest.raises(ValidationError, match="user"):
        last.list_namespaces(prefix=("memories", "bob"))  # a negative label cannot be read from a prefix
