"""Concurrent writers and readers: every write lands, no "database is locked" reaches a caller.

SQLite: separate processes (each opening the same file, as separate application workers would)
write one item per ``store.add`` call while another process searches. PostgreSQL: threads and
asyncio tasks share one store's connection pool. Every suite run writes 1,000 (SQLite) and 800
(PostgreSQL) items; ``NAVI_MEMORY_TEST_SOAK=full`` writes 8,000 and 2,000. Figures: docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import time
import traceback
from pathlib import Path

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore

from .helpers import fts_integrity_ok, soak_size

PROCESSES = 4
WRITES = soak_size(250, 2000)  # per process
USERS = ("alice", "bob")


def _content(worker: int, n: int) -> str:
    return f"worker {worker} write {n} about coffee and trains"


def _sqlite_writer(url: str, worker: int, writes: int, start, results) -> None:
    """One process: ``writes`` separate store.add calls, a search every 50 writes."""
    errors: list[str] = []
    try:
        with MemoryStore.open(url, embeddings="hashing") as store:
            start.wait()
            for n in range(writes):
                try:
                    store.add(user_id=USERS[n % 2], content=_content(worker, n), tags=[f"w{worker}"])
                    if n % 50 == 0:
                        store.search("coffee trains", user_id=USERS[n % 2], limit=5)
                except Exception as exc:  # counted and reported, the test decides
                    errors.append(f"{type(exc).__name__}: {exc}")
    except Exception:
        errors.append(traceback.format_exc())
    results.put((worker, errors))


def _sqlite_searcher(url: str, start, done, results) -> None:
    errors: list[str] = []
    searches = 0
    try:
        with MemoryStore.open(url, embeddings="hashing") as store:
            start.wait()
            while not done.is_set():
                try:
                    store.search("write about coffee", user_id=USERS[searches % 2], limit=10)
                    store.list_items(user_id=USERS[searches % 2], limit=20)
                    searches += 1
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
    except Exception:
        errors.append(traceback.format_exc())
    results.put(("searcher", errors, searches))


def test_sqlite_four_processes_writing_with_concurrent_searches(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/shared.db"
    with MemoryStore.open(url, embeddings="hashing"):
        pass  # create the schema once, as a deployment's migrate step would
    ctx = multiprocessing.get_context("spawn")
    start, done, results = ctx.Barrier(PROCESSES + 1), ctx.Event(), ctx.Queue()
    writers = [ctx.Process(target=_sqlite_writer, args=(url, w, WRITES, start, results)) for w in range(PROCESSES)]
    searcher = ctx.Process(target=_sqlite_searcher, args=(url, start, done, results))
    started = time.monotonic()
    for p in (*writers, searcher):
        p.start()
    reports = [results.get(timeout=300) for _ in writers]
    elapsed = time.monotonic() - started
    done.set()
    searcher_report = results.get(timeout=60)
    for p in (*writers, searcher):
        p.join(60)
        assert p.exitcode == 0
    errors = [e for _, errs in reports for e in errs] + searcher_report[1]
    assert not [e for e in errors if "locked" in e or "busy" in e], errors[:5]
    assert errors == []
    assert searcher_report[2] > 0  # the searches really ran beside the writers
    print(f"sqlite: {PROCESSES} x {WRITES} writes (+ process start-up) in {elapsed:.1f}s, "
          f"{searcher_report[2]} search+list rounds beside them")
    with MemoryStore.open(url, embeddings="hashing") as store:
        stored = {i.content for u in USERS for i in store.list_items(user_id=u, limit=10_000)}
        assert stored == {_content(w, n) for w in range(PROCESSES) for n in range(WRITES)}
        assert store.embedding_status()["ready"] == PROCESSES * WRITES
    conn = sqlite3.connect(tmp_path / "shared.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    fts_integrity_ok(tmp_path / "shared.db")


def test_sqlite_connections_use_wal_and_a_busy_timeout(tmp_path: Path):
    with MemoryStore.open(f"sqlite:///{tmp_path}/m.db", embeddings=False) as store:
        store.add(user_id="alice", content="x")
        with store.backend._connection() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


# -- PostgreSQL: one pool, many threads / tasks ---------------------------------------------------

THREADS = 16
PG_WRITES = soak_size(50, 125)  # per worker: 800 (full: 2,000) writes per test


@pytest.mark.postgres
def test_postgres_sixteen_threads_through_the_pool(pg_url):
    errors: list[str] = []
    start = threading.Barrier(THREADS)
    with MemoryStore.open(pg_url, embeddings="hashing") as store:
        def work(worker: int) -> None:
            start.wait()
            for n in range(PG_WRITES):
                try:
                    store.add(user_id=USERS[n % 2], content=_content(worker, n))
                    if n % 5 == 0:
                        store.search("coffee trains", user_id=USERS[worker % 2], limit=5)
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(w,)) for w in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        stored = {i.content for u in USERS for i in store.list_items(user_id=u, limit=10_000)}
        assert stored == {_content(w, n) for w in range(THREADS) for n in range(PG_WRITES)}
        assert store.embedding_status()["ready"] == THREADS * PG_WRITES


@pytest.mark.postgres
async def test_postgres_sixteen_async_tasks_through_the_pool(pg_url):
    errors: list[str] = []
    store = await AsyncMemoryStore.open(pg_url, embeddings="hashing")
    try:
        async def work(worker: int) -> None:
            for n in range(PG_WRITES):
                try:
                    await store.add(user_id=USERS[n % 2], content=_content(worker, n))
                    if n % 5 == 0:
                        await store.search("coffee trains", user_id=USERS[worker % 2], limit=5)
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")

        await asyncio.gather(*(work(w) for w in range(THREADS)))
        assert errors == []
        stored = {i.content for u in USERS for i in await store.list_items(user_id=u, limit=10_000)}
        assert stored == {_content(w, n) for w in range(THREADS) for n in range(PG_WRITES)}
        assert (await store.embedding_status())["ready"] == THREADS * PG_WRITES
    finally:
        await store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_racing_writers_of_one_fact_key_all_land(backend, pg_url, tmp_path: Path):
    """Eight threads save the same new fact key at once (the read-then-insert race): on PostgreSQL
    the losers hit the unique key, are run again and update the winner's fact; no caller sees an error."""
    url = pg_url if backend == "postgres" else f"sqlite:///{tmp_path / 'race.db'}"
    errors: list[str] = []
    start = threading.Barrier(8)
    with MemoryStore.open(url, embeddings="hashing") as store:
        def work(worker: int) -> None:
            start.wait()
            try:
                store.upsert_fact(user_id="alice", category="preferences", key="race_colour", value=f"c{worker}")
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        fact = store.get_fact("race_colour", user_id="alice")
        assert fact.value in {f"c{w}" for w in range(8)}
        # every value was saved once: the current one, the others in its history
        assert {fact.value} | {h.value for h in fact.history} == {f"c{w}" for w in range(8)}
