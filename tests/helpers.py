"""Helpers that look at the SQLite file directly, bypassing the store."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


# Soaks (many writes from many workers at once) run in every suite at a size that finds a lock or
# pool fault in seconds; NAVI_MEMORY_TEST_SOAK=full runs them at the sizes docs/reliability.md quotes
# (read at import: the tests' own environment is cleared of NAVI_MEMORY_* variables).
SOAK_FULL = os.environ.get("NAVI_MEMORY_TEST_SOAK", "").lower() == "full"


def soak_size(every_run: int, full: int) -> int:
    return full if SOAK_FULL else every_run


def _connect(path: Path | str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def table_names(path: Path | str) -> list[str]:
    """Every ordinary table of the file (FTS5 shadow tables included, virtual tables excluded)."""
    with _connect(path) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
            " ORDER BY name").fetchall()
    return [r[0] for r in rows]


def dump_tables(path: Path | str) -> dict[str, list[tuple]]:
    """All rows of all tables, each table's rows sorted, for before/after comparisons."""
    out: dict[str, list[tuple]] = {}
    conn = _connect(path)
    try:
        for name in table_names(path):
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            out[name] = sorted(rows, key=repr)
    finally:
        conn.close()
    return out


def count_rows(path: Path | str, table: str, where: str = "1=1", params: tuple = ()) -> int:
    conn = _connect(path)
    try:
        return conn.execute(f'SELECT count(*) FROM "{table}" WHERE {where}', params).fetchone()[0]
    finally:
        conn.close()


def fts_integrity_ok(path: Path | str) -> None:
    """Raise sqlite3.Error when the FTS5 index disagrees with the items table."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("INSERT INTO items_fts (items_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def sqlite_at_version(path: Path | str, version: int) -> sqlite3.Connection:
    """A new SQLite file with the schema as migration ``version`` left it (autocommit, foreign
    keys on, like the store's connections)."""
    from navi_memory.backends.sqlite.lexicon import register
    from navi_memory.backends.sqlite.schema import MIGRATIONS

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    register(conn)  # the function version 12's triggers call
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for number, statements in MIGRATIONS[:version]:
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, datetime('now'))", (number,))
    return conn


def postgres_back_to(url: str, version: int, *undo: str) -> None:
    """Take the PostgreSQL schema of ``url`` back to what migration ``version`` left: run the
    ``undo`` statements of the later migrations, then forget those migrations."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in undo:
            conn.execute(statement)
        conn.execute("DELETE FROM navi_schema_migrations WHERE version > %s", (version,))


@contextmanager
def sqlite_connections_used() -> Iterator[list[int]]:
    """Counts every database connection a SQLite store takes meanwhile (each statement, read or
    write, runs on one): a call that got none never reached the database."""
    from navi_memory.backends.sqlite.backend import SQLiteBackend

    used: list[int] = []
    original = SQLiteBackend._connection

    def counted(self: SQLiteBackend):  # type: ignore[no-untyped-def]
        used.append(1)
        return original(self)

    SQLiteBackend._connection = counted  # type: ignore[method-assign]
    try:
        yield used
    finally:
        SQLiteBackend._connection = original  # type: ignore[method-assign]
