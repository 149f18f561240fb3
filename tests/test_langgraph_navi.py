"""What only ``NaviStore`` has: whose memory a call reaches (the run's user, the bound user, or a
namespace label), the value kept as item metadata, the async store, and LangMem with ``user_label``.
The BaseStore behaviour shared with LangGraph's own stores is in test_langgraph_store.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from langchain.agents import create_agent
from langgraph.store.base import GetOp, PutOp, SearchOp

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.errors import ValidationError
from navi_memory.integrations import acting_for
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


def test_query_search_ranks_by_similarity_or_is_the_hybrid_search(memory: MemoryStore) -> None:
    navi = NaviStore(memory, user_id="u1", index={"fields": ["text"]})
    navi.put(("docs",), "train", {"text": "My train to Berlin leaves at nine"})
    navi.put(("docs",), "coffee", {"text": "I drink oat milk lattes"})
    found = navi.search(("docs",), query="Berlin")  # as LangGraph's stores: every item, by cosine similarity
    query = np.asarray(FakeEmbeddings().embed_query("Berlin"))
    expected = {}
    for key, text in (("train", "My train to Berlin leaves at nine"), ("coffee", "I drink oat milk lattes")):
        vector = np.asarray(FakeEmbeddings().embed_documents([text])[0])
        expected[key] = float(query @ vector / (np.linalg.norm(query) * np.linalg.norm(vector)))
    assert [i.key for i in found] == sorted(expected, key=lambda k: -expected[k]) and found[0].key == "train"
    assert [i.score for i in found] == [pytest.approx(expected[i.key], abs=1e-5) for i in found]
    hybrid = NaviStore(memory, user_id="u1", index={"fields": ["text"]}, ranking="hybrid").search(("docs",),
                                                                                                 query="Berlin")
    direct = memory.search("Berlin", user_id="u1", namespace_prefix=("docs",))
    assert [i.key for i in hybrid] == [r.key for r in direct]
    assert [i.score for i in hybrid] == [pytest.approx(r.score) for r in direct]
    with pytest.raises(ValidationError, match="ranking"):
        NaviStore(memory, ranking="fused")


class Scaled(FakeEmbeddings):
    """Vectors of lengths that differ by text: the l2 and inner product scales tell them apart."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[x * (1 + len(t) % 3) for x in vec] for t, vec in zip(texts, super().embed_documents(texts))]

    def embed_query(self, text: str) -> list[float]:
        return [x * 2 for x in super().embed_query(text)]


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
def test_scores_in_the_index_distance_from_each_fields_vector(db_url: str, distance: str) -> None:
    embedder = Scaled()
    with MemoryStore.open(db_url, embeddings=embedder) as memory:
        navi = NaviStore(memory, user_id="u1", index={"fields": ["title", "body"], "distance_type": distance})
        values = {"a": {"title": "oat milk lattes", "body": "the river walk"}, "b": {"title": "train to Berlin"},
                  "c": {"body": "oat milk"}}
        for key, value in values.items():
            navi.put(("docs",), key, value)
        query = np.asarray(embedder.embed_query("oat milk"))

        def score(text: str) -> float:
            vec = np.asarray(embedder.embed_documents([text])[0])
            if distance == "l2":
                return float(-np.linalg.norm(vec - query))
            if distance == "inner_product":
                return float(vec @ query)
            return float(vec @ query / (np.linalg.norm(vec) * np.linalg.norm(query)))

        expected = {key: max(score(t) for t in value.values()) for key, value in values.items()}
        found = navi.search(("docs",), query="oat milk")
        assert [i.key for i in found] == sorted(expected, key=lambda k: -expected[k])
        assert {i.key: i.score for i in found} == {k: pytest.approx(e, abs=1e-4) for k, e in expected.items()}
        # kept beside the item, with their model: a cosine index keeps them only for several texts
        private = memory.get_keyed(user_id="u1", namespace=("docs",), key="a").metadata["_langgraph"]
        assert private["vectors"]["model"] == memory.embedding_model and len(private["vectors"]["vectors"]) == 2
        one = memory.get_keyed(user_id="u1", namespace=("docs",), key="b").metadata
        assert ("_langgraph" in one) is (distance != "cosine")
    with pytest.raises(ValidationError, match="distance_type"):
        NaviStore(memory, index={"fields": ["text"], "distance_type": "hamming"})


@pytest.mark.parametrize("distance", ["l2", "inner_product"])
def test_one_indexed_text_is_embedded_once_whatever_the_distance(db_url: str, distance: str) -> None:
    """A non-cosine index keeps the text's own vector for LangGraph's score; that vector is also the
    item's (the same text, the same model), so a put embeds the text once, new key or replaced."""
    embedder = FakeEmbeddings()
    with MemoryStore.open(db_url, embeddings=embedder) as memory:
        navi = NaviStore(memory, user_id="u1", index={"fields": ["text"], "distance_type": distance})
        for text in ("oat milk lattes", "oat milk lattes", "train to Berlin"):  # new, unchanged, replaced
            embedder.embedded_texts.clear()
            navi.put(("docs",), "a", {"text": text})
            assert embedder.embedded_texts == [text]
            item = memory.get_keyed(user_id="u1", namespace=("docs",), key="a")
            assert item is not None and item.embedding is not None and item.embedding.state == "ready"
            [hit] = memory.search("zzz", user_id="u1", query_embedding=embedder.expected(text), min_score=0)
            assert hit.id == item.id and hit.scores["semantic"] == pytest.approx(1.0, abs=1e-5)  # this text's vector
        found = navi.search(("docs",), query="train to Berlin")
        assert [i.key for i in found] == ["a"]


def test_field_vectors_of_another_model_or_a_failed_embedding_leave_the_items_own(db_url: str, caplog) -> None:
    old = FakeEmbeddings(model="old")
    with MemoryStore.open(db_url, embeddings=old) as memory:
        navi = NaviStore(memory, user_id="u1", index={"fields": ["title", "body"]})
        navi.put(("docs",), "a", {"title": "oat milk lattes", "body": "the river walk"})
        old.fail = True
        navi.put(("docs",), "b", {"title": "oat milk lattes", "body": "a train"})  # stored all the same
        assert "embedding the index fields failed" in caplog.text
        assert "_langgraph" not in memory.get_keyed(user_id="u1", namespace=("docs",), key="b").metadata
        assert navi.get(("docs",), "b").value == {"title": "oat milk lattes", "body": "a train"}
    new = FakeEmbeddings(model="new")
    with MemoryStore.open(db_url, embeddings=new) as memory:
        memory.rebuild_embeddings()
        navi = NaviStore(memory, user_id="u1", index={"fields": ["title", "body"]})
        found = navi.search(("docs",), query="oat milk lattes")
        # the old model's field vectors are not compared with the new model's query: the item's own cosine
        own = {r.key: r.scores["semantic"] for r in memory.search("oat milk lattes", user_id="u1", min_similarity=0.0)}
        assert {i.key: i.score for i in found} == {k: pytest.approx(v, abs=1e-5) for k, v in own.items()}


def test_a_ttl_config_refreshes_on_read_only_when_it_says_so(memory: MemoryStore, clock) -> None:
    assert NaviStore(memory, user_id="u1", ttl={"default_ttl": 5}).ttl_config == {
        "default_ttl": 5, "refresh_on_read": False}
    assert NaviStore(memory, user_id="u1", ttl={"refresh_on_read": True}).ttl_config == {"refresh_on_read": True}
    silent = NaviStore(memory, user_id="u1", ttl={"default_ttl": 5})
    silent.put(("docs",), "k", {"text": "x"})
    before = memory.get_keyed(user_id="u1", namespace=("docs",), key="k").expires_at
    clock.advance(minutes=2)
    silent.get(("docs",), "k")
    silent.search(("docs",))
    assert memory.get_keyed(user_id="u1", namespace=("docs",), key="k").expires_at == before
    silent.get(("docs",), "k", refresh_ttl=True)  # a read that asks still refreshes
    assert memory.get_keyed(user_id="u1", namespace=("docs",), key="k").expires_at == before + timedelta(minutes=2)


def test_batch_in_a_run_uses_the_runs_user(memory: MemoryStore) -> None:
    from langchain_core.runnables import RunnableLambda

    navi = NaviStore(memory)
    put = RunnableLambda(lambda _: navi.batch([PutOp(("notes",), "k", {"text": "hi"}), GetOp(("notes",), "k")]))
    put.invoke(None, {"configurable": {"user_id": "dana"}})
    put.invoke(None, {"configurable": {"langgraph_user_id": "erin"}})
    assert memory.get_keyed(user_id="dana", namespace=("notes",), key="k") is not None
    assert memory.get_keyed(user_id="erin", namespace=("notes",), key="k") is not None
    bound = NaviStore(memory, user_id="fallback")
    assert bound.batch([SearchOp(("notes",))]) == [[]]  # outside a run: the bound user
    same = RunnableLambda(lambda _: bound.batch([GetOp(("notes",), "k")]))
    assert same.invoke(None, {"configurable": {"user_id": "fallback"}}) == [None]


def test_two_sources_naming_different_users_are_refused(memory: MemoryStore) -> None:
    from langchain_core.runnables import RunnableLambda

    def put(store: NaviStore) -> RunnableLambda:
        return RunnableLambda(lambda _: store.put(("notes",), "k", {"text": "hi"}))

    with pytest.raises(ValidationError, match="conflicting users"):  # bound to alice, run for bob
        put(NaviStore(memory, user_id="alice")).invoke(None, {"configurable": {"user_id": "bob"}})
    with pytest.raises(ValidationError, match="conflicting users"):
        put(NaviStore(memory)).invoke(None, {"configurable": {"user_id": "alice", "langgraph_user_id": "bob"}})
    labelled = NaviStore(memory, user_label=1)
    read_bob = RunnableLambda(lambda _: labelled.get(("memories", "bob"), "k"))
    with pytest.raises(ValidationError, match="another user"):  # alice's run naming bob's namespace
        read_bob.invoke(None, {"configurable": {"user_id": "alice"}})
    with pytest.raises(ValidationError, match="another user"):
        NaviStore(memory, user_id="alice", user_label=1).put(("memories", "bob"), "k", {"text": "x"})
    assert read_bob.invoke(None, {"configurable": {"user_id": "bob"}}) is None
    labelled.put(("memories", "bob"), "k", {"text": "outside a run the label decides"})
    assert memory.get_keyed(user_id="bob", namespace=("memories", "bob"), key="k") is not None
    assert [u["id"] for u in memory.list_users()] == ["bob"]  # nothing reached alice


def test_the_runtime_context_names_the_user(memory: MemoryStore) -> None:
    from dataclasses import dataclass

    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime
    from typing_extensions import TypedDict

    @dataclass
    class Ctx:
        user_id: str

    class State(TypedDict):
        text: str

    def remember(state: State, runtime: Runtime[Ctx]) -> State:
        assert runtime.store is not None
        runtime.store.put(("notes",), "k", {"text": state["text"]})
        return state

    graph = StateGraph(State, context_schema=Ctx)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    app = graph.compile(store=NaviStore(memory))
    app.invoke({"text": "bob's"}, context=Ctx(user_id="bob"))
    item = memory.get_keyed(user_id="bob", namespace=("notes",), key="k")
    assert item is not None and item.metadata["text"] == "bob's"
    bound = graph.compile(store=NaviStore(memory, user_id="alice"))
    with pytest.raises(ValidationError, match="conflicting users"):
        bound.invoke({"text": "x"}, context=Ctx(user_id="bob"))


def test_async_store_is_native_and_blocking_calls_come_from_worker_threads(db_url: str) -> None:
    async def run() -> tuple:
        async_memory = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings())
        try:
            navi = NaviStore(async_memory, user_id="u1", index={"fields": ["text"]})
            await navi.aput(("docs",), "k", {"text": "oat milk lattes"})
            got = await navi.aget(("docs",), "k")
            found = await navi.asearch(("docs",), query="oat milk")
            with pytest.raises(asyncio.InvalidStateError, match="aget"):
                navi.get(("docs",), "k")  # in the loop's own thread it would block the loop
            await asyncio.to_thread(navi.put, ("docs",), "t", {"text": "from a thread"})
            from_thread = await asyncio.to_thread(navi.get, ("docs",), "t")
            return navi, got, found, from_thread
        finally:
            await async_memory.close()

    navi, got, found, from_thread = asyncio.run(run())
    assert got.value == {"text": "oat milk lattes"} and [i.key for i in found] == ["k"]
    assert from_thread.value == {"text": "from a thread"}
    with pytest.raises(ValidationError, match="event loop running"):
        navi.get(("docs",), "k")  # its loop has ended


def test_blocking_calls_from_worker_threads_run_together_as_awaited_ones_do(db_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    async def run() -> tuple:
        async_memory = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings())
        calls: list[str] = []
        real = async_memory.get_keyed

        async def slow(*args, **kwargs):  # keeps the lanes busy, so calls queue up behind them
            calls.append("get_keyed")
            await asyncio.sleep(0.05)
            return await real(*args, **kwargs)

        async_memory.get_keyed = slow  # type: ignore[method-assign]
        try:
            navi = NaviStore(async_memory, user_id="u1")
            await navi.aput(("docs",), "k", {"text": "shared"})
            calls.clear()
            loop = asyncio.get_running_loop()
            with ThreadPoolExecutor(16) as threads:
                reads = await asyncio.gather(*(loop.run_in_executor(threads, navi.get, ("docs",), "k")
                                               for _ in range(80)))
            return reads, calls
        finally:
            await async_memory.close()

    reads, calls = asyncio.run(run())
    assert [r.value for r in reads] == [{"text": "shared"}] * 80
    assert len(calls) < 60  # 80 calls from 16 threads (8 lanes), merged as a gather's are


def test_concurrent_calls_run_together_each_with_its_own_user_result_and_error(db_url: str) -> None:
    from navi_memory.integrations import langgraph as module

    async def as_user(navi: NaviStore, user: str, work):
        with acting_for(user):
            return await work(navi)

    async def run() -> tuple:
        async_memory = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings())
        calls: list[str] = []
        real = async_memory.get_keyed

        async def counted(*args, **kwargs):
            calls.append("get_keyed")
            return await real(*args, **kwargs)

        async_memory.get_keyed = counted  # type: ignore[method-assign]
        try:
            navi = NaviStore(async_memory, index={"fields": ["text"]})
            await asyncio.gather(*(as_user(navi, user, lambda n, u=user, i=i: n.aput(("docs",), f"k{i}", {"text": u}))
                                   for user in ("alice", "bob") for i in range(20)))
            reads = await asyncio.gather(*(as_user(navi, user, lambda n, i=i: n.aget(("docs",), f"k{i % 5}"))
                                           for user in ("alice", "bob") for i in range(40)))
            # one bad call among many: only its caller sees the error
            outcomes = await asyncio.gather(
                *(as_user(navi, "alice", lambda n, i=i: n.aget(("docs",), f"k{i}")) for i in range(10)),
                as_user(navi, "alice", lambda n: n.aput(("docs",), "bad", {"_langgraph": 1})),  # refused at once
                as_user(navi, "alice", lambda n: n.aput(("docs",), "x" * 300, {"text": "y"})),  # refused by the store
                *(as_user(navi, "bob", lambda n, i=i: n.aput(("docs",), f"new{i}", {"text": "z"})) for i in range(5)),
                return_exceptions=True)
            written = await asyncio.gather(*(as_user(navi, "bob", lambda n, i=i: n.aget(("docs",), f"new{i}"))
                                             for i in range(5)))
            outcomes.append(written)
            return reads, outcomes, calls
        finally:
            await async_memory.close()

    reads, outcomes, calls = asyncio.run(run())
    assert [r.value["text"] for r in reads] == ["alice"] * 40 + ["bob"] * 40
    assert len(calls) < 80  # the same key read once per merged batch
    assert all(getattr(o, "value", None) == {"text": "alice"} for o in outcomes[:10])
    assert isinstance(outcomes[10], ValidationError) and isinstance(outcomes[11], ValidationError)
    assert outcomes[12:17] == [None] * 5 and [w.value for w in outcomes[17]] == [{"text": "z"}] * 5
    assert module.MERGED_OPS >= 100


def test_reads_asked_twice_in_a_batch_with_lists_for_tuples_are_read_once(memory: MemoryStore) -> None:
    from langgraph.store.base import ListNamespacesOp, MatchCondition

    navi = NaviStore(memory, user_id="u1")
    navi.put(("docs", "a"), "k", {"text": "x"})
    listing = ListNamespacesOp(match_conditions=(MatchCondition("prefix", ["docs"]),), limit=10)  # type: ignore[arg-type]
    found = navi.batch([listing, listing, GetOp(["docs", "a"], "k"), GetOp(("docs", "a"), "k"),  # type: ignore[arg-type]
                        SearchOp(["docs"], filter={"text": "x"}), SearchOp(("docs",), filter={"text": "x"})])
    assert found[0] == found[1] == [("docs", "a")] and found[0] is not found[1]
    assert found[2].value == found[3].value == {"text": "x"}
    assert [i.key for i in found[4]] == [i.key for i in found[5]] == ["k"]
    assert navi.list_namespaces(prefix=["docs"]) == [("docs", "a")]  # type: ignore[arg-type]


def test_a_sync_tool_under_ainvoke_uses_a_store_over_an_async_store(db_url: str) -> None:
    from langchain_core.tools import tool
    from langgraph.config import get_store

    @tool
    def save_note(text: str) -> str:
        """Save a note."""
        get_store().put(("notes",), "n1", {"text": text})
        return "saved"

    async def run() -> tuple:
        async_memory = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings())
        try:
            model = ToolChat(script=[call("save_note", {"text": "likes tea"}), "Saved."])
            agent = create_agent(model, tools=[save_note], store=NaviStore(async_memory))
            result = await agent.ainvoke({"messages": [{"role": "user", "content": "I like tea"}]},
                                         {"configurable": {"user_id": "ana"}})
            return result, await async_memory.get_keyed(user_id="ana", namespace=("notes",), key="n1")
        finally:
            await async_memory.close()

    result, item = asyncio.run(run())
    assert result["messages"][-1].content == "Saved." and item.metadata["text"] == "likes tea"


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
    first, last = NaviStore(memory, user_label=1), NaviStore(memory, user_label=-1)
    first.put(("memories", "alice"), "k", {"text": "a"})
    first.put(("memories", "bob", "work"), "k", {"text": "b"})
    assert [i.value for i in first.search(("memories", "alice"))] == [{"text": "a"}]
    assert [i.value for i in last.search(("memories", "alice"))] == [{"text": "a"}]
    with pytest.raises(ValidationError, match="does not know the user"):
        first.search(("memories",))  # too short to name the user, and no run or binding names one
    assert NaviStore(memory, user_label=1, user_id="carol").search(("memories",)) == []  # the bound user's
    assert first.list_namespaces(prefix=("memories", "bob")) == [("memories", "bob", "work")]
    with pytest.raises(ValidationError, match="does not know the user"):
        first.list_namespaces(prefix=("memories",))
    with pytest.raises(ValidationError, match="user"):
        last.list_namespaces(prefix=("memories", "bob"))  # a negative label cannot be read from a prefix
