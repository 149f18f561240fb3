"""PostgreSQL: opening a store never blocks or deadlocks other processes, and writes that lose a
deadlock or serialization conflict are run again inside the backend (never "unavailable")."""

from __future__ import annotations

import multiprocessing
import time
import traceback
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from navi_memory import AsyncMemoryStore, BackendUnavailableError, MemoryStore, StorageError
from navi_memory.backends.postgres.pool import CONFLICT_ATTEMPTS, retry_delays

from .helpers import soak_size

pytestmark = pytest.mark.postgres

WRITERS, WRITES, OPENERS = 3, soak_size(60, 150), 2  # NAVI_MEMORY_TEST_SOAK=full: 150 adds per writer


def _with_option(url: str, option: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} {option}".strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _writer(url: str, worker: int, start, results) -> None:
    errors: list[str] = []
    try:
        with MemoryStore.open(url, embeddings="hashing") as store:
            start.wait()
            for n in range(WRITES):
                try:
                    store.add(user_id=f"user{n % 3}", content=f"worker {worker} write {n} about ferries")
                except Exception as exc:  # counted and reported: the test asserts there are none
                    errors.append(f"{type(exc).__name__}: {exc}")
    except Exception:
        errors.append(traceback.format_exc())
    results.put(("writer", worker, errors, WRITES))


def _opener(url: str, worker: int, start, done, results) -> None:
    errors: list[str] = []
    opens = 0
    start.wait()
    while not done.is_set():
        try:
            with MemoryStore.open(url, embeddings="hashing") as store:  # migrate() on a current schema
                store.search("ferries", user_id=f"user{opens % 3}", limit=5)
            opens += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        time.sleep(0.05)
    results.put(("opener", worker, errors, opens))


def test_writers_beside_processes_opening_stores_lose_nothing(pg_url):
    db_url = pg_url
    MemoryStore.open(db_url, embeddings="hashing").close()  # the schema exists, as in production
    ctx = multiprocessing.get_context("spawn")
    start, done, results = ctx.Event(), ctx.Event(), ctx.Queue()
    writers = [ctx.Process(target=_writer, args=(db_url, w, start, results)) for w in range(WRITERS)]
    openers = [ctx.Process(target=_opener, args=(db_url, w, start, done, results)) for w in range(OPENERS)]
    for p in writers + openers:
        p.start()
    start.set()
    reports = [results.get(timeout=300) for _ in writers]
    done.set()
    reports += [results.get(timeout=120) for _ in openers]
    for p in writers + openers:
        p.join(60)
    errors = [e for _, _, errs, _ in reports for e in errs]
    opens = sum(n for kind, _, _, n in reports if kind == "opener")
    print(f"{WRITERS} writers x {WRITES} adds, {OPENERS} processes opened {opens} stores meanwhile, {len(errors)} errors")
    assert errors == []
    assert opens > 0  # stores were opened meanwhile
    with MemoryStore.open(db_url, embeddings="hashing") as store:
        stored = {i.content for u in range(3) for i in store.list_items(user_id=f"user{u}", limit=10_000)}
    assert stored == {f"worker {w} write {n} about ferries" for w in range(WRITERS) for n in range(WRITES)}


def test_opening_a_current_schema_takes_no_lock_a_writer_holds(pg_url):
    db_url = pg_url
    MemoryStore.open(db_url, embeddings="hashing").close()
    with psycopg.connect(db_url) as busy:  # a writer in the middle of its transaction on every table
        busy.execute("SELECT set_config('search_path', current_setting('search_path'), false)")
        busy.execute("INSERT INTO users (id) VALUES ('busy-writer')")
        busy.execute("LOCK TABLE items, facts, embeddings, session_state, persons IN ROW EXCLUSIVE MODE")
        # any DDL (ALTER TABLE, CREATE INDEX) would wait for this transaction: fail fast instead
        with MemoryStore.open(_with_option(db_url, "-c lock_timeout=2s"), embeddings="hashing") as store:
            assert store.migrate() == store.migrate()
            item = store.add(user_id="alice", content="written while another writer is busy")
            assert store.get(item, user_id="alice").content == "written while another writer is busy"
        busy.rollback()


def test_retry_delays_are_bounded_and_jittered():
    delays = retry_delays()
    assert len(delays) == CONFLICT_ATTEMPTS - 1 and all(0 <= d <= 0.5 for d in delays)
    assert retry_delays(attempts=1) == []


def _lose_conflicts(backend, times: int, sqlstate: str = "deadlock_detected") -> list[int]:
    """Make the backend's next ``times`` transactions fail on the server with a real conflict
    error (raised by PostgreSQL itself, rolled back like a lost deadlock), then run normally."""
    seen = [0]
    real = backend._run_once

    def run_once(gen, *args):
        seen[0] += 1
        if seen[0] <= times:
            with backend.pool.connection() as conn:
                conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'lost a conflict (test)' USING ERRCODE = '{sqlstate}'; END $$")
        return real(gen, *args)

    backend._run_once = run_once
    return seen


@pytest.mark.parametrize("sqlstate", ["deadlock_detected", "serialization_failure"])
def test_a_write_that_loses_a_conflict_is_run_again(pg_url, sqlstate):
    with MemoryStore.open(pg_url, embeddings="hashing") as store:
        seen = _lose_conflicts(store.backend, 2, sqlstate)
        item = store.add(user_id="alice", content="written after two lost conflicts")
        assert seen[0] >= 3 and store.get(item, user_id="alice").content == "written after two lost conflicts"
        assert [i.content for i in store.list_items(user_id="alice")] == ["written after two lost conflicts"]


def test_a_write_that_keeps_losing_is_a_storage_error_not_unavailable(pg_url):
    with MemoryStore.open(pg_url, embeddings="hashing") as store:
        _lose_conflicts(store.backend, 100)
        with pytest.raises(StorageError, match="still conflicting") as info:
            store.add(user_id="alice", content="never written")
        assert not isinstance(info.value, BackendUnavailableError)


async def test_the_async_backend_runs_a_lost_conflict_again(pg_url):
    async with await AsyncMemoryStore.open(pg_url, embeddings="hashing") as store:
        backend = store.backend
        seen = [0]
        real = backend._run_once

        async def run_once(gen, *args):
            seen[0] += 1
            if seen[0] == 1:
                async with backend.pool.connection() as conn:
                    await conn.execute("DO $$ BEGIN RAISE EXCEPTION 'lost (test)' USING ERRCODE = 'deadlock_detected'; END $$")
            return await real(gen, *args)

        backend._run_once = run_once
        item = await store.add(user_id="alice", content="async, after a lost conflict")
        assert (await store.get(item, user_id="alice")).content == "async, after a lost conflict"
