"""LangGraph ``BaseStore`` behaviour, the same tests for every implementation.

``inmemory`` and ``postgres`` are LangGraph's own ``InMemoryStore`` and ``PostgresStore`` (on the
tests' PostgreSQL); ``navi-*`` is ``NaviStore`` over a ``MemoryStore``. Where the implementations
differ, the test says what each kind does: docs/integrations.md's comparison table repeats these
statements.
"""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp

from .langgraph_support import Make, StoreCase, case, make, ttl_case, ttl_make  # noqa: F401 (fixtures)

pytest.importorskip("langgraph.store.postgres")

def keys(items: list) -> list[str]:
    return [item.key for item in items]


# -- put / get / delete ---------------------------------------------------------------------------

def test_put_get_round_trips_the_value(case: StoreCase) -> None:
    value = {"text": "I drink oat milk lattes", "n": 3, "nested": {"a": [1, 2, {"b": None}]}, "ok": True}
    case.store.put(("memories", "alice"), "k1", value)
    item = case.store.get(("memories", "alice"), "k1")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("memories", "alice"), "k1", value)
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    assert case.store.get(("memories", "alice"), "missing") is None
    assert case.store.get(("memories", "bob"), "k1") is None


def test_delete_removes_and_missing_delete_is_silent(case: StoreCase) -> None:
    case.store.put(("memories", "alice"), "k1", {"text": "x"})
    case.store.delete(("memories", "alice"), "k1")
    assert case.store.get(("memories", "alice"), "k1") is None
    case.store.delete(("memories", "alice"), "k1")
    assert case.store.search(("memories",)) == []


# overwriting: does the item keep its first created_at?
KEEPS_CREATED_AT = {"inmemory": False, "postgres": True, "navi": True}


def test_overwrite_replaces_the_value(case: StoreCase) -> None:
    case.store.put(("memories", "alice"), "k1", {"text": "first", "old": 1})
    first = case.store.get(("memories", "alice"), "k1")
    case.tick()
    case.store.put(("memories", "alice"), "k1", {"text": "second"})
    second = case.store.get(("memories", "alice"), "k1")
    assert second.value == {"text": "second"}
    assert second.updated_at > first.updated_at
    assert (second.created_at == first.created_at) is KEEPS_CREATED_AT[case.kind]
    assert len(case.store.search(("memories",))) == 1


def test_batch_runs_ops_in_order_and_returns_one_result_each(case: StoreCase) -> None:
    ns = ("memories", "alice")
    results = case.store.batch([ListNamespacesOp(), PutOp(ns, "k1", {"text": "a"}), GetOp(ns, "k1"),
                                GetOp(ns, "nope"), SearchOp(("memories",))])
    assert results[0] == [] and results[1] is None and results[3] is None
    # puts are applied after the reads of the same batch in both LangGraph stores
    assert results[2] is None and results[4] == []
    assert case.store.get(ns, "k1").value == {"text": "a"}


def test_async_methods_match_sync(case: StoreCase) -> None:
    async def run() -> tuple:
        await case.store.aput(("memories", "alice"), "k1", {"text": "async"})
        got = await case.store.aget(("memories", "alice"), "k1")
        found = await case.store.asearch(("memories",), filter={"text": "async"})
        spaces = await case.store.alist_namespaces()
        await case.store.adelete(("memories", "alice"), "k1")
        return got, found, spaces, await case.store.aget(("memories", "alice"), "k1")

    got, found, spaces, gone = asyncio.run(run())
    assert got.value == {"text": "async"} and keys(found) == ["k1"]
    assert spaces == [("memories", "alice")] and gone is None


# -- namespaces ----------------------------------------------------------------------------------

# InMemoryStore lists a namespace once anything looked into it (a get of a missing key)
GET_LISTS_NAMESPACE = {"inmemory": True, "postgres": False, "navi": False}


def test_reading_a_missing_key_does_not_make_a_namespace(case: StoreCase) -> None:
    assert case.store.get(("ghost", "alice"), "k") is None
    assert (case.store.list_namespaces() == [("ghost", "alice")]) is GET_LISTS_NAMESPACE[case.kind]


def fill_namespaces(case: StoreCase) -> None:
    for ns in [("memories", "alice"), ("memories", "bob"), ("memories", "bob", "work"), ("prefs", "alice"),
               ("memoriesX", "carol")]:
        case.store.put(ns, "k", {"text": "x"})


def test_list_namespaces_prefix_suffix_wildcard_depth(case: StoreCase) -> None:
    fill_namespaces(case)
    s = case.store
    assert s.list_namespaces() == [("memories", "alice"), ("memories", "bob"), ("memories", "bob", "work"),
                                   ("memoriesX", "carol"), ("prefs", "alice")]
    assert s.list_namespaces(prefix=("memories",)) == [("memories", "alice"), ("memories", "bob"),
                                                       ("memories", "bob", "work")]
    assert s.list_namespaces(suffix=("alice",)) == [("memories", "alice"), ("prefs", "alice")]
    assert s.list_namespaces(prefix=("*", "alice")) == [("memories", "alice"), ("prefs", "alice")]
    assert s.list_namespaces(prefix=("memories",), suffix=("work",)) == [("memories", "bob", "work")]
    assert s.list_namespaces(max_depth=1) == [("memories",), ("memoriesX",), ("prefs",)]
    assert s.list_namespaces(prefix=("memories",), max_depth=2) == [("memories", "alice"), ("memories", "bob")]
    assert s.list_namespaces(limit=2, offset=1) == [("memories", "bob"), ("memories", "bob", "work")]


def test_search_prefix_matches_whole_labels(case: StoreCase) -> None:
    fill_namespaces(case)
    assert sorted(i.namespace for i in case.store.search(("memories",))) == [
        ("memories", "alice"), ("memories", "bob"), ("memories", "bob", "work")]
    assert [i.namespace for i in case.store.search(("memories", "bob", "work"))] == [("memories", "bob", "work")]
    assert case.store.search(("memo",)) == []


# -- search without a query ----------------------------------------------------------------------

# the order of a search without a query, after putting a, b, c and overwriting a
UNQUERIED_ORDER = {"inmemory": ["a", "b", "c"], "postgres": ["a", "c", "b"], "navi": ["a", "c", "b"]}


def test_search_without_query_order_limit_offset(case: StoreCase) -> None:
    ns = ("docs", "alice")
    for key in "abc":
        case.store.put(ns, key, {"text": key})
        case.tick()
    case.store.put(ns, "a", {"text": "a2"})
    order = UNQUERIED_ORDER[case.kind]
    found = case.store.search(("docs",))
    assert keys(found) == order and all(i.score is None for i in found)
    assert keys(case.store.search(("docs",), limit=2)) == order[:2]
    assert keys(case.store.search(("docs",), limit=2, offset=1)) == order[1:3]
    assert case.store.search(("docs",), offset=3) == []


def fill_filtered(case: StoreCase) -> None:
    ns = ("docs", "alice")
    rows = [("k1", {"kind": "note", "n": 5, "tags": ["a"], "meta": {"lang": "en", "src": "chat"}}),
            ("k2", {"kind": "fact", "n": 10, "meta": {"lang": "de"}}),
            ("k3", {"kind": "note", "n": 20, "done": True})]
    for key, value in rows:
        case.store.put(ns, key, value)
        case.tick()


def filtered(case: StoreCase, flt: dict) -> list[str]:
    return sorted(keys(case.store.search(("docs",), filter=flt)))


def test_filter_equality_and_ne(case: StoreCase) -> None:
    fill_filtered(case)
    assert filtered(case, {"kind": "note"}) == ["k1", "k3"]
    assert filtered(case, {"kind": "note", "n": 20}) == ["k3"]
    assert filtered(case, {"kind": {"$eq": "fact"}}) == ["k2"]
    assert filtered(case, {"done": True}) == ["k3"]
    assert filtered(case, {"tags": ["a"]}) == ["k1"]
    assert filtered(case, {"kind": "nothing"}) == []


# {"kind": {"$ne": "fact"}}: are items without... (all three have "kind")
# {"done": {"$ne": True}}: k1 and k2 have no "done" at all
NE_MISSING = {"inmemory": ["k1", "k2"], "postgres": [], "navi": ["k1", "k2"]}


def test_filter_ne_and_missing_fields(case: StoreCase) -> None:
    fill_filtered(case)
    assert filtered(case, {"kind": {"$ne": "fact"}}) == ["k1", "k3"]
    assert filtered(case, {"done": {"$ne": True}}) == NE_MISSING[case.kind]


# range operators over n = 5, 10, 20: numbers compared as numbers, or as their text ("10" < "7")?
NUMERIC = {"$gt": 7}, {"$gte": 5, "$lt": 20}, {"$lte": 5}
RANGES = {"inmemory": [["k2", "k3"], ["k1", "k2"], ["k1"]],
          "postgres": [[], [], ["k1", "k2", "k3"]],
          "navi": [["k2", "k3"], ["k1", "k2"], ["k1"]]}


def test_filter_range_operators(case: StoreCase) -> None:
    fill_filtered(case)
    assert [filtered(case, {"n": flt}) for flt in NUMERIC] == RANGES[case.kind]


# a nested dict filter ({"meta": {"lang": "en"}}) matches the stored objects that contain it;
# PostgresStore reads its keys as operators and raises ValueError
NESTED_FILTER = {"inmemory": True, "postgres": False, "navi": True}


def test_filter_nested_dict(case: StoreCase) -> None:
    fill_filtered(case)
    if not NESTED_FILTER[case.kind]:
        with pytest.raises(ValueError, match="Unsupported operator"):
            filtered(case, {"meta": {"lang": "de"}})
        return
    assert filtered(case, {"meta": {"lang": "de"}}) == ["k2"]
    assert filtered(case, {"meta": {"lang": "en"}}) == ["k1"]
    assert filtered(case, {"meta": {"lang": "en", "src": "web"}}) == []


# a filter key with a dot: the key itself, or also the nested path (LangGraph's SqliteStore: that path only)
DOTTED = {"inmemory": ["flat"], "postgres": ["flat"], "navi": ["flat", "nested"]}


def test_a_dotted_filter_key(case: StoreCase) -> None:
    ns = ("docs", "alice")
    case.store.put(ns, "flat", {"a.b": 1})
    case.store.put(ns, "nested", {"a": {"b": 1}})
    assert filtered(case, {"a.b": 1}) == DOTTED[case.kind]
    if NESTED_FILTER[case.kind]:
        assert filtered(case, {"a": {"b": 1}}) == ["nested"]


# $in, $nin, $exists: only NaviStore has them (LangGraph's stores raise ValueError)
MORE_OPERATORS = {"inmemory": False, "postgres": False, "navi": True}


def test_filter_in_nin_exists(case: StoreCase) -> None:
    fill_filtered(case)
    if not MORE_OPERATORS[case.kind]:
        for flt in ({"kind": {"$in": ["fact"]}}, {"kind": {"$nin": ["fact"]}}, {"done": {"$exists": True}}):
            with pytest.raises(ValueError, match="Unsupported operator"):
                case.store.search(("docs",), filter=flt)
        return
    assert filtered(case, {"kind": {"$in": ["fact", "other"]}}) == ["k2"]
    assert filtered(case, {"kind": {"$nin": ["fact"]}}) == ["k1", "k3"]
    assert filtered(case, {"done": {"$exists": True}}) == ["k3"]
    assert filtered(case, {"done": {"$exists": False}}) == ["k1", "k2"]


# -- search with a query -------------------------------------------------------------------------

def fill_semantic(case: StoreCase) -> None:
    ns = ("docs", "alice")
    case.store.put(ns, "coffee", {"text": "I drink oat milk lattes every morning", "kind": "pref"})
    case.store.put(ns, "train", {"text": "My train to Berlin leaves at nine", "kind": "plan"})
    case.store.put(ns, "cat", {"text": "The cat is called Miso", "kind": "pref"})
    case.store.put(ns, "hidden", {"text": "oat milk lattes are secret"}, index=False)
    case.store.put(ns, "other", {"text": "not indexed text", "title": "oat milk lattes"}, index=["title"])


def test_query_search_ranks_by_meaning_with_scores(make: Make) -> None:
    case = make(index=True)
    fill_semantic(case)
    found = case.store.search(("docs",), query="oat milk lattes", limit=3)
    assert found[0].key in ("coffee", "other")
    assert {"coffee", "other"} <= set(keys(found[:2]))
    scores = [i.score for i in found]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
    only_plans = case.store.search(("docs",), query="train to Berlin", filter={"kind": "plan"})
    assert keys(only_plans) == ["train"]
    page = case.store.search(("docs",), query="oat milk lattes", limit=1, offset=1)
    assert keys(page) == [found[1].key]


# an item put with index=False, in a search with a query
NOT_INDEXED = {"inmemory": "after the scored items, score None", "postgres": "not returned",
               "navi": "after the scored items, score None"}


def test_index_false_items_in_query_search(make: Make) -> None:
    case = make(index=True)
    fill_semantic(case)
    found = case.store.search(("docs",), query="oat milk lattes", limit=10)
    hidden = [i for i in found if i.key == "hidden"]
    if NOT_INDEXED[case.kind] == "not returned":
        assert hidden == []
    else:
        assert found[-1].key == "hidden" and found[-1].score is None
    assert case.store.get(("docs", "alice"), "hidden").value == {"text": "oat milk lattes are secret"}
    assert "hidden" in keys(case.store.search(("docs",), limit=10))


def test_each_index_field_is_scored_on_its_own(make: Make) -> None:
    case = make(index=["title", "body"])
    ns = ("docs", "alice")
    case.store.put(ns, "both", {"title": "oat milk lattes", "body": "a long walk along the river to the station"})
    case.store.put(ns, "title", {"title": "oat milk lattes"})
    case.store.put(ns, "body", {"body": "a long walk along the river to the station"})
    found = {i.key: i.score for i in case.store.search(("docs",), query="oat milk lattes")}
    # the item with both fields scores as its best field (the same text as the one-field item)
    assert found["both"] == pytest.approx(found["title"], abs=1e-5)
    assert found["both"] > found["body"]
    found = {i.key: i.score for i in case.store.search(("docs",), query="a long walk along the river to the station")}
    assert found["both"] == pytest.approx(found["body"], abs=1e-5)


def test_query_without_index_is_a_filter_only_search(case: StoreCase) -> None:
    fill_semantic(case)
    found = case.store.search(("docs",), query="oat milk lattes", limit=10)
    assert sorted(keys(found)) == ["cat", "coffee", "hidden", "other", "train"]
    assert all(i.score is None for i in found)


# -- TTL -----------------------------------------------------------------------------------------

# an expired item before the sweep (PostgresStore returns it unless ttl={"omit_expired": True})
EXPIRED_VISIBLE = {"postgres": True, "navi": False}


def test_ttl_support(case: StoreCase) -> None:
    assert case.supports_ttl is (case.kind != "inmemory")
    if case.kind == "inmemory":
        with pytest.raises(NotImplementedError):
            case.store.put(("docs",), "k", {"text": "x"}, ttl=5)


def test_ttl_expiry_and_sweep(ttl_case: StoreCase) -> None:
    case = ttl_case
    ns = ("docs", "alice")
    case.store.put(ns, "short", {"text": "short"}, ttl=10)
    case.store.put(ns, "long", {"text": "long"}, ttl=60)
    case.store.put(ns, "forever", {"text": "forever"})
    case.advance(11)
    visible = EXPIRED_VISIBLE[case.kind]
    assert (case.store.get(ns, "short", refresh_ttl=False) is not None) is visible
    assert ("short" in keys(case.store.search(("docs",), refresh_ttl=False))) is visible
    case.sweep()
    assert case.store.get(ns, "short") is None
    assert sorted(keys(case.store.search(("docs",)))) == ["forever", "long"]


def test_ttl_refresh_on_read(ttl_case: StoreCase) -> None:
    case = ttl_case
    ns = ("docs", "alice")
    for key in ("got", "searched", "kept", "stale"):
        case.store.put(ns, key, {"text": key}, ttl=10)
    case.advance(6)
    assert case.store.get(ns, "got") is not None                      # refreshes: 10 more minutes
    assert keys(case.store.search(("docs",), filter={"text": "searched"})) == ["searched"]
    assert case.store.get(ns, "kept", refresh_ttl=False) is not None  # does not refresh
    case.advance(6)
    case.sweep()
    assert case.store.get(ns, "got") is not None and case.store.get(ns, "searched") is not None
    assert case.store.get(ns, "kept") is None and case.store.get(ns, "stale") is None


def test_ttl_config_default_and_no_refresh(ttl_make: Make) -> None:
    case = ttl_make(ttl={"default_ttl": 10, "refresh_on_read": False})
    ns = ("docs", "alice")
    case.store.put(ns, "default", {"text": "x"})
    case.store.put(ns, "none", {"text": "x"}, ttl=None)
    case.advance(6)
    assert case.store.get(ns, "default") is not None   # not refreshed (config)
    case.advance(6)
    case.sweep()
    assert case.store.get(ns, "default") is None and case.store.get(ns, "none") is not None
