"""navi-memory through PgBouncer in transaction mode (issue 34, item 6; docs/scaling.md, "A pooler in
front"): a representative set of the store's behaviours, each on a fresh database reached through the
pooler (``pooled_url``, with ``?prepare_threshold=none``), with more client connections than
PgBouncer's server pool so clients queue; SET LOCAL settings and pipelines meeting their statement
on one server connection; session settings neither lost nor leaked to other clients; and what
happens to psycopg's prepared statements with and without ``prepare_threshold``."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.backends.postgres.connect import pool_settings, split_url
from navi_memory.backends.postgres.pool import iter_once
from navi_memory.backends.postgres.sql import Q
from navi_memory.config import parse_url
from navi_memory.errors import ConfigurationError, StorageError

from .fakes import FakeClock, FakeEmbeddings
from .pgbouncer import POOL_SIZE, version
from .test_pipeline_extraction import U, chat, facts, reply, talk

pytestmark = pytest.mark.postgres
THREADS = 3 * POOL_SIZE  # client connections beyond PgBouncer's server connections: they queue


def without_threshold(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(query=""))


@pytest.fixture
def pooled(pooled_url, clock):
    with MemoryStore.open(pooled_url, embeddings=FakeEmbeddings(), clock=clock,
                          backend_options={"max_size": THREADS}) as store:
        yield store


def test_items_and_searches_lexical_and_semantic(pooled):
    first = pooled.add(user_id=U, content="The ferry to Bergen leaves at dawn")
    ids = pooled.add_many([{"user_id": U, "content": text} for text in
                           ["apples and pears", "blue paint for the shed", "the cat sleeps on the roof", "timetables"]])
    assert len(ids) == 4 and pooled.get(first, user_id=U).content.startswith("The ferry")
    assert pooled.search("ferry Bergen", user_id=U)[0].id == first  # full-text and semantic
    vector = FakeEmbeddings().expected("a vector of its own")
    own = pooled.add(user_id=U, content="something else entirely", embedding=vector)
    hits = pooled.search("unrelated words", user_id=U, query_embedding=vector)  # HNSW, under SET LOCAL ef_search
    assert hits[0].id == own and hits[0].scores["semantic"] == pytest.approx(1.0)
    assert pooled._backend.has_vector and pooled.embedding_status()["pending"] == 0


def test_set_local_and_its_statement_meet_on_one_server_connection(pooled):
    """The runner's BEGIN; SET LOCAL; statement; COMMIT pipeline from many threads at once: each
    sees its own value, and the next transaction on any server connection the default again."""
    backend = pooled._backend

    def setting(value: int | None) -> str | None:
        local = (("hnsw.ef_search", value),) if value else ()
        rows = backend._run(lambda: iter_once(Q("SELECT current_setting('hnsw.ef_search', true) AS v", local=local)),
                            reads=True)
        return rows[0]["v"]

    pooled.add(user_id=U, content="loads pgvector's settings")
    values = [100 + n for n in range(THREADS * 4)]
    with ThreadPoolExecutor(THREADS) as pool:
        assert list(pool.map(setting, values)) == [str(v) for v in values]
        # pgvector's default, or none where the server connection has not loaded pgvector: nothing leaked
        assert set(pool.map(setting, [None] * THREADS * 2)) <= {"40", "", None}


def test_facts_and_their_history(pooled, clock):
    assert pooled.upsert_fact(user_id=U, category="profile", key="city", value="Oslo").action == "added"
    clock.advance(minutes=5)
    assert pooled.upsert_fact(user_id=U, category="profile", key="city", value="Bergen").action == "updated"
    fact = pooled.get_fact("city", user_id=U)
    assert fact.value == "Bergen" and [h.value for h in fact.history] == ["Oslo"]


def test_conversation_extraction(pooled):
    chat(pooled, reply(("profile", "name", "Eugene", "user_explicit"),
                       ("technical", "editor", "Neovim", "conversation")),
         "Eugene edits in Neovim.")
    talk(pooled, "s1", "Hi, my name is Eugene.", "Hi Eugene!", "I edit everything in Neovim.", "Nice.")
    report = pooled.extract_session("s1", user_id=U)
    assert report.state == "extracted" and report.used_llm
    assert facts(pooled) == {("profile", "name"): "Eugene", ("technical", "editor"): "Neovim"}
    assert pooled.get_summary(user_id=U) == "Eugene edits in Neovim."


def test_keyed_items_and_their_time_to_live(pooled, clock):
    pooled.put_keyed(user_id=U, namespace=["prefs"], key="theme", content="dark")
    pooled.put_keyed(user_id=U, namespace=["prefs"], key="lang", content="nb", ttl_minutes=10)
    assert pooled.get_keyed(user_id=U, namespace=["prefs"], key="theme").content == "dark"
    clock.advance(minutes=11)
    assert pooled.get_keyed(user_id=U, namespace=["prefs"], key="lang") is None
    assert pooled.sweep_ttl(user_id=U) == 1


def test_export_import_and_forget(pooled):
    pooled.add(user_id=U, content="The ferry leaves at dawn")
    pooled.upsert_fact(user_id=U, category="profile", key="city", value="Oslo")
    records: list[dict] = []
    pooled.export(records.append, user_id=U)
    report = pooled.import_records(records, user_map={U: "bob"})
    assert report.added["item"] == 1 and report.added["fact"] == 1
    assert "The ferry leaves at dawn" in [i.content for i in pooled.list_items(user_id="bob")]
    assert pooled.get_fact("city", user_id="bob").value == "Oslo"
    removed = pooled.forget(user_id=U)
    assert removed["items"] >= 1 and removed["facts"] == 1
    assert pooled.list_items(user_id=U) == [] and pooled.search("ferry", user_id="bob")


def test_threads_beyond_the_server_pool_write_and_read_their_own(pooled):
    def user_work(n: int) -> tuple[int, int]:
        user = f"user{n}"
        ids = [pooled.add(user_id=user, content=f"{user} keeps note {i} about the harbour") for i in range(3)]
        pooled.upsert_fact(user_id=user, category="profile", key="number", value=str(n))
        found = {h.id for h in pooled.search("harbour note", user_id=user, limit=10)}
        assert set(ids) <= found
        return len(ids), int(pooled.get_fact("number", user_id=user).value)

    with ThreadPoolExecutor(THREADS) as pool:
        assert list(pool.map(user_work, range(THREADS * 2))) == [(3, n) for n in range(THREADS * 2)]
    assert len(pooled.list_users()) == THREADS * 2


async def test_the_async_store_writes_and_searches_concurrently(pooled_url):
    url = without_threshold(pooled_url)  # the setting as a backend option this time
    store = await AsyncMemoryStore.open(url, embeddings=FakeEmbeddings(), clock=FakeClock(),
                                        backend_options={"prepare_threshold": None, "max_size": THREADS})
    try:
        async def user_work(n: int) -> list[int]:
            user = f"user{n}"
            ids = [await store.add(user_id=user, content=f"{user} remembers the lighthouse {i}") for i in range(3)]
            await store.upsert_fact(user_id=user, category="profile", key="number", value=str(n))
            hits = await store.search("lighthouse", user_id=user, limit=10)
            assert set(ids) <= {h.id for h in hits}
            return ids

        made = await asyncio.gather(*(user_work(n) for n in range(THREADS * 2)))
        assert len({i for ids in made for i in ids}) == THREADS * 6
    finally:
        await store.close()


def test_session_settings_follow_the_client_and_leak_to_no_other(pooled_url, postgres_server):
    """The store sets UTC and ISO once per connection (a statement; PgBouncer refuses the startup
    ``options``); PgBouncer sets them again on whichever server connection serves the next
    transaction, and back to the database's own for other clients (set before PgBouncer's first
    server connection: PgBouncer takes a database's defaults from it)."""
    name = urlsplit(pooled_url).path.lstrip("/")
    postgres_server.execute(f"ALTER DATABASE {name} SET timezone = 'Europe/Oslo'")
    postgres_server.execute(f"ALTER DATABASE {name} SET DateStyle = 'SQL, DMY'")
    plain = without_threshold(pooled_url)

    def theirs(_: int) -> tuple[str, str]:
        with psycopg.connect(plain, prepare_threshold=None, autocommit=True) as conn:
            return conn.execute("SELECT current_setting('TimeZone'), current_setting('DateStyle')").fetchone()

    with MemoryStore.open(pooled_url, embeddings=FakeEmbeddings(), backend_options={"max_size": THREADS}) as store:
        def ours(_: int) -> tuple[str, str]:
            rows = store._backend._run(lambda: iter_once(Q(
                "SELECT current_setting('TimeZone') AS tz, current_setting('DateStyle') AS ds")), reads=True)
            return rows[0]["tz"], rows[0]["ds"]

        with ThreadPoolExecutor(THREADS) as pool:
            mine = list(pool.map(ours, range(THREADS * 4)))
            other = list(pool.map(theirs, range(THREADS)))
            mine += list(pool.map(ours, range(THREADS * 4)))
        assert {(tz, style.split(",")[0]) for tz, style in mine} == {("UTC", "ISO")}
        assert set(other) == {("Europe/Oslo", "SQL, DMY")}
        item = store.add(user_id=U, content="forever", expires_at="9999-12-31T23:59:59Z")
        assert store.get(item, user_id=U).expires_at.year == 9999


def test_schema_changes_leave_no_setting_on_the_pooled_server_connections(pooled_url):
    """``CREATE EXTENSION`` and the first HNSW index run on a connection of their own under
    ``lock_timeout``: SET LOCAL in their transaction, so the server connection PgBouncer hands to
    the next client carries no lock timeout."""
    with MemoryStore.open(pooled_url, embeddings=FakeEmbeddings()) as store:
        store.add(user_id=U, content="the first vector creates the HNSW index")
        assert store._backend.has_vector
    with psycopg.connect(without_threshold(pooled_url), prepare_threshold=None, autocommit=True) as conn:
        assert conn.execute("SHOW lock_timeout").fetchone() == ("0",)
        indexes = conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw_%'").fetchone()
        assert indexes == (1,)


def test_schema_changes_wait_for_no_open_transaction_of_their_caller(pooled_url, postgres_server, monkeypatch):
    """A statement run on a connection of its own (``CREATE EXTENSION`` at migrate, the first HNSW
    index at the first vector) never waits while its caller's transaction holds a server connection:
    with every PgBouncer server connection so held, it would wait for ever. The call gives its
    transaction up, the statement runs, the call runs again."""
    from navi_memory.backends.postgres.pool import PostgresBackend

    name = urlsplit(pooled_url).path.lstrip("/")
    direct = urlunsplit(urlsplit(postgres_server.url)._replace(path=f"/{name}"))
    held: list[tuple[str, int]] = []
    real = PostgresBackend._own_tx

    def probed(self, query):
        with psycopg.connect(direct, autocommit=True) as conn:
            text = query.text if isinstance(query.text, str) else query.text.as_string(conn)
            held.append((text, conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND state LIKE 'idle in transaction%%'").fetchone()[0]))
        return real(self, query)

    monkeypatch.setattr(PostgresBackend, "_own_tx", probed)
    with MemoryStore.open(pooled_url, embeddings=FakeEmbeddings()) as store:
        store.add(user_id=U, content="the first vector creates the HNSW index")
        assert store.search("vector", user_id=U)
    assert [statement.split()[:2] for statement, _ in held] == [["CREATE", "EXTENSION"], ["CREATE", "INDEX"]]
    assert [count for _, count in held] == [0, 0]


# -- prepared statements ----------------------------------------------------------------------

RUNS = 25  # many more than psycopg's prepare_threshold (5)
keeps_no_prepared_statements = pytest.mark.skipif(
    version() >= (1, 21), reason="PgBouncer 1.21 and later can keep prepared statements (max_prepared_statements)")


@keeps_no_prepared_statements
def test_psycopg_prepared_statements_break_through_pgbouncer_1_18(pooled_url):
    """What ``prepare_threshold`` none avoids: PgBouncer before 1.21 forwards a prepared statement to
    the server connection of one transaction only. Two clients taking turns meet on the same idle
    server connection (PgBouncer reuses the last one freed): the second client prepares a statement of
    the same name there."""
    plain = without_threshold(pooled_url)
    with psycopg.connect(plain, autocommit=True) as one, psycopg.connect(plain, autocommit=True) as two:
        with pytest.raises((psycopg.errors.DuplicatePreparedStatement, psycopg.errors.InvalidSqlStatementName)):
            for n in range(RUNS):
                for conn in (one, two):
                    conn.execute("SELECT %s::int + 1", [n])


@keeps_no_prepared_statements
def test_the_store_fails_without_the_setting(pooled_url):
    plain = without_threshold(pooled_url)
    with MemoryStore.open(plain, embeddings=FakeEmbeddings()) as a, \
            MemoryStore.open(plain, embeddings=FakeEmbeddings()) as b:
        with pytest.raises(StorageError, match="prepared statement"):
            for n in range(RUNS):
                for store in (a, b):
                    store.upsert_fact(user_id=U, category="profile", key="count", value=str(n))


def test_stores_repeating_their_statements_prepare_nothing_with_the_setting(pooled_url):
    plain = without_threshold(pooled_url)
    stores = [MemoryStore.open(pooled_url, embeddings=FakeEmbeddings(), backend_options={"max_size": 2})
              for _ in range(THREADS)]
    try:
        def work(number: int) -> str:
            store, key = stores[number], f"count{number}"
            for n in range(RUNS):
                store.upsert_fact(user_id=U, category="profile", key=key, value=str(n))
                assert store.get_fact(key, user_id=U).value == str(n)
            return store.get_fact(key, user_id=U).value

        with ThreadPoolExecutor(THREADS) as pool:
            assert set(pool.map(work, range(THREADS))) == {str(RUNS - 1)}
        with psycopg.connect(plain, prepare_threshold=None, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
    finally:
        for store in stores:
            store.close()


def test_the_url_parameter_leaves_the_rest_of_the_url_to_libpq(pg_url):
    """Directly on PostgreSQL (the fixture's schema travels in the URL's ``options``): the parameter
    is taken out, the other parameters reach libpq unchanged, and nothing is prepared."""
    with MemoryStore.open(pg_url + "&prepare_threshold=none", embeddings=FakeEmbeddings()) as store:
        for n in range(RUNS // 5):
            store.add(user_id=U, content=f"note {n}")
        assert len(store.list_items(user_id=U)) == RUNS // 5
        with store._backend.pool.connection() as conn:
            assert conn.prepare_threshold is None
            assert conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()["n"] == 0
            schema = conn.execute("SELECT current_schema() AS s").fetchone()["s"]
    assert schema.startswith("t_") and schema in pg_url


def test_prepare_threshold_comes_from_the_url_or_the_backend_options():
    url = parse_url("postgresql://u@127.0.0.1:6432/db?sslmode=disable&prepare_threshold=none")
    assert split_url(url) == ("postgresql://u@127.0.0.1:6432/db?sslmode=disable", None)
    assert split_url(parse_url("postgresql://u@h/db")) == ("postgresql://u@h/db", 5)  # psycopg's default
    assert pool_settings(url)[1]["prepare_threshold"] is None
    assert pool_settings(url, 3)[1]["prepare_threshold"] == 3  # backend_options win
    assert pool_settings(parse_url("postgresql://u@h/db?prepare_threshold=0"))[1]["prepare_threshold"] == 0
    for bad in ("never", "-1", "1.5"):
        with pytest.raises(ConfigurationError, match="prepare_threshold"):
            split_url(parse_url(f"postgresql://u@h/db?prepare_threshold={bad}"))
    for bad in (-1, 1.5, True, "x"):
        with pytest.raises(ConfigurationError, match="prepare_threshold"):
            pool_settings(parse_url("postgresql://u@h/db"), bad)

