"""A writer SIGKILLed mid-ingest leaves a consistent database, and a re-run completes the ingest.

``tests/crash_writer.py`` ingests N documents in ``add_many`` batches plus one fact per batch,
resuming by counting what is stored. The test kills it at random moments (>= 10 times), checks
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
        from navi_memory.backends.postgres_schema import TSV_EXPRESSION

        assert query(f"SELECT count(*) FROM items WHERE content_tsv IS DISTINCT FROM ({TSV_EXPRESSION})") == [(0,)]
    for what, sql in CONSISTENCY.items():
        assert query(sql) == [(0,)], what
    docs = query("SELECT content FROM items WHERE type = 'note'")
    numbers = sorted(int(c.split()[1]) for (c,) in docs)
    assert numbers == list(range(len(numbers))), "documents were skipped or written twice"
    return len(numbers)


def _run_writer(url: str, total: int, kill: tuple[int, float] | None) -> tuple[int, str]:
    """Run the writer to the end, or kill it ``kill[1]`` seconds after it reported ``kill[0]``
    finished batches: tied to its progress, so a fast machine cannot finish before the kills."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.crash_writer", url, str(total)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "ready N": the store is open and the ingest starts now
    assert line.startswith("ready"), proc.stderr.read()
    if kill is None:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        return proc.returncode, out
    batches, delay = kill
    seen = [line]
    while batches > 0:
        line = proc.stdout.readline()
        seen.append(line)
        if not line or line.startswith("finished"):
            break
        batches -= line.startswith("batch")
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, "".join(seen) + out


def _crash_and_resume(url: str, query, backend: str, path: Path | None, total: int, window: float) -> list[int]:
    rng = random.Random(8)
    progress = []
    for _ in range(KILLS):
        code, out = _run_writer(url, total, (rng.randint(0, 3), rng.uniform(0.0, window)))
        if "finished" in out:
            break  # the ingest got done before the kill: nothing left to interrupt
        assert code == -signal.SIGKILL
        progress.append(_check(query, backend, path))
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
                                 total=2000, window=0.03)
    print("documents stored at each kill:", progress)
    assert len(progress) >= 10 and any(0 < p < 2000 for p in progress)


@pytest.mark.postgres
def test_postgres_survives_sigkill_mid_ingest(postgres_server):
    url = postgres_server.fresh_schema_url()
    try:
        progress = _crash_and_resume(url, lambda sql: _query_postgres(url, sql), "postgres", None,
                                     total=1000, window=0.05)
        print("documents stored at each kill:", progress)
        assert len(progress) >= 10 and any(0 < p < 1000 for p in progress)
    finally:
        postgres_server.drop_schema(url)
