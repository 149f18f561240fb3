"""Keyed items (namespace + key, LangGraph's store model) on every backend: insert or replace,
expiry, TTL refresh, namespaces listed like BaseStore.list_namespaces, namespace-prefix search."""

from __future__ import annotations

from datetime import timedelta

import pytest

from navi_memory import AsyncMemoryStore, ValidationError

from .fakes import FakeClock, FakeEmbeddings
from .test_postgres import novector_url  # noqa: F401  (a fixture: a fresh database without pgvector)

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


U = "u1"


def test_a_vector_given_with_a_put_is_kept_and_nothing_is_embedded(store, fake_embeddings):
    def semantic(text: str) -> float:
        [hit] = store.search("zzz", user_id=U, query_embedding=fake_embeddings.expected(text), min_score=0)
        return hit.scores["semantic"]

    for content, vector_of in (("likes green tea", "a new key"), ("likes black coffee", "a replaced text"),
                               ("likes black coffee", "an unchanged text")):
        item = store.put_keyed(user_id=U, namespace=("prefs",), key="k", content=content,
                               embedding=fake_embeddings.expected(vector_of))
        assert fake_embeddings.document_calls == 0 and item.embedding.state == "ready"
        if vector_of != "an unchanged text":  # the text's vector stays: nothing to keep
            assert semantic(vector_of) == pytest.approx(1.0, abs=1e-5)
    assert semantic("a replaced text") == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValidationError, match="embed=False"):
        store.put_keyed(user_id=U, namespace=("prefs",), key="k", content="x", embed=False,
                        embedding=fake_embeddings.expected("x"))
    with pytest.raises(ValidationError, match="embedding"):
        store.put_keyed(user_id=U, namespace=("prefs",), key="k", content="x", embedding=[1.0, float("nan")])
    assert store.get_keyed(user_id=U, namespace=("prefs",), key="k").content == "likes black coffee"


def test_put_inserts_then_replaces_keeping_id_and_creation(store, clock, fake_embeddings):
    first = store.put_keyed(user_id=U, namespace=("memories", "u1"), key="k1", content="likes green tea",
                            metadata={"kind": "pref"})
    assert first.namespace == ("memories", "u1") and first.key == "k1" and first.embedding.state == "ready"
    assert store.get_keyed(user_id=U, namespace=("memories", "u1"), key="k1").content == "likes green tea"
    calls = fake_embeddings.document_calls
    clock.advance(minutes=5)
    same = store.put_keyed(user_id=U, namespace=("memories", "u1"), key="k1", content="likes green tea",
                           metadata={"kind": "pref", "n": 2})
    assert fake_embeddings.document_calls == calls  # same text: the vector stays
    assert (same.id, same.created_at, same.metadata) == (first.id, first.created_at, {"kind": "pref", "n": 2})
    assert same.updated_at > first.updated_at
    clock.advance(minutes=5)
    changed = store.put_keyed(user_id=U, namespace=("memories", "u1"), key="k1", content="likes black coffee")
    assert changed.id == first.id and changed.content == "likes black coffee" and changed.embedding.state == "ready"
    assert fake_embeddings.document_calls == calls + 1
    assert store.count_items(user_id=U) == 1
    assert store.search("coffee", user_id=U)[0].key == "k1"
    other = store.put_keyed(user_id="u2", namespace=("memories", "u1"), key="k1", content="someone else")
    assert other.id != first.id  # the key is per user
    assert store.get_keyed(user_id=U, namespace=("memories", "u1"), key="k1").content == "likes black coffee"


def test_embed_false_keeps_no_vector_and_backfill_leaves_it(store, fake_embeddings):
    item = store.put_keyed(user_id=U, namespace=("docs",), key="raw", content="not for vectors", embed=False)
    assert (item.embedding.state, item.embedding.error) == ("skipped", None)  # by choice, not a failure
    assert store.get(item.id, user_id=U).embedding.state == "skipped"
    status = store.embedding_status()
    assert (status["skipped"], status["error"], status["pending"], status["items"]) == (1, 0, 0, 1)
    calls = fake_embeddings.document_calls
    assert store.backfill(user_id=U).remaining == 0  # nothing left to do: the item is not owed a vector
    store.rebuild_embeddings(user_id=U)
    assert fake_embeddings.document_calls == calls
    assert store.search("vectors", user_id=U)[0].key == "raw"  # full text still finds it
    again = store.put_keyed(user_id=U, namespace=("docs",), key="raw", content="not for vectors")
    assert again.embedding.state == "ready"  # embed=True again: embedded
    back = store.put_keyed(user_id=U, namespace=("docs",), key="raw", content="not for vectors", embed=False)
    assert back.embedding.state == "skipped"


def test_expiry_delete_and_ttl_refresh(store, clock):
    soon = clock() + timedelta(minutes=10)
    store.put_keyed(user_id=U, namespace=("s",), key="a", content="short lived", expires_at=soon)
    store.put_keyed(user_id=U, namespace=("s",), key="b", content="refreshed", expires_at=soon)
    assert store.touch_keyed(user_id=U, namespace=("s",), key="b", expires_at=clock() + timedelta(hours=1))
    assert not store.touch_keyed(user_id=U, namespace=("s",), key="nope", expires_at=None)
    clock.advance(minutes=20)
    assert store.get_keyed(user_id=U, namespace=("s",), key="a") is None
    refreshed = store.get_keyed(user_id=U, namespace=("s",), key="b")
    assert refreshed is not None
    assert store.touch_items([refreshed.id], user_id=U, expires_at=None) == 1
    assert store.get_keyed(user_id=U, namespace=("s",), key="b").expires_at is None
    # an expired key is replaced by a new put (the row is still there, so it keeps its id)
    revived = store.put_keyed(user_id=U, namespace=("s",), key="a", content="back again")
    assert store.get_keyed(user_id=U, namespace=("s",), key="a").id == revived.id
    assert store.delete_keyed(user_id=U, namespace=("s",), key="a") is True
    assert store.delete_keyed(user_id=U, namespace=("s",), key="a") is False
    assert store.get_keyed(user_id=U, namespace=("s",), key="a") is None


NAMESPACES = [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z",), ("a_b",), ("axb",), ("docs", "u1"),
              ("docs", "u10")]


@pytest.fixture
def spaced(store):
    for number, namespace in enumerate(NAMESPACES):
        store.put_keyed(user_id=U, namespace=namespace, key="k", content=f"note number {number}", embed=False)
    return store


@pytest.mark.parametrize("kwargs, expected", [
    ({}, sorted(NAMESPACES)),
    ({"prefix": ("a",)}, [("a", "b", "c"), ("a", "b", "d"), ("a", "x")]),
    ({"prefix": ("a", "b")}, [("a", "b", "c"), ("a", "b", "d")]),
    ({"prefix": ("a", "*", "c")}, [("a", "b", "c")]),
    ({"prefix": ("*", "u1")}, [("docs", "u1")]),
    ({"suffix": ("c",)}, [("a", "b", "c")]),
    ({"suffix": ("*", "d")}, [("a", "b", "d")]),
    ({"prefix": ("a",), "suffix": ("x",)}, [("a", "x")]),
    ({"prefix": ("a_b",)}, [("a_b",)]),
    ({"prefix": ("A",)}, []),
    ({"max_depth": 1}, [("a",), ("a_b",), ("axb",), ("docs",), ("z",)]),
    ({"prefix": ("a",), "max_depth": 2}, [("a", "b"), ("a", "x")]),
    ({"limit": 2, "offset": 1}, sorted(NAMESPACES)[1:3]),
])
def test_list_namespaces_follows_basestore(spaced, kwargs, expected):
    assert spaced.list_namespaces(user_id=U, **kwargs) == expected


def test_namespace_prefix_search_and_listing(spaced, clock):
    def keys(results):
        return sorted(r.namespace for r in results)

    assert keys(spaced.search("note", user_id=U, namespace_prefix=("docs", "u1"))) == [("docs", "u1")]
    assert keys(spaced.search("note", user_id=U, namespace_prefix=("a_b",))) == [("a_b",)]
    assert keys(spaced.search("note", user_id=U, namespace_prefix=("a",), limit=10)) == [
        ("a", "b", "c"), ("a", "b", "d"), ("a", "x")]
    spaced.add(user_id=U, content="a plain note outside every namespace")
    assert len(spaced.search("note", user_id=U, limit=20)) == len(NAMESPACES) + 1
    clock.advance(minutes=1)
    spaced.put_keyed(user_id=U, namespace=("a", "b", "c"), key="k", content="note number 0, edited")
    listed = spaced.list_items(user_id=U, namespace_prefix=("a",), order="updated")
    assert [i.namespace for i in listed][0] == ("a", "b", "c") and len(listed) == 3
    assert [i.namespace for i in spaced.list_items(user_id=U, namespace_prefix=("a",), limit=1, offset=1,
                                                   order="updated")] == [listed[1].namespace]
    assert spaced.count_items(user_id=U, namespace_prefix=("docs",)) == 2


@pytest.mark.parametrize("namespace, key", [
    ((), "k"), (("a.b",), "k"), (("",), "k"), ("ab", "k"), (("a", 1), "k"), (("a",), ""), (("a",), None),
])
def test_bad_namespaces_and_keys_are_refused(store, namespace, key):
    with pytest.raises(ValidationError):
        store.put_keyed(user_id=U, namespace=namespace, key=key, content="x")


def test_bad_list_namespaces_conditions_are_refused(store):
    with pytest.raises(ValidationError):
        store.list_namespaces(user_id=U, prefix="a")
    with pytest.raises(ValidationError):
        store.search("x", user_id=U, namespace_prefix=("a.b",))


def test_concurrent_puts_of_one_new_key_make_one_item(store):
    from concurrent.futures import ThreadPoolExecutor

    def put(n: int) -> int:
        return store.put_keyed(user_id=U, namespace=("race",), key="k", content=f"writer {n}", embed=False).id

    with ThreadPoolExecutor(6) as pool:
        ids = set(pool.map(put, range(12)))
    assert len(ids) == 1 and store.count_items(user_id=U) == 1


async def test_the_async_store_has_the_keyed_api(new_db_url):
    store = await AsyncMemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=FakeClock())
    try:
        item = await store.put_keyed(user_id=U, namespace=("x", "y"), key="k", content="async value")
        assert (await store.get_keyed(user_id=U, namespace=("x", "y"), key="k")).id == item.id
        assert await store.list_namespaces(user_id=U) == [("x", "y")]
        assert await store.delete_keyed(user_id=U, namespace=("x", "y"), key="k")
    finally:
        await store.close()


@pytest.mark.postgres
def test_keyed_items_filters_and_scopes_without_pgvector(novector_url):  # noqa: F811
    from navi_memory import MemoryStore

    with MemoryStore.open(novector_url, embeddings=FakeEmbeddings()) as store:
        first = store.put_keyed(user_id=U, namespace=("a", "b"), key="k", content="lexical only",
                                metadata={"kind": "x"}, agent_id="planner")
        again = store.put_keyed(user_id=U, namespace=("a", "b"), key="k", content="lexical only, edited",
                                metadata={"kind": "y"}, embed=False)
        assert again.id == first.id and again.embedding is None
        assert [r.key for r in store.search("edited", user_id=U, namespace_prefix=("a",), filters={"kind": "y"})] == ["k"]
        assert store.list_namespaces(user_id=U, max_depth=1) == [("a",)]
        store.upsert_fact(user_id=U, category="profile", key="city", value="Rome", agent_id="planner")
        store.upsert_fact(user_id=U, category="profile", key="city", value="Oslo")
        assert len(store.get_all_facts(user_id=U)) == 2


def test_embed_false_shows_as_skipped_on_the_item_page_and_its_json(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.app import create_app

    from .ui_helpers import LOCAL

    item = store.put_keyed(user_id=U, namespace=("docs",), key="raw", content="not for vectors", embed=False)
    client = TestClient(create_app(store), base_url=LOCAL)
    data = client.get(f"/api/users/{U}/items/{item.id}").json()
    assert data["item"]["embedding"]["state"] == "skipped" and data["item"]["embedding"]["error"] is None
    page = client.get(f"/users/{U}/items/{item.id}").text
    assert '<span class="state skipped"' in page and "not indexed" not in page and 'class="error"' not in page
