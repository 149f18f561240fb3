"""The schema a new SQLite database gets in one step: what the migrations build, without their history.

A new file migrated step by step runs every version's statements (tables rebuilt, columns added,
triggers replaced: about 130 statements, 22 ms); the schema they leave is ``sqlite_master``'s
CREATE statements (48 of them, 5 ms). They are read once per process, from the first new database
migrated step by step, replayed into an in-memory one and kept only if both ``sqlite_master``
tables are the same: the shortcut never gives a database a schema the migrations would not.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from . import lexicon
from .runner import register
from .schema import MIGRATIONS

log = logging.getLogger(__name__)

VERSIONS_TABLE = "schema_migrations"
CREATE_VERSIONS_TABLE = f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
_ORDER = {"table": 0, "index": 1, "view": 2, "trigger": 3}  # each after what it names


def apply_migrations(conn: sqlite3.Connection, done: set[int]) -> None:
    """The steps of every version not in ``done``, each recorded (in the caller's transaction)."""
    for version, statements in MIGRATIONS:
        if version in done:
            continue
        for statement in statements:
            conn.execute(statement)
        conn.execute(f"INSERT INTO {VERSIONS_TABLE} VALUES (?, datetime('now'))", (version,))


def is_new(conn: sqlite3.Connection) -> bool:
    """Nothing in the database but the (empty) versions table."""
    found: int = conn.execute("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name != ?",
                              (VERSIONS_TABLE,)).fetchone()[0]
    recorded: int = conn.execute(f"SELECT count(*) FROM {VERSIONS_TABLE}").fetchone()[0]
    return found == 0 and recorded == 0


def create(conn: sqlite3.Connection) -> bool:
    """Give a new database (``is_new``) the current schema in one step and record every version;
    False (nothing done) until ``learn`` has read a schema that replays: migrate step by step."""
    statements = _learned.get("schema")
    if statements is None:
        return False
    for statement in statements:
        conn.execute(statement)
    conn.executemany(f"INSERT INTO {VERSIONS_TABLE} VALUES (?, datetime('now'))",
                     [(version,) for version, _ in MIGRATIONS])
    return True


def learn(conn: sqlite3.Connection) -> None:
    """Read the schema of a new database just migrated step by step (the process's first), for
    ``create`` to give the next ones."""
    with _lock:
        if "schema" not in _learned:
            _learned["schema"] = _replayable(conn)


_lock = threading.Lock()
_learned: dict[str, tuple[str, ...] | None] = {}  # "schema": its statements, or None: they do not replay


def _replayable(migrated: sqlite3.Connection) -> tuple[str, ...] | None:
    """The CREATE statements of ``migrated``'s schema in an order that replays (the versions table
    apart); None if a replay would differ from it."""
    objects = migrated.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
                               " AND name NOT LIKE 'sqlite_%' AND name != ? ORDER BY rowid",
                               (VERSIONS_TABLE,)).fetchall()
    objects.sort(key=lambda row: _ORDER[row[0]])
    replayed = _scratch()
    replayed.execute(CREATE_VERSIONS_TABLE)
    statements = []
    try:
        for kind, name, statement in objects:
            # a virtual table makes its own shadow tables (FTS5's _data, _idx, ...): not replayed
            if kind == "table" and replayed.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone():
                continue
            replayed.execute(statement)
            statements.append(statement)
        same = _catalogue(replayed) == _catalogue(migrated)
    except sqlite3.Error as exc:  # the database just migrated is fine: only the shortcut is lost
        log.warning("the SQLite schema does not replay (%s): new databases are migrated step by step", exc)
        return None
    finally:
        replayed.close()
    if not same:
        log.warning("the SQLite schema does not replay from sqlite_master: new databases are migrated step by step")
        return None
    return tuple(statements)


def _scratch() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    register(conn)
    lexicon.register(conn)
    return conn


def _catalogue(conn: sqlite3.Connection) -> list[tuple[str, ...]]:
    rows = conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master").fetchall()
    return sorted(tuple(row) for row in rows)
