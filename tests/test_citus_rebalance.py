"""Rebalancing under load: a third worker joins a Citus cluster and ``citus_rebalance_start()`` moves
shards to it (logical replication, the default ``auto`` mode) while real processes write and search.
No write fails or goes missing, every search finds its user's seeded note, and shards land on the new
worker. A cluster of its own (coordinator + 2 workers), so the session's shared cluster is untouched.
Figures: docs/scaling.md ("Rebalancing")."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.postgres import schema

from .citus import start_cluster
from .repeat import lines, repeat

pytestmark = [pytest.mark.citus, pytest.mark.xdist_group("citus")]

USERS = tuple(f"user{n}" for n in range(6))
WRITERS = 2
SETTINGS = {"citus.shard_count": "4"}


def _seed(user: str) -> str:
    return f"seed note of {user}: the kumquat orchard by the river"


def _note(writer: int, n: int) -> str:
    return f"writer {writer} note {n} about trains"


def _write(store: MemoryStore, n: int, writer: int) -> dict[str, Any]:
    """One numbered note, round-robin over the users: acknowledged (its id) or the error it raised."""
    user, content = USERS[n % len(USERS)], _note(writer, n)
    began = time.monotonic()
    try:
        added = store.add_note(user_id=user, content=content)
    except Exception as exc:  # counted: the test asserts there are none
        return {"error": f"{type(exc).__name__}: {exc}", "content": content}
    return {"user": user, "id": added.item.id, "content": content, "seconds": time.monotonic() - began}


def _search(store: MemoryStore, n: int, seeds: dict[str, int]) -> dict[str, Any]:
    """One user searched for its seeded note: ``ok`` or why not."""
    user = USERS[n % len(USERS)]
    try:
        ids = [r.id for r in store.search("kumquat orchard", user_id=user, limit=5)]
    except Exception as exc:
        return {"error": f"{user}: {type(exc).__name__}: {exc}"}
    return {"ok": True} if seeds[user] in ids else {"error": f"{user}: seed missing, got {ids}"}


STEPS = {"write": _write, "search": _search}


def _process(step: str, arg: Any, url: str, log: str, started, done) -> None:
    """A real process repeating one step until ``done`` (``repeat``)."""
    repeat(lambda: MemoryStore.open(url, embeddings=False, migrate=False),
           lambda store, n: STEPS[step](store, n, arg), log, started, done)


@pytest.fixture
def cluster() -> Any:
    started = start_cluster(2, SETTINGS)
    yield started
    started.stop()


def _placements_by_port(url: str) -> dict[int, int]:
    """Shards of the distributed tables per node (a reference table has a copy on every node anyway)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT nodeport, count(*) FROM citus_shards WHERE citus_table_type = 'distributed'"
                            " GROUP BY nodeport").fetchall()
    return {port: count for port, count in rows}


def test_adding_a_worker_and_rebalancing_under_writes_and_searches(cluster, tmp_path: Path):
    url = cluster.url
    with MemoryStore.open(url, embeddings=False) as store:  # migrate: the tables distributed
        assert store.backend.distributed
        seeds = {user: store.add_note(user_id=user, content=_seed(user)).item.id for user in USERS}
    ctx = multiprocessing.get_context("spawn")
    started, done = ctx.Barrier(WRITERS + 2), ctx.Event()
    writer_logs = [tmp_path / f"writer{w}.jsonl" for w in range(WRITERS)]
    search_log = tmp_path / "searcher.jsonl"
    procs = [ctx.Process(target=_process, args=("write", w, url, str(writer_logs[w]), started, done))
             for w in range(WRITERS)]
    procs.append(ctx.Process(target=_process, args=("search", seeds, url, str(search_log), started, done)))
    for proc in procs:
        proc.start()
    try:
        started.wait(timeout=60)
        time.sleep(1)  # writes and searches under way before the cluster changes
        before = sum(len(lines(log)) for log in writer_logs)
        began = time.monotonic()
        new = cluster.add_worker()
        added_seconds = time.monotonic() - began
        cluster.sql(cluster.coordinator, "SELECT citus_rebalance_start()")
        cluster.sql(cluster.coordinator, "SELECT citus_rebalance_wait()")
        rebalance_seconds = time.monotonic() - began
        status = cluster.sql(cluster.coordinator, "SELECT state FROM citus_rebalance_status()"
                                                  " ORDER BY job_id DESC LIMIT 1")
        moves = cluster.sql(cluster.coordinator, "SELECT status, command FROM pg_dist_background_task"
                                                 " WHERE command LIKE '%citus_move_shard_placement%'")
        during = sum(len(lines(log)) for log in writer_logs) - before
        time.sleep(1)  # and some after it
    finally:
        done.set()
        for proc in procs:
            proc.join(60)
            if proc.is_alive():  # never left running: the exit code check below fails instead
                proc.terminate()
                proc.join(10)
    assert [proc.exitcode for proc in procs] == [0] * len(procs)
    assert status == [("finished",)]
    # the default mode: logical replication (the tables have primary keys), writes never blocked
    assert moves and all(state == "done" and command.endswith("'auto')") for state, command in moves), moves
    placements = _placements_by_port(url)
    assert placements.get(new.port, 0) > 0, placements
    # every shard placed once: moved, never copied
    assert sum(placements.values()) == int(SETTINGS["citus.shard_count"]) * len(schema.DISTRIBUTED)

    writes = [line for log in writer_logs for line in lines(log)]
    assert [w for w in writes if "error" in w] == []
    searches = lines(search_log)
    assert [s for s in searches if "error" in s] == []
    assert len(searches) > 0 and during > 0
    with MemoryStore.open(url, embeddings=False, migrate=False) as store:
        for user in USERS:
            stored = {item.id: item.content for item in store.list_items(user_id=user, limit=10_000)}
            acknowledged = {w["id"]: w["content"] for w in writes if w["user"] == user}
            assert stored == {**acknowledged, seeds[user]: _seed(user)}, user
    slowest = max(w["seconds"] for w in writes)
    print(f"rebalance: {rebalance_seconds:.1f} s (worker added in {added_seconds:.1f} s, then shards moved),"
          f" {during} writes acknowledged during it, {len(writes)} writes (slowest {slowest:.2f} s) and"
          f" {len(searches)} searches in all, distributed shards by port {placements}")
