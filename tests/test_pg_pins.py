"""The plan-fixed HNSW statement (``Pins``): which users it serves, that it returns what the plain
statement returns, and that it runs under one generic plan."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from psycopg import sql

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.backends.postgres import search as pg_search
from navi_memory.backends.postgres import sql as q
from navi_memory.backends.postgres.search import Pins
from navi_memory.models import utcnow

from .pg import with_option

pytestmark = pytest.mark.postgres
MODEL = "random-16"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_user_is_pinned_by_its_expected_share_of_the_index_scan(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(pg_search.time, "monotonic", clock)
    pins = Pins()
    assert pins.stale(MODEL, 16) and not pins.serves("big", MODEL, 16, 300, 50)
    pins.read(MODEL, 16, True, ["big", "mid"], [0.6, 0.4])
    assert not pins.stale(MODEL, 16)
    assert pins.serves("big", MODEL, 16, 300, 50)  # 300 x 0.6 = 180 >= 3 x 50
    assert not pins.serves("mid", MODEL, 16, 300, 50)  # 120 < 150
    assert pins.serves("mid", MODEL, 16, 400, 50)
    assert not pins.serves("unlisted", MODEL, 16, 300, 50)
    assert not pins.serves("big", MODEL, 32, 300, 50)  # another size: its own index, not read yet
    pins.fell_short("big", MODEL, 16)
    assert not pins.serves("big", MODEL, 16, 300, 50)
    clock.now += pg_search.PIN_SECONDS + 1
    assert pins.stale(MODEL, 16)
    assert pins.serves("big", MODEL, 16, 300, 50)  # the shortfall is forgotten with the read
    pins.read(MODEL, 16, False, ["big"], [1.0])
    assert not pins.serves("big", MODEL, 16, 300, 50)  # no index: the plain statement scans exactly


def test_the_users_remembered_as_fallen_short_are_bounded(monkeypatch):
    pins = Pins()
    monkeypatch.setattr(pins, "most", 3)
    for n in range(10):
        pins.fell_short(f"u{n}", MODEL, 16)
    assert len(pins._short) <= 3


def test_only_plain_filters_are_pinned():
    now = utcnow()
    assert Filters(user_id="u", now=now).plain
    assert Filters(user_id="u", now=now, include_expired=True).plain
    for changed in ({"theme": "food"}, {"types": ("note",)}, {"since": now}, {"person": "Bob"},
                    {"status": "archived"}, {"namespace_prefix": "a"}, {"agent_id": "a"}, {"run_id": "r"}):
        assert not Filters(user_id="u", now=now, **changed).plain, changed


def _two_users_data() -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
    """The large user's vectors, the small one's, and the generator that drew them (each test draws on)."""
    rng = np.random.default_rng(5)
    return rng, rng.normal(size=(3000, 16)), rng.normal(size=(40, 16))


@pytest.fixture(scope="module")
def two_users_schema(postgres_server):
    """A schema holding a large user (most of the index) and a small one, analysed; the small user's
    ids. Made once for the module: its tests only read it (a search's pins live in its store)."""
    url = postgres_server.fresh_schema_url()
    _, big, small = _two_users_data()
    with MemoryStore.open(url, embeddings=False, embedding_model=MODEL) as store:
        store.add_many([{"user_id": "big", "content": f"big {n}", "theme": "food" if n % 2 else "work",
                         "embedding": v} for n, v in enumerate(big)])
        ids = store.add_many([{"user_id": "small", "content": f"small {n}", "embedding": v}
                              for n, v in enumerate(small)])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    yield url, ids
    postgres_server.drop_schema(url)


@pytest.fixture
def two_users(two_users_schema):
    """A store of its own on one connection over ``two_users_schema``. Sorting is discouraged so that
    the plain statement takes the HNSW plan for the large user too, as it does on tables of real size
    (on 3,000 rows an exact sort may look cheaper)."""
    url, ids = two_users_schema
    rng, _, small = _two_users_data()
    now = utcnow()  # one moment for every search: the same recency, so the same scores
    store = MemoryStore.open(with_option(url, "enable_sort=off"), embeddings=False, embedding_model=MODEL,
                             backend_options={"max_size": 1}, clock=lambda: now)
    yield store, rng, small, ids
    store.close()


def _sent(monkeypatch) -> list[str]:
    sent: list[str] = []
    real = psycopg.Cursor.execute
    monkeypatch.setattr(psycopg.Cursor, "execute", lambda cur, text, *a, **k: (
        sent.append(text.as_string(cur) if hasattr(text, "as_string") else str(text)), real(cur, text, *a, **k))[1])
    return sent


def test_a_large_user_gets_the_same_hits_from_one_generic_plan(two_users, monkeypatch):
    store, rng, _, _ = two_users
    backend, filters = store._backend, Filters(user_id="big", now=utcnow())
    queries = rng.normal(size=(8, 16))
    plain = []
    for query in queries:
        monkeypatch.setattr(pg_search, "PIN_MARGIN", 10**9)  # nobody is pinned
        plain.append(backend.semantic_hits(filters, MODEL, query, 20).scored)
    monkeypatch.setattr(pg_search, "PIN_MARGIN", 3)
    sent = _sent(monkeypatch)
    pinned = [backend.semantic_hits(filters, MODEL, query, 20).scored for query in queries]
    assert [[i for i, _ in hits] for hits in pinned] == [[i for i, _ in hits] for hits in plain]
    assert np.allclose([s for hits in pinned for _, s in hits], [s for hits in plain for _, s in hits])
    assert all(len(hits) == 20 for hits in pinned)
    text, params = q.semantic_candidates(filters, MODEL, 16, queries[0], 20)
    with backend.pool.connection() as conn:  # the plain statement's own plan is HNSW too (see the fixture)
        assert "embeddings_hnsw_" in "\n".join(r["QUERY PLAN"] for r in conn.execute(sql.SQL("EXPLAIN ") + text, params))
    assert sent.count("SET LOCAL plan_cache_mode = 'force_generic_plan'") == len(queries)
    assert sum(") e JOIN items i" in text for text in sent) == len(queries)
    with backend.pool.connection() as conn:  # psycopg prepares a statement on its fifth run
        plans = conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                             " WHERE statement LIKE '%%) e JOIN items i%%'").fetchall()
    assert plans and plans[0]["generic_plans"] >= 3 and plans[0]["custom_plans"] == 0


def test_whole_searches_of_a_large_user_are_the_same_pinned_or_not(two_users, monkeypatch):
    store, rng, _, _ = two_users
    queries = rng.normal(size=(4, 16))
    monkeypatch.setattr(pg_search, "PIN_MARGIN", 10**9)
    plain = [[(r.id, round(r.score, 6)) for r in store.search("big", user_id="big", query_embedding=q)]
             for q in queries]
    monkeypatch.setattr(pg_search, "PIN_MARGIN", 3)
    sent = _sent(monkeypatch)
    pinned = [[(r.id, round(r.score, 6)) for r in store.search("big", user_id="big", query_embedding=q)]
              for q in queries]
    assert pinned == plain
    assert sum(") e JOIN items i" in text for text in sent) == len(queries)


def test_small_users_and_filtered_searches_keep_the_plain_statement(two_users, monkeypatch):
    store, rng, small, ids = two_users
    backend, query = store._backend, rng.normal(size=16)
    sent = _sent(monkeypatch)
    hits = backend.semantic_hits(Filters(user_id="small", now=utcnow()), MODEL, query, 10).scored
    cosine = small @ query / (np.linalg.norm(small, axis=1) * np.linalg.norm(query))
    assert [i for i, _ in hits] == [ids[i] for i in np.argsort(-cosine)[:10]]  # exact
    themed = backend.semantic_hits(Filters(user_id="big", now=utcnow(), theme="food"), MODEL, query, 10).scored
    assert len(themed) == 10
    assert not any(") e JOIN items i" in text or "plan_cache_mode" in text for text in sent)


def test_a_pinned_search_that_falls_short_is_searched_exactly_and_unpins_the_user(two_users, monkeypatch):
    store, rng, small, ids = two_users
    backend, query = store._backend, rng.normal(size=16)
    backend.ef_search = 30  # an index scan this shallow finds few of the small user's 40 vectors
    filters = Filters(user_id="small", now=utcnow())
    backend.semantic_hits(filters, MODEL, query, 10).scored  # reads the statistics
    backend.pins.read(MODEL, 16, True, ["small"], [1.0])  # as if the statistics said it held them all
    sent = _sent(monkeypatch)
    hits = backend.semantic_hits(filters, MODEL, query, 10).scored
    cosine = small @ query / (np.linalg.norm(small, axis=1) * np.linalg.norm(query))
    assert [i for i, _ in hits] == [ids[i] for i in np.argsort(-cosine)[:10]]  # the exact rerun
    assert sum(") e JOIN items i" in text for text in sent) == 1
    assert not backend.pins.serves("small", MODEL, 16, 30, 10)
    sent.clear()
    backend.semantic_hits(filters, MODEL, query, 10).scored
    assert not any(") e JOIN items i" in text for text in sent)


def _exact(backend, filters, query, k):
    """The user's k nearest, compared one by one (the reference)."""
    sql_text, params = q.semantic_candidates(filters, MODEL, 16, query, k, exact=True)
    with backend.pool.connection() as conn:
        return [r["id"] for r in conn.execute(sql_text, params)]


def test_a_stale_share_costs_speed_never_rows(pg_url):
    """A pinned user's share of the table drops 20x (other users arrive) and ANALYZE runs; a store
    that read the statistics before (or any store, until its read is a minute old) still pins the
    user. The index's nearest ``ef_search`` vectors then hold few of theirs: the pinned search
    falls short. It returned those rows as they were when the user has at least ``exact_below``
    vectors (5 hits where exact search has 10); now it is asked again as the planner sees it."""
    rng = np.random.default_rng(11)
    now = utcnow()
    store = MemoryStore.open(pg_url, embeddings=False, embedding_model=MODEL, backend_options={"max_size": 1},
                             clock=lambda: now)
    store.add_many([{"user_id": "big", "content": f"big {n}", "embedding": v}
                    for n, v in enumerate(rng.normal(size=(300, 16)))])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    backend, filters = store._backend, Filters(user_id="big", now=now)
    backend.semantic_hits(filters, MODEL, rng.normal(size=16), 40).scored
    assert backend.pins.serves("big", MODEL, 16, 300, 40)  # the user holds the whole index
    before = backend.pins._tables[(MODEL, 16)]
    store.add_many([{"user_id": f"other{n % 19}", "content": f"other {n}", "embedding": v}
                    for n, v in enumerate(rng.normal(size=(19 * 300, 16)))])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    store.close()
    store = MemoryStore.open(pg_url, embeddings=False, embedding_model=MODEL, backend_options={"max_size": 1},
                             clock=lambda: now)
    try:
        backend = store._backend
        backend.exact_below = 100  # as for a user of 20,000 vectors or more: no exact rerun by size
        shortfalls = 0
        def stale() -> None:  # the statistics as read before the ANALYZE, no shortfall remembered
            backend.pins._tables[(MODEL, 16)] = before
            backend.pins._short.clear()
            assert backend.pins.serves("big", MODEL, 16, 300, 40)

        for query in rng.normal(size=(20, 16)):
            stale()
            hits = [i for i, _ in backend.semantic_hits(filters, MODEL, query, 40).scored]
            shortfalls += not backend.pins.serves("big", MODEL, 16, 300, 40)
            assert hits == _exact(backend, filters, query, 40)
            stale()
            found = store.search("weather", user_id="big", query_embedding=query, limit=10)
            assert len(found) == 10 and {r.id for r in found} <= set(hits)  # was 5 hits in a real run
        assert shortfalls == 20  # 300 of the 6,000 vectors: the index's nearest 300 never hold 40 of theirs
    finally:
        store.close()
