"""A writer SIGKILLed mid-ingest leaves a consistent database, and a re-run completes the ingest.

``tests/crash_writer.py`` ingests N documents in ``add_many`` batches plus one fact per batch,
resuming by counting what is stored. The test kills it 12 times at random moments, checks
the database after each kill (SQLite ``integrity_check`` and the FTS5 index; on both backends: no
fact without its item row, no item without its embedding row, no half-written batch, the search
index agrees with the items), then lets a last run finish and checks every document is there once.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from navi_memory import MemoryStore

from . import crash_writer
from .helpers import fts_integrity_ok

KILLS = 12
ROOT = Path(__file__).resolve().parent.parent

CONSISTENCY = {
    "facts without their item row": "SELECT count(*) FROM facts f WHERE f.item_id IS NULL"
                                    " OR NOT EXISTS (SELECT 1 FROM items i WHERE i.id = f.item_id)",
    "fact items without their fact": "SELECT count(*) FROM items i WHERE i.type = 'fact'"
                                     " AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.item_id = i.id)",
    "items without an embedding row": "SELECT count(*) FROM items i"
                                      " WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.item_id = i.id)",
    "embedding rows without an item": "SELECT count(*) FROM embeddings e"
                                      " WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.id = e.item_id)",
    "documents not a whole number of batches": f"SELECT count(*) % {crash_writer.BATCH} FROM items"
                                               " WHERE type = 'note'",
}


def _query_sqlite(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _query_postgres(url: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def _check(query, backend: str, path: Path | None) -> int:
    """Assert consistency; returns the number of documents stored."""
    if backend == "sqlite":
        assert query("PRAGMA integrity_check") == [("ok",)]
        fts_integrity_ok(path)
    else:
        from navi_memory.backends.postgres.schema import FOLDED_TSV_EXPRESSION

        assert query(f"SELECT count(*) FROM items WHERE content_tsv IS DISTINCT FROM ({FOLDED_TSV_EXPRESSION})") \
            == [(0,)]
    for what, sql in CONSISTENCY.items():
        assert query(sql) == [(0,)], what
    docs = query("SELECT content FROM items WHERE type = 'note'")
    numbers = sorted(int(c.split()[1]) for (c,) in docs)
    assert numbers == list(range(len(numbers))), "documents were skipped or written twice"
    return len(numbers)


def _run_writer(url: str, total: int, kill: tuple[int, float] | None) -> tuple[int, str]:
    """Run the writer to the end, or step it through ``kill[0]`` batches, start one more and kill it
    after ``kill[1]`` times the time a batch took: at a random moment of that batch (or just after
    it), and the ingest never gets further than the test allows, however fast the machine."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    step = [] if kill is None else ["step"]
    proc = subprocess.Popen([sys.executable, "-m", "tests.crash_writer", url, str(total), *step], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "ready N": the store is open and the ingest starts now
    assert line.startswith("ready"), proc.stderr.read()
    if kill is None:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        return proc.returncode, out
    batches, fraction = kill
    seen, took = [line], []
    for _ in range(batches):
        started = time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        seen.append(proc.stdout.readline())
        assert seen[-1].startswith("batch"), "".join(seen) + proc.stderr.read()
        took.append(time.monotonic() - started)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    time.sleep(fraction * sum(took) / len(took))
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, "".join(seen) + out


def _crash_and_resume(url: str, query, backend: str, path: Path | None, total: int) -> list[int]:
    rng = random.Random(8)
    progress, before_commit = [], 0
    for _ in range(KILLS):  # at most 4 batches a run: 12 runs stay far from the end of the ingest
        batches = rng.randint(1, 3)
        code, out = _run_writer(url, total, (batches, rng.uniform(0.0, 1.2)))
        assert code == -signal.SIGKILL, out
        progress.append(_check(query, backend, path))
        before_commit += progress[-1] - (progress[-2] if len(progress) > 1 else 0) == batches * crash_writer.BATCH
    print("documents stored at each kill:", progress)
    print(f"kills that stopped the last batch before its add_many committed: {before_commit} of {KILLS}")
    _run_writer(url, total, None)
    assert _check(query, backend, path) == total
    facts = query("SELECT count(*) FROM facts")[0][0]
    assert facts == total // crash_writer.BATCH
    with MemoryStore.open(url, embeddings="hashing") as store:
        assert store.embedding_status()["ready"] == total + facts  # the last run's backfill healed every vector
        assert store.search("document 17 coffee", user_id=crash_writer.USER, limit=3)
    return progress


def test_sqlite_survives_sigkill_mid_ingest(tmp_path: Path):
    path = tmp_path / "crash.db"
    progress = _crash_and_resume(f"sqlite:///{path}", lambda sql: _query_sqlite(path, sql), "sqlite", path,
                                 total=2000)
    assert len(progress) == KILLS and 0 < progress[0] <= progress[-1] < 2000


@pytest.mark.postgres
def test_postgres_survives_sigkill_mid_ingest(postgres_server):
    url = postgres_server.fresh_schema_url()
    try:
        progress = _crash_and_resume(url, lambda sql: _query_postgres(url, sql), "postgres", None, total=1000)
        assert len(progress) == KILLS and 0 < progress[0] <= progress[-1] < 1000
    finally:
        postgres_server.drop_schema(url)
