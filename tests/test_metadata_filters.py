"""Metadata filters: one table of cases giving the same items on SQLite, on PostgreSQL and in the
pure Python meaning (core/filters.py), a hypothesis comparison of SQL against Python, and the
PostgreSQL GIN index serving an equality filter."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from navi_memory import MemoryStore, ValidationError
from navi_memory.core.filters import conditions, evaluate

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)

U = "u1"
ROWS = {
    "m1": {"kind": "pref", "score": 5, "tags": ["a", "b"], "n": {"x": 1}},
    "m2": {"kind": "note", "score": 2.5, "flag": True, "n": {"x": "1"}},
    "m3": {"kind": "pref", "score": "high", "flag": False, "nul": None},
    "m4": {"n.x": 7},  # a key with a dot in it
    "m5": {"kind": "Pref", "score": 10, "n": {"x": [1]}, "0": {"1": 3}},
}

CASES = [
    ({"kind": "pref"}, {"m1", "m3"}),
    ({"kind": {"$eq": "pref"}}, {"m1", "m3"}),
    ({"kind": {"ne": "pref"}}, {"m2", "m4", "m5"}),
    ({"kind": {"$in": ["pref", "note"]}}, {"m1", "m2", "m3"}),
    ({"kind": {"nin": ["pref"]}}, {"m2", "m4", "m5"}),
    ({"score": {"$gt": 2}}, {"m1", "m2", "m5"}),
    ({"score": {"$gte": 5, "$lt": 10}}, {"m1"}),
    ({"score": {"lte": 2.5}}, {"m2"}),
    ({"score": {"gt": "a"}}, {"m3"}),
    ({"score": 5.0}, {"m1"}),
    ({"flag": True}, {"m2"}),
    ({"flag": 1}, set()),
    ({"flag": {"$exists": True}}, {"m2", "m3"}),
    ({"flag": {"$exists": False}}, {"m1", "m4", "m5"}),
    ({"nul": {"exists": True}}, {"m3"}),
    ({"n.x": 1}, {"m1"}),
    ({"n.x": "1"}, {"m2"}),
    ({"n.x": {"exists": True}}, {"m1", "m2", "m4", "m5"}),  # a dotted key: the nested path or the key itself
    ({"n.x": {"gte": 0}}, {"m1", "m4"}),
    ({"n.x": {"ne": 1}}, {"m2", "m3", "m4", "m5"}),
    ({"n.x": {"exists": False}}, {"m3"}),
    ({("n.x",): 7}, {"m4"}),  # a tuple key is the path itself: the key "n.x"
    ({("n", "x"): 1}, {"m1"}),
    ({"n.x": 7}, {"m4"}),
    ({("n.x",): {"exists": True}}, {"m4"}),
    ({"tags": "a"}, set()),
    ({"0.1": 3}, {"m5"}),
    ({"0.1": {"gte": 3}}, {"m5"}),
    ({"kind": "pref", "flag": False}, {"m3"}),
    ({"fact.key": {"exists": True}}, set()),  # facts' own items never pass a metadata filter
    # operands no database compares, meaning what they mean in Python (and in LangGraph's stores)
    ({"score": {"$lt": float("inf")}}, {"m1", "m2", "m5"}),
    ({"score": {"$gt": float("-inf")}}, {"m1", "m2", "m5"}),
    ({"score": {"$gt": float("inf")}}, set()),
    ({"score": {"$lte": float("-inf")}}, set()),
    ({"score": {"$lt": 10**100}}, {"m1", "m2", "m5"}),
    ({"score": {"$gt": -(10**30)}}, {"m1", "m2", "m5"}),
    ({"score": float("nan")}, set()),
    ({"score": {"$gte": float("nan")}}, set()),
    ({"score": {"$ne": float("nan")}}, None),  # holds for everything: no condition left
    ({"kind": "pref\x00' OR '1'='1"}, set()),
    ({"kind": {"$in": ["pref\x00", "note"]}}, {"m2"}),
    ({"kind": {"$nin": ["pref\x00"]}}, None),
    ({}, None),  # no filter: everything, facts included
]


@pytest.fixture
def filled(lexical_store):
    names = {}
    for name, metadata in ROWS.items():
        names[lexical_store.add(user_id=U, content=f"row {name}", metadata=metadata)] = name
    lexical_store.upsert_fact(user_id=U, category="profile", key="city", value="Rome")
    return lexical_store, names


@pytest.mark.parametrize("filters, expected", CASES)
def test_the_filter_table_on_every_backend(filled, filters, expected):
    store, names = filled
    got = {names.get(i.id, "fact") for i in store.list_items(user_id=U, filters=filters, limit=100)}
    python = {name for name, metadata in ROWS.items() if evaluate(conditions(filters), metadata)}
    if expected is None:
        assert got == set(ROWS) | {"fact"}
        return
    assert got == expected == python
    assert store.count_items(user_id=U, filters=filters) == len(expected)
    assert {names[r.id] for r in store.search("row", user_id=U, filters=filters, limit=50)} == expected


def test_the_smallest_64_bit_integer_is_a_value_like_any_other(lexical_store):
    """-2**63 is storable on both databases, but an equality filter on it was refused and a range
    bound of it became a float: "$gt -2**63" then held for -2**63 itself on PostgreSQL."""
    low = lexical_store.add(user_id=U, content="the lowest", metadata={"n": -(2**63)})
    lexical_store.add(user_id=U, content="one above", metadata={"n": -(2**63) + 1})
    for filters, expected in [({"n": -(2**63)}, {"the lowest"}), ({"n": {"$gt": -(2**63)}}, {"one above"}),
                              ({"n": {"$lte": -(2**63)}}, {"the lowest"}), ({"n": {"$lt": -(2**63)}}, set())]:
        got = {i.content for i in lexical_store.list_items(user_id=U, filters=filters)}
        assert got == expected == {i.content for i in lexical_store.list_items(user_id=U)
                                   if evaluate(conditions(filters), i.metadata)}, filters
    assert lexical_store.get(low, user_id=U).metadata == {"n": -(2**63)}


@pytest.mark.parametrize("filters, message", [
    ({"k": {"$like": "x"}}, "'k': unknown operator '$like'"),
    ({"k": {"gt": True}}, "'k' $gt"),
    ({"k": {"in": "abc"}}, "'k' $in"),
    ({"k": {"exists": 1}}, "'k' $exists"),
    ({"k": None}, "'k' $eq"),
    ({"k": [1, 2]}, "'k' $eq"),
    ({"k": {}}, "'k' has no operator"),
    ({"a..b": 1}, "'a..b'"),
    ({'a"b': 1}, "quote"),
    ({"a') OR json_extract(value, '$.": 1}, "Invalid filter key"),
    ({"k": 2**70}, "'k' $eq"),
    ({"k": 2**63}, "integers must fit in 64 bits"),  # a number, said why it is refused
    ({"k": {"$ne": float("inf")}}, "numbers must be finite"),
    ({"k": {"$in": ["a", -(2**63) - 1]}}, "'k' $in takes a list .* integers must fit in 64 bits"),
    (["k"], "mapping"),
    ({(): 1}, "non-empty string"),
    ({("a", 1): 1}, "non-empty string"),
    ({("a", ""): 1}, "Invalid filter key"),
    ({("a", 'b"'): 1}, "quote"),
])
def test_bad_filters_name_the_key_and_the_operator(filters, message):
    with pytest.raises(ValidationError, match=message.replace("$", r"\$")):
        conditions(filters)


SCALARS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 2.5, -1.5, 1.0]), st.sampled_from(["a", "b", "B", "é", ""]),
                    st.booleans())
KEYS = st.sampled_from(["a", "b", "n.a", "n.b"])
OPERATOR = st.one_of(
    st.tuples(st.sampled_from(["eq", "$ne"]), SCALARS),
    st.tuples(st.sampled_from(["$in", "nin"]), st.lists(SCALARS, min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["gt", "$gte", "lt", "lte"]), st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5]),
                                                                      st.sampled_from(["a", "b", "B"]))),
    st.tuples(st.just("exists"), st.booleans()),
)
FILTERS = st.dictionaries(KEYS, st.one_of(SCALARS, st.lists(OPERATOR, min_size=1, max_size=2).map(dict)),
                          min_size=1, max_size=2)


@pytest.fixture
def random_rows(lexical_store):
    rows = {}
    for metadata in _fixed_rows():
        rows[lexical_store.add(user_id=U, content="row", metadata=metadata)] = metadata
    return lexical_store, rows


def _fixed_rows() -> list[dict]:
    """40 metadata objects (scalars, nulls, lists, one nested object), the same on every run."""
    import random

    rnd = random.Random(7)
    scalars = [-3, -1, 0, 1, 2, 3, 0.5, 2.5, -1.5, 1.0, "a", "b", "B", "é", "", True, False]
    values = scalars + [None, [], [1], ["a", True]]
    out = []
    for _ in range(40):
        top = {k: rnd.choice(values) for k in rnd.sample(["a", "b"], rnd.randint(0, 2))}
        inner = {k: rnd.choice(values) for k in rnd.sample(["a", "b"], rnd.randint(0, 2))}
        out.append({**top, "n": inner} if inner else top)
    return out


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters=FILTERS)
def test_sql_filtering_matches_the_python_meaning(random_rows, filters):
    store, rows = random_rows
    conds = conditions(filters)
    expected = {i for i, metadata in rows.items() if evaluate(conds, metadata)}
    assert {i.id for i in store.list_items(user_id=U, filters=filters, limit=100)} == expected


@pytest.mark.postgres
def test_postgres_uses_the_gin_index_for_equality(postgres_server):
    import psycopg
    from psycopg import sql

    from navi_memory.backends.base import Filters
    from navi_memory.backends.postgres.sql import where

    url = postgres_server.fresh_schema_url()
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            store.add_many([{"user_id": U, "content": f"row {n}", "metadata": {"kind": f"k{n % 500}", "n": n}}
                            for n in range(5000)])
        cond, params = where(Filters(user_id=U, now=datetime.now(timezone.utc), metadata=conditions({"kind": "k7"})))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE items")
            plan = "\n".join(r[0] for r in conn.execute(
                sql.SQL("EXPLAIN SELECT i.id FROM items i WHERE {}").format(cond), params))
        assert "items_metadata_gin" in plan, plan
    finally:
        postgres_server.drop_schema(url)
