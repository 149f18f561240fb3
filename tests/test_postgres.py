"""PostgreSQL-only behaviour: index use, degraded servers, faults, pools."""

from __future__ import annotations

import asyncio
import logging
import re

import numpy as np
import psycopg
import pytest
from psycopg import sql

from navi_memory import AsyncMemoryStore, BackendUnavailableError, ConfigurationError, MemoryStore, ValidationError
from navi_memory.backends.postgres import sql as q
from navi_memory.backends.postgres.pool import iter_once
from navi_memory.backends.base import Beside, Filters
from navi_memory.errors import StorageError
from navi_memory.models import utcnow

from .fakes import FakeEmbeddings
from .pg import drop_database, fresh_database, novector_server_url, with_option

pytestmark = pytest.mark.postgres
U = "alice"


@pytest.fixture
def novector_url():
    server = novector_server_url()
    if server is None:
        pytest.skip("no PostgreSQL without pgvector here (set NAVI_MEMORY_TEST_POSTGRES_NOVECTOR_URL)")
    url = fresh_database(server)
    yield url
    drop_database(server, url)


def explain(url: str, text, params) -> str:
    """The plan with sequential scans discouraged: shows that an index *can* serve the query (on
    the few thousand rows of a test the planner may still prefer to read the whole table)."""
    with psycopg.connect(url) as conn:
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute(psycopg.sql.SQL("EXPLAIN ") + text, params).fetchall()
    return "\n".join(r[0] for r in rows)


def test_candidate_queries_use_the_hnsw_and_gin_indexes(pg_url):
    rng = np.random.default_rng(7)
    with MemoryStore.open(pg_url, embeddings=False, embedding_model="random-32") as store:
        store.add_many([{"user_id": U, "content": f"note {n} about {'oat milk lattes' if n % 500 == 0 else 'tea'}",
                         "embedding": rng.normal(size=32)} for n in range(3000)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        filters = Filters(user_id=U, now=utcnow())
        query = rng.normal(size=32)
        text, params = q.semantic_candidates(filters, "random-32", 32, "[" + ",".join(map(str, query)) + "]", 10)
        assert "embeddings_hnsw_" in explain(pg_url, text, params)
        assert "items_tsv" in explain(pg_url, *q.lexical_candidates(filters, ["lattes"], 10))


def test_migrate_is_idempotent(pg_url):
    with MemoryStore.open(pg_url, embeddings=False) as store:
        store.add(user_id=U, content="kept across migrations")
        assert store.migrate() == store.migrate() == store._backend.schema_version() >= 3
    with MemoryStore.open(pg_url, embeddings=False) as again:
        assert [i.content for i in again.list_items(user_id=U)] == ["kept across migrations"]


def test_unreachable_server_names_host_and_db_but_not_the_password():
    with pytest.raises(BackendUnavailableError) as info:
        MemoryStore.open("postgresql://navi:s3cr3t-pw@127.0.0.1:1/memorydb", embeddings=False)
    message = str(info.value)
    assert "127.0.0.1:1/memorydb" in message
    assert "s3cr3t-pw" not in message and "s3cr3t-pw" not in repr(info.value)


@pytest.mark.parametrize("url, error", [("postgresql://navi:s3cr3t-pw@127.0.0.1:99999999/memorydb",
                                         BackendUnavailableError),
                                        ("postgresql://navi:s3cr3t-pw@[::1:1/memorydb", ConfigurationError)])
def test_a_url_urlsplit_cannot_read_is_a_clear_error(url, error):
    """The error translator read the port with ``urlsplit``, whose ValueError ("Port out of range")
    replaced the driver's connection error with a traceback; an open bracket was a bare ValueError."""
    with pytest.raises(error) as info:
        MemoryStore.open(url, embeddings=False)
    assert "s3cr3t-pw" not in str(info.value) and "s3cr3t-pw" not in repr(info.value)
    assert info.value.__cause__ is None or "s3cr3t-pw" not in str(info.value.__cause__)


def test_a_text_past_the_full_text_indexs_limit_is_a_validation_error(pg_url):
    """With NAVI_MEMORY_MAX_CONTENT_BYTES raised, a text of distinct words whose tsvector passes
    PostgreSQL's 1 MB was a StorageError (ProgramLimitExceeded), as if the server had failed."""
    import random
    import string

    from navi_memory import Settings

    rng = random.Random(1)
    words = " ".join("".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(150_000))  # 1.35 MB
    with MemoryStore.open(pg_url, embeddings=False, settings=Settings(url=pg_url, max_content_bytes=4 << 20)) as store:
        with pytest.raises(ValidationError, match="too long for PostgreSQL's full-text index"):
            store.add(user_id=U, content=words)
        assert store.count_items(user_id=U) == 0
        assert store.add(user_id=U, content=words[:200_000])  # a part of it is stored


def test_pool_recovers_after_connections_are_killed(pg_url, postgres_server):
    with MemoryStore.open(pg_url, embeddings=False) as store:
        store.add(user_id=U, content="before the restart")
        postgres_server.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                " WHERE pid <> pg_backend_pid() AND datname = current_database()")
        for _ in range(3):  # a call meeting a dead connection checks the pool and runs again
            store.add(user_id=U, content="after the restart", dedup=False)
        assert len(store.list_items(user_id=U)) == 4


def _kill_connections(postgres_server) -> None:
    postgres_server.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE pid <> pg_backend_pid() AND datname = current_database()")


def test_reads_and_writes_on_connections_the_server_closed_run_again_once(pg_url, postgres_server):
    """Pooled connections are not checked before each call: the first read and the first write
    after the server closed every connection each meet a dead one and run again, exactly once."""
    with MemoryStore.open(pg_url, embeddings=FakeEmbeddings(), backend_options={"min_size": 3}) as store:
        first = store.add(user_id=U, content="written before the kill")
        store.search("written", user_id=U)
        _kill_connections(postgres_server)
        assert [r.id for r in store.search("written", user_id=U)] == [first]
        _kill_connections(postgres_server)
        second = store.add(user_id=U, content="written after the kill")
        assert [i.id for i in store.list_items(user_id=U)] == [second, first]


def test_a_call_whose_connection_dies_after_a_statement_ran_is_not_run_again(pg_url):
    """Only a call that ran nothing is run again: one that loses its connection half-way raises,
    its uncommitted statements rolled back by the server, never repeated."""
    from navi_memory.backends.postgres.pool import iter_once
    from navi_memory.errors import StorageError

    with MemoryStore.open(pg_url, embeddings=False) as store:
        backend, made = store._backend, []

        def call():
            made.append(1)
            yield q.Q("INSERT INTO users (id, created_at) VALUES ('half-way', now())")
            yield q.Q("SELECT pg_terminate_backend(pg_backend_pid())")

        with pytest.raises(StorageError):
            backend._run(call)
        assert made == [1]
        assert backend._run(lambda: iter_once(q.Q("SELECT count(*) AS n FROM users WHERE id = 'half-way'")))[0]["n"] == 0


async def test_the_async_pool_runs_a_call_again_on_a_connection_the_server_closed(pg_url, postgres_server):
    async with await AsyncMemoryStore.open(pg_url, embeddings=FakeEmbeddings()) as store:
        first = await store.add(user_id=U, content="written before the kill")
        _kill_connections(postgres_server)
        assert [i.id for i in await store.list_items(user_id=U)] == [first]
        _kill_connections(postgres_server)
        await store.add(user_id=U, content="written after the kill")
        assert await store.count_items(user_id=U) == 2


def test_ef_search_goes_with_its_query_in_one_round_trip_and_ends_with_it(pg_url, monkeypatch, tmp_path):
    """A transaction-mode pooler (PgBouncer) may give each transaction another server connection:
    the setting is SET LOCAL in the query's own transaction, sent with it in one pipeline (one
    Sync, one ReadyForQuery), and nothing of it stays on the connection."""
    with MemoryStore.open(pg_url, embeddings=False, embedding_model="random-16",
                          backend_options={"max_size": 1}) as store:
        store.add(user_id=U, content="one", embedding=np.ones(16))
        backend, filters = store._backend, Filters(user_id=U, now=utcnow())
        backend.exact_below = 0  # the HNSW query alone (no exact rerun for this small user)
        backend.semantic_hits(filters, "random-16", np.ones(16), 50).scored  # reads the table's statistics (Pins)
        sent = []
        real = psycopg.Cursor.execute
        monkeypatch.setattr(psycopg.Cursor, "execute", lambda cur, text, *a, **k: (
            sent.append(text.as_string(cur) if hasattr(text, "as_string") else text), real(cur, text, *a, **k))[1])
        trace = tmp_path / "trace"
        with open(trace, "w") as out:
            with backend.pool.connection() as conn:
                conn.pgconn.trace(out.fileno())
            assert backend.semantic_hits(filters, "random-16", np.ones(16), 50).scored
            with backend.pool.connection() as conn:
                conn.pgconn.untrace()
        assert trace.read_text().count("ReadyForQuery") == 1
        backend.ef_search = 40
        backend.semantic_hits(filters, "random-16", np.ones(16), 50).scored
        backend.ef_search = 400
        shown = backend._run(lambda: iter_once(q.Q("SELECT current_setting('hnsw.ef_search') AS v",
                                                   local=(("hnsw.ef_search", 400),))), True)
        assert shown == [{"v": "400"}]
        with pytest.raises(StorageError):  # rolled back: the one connection is still usable below
            backend._run(lambda: iter_once(q.Q("SELECT 1 / 0", local=(("hnsw.ef_search", 400),))), True)
        with backend.pool.connection() as conn:
            assert conn.execute("SHOW hnsw.ef_search").fetchone()["hnsw.ef_search"] == "40"  # pgvector's default
    assert [t for t in sent if t.startswith("SET")] == ["SET LOCAL hnsw.ef_search = 300",
                                                        "SET LOCAL hnsw.ef_search = 50",
                                                        "SET LOCAL hnsw.ef_search = 400",
                                                        "SET LOCAL hnsw.ef_search = 400"]  # the 1 / 0 too


async def test_the_async_runner_sends_ef_search_with_its_query(pg_url):
    store = await AsyncMemoryStore.open(pg_url, embeddings=False, embedding_model="random-16",
                                        backend_options={"max_size": 1})
    try:
        backend = store._backend
        shown = await backend._run(lambda: iter_once(q.Q("SELECT current_setting('hnsw.ef_search') AS v",
                                                         local=(("hnsw.ef_search", 123),))), True)
        assert shown == [{"v": "123"}]
        failing = q.Q("SELECT 1 / 0", local=(("hnsw.ef_search", 123),))
        with pytest.raises(StorageError):
            await backend._run(lambda: iter_once(failing), True)
        async with backend.pool.connection() as conn:  # rolled back: the connection is usable, idle
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert (await (await conn.execute("SELECT 2 AS n")).fetchone())["n"] == 2
    finally:
        await store.close()


async def test_async_pool_runs_concurrent_writes(pg_url):
    store = await AsyncMemoryStore.open(pg_url, embeddings=FakeEmbeddings())
    try:
        ids = await asyncio.gather(*(store.add(user_id=U, content=f"concurrent note {n}") for n in range(32)))
        assert len(set(ids)) == 32
        assert len(await store.list_items(user_id=U, limit=100)) == 32
        assert (await store.search("concurrent", user_id=U, limit=5))[0].signals["semantic"] is True
    finally:
        await store.close()


def test_without_pgvector_search_is_lexical_with_one_warning(novector_url, caplog):
    with caplog.at_level(logging.WARNING, logger="navi_memory"):
        store = MemoryStore.open(novector_url, embeddings=FakeEmbeddings())
    try:
        warnings = [r for r in caplog.records if "pgvector" in r.getMessage()]
        assert len(warnings) == 1 and "lexical-only" in warnings[0].getMessage()
        assert store.embedding_model is None
        item = store.add(user_id=U, content="I drink oat milk lattes")
        assert store.get(item, user_id=U).embedding is None
        results = store.search("oat milk", user_id=U)
        assert [r.id for r in results] == [item]
        assert results[0].signals == {"fts": True, "semantic": False, "substring": False, "context": False}
    finally:
        store.close()


def test_trigram_indexes_serve_the_substring_fallback(novector_url):
    with psycopg.connect(novector_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")  # what a DBA does; the app never requires it
    with MemoryStore.open(novector_url, embeddings=False) as store:
        assert store._backend.has_trgm is True
        store.add_many([{"user_id": "other", "content": f"filler note number {n}"} for n in range(3000)])
        item = store.add(user_id=U, content="I drink oat milk lattes")
        with psycopg.connect(novector_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        results = store.search("atte", user_id=U)
        assert [r.id for r in results] == [item] and results[0].signals["substring"] is True
        hits, params = q.substring_hits(["atte"])
        text = psycopg.sql.SQL("SELECT i.id FROM items i WHERE i.content ILIKE %s")
        assert "items_content_trgm" in explain(novector_url, text, [params[0]])
        facts = psycopg.sql.SQL("SELECT id FROM facts WHERE value ILIKE %s")
        assert "facts_value_trgm" in explain(novector_url, facts, ["%latte%"])


def test_without_pg_trgm_substring_search_still_works(novector_url):
    with MemoryStore.open(novector_url, embeddings=False) as store:
        assert store._backend.has_trgm is False
        item = store.add(user_id=U, content="I drink oat milk lattes")
        assert [r.id for r in store.search("atte", user_id=U)] == [item]


def _hnsw_indexes(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                                           " AND indexdef LIKE '%%USING hnsw%%'")]


def test_deferred_vector_index_is_built_by_build_vector_index(pg_url):
    rng = np.random.default_rng(3)
    with MemoryStore.open(pg_url, embeddings=False, embedding_model="random-16",
                          backend_options={"defer_vector_index": True}) as store:
        ids = store.add_many([{"user_id": U, "content": f"bulk note {n}", "embedding": rng.normal(size=16)}
                              for n in range(300)])
        assert _hnsw_indexes(pg_url) == []  # bulk load: no index maintained row by row
        query = rng.normal(size=16)
        before = store.search("bulk", user_id=U, query_embedding=query)  # exact scan meanwhile
        backend = store.backend
        assert backend.build_vector_index("random-16", 16, m=8, ef_construction=32, maintenance_work_mem="64MB")
        (definition,) = _hnsw_indexes(pg_url)
        assert "m='8'" in definition and "ef_construction='32'" in definition and "'random-16'" in definition
        assert backend.build_vector_index("random-16", 16) is True  # exists: a no-op
        assert len(_hnsw_indexes(pg_url)) == 1
        after = store.search("bulk", user_id=U, query_embedding=query)
        assert [r.id for r in after] == [r.id for r in before] and set(r.id for r in after) <= set(ids)


def test_a_small_user_gets_exact_neighbours_when_the_hnsw_scan_filters_its_rows_out(pg_url):
    """pgvector 0.6 filters by user after the HNSW scan: a user holding a small share of the index
    finds few of its rows among the ef_search nearest. enable_sort=off makes the planner take the
    HNSW scan for that user, as it does on large tables."""
    rng = np.random.default_rng(11)
    url = with_option(pg_url, "enable_sort=off")
    small = rng.normal(size=(30, 16))
    with MemoryStore.open(url, embeddings=False, embedding_model="random-16") as store:
        store.add_many([{"user_id": "big", "content": f"n {n}", "embedding": v} for n, v in enumerate(rng.normal(size=(2000, 16)))])
        ids = store.add_many([{"user_id": "small", "content": f"s {n}", "embedding": v} for n, v in enumerate(small)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        backend, query = store._backend, rng.normal(size=16)
        backend.ef_search = 10
        filters = Filters(user_id="small", now=utcnow())
        backend.exact_below = 0  # the HNSW scan alone
        hnsw_only = backend.semantic_hits(filters, "random-16", query, 20).scored
        backend.exact_below = 1000
        fixed = backend.semantic_hits(filters, "random-16", query, 20).scored
        backend.exact_below = 25  # the user has more vectors than that: the HNSW result stands
        capped = backend.semantic_hits(filters, "random-16", query, 20).scored
    cosine = small @ query / (np.linalg.norm(small, axis=1) * np.linalg.norm(query))
    expected = [ids[i] for i in np.argsort(-cosine)[:20]]
    assert len(hnsw_only) < 20 and len(capped) == len(hnsw_only)
    assert [i for i, _ in fixed] == expected
    assert np.allclose([s for _, s in fixed], np.sort(cosine)[::-1][:20], atol=1e-5)


def test_small_user_in_a_big_index_still_gets_exact_neighbours(pg_url):
    rng = np.random.default_rng(11)
    options = {"ef_search": 1}  # the HNSW scan alone would return almost nothing for a small user
    with MemoryStore.open(pg_url, embeddings=False, embedding_model="random-16", backend_options=options) as store:
        store.add_many([{"user_id": f"big{n % 3}", "content": f"filler {n}", "embedding": rng.normal(size=16)}
                        for n in range(3000)])
        mine = store.add_many([{"user_id": "small", "content": f"mine {n}", "embedding": rng.normal(size=16)}
                               for n in range(5)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        results = store.search("zzz", user_id="small", query_embedding=rng.normal(size=16), limit=10, min_score=0)
        assert sorted(r.id for r in results) == sorted(mine)
        assert all(r.signals["semantic"] for r in results)


def test_common_query_words_only_score_the_rows_that_rarer_words_select(pg_url):
    # 400 notes mention "today"; 3 mention "quinoa". With the cutoff at 50 rows, "today" is common
    # for this user: it no longer selects rows, but still lifts the quinoa note that has it too
    # (of two notes of two words; a longer note ranks lower, as BM25 ranks it on SQLite).
    rows = [{"user_id": U, "content": f"note {n} written today"} for n in range(400)]
    rows += [{"user_id": U, "content": "quinoa salad recipe"}, {"user_id": U, "content": "quinoa bowl"},
             {"user_id": U, "content": "quinoa today"}, {"user_id": "bob", "content": "nothing"}]
    rows += [{"user_id": U, "content": f"reminder {n} for later"} for n in range(100)]
    with MemoryStore.open(pg_url, embeddings=False, backend_options={"lexical_row_budget": 50}) as store:
        store.add_many(rows)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE items")
            estimates = {term: rows for term, _, rows in conn.execute(*q.term_row_estimates(U, ["today", "quinoa", "zzz"]))}
        assert estimates["today"] > 50 and estimates["quinoa"] <= 50 and estimates["zzz"] == 0
        backend = store.backend
        filters = Filters(user_id=U, now=utcnow())
        ranked = backend.lexical_hits(filters, ["quinoa", "today"], 10).scored
        contents = [store.get(i, user_id=U).content for i, _ in ranked]
        assert contents == ["quinoa today", "quinoa bowl", "quinoa salad recipe"]
        # All words common: a row must contain them all.
        both = backend.lexical_hits(filters, ["today", "note"], 10).scored
        assert len(both) == 10
        assert all("today" in store.get(i, user_id=U).content for i, _ in both)
        # No row has all the common words: the rarest of them ("later", 100 rows) selects alone.
        lonely = backend.lexical_hits(filters, ["today", "later"], 10).scored
        assert len(lonely) == 10 and all("later" in store.get(i, user_id=U).content for i, _ in lonely)
        # Without statistics for the user (bob is not among the most common values) nothing is pruned.
        assert [store.get(i, user_id="bob").content for i, _ in
                backend.lexical_hits(Filters(user_id="bob", now=utcnow()), ["nothing", "today"], 10).scored] == ["nothing"]


def test_a_words_weight_is_counted_over_the_users_newest_rows(pg_url, clock, monkeypatch):
    """Oslo is common in the user's older notes, coffee in the newest: over all of them coffee is the
    rarer word (its note ranks first), over the newest three (``IDF_SAMPLE``) Oslo is."""
    with MemoryStore.open(pg_url, embeddings=False, clock=clock) as store:
        oslo = store.add(user_id=U, content="Oslo")
        coffee = store.add(user_id=U, content="coffee")
        for n in range(20):
            clock.advance(minutes=1)
            store.add(user_id=U, content=f"Oslo trip {n}")
        for n in range(3):
            clock.advance(minutes=1)
            store.add(user_id=U, content=f"coffee morning {n}")
        filters = Filters(user_id=U, now=clock.now)

        def first() -> int:
            return store.backend.lexical_hits(filters, ["oslo", "coffee"], 30).scored[0][0]

        assert first() == coffee
        monkeypatch.setattr(q, "IDF_SAMPLE", 3)
        assert first() == oslo


def _plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)


def test_the_full_text_statement_reads_the_users_statistics_once_without_table_statistics(pg_url):
    """A table never analysed (a new store, or rows written faster than autovacuum looks): the planner
    joined the word weights' aggregate to each candidate row and computed it again for every one (the
    user's 2,000 newest rows read once per candidate: seconds per search and per deduplicated write)."""
    with MemoryStore.open(pg_url, embeddings=False) as store:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE items SET (autovacuum_enabled = false)")
            conn.execute("SELECT pg_stat_reset()")
        store.add_many([{"user_id": U, "content": f"worker {n % 7} wrote note {n} about coffee"} for n in range(300)])
        text, params = q.lexical_candidates(Filters(user_id=U, now=utcnow()), ["worker", "coffee", "note"], 10)
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'items'").fetchone()[0] <= 0
            plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + text, params).fetchone()[0][0]["Plan"]
    reads = [node for node in _plan_nodes(plan) if node.get("Relation Name") == "items" or node["Node Type"] == "Aggregate"]
    assert len(reads) >= 3 and all(node["Actual Loops"] == 1 for node in reads)  # a CTE scan may read its row again


def test_session_neighbours_are_looked_up_once_per_hit_without_table_statistics(pg_url):
    """A search across users reading its hits' session neighbours, on a table never analysed: the
    planner joined all of a hit's user's rows to it before the neighbour lookups, and ran those once
    per row (1.9 s at 3,000 notes a user)."""
    with MemoryStore.open(pg_url, embeddings=False) as store:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE items SET (autovacuum_enabled = false)")
        for user in (U, "bob"):
            store.add_many([{"user_id": user, "content": f"turn {n} about coffee",
                             "source_ref": {"session_id": f"s{n // 10}"}} for n in range(300)])
        every = Filters(user_id=None, now=utcnow())
        text, params = q.hits_beside(*q.lexical_candidates(every, ["coffee", "turn"], 10, wide=True), every,
                                     Beside(neighbours=True))
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'items'").fetchone()[0] <= 0
            plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + text, params).fetchone()[0][0]["Plan"]
    scans = [node for node in _plan_nodes(plan) if node.get("Relation Name") == "items"]
    assert scans and max(node["Actual Loops"] for node in scans) <= 10  # at most once per hit


def test_a_prepared_full_text_statement_parses_each_word_once(pg_url):
    """Under a generic plan (psycopg prepares a statement run five times on a connection) a tsquery
    written beside a column is parsed again for each row it meets: each word's is made once."""
    terms = ["worker", "coffee", "note"]
    text, params = q.lexical_candidates(Filters(user_id=U, now=utcnow()), terms, 10)
    with MemoryStore.open(pg_url, embeddings=False), psycopg.connect(pg_url) as conn:
        numbered = iter(range(1, len(params) + 1))
        generic = re.sub("%s", lambda _: f"${next(numbered)}", text.as_string(conn))
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (VERBOSE, GENERIC_PLAN) " + generic))
    assert "$1" in plan and plan.count("to_tsquery(") == len(terms) + 1  # + the condition on the index


def test_the_cutoff_can_be_turned_off(pg_url):
    with MemoryStore.open(pg_url, embeddings=False, backend_options={"lexical_row_budget": 0}) as store:
        store.add_many([{"user_id": U, "content": f"note {n} written today"} for n in range(100)]
                       + [{"user_id": U, "content": "quinoa bowl"}])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE items")
        ranked = store.backend.lexical_hits(Filters(user_id=U, now=utcnow()), ["quinoa", "today"], 200).scored
        assert len(ranked) == 101


def test_ivfflat_serves_where_hnsw_is_unavailable(pg_url):
    # pgvector before 0.5 has no HNSW; forcing the method shows the IVFFlat path on this server.
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 16))
    options = {"index_method": "ivfflat", "ivfflat_min_rows": 200, "ivfflat_probes": 4}
    with MemoryStore.open(pg_url, embeddings=False, embedding_model="random-16", backend_options=options) as store:
        store.add_many([{"user_id": U, "content": f"note {n}", "embedding": v} for n, v in enumerate(vectors[:150])])
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%ivfflat%'").fetchone()[0] == 0
        store.add_many([{"user_id": U, "content": f"note {n}", "embedding": v}
                        for n, v in enumerate(vectors[150:], start=150)])
        store.add(user_id=U, content="one more", embedding=rng.normal(size=16))  # the first write past 200 builds it
        with psycopg.connect(pg_url, autocommit=True) as conn:
            indexdef = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexdef LIKE '%ivfflat%'").fetchone()[0]
            conn.execute("ANALYZE")
        assert "lists='1'" in indexdef.replace(" ", "") or "lists=1" in indexdef.replace(" ", "")
        text, params = q.semantic_candidates(Filters(user_id=U, now=utcnow()), "random-16", 16,
                                             "[" + ",".join(map(str, vectors[7])) + "]", 5)
        assert "embeddings_hnsw_" in explain(pg_url, text, params)  # the index name is method-neutral
        nearest = store.backend.semantic_hits(Filters(user_id=U, now=utcnow()), "random-16", vectors[7], 3).scored
        assert store.get(nearest[0][0], user_id=U).content == "note 7"


def test_unknown_backend_options_are_rejected(pg_url):
    with pytest.raises(ValidationError, match="unknown PostgreSQL backend options"):
        MemoryStore.open(pg_url, embeddings=False, backend_options={"ef_serach": 10})
    with pytest.raises(ValidationError, match="index_method"):
        MemoryStore.open(pg_url, embeddings=False, backend_options={"index_method": "annoy"})
    for name, value in (("ef_search", -1), ("lexical_row_budget", "300"), ("exact_below", 2.5), ("ivfflat_probes", True)):
        with pytest.raises(ValidationError, match=f"{name} must be a whole number"):
            MemoryStore.open(pg_url, embeddings=False, backend_options={name: value})


def test_words_are_selected_rarest_first_within_the_budget_unless_the_user_fits_it(pg_url):
    rows = [{"user_id": U, "content": f"apple pie {n}"} for n in range(200)]
    rows += [{"user_id": U, "content": f"banana bread {n}"} for n in range(200)]
    for budget, expected in ((300, 200), (450, 400)):  # 400 items: a budget of 450 holds the whole user
        with MemoryStore.open(pg_url, embeddings=False, backend_options={"lexical_row_budget": budget}) as store:
            if budget == 300:
                store.add_many(rows)
                with psycopg.connect(pg_url, autocommit=True) as conn:
                    conn.execute("ANALYZE items")
            found = store.backend.lexical_hits(Filters(user_id=U, now=utcnow()), ["apple", "banana"], 500).scored
            assert len(found) == expected


def test_rows_of_one_insert_go_as_multi_row_inserts_within_the_parameter_limit():
    text = "INSERT INTO t (a, b) VALUES (%s, %s::vector) ON CONFLICT DO NOTHING"
    rows = [(i, f"v{i}") for i in range(5)]
    batches = q.rows_at_once(text, rows, per_statement=2)
    assert [b[0] for b in batches] == [
        "INSERT INTO t (a, b) VALUES (%s, %s::vector), (%s, %s::vector) ON CONFLICT DO NOTHING"] * 2 + [
        "INSERT INTO t (a, b) VALUES (%s, %s::vector) ON CONFLICT DO NOTHING"]
    assert [v for b in batches for v in b[1]] == [v for r in rows for v in r]
    wide = [tuple(range(40))] * 3000  # 120,000 parameters: statements of at most 65,535
    assert all(len(params) <= q.MAX_PARAMETERS for _, params in q.rows_at_once(
        "INSERT INTO t VALUES (" + ", ".join(["%s"] * 40) + ")", wide, per_statement=10_000))
    for other in ("UPDATE t SET a = %s", "INSERT INTO t (a) VALUES (%s) RETURNING a", "INSERT INTO t SELECT %s"):
        assert q.rows_at_once(other, [(1,)]) is None


def test_a_large_batch_is_stored_whole_through_multi_row_inserts(pg_url):
    items = [{"user_id": f"u{i % 7}", "content": f"note {i}", "theme": f"t{i % 3}"} for i in range(450)]
    with MemoryStore.open(pg_url, embeddings=FakeEmbeddings()) as store:
        ids = store.add_many(items)
        assert len(set(ids)) == 450
        for user in range(7):
            stored = store.list_items(user_id=f"u{user}", limit=1000)
            assert sorted(it.content for it in stored) == sorted(
                f"note {i}" for i in range(450) if i % 7 == user)
        assert store.embedding_status()["ready"] >= 450


def test_the_pool_wait_is_the_connect_timeout_unless_given(pg_url):
    with MemoryStore.open(pg_url, embeddings=False, backend_options={"connect_timeout": 3}) as store:
        assert store.backend.pool.timeout == 3  # a server that is down fails a call as fast as a connect
    with MemoryStore.open(pg_url, embeddings=False, backend_options={"pool_wait": 45}) as store:
        assert store.backend.pool.timeout == 45  # a burst of calls may queue longer for busy connections
