"""A keyed item's TTL (schema 6): ``put_keyed(ttl_minutes=)`` keeps it on the row, a read with
``refresh_ttl`` moves the expiry to now + TTL, ``sweep_ttl`` deletes expired keyed items, and
NaviStore's sweeper runs it periodically. Databases whose NaviStore kept the TTL in the
``_langgraph`` metadata key have it moved to the column by the migration."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import psycopg
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore, ValidationError
from navi_memory.backends.sqlite.schema import LATEST_VERSION
from navi_memory.integrations.langgraph import NaviStore

from .fakes import FakeClock, FakeEmbeddings
from .helpers import sqlite_at_version

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)

U = "u1"
NS = ("memories", "u1")


def _alive(store, key: str) -> bool:
    return store.get_keyed(user_id=U, namespace=NS, key=key) is not None


def test_ttl_minutes_refresh_on_read_and_sweep(store, clock):
    item = store.put_keyed(user_id=U, namespace=NS, key="a", content="short", ttl_minutes=10)
    assert item.ttl_minutes == 10 and item.expires_at == clock() + timedelta(minutes=10)
    for key in ("b", "c"):
        store.put_keyed(user_id=U, namespace=NS, key=key, content=key, ttl_minutes=10)
    store.put_keyed(user_id=U, namespace=NS, key="fixed", content="fixed", expires_at=clock() + timedelta(minutes=10))
    store.put_keyed(user_id=U, namespace=NS, key="never", content="never")
    clock.advance(minutes=8)
    read = store.get_keyed(user_id=U, namespace=NS, key="a", refresh_ttl=True)
    assert read.expires_at == clock() + timedelta(minutes=10)
    assert store.get_keyed(user_id=U, namespace=NS, key="b").expires_at < clock() + timedelta(minutes=3)  # no refresh
    ids = [store.get_keyed(user_id=U, namespace=NS, key=k).id for k in ("c", "fixed", "never")]
    assert store.refresh_ttl(ids, user_id=U) == 1  # only c has a TTL
    assert store.refresh_ttl(ids, user_id="someone-else") == 0
    clock.advance(minutes=5)
    assert [k for k in ("a", "b", "c", "fixed", "never") if _alive(store, k)] == ["a", "c", "never"]
    store.put_keyed(user_id="u2", namespace=NS, key="b", content="other user", ttl_minutes=1)
    clock.advance(minutes=2)
    assert store.sweep_ttl(user_id=U) == 2  # b and fixed; u2's item is left for a sweep of every user
    assert store.count_items(user_id=U, include_expired=True, status="any") == 3
    assert store.sweep_ttl() == 1
    replaced = store.put_keyed(user_id=U, namespace=NS, key="a", content="no ttl now")
    assert replaced.ttl_minutes is None and replaced.expires_at is None


@pytest.mark.parametrize("bad", [0, -1, True, "10", float("inf"), 10**9])
def test_bad_ttls_are_refused(store, bad):
    with pytest.raises(ValidationError, match="ttl_minutes"):
        store.put_keyed(user_id=U, namespace=NS, key="k", content="x", ttl_minutes=bad)


def test_ttl_and_expiry_together_are_refused(store, clock):
    with pytest.raises(ValidationError, match="not both"):
        store.put_keyed(user_id=U, namespace=NS, key="k", content="x", ttl_minutes=5, expires_at=clock())


# -- the sweeper -----------------------------------------------------------------------------------

def _wait(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_navistore_sweeper_thread_deletes_expired_items(store, clock):
    navi = NaviStore(store, user_id=U, ttl={"sweep_interval_minutes": 0.001})
    navi.put(NS, "gone", {"text": "x"}, ttl=1)
    navi.put(NS, "kept", {"text": "y"})
    future = navi.start_ttl_sweeper()
    assert navi.start_ttl_sweeper() is future  # one sweeper at a time
    clock.advance(minutes=2)
    assert _wait(lambda: store.count_items(user_id=U, include_expired=True, status="any") == 1)
    assert navi.stop_ttl_sweeper(timeout=10) and future.done()
    assert navi.stop_ttl_sweeper() is True  # none running
    assert navi.get(NS, "kept") is not None
    with pytest.raises(ValidationError, match="sweep_interval_minutes"):
        navi.start_ttl_sweeper(sweep_interval_minutes=0)


async def test_navistore_sweeper_task_with_an_async_store(new_db_url):
    clock = FakeClock()
    store = await AsyncMemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock)
    try:
        navi = NaviStore(store, user_id=U)
        await navi.aput(NS, "gone", {"text": "x"}, ttl=1)
        task = await navi.start_ttl_sweeper(sweep_interval_minutes=0.001)  # awaited, as LangGraph's async stores
        assert await navi.start_ttl_sweeper() is task
        clock.advance(minutes=2)
        for _ in range(500):
            if await store.count_items(user_id=U, include_expired=True, status="any") == 0:
                break
            await asyncio.sleep(0.02)
        assert await store.count_items(user_id=U, include_expired=True, status="any") == 0
        assert await navi.stop_ttl_sweeper(timeout=10) and task.done()
        assert await navi.stop_ttl_sweeper() is True  # none running
        await navi.aput(NS, "also gone", {"text": "y"}, ttl=1)
        clock.advance(minutes=2)
        assert await navi.sweep_ttl() == 1 and await navi.asweep_ttl() == 0
    finally:
        await store.close()


# -- databases from before schema 6 ----------------------------------------------------------------

STAMP = "2024-01-01T00:00:00.000000Z"
LATER = "2100-01-01T00:00:00.000000Z"  # after the fake clock's now


def test_a_version_5_sqlite_database_moves_the_navistore_ttl_to_the_column(tmp_path):
    path = tmp_path / "v5.db"
    conn = sqlite_at_version(path, 5)
    conn.execute("INSERT INTO users (id, created_at) VALUES (?, ?)", (U, STAMP))
    conn.execute("INSERT INTO themes (user_id, slug, display_name, created_at, updated_at)"
                 " VALUES (?, 'general', 'General', ?, ?)", (U, STAMP, STAMP))
    rows = [("ttl", {"text": "a", "_langgraph": {"ttl": 30.0}}, LATER),
            ("both", {"text": "b", "_langgraph": {"ttl": 30, "index": False}}, LATER),
            ("plain", {"text": "c"}, None)]
    for key, metadata, expires in rows:
        conn.execute("INSERT INTO items (user_id, theme, type, content, metadata, expires_at, namespace, ext_key,"
                     " created_at, updated_at) VALUES (?, 'general', 'note', ?, ?, ?, 'memories.u1', ?, ?, ?)",
                     (U, key, json.dumps(metadata), expires, key, STAMP, STAMP))
    conn.close()
    clock = FakeClock()
    with MemoryStore.open(f"sqlite:///{path}", embeddings=False, clock=clock) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        _check_migrated(store, clock)


def _check_migrated(store, clock) -> None:
    got = {k: store.get_keyed(user_id=U, namespace=NS, key=k) for k in ("ttl", "both", "plain")}
    assert {k: (i.ttl_minutes, i.metadata) for k, i in got.items()} == {
        "ttl": (30.0, {"text": "a"}), "both": (30.0, {"text": "b", "_langgraph": {"index": False}}),
        "plain": (None, {"text": "c"})}
    navi = NaviStore(store, user_id=U, index={"fields": ["text"]})
    assert navi.get(NS, "ttl").value == {"text": "a"}  # refreshed on read by the column's TTL
    assert store.get_keyed(user_id=U, namespace=NS, key="ttl").expires_at == clock() + timedelta(minutes=30)
    assert navi.get(NS, "both", refresh_ttl=False).value == {"text": "b"}
    assert store.search("both", user_id=U, min_score=0)[0].key == "both"
    # its index=False is still known: never scored, listed after the scored items
    assert [(i.key, i.score) for i in navi.search(("memories",), query="both") if i.key == "both"] == [("both", None)]


@pytest.mark.postgres
def test_a_version_5_postgres_schema_moves_the_navistore_ttl_to_the_column(postgres_server):
    url = postgres_server.fresh_schema_url()
    clock = FakeClock()
    try:
        with MemoryStore.open(url, embeddings=False, clock=clock) as store:
            for key, metadata in (("ttl", {"text": "a"}), ("both", {"text": "b"}), ("plain", {"text": "c"})):
                store.put_keyed(user_id=U, namespace=NS, key=key, content=key, metadata=metadata)
        with psycopg.connect(url, autocommit=True) as conn:  # back to what version 5 and an older NaviStore left
            conn.execute("DROP INDEX items_keyed_expiry")
            conn.execute("ALTER TABLE items DROP COLUMN ttl_minutes")
            conn.execute("DELETE FROM navi_schema_migrations WHERE version >= 6")
            conn.execute("""UPDATE items SET metadata = metadata || '{"_langgraph": {"ttl": 30.0}}',"""
                         " expires_at = now() + interval '1 day' WHERE ext_key = 'ttl'")
            conn.execute("""UPDATE items SET metadata = metadata || '{"_langgraph": {"ttl": 30, "index": false}}',"""
                         " expires_at = now() + interval '1 day' WHERE ext_key = 'both'")
        with MemoryStore.open(url, embeddings=False, clock=clock) as store:
            assert store.backend.schema_version() == LATEST_VERSION
            _check_migrated(store, clock)
            assert store.migrate() == LATEST_VERSION  # idempotent
    finally:
        postgres_server.drop_schema(url)
