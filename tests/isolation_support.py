"""One user's rows, read straight from the database (both backends), for isolation checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def _sqlite_user_rows(path: Path, user: str) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            column = "user_id" if "user_id" in columns else ("id" if table == "users" else None)
            if column:
                rows = conn.execute(f'SELECT * FROM "{table}" WHERE "{column}" = ?', (user,)).fetchall()
                out[table] = sorted(rows, key=repr)
        return out
    finally:
        conn.close()


def _postgres_user_rows(url: str, user: str) -> dict[str, list[tuple]]:
    import psycopg
    from psycopg import sql

    out = {}
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT t.table_name, bool_or(c.column_name = 'user_id') FROM information_schema.tables t"
            " JOIN information_schema.columns c ON c.table_schema = t.table_schema AND c.table_name = t.table_name"
            " WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE' GROUP BY t.table_name").fetchall()
        for table, has_user in tables:
            column = "user_id" if has_user else ("id" if table == "users" else None)
            if column:
                rows = conn.execute(sql.SQL("SELECT * FROM {} WHERE {} = %s").format(
                    sql.Identifier(table), sql.Identifier(column)), (user,)).fetchall()
                out[table] = sorted(rows, key=repr)
    return out


def user_rows(backend_name: str, db_url: str, tmp_path: Path, user: str) -> dict[str, list[tuple]]:
    """Every row that belongs to ``user`` in every table with a user column (sorted per table)."""
    if backend_name == "sqlite":
        return _sqlite_user_rows(tmp_path / "memory.db", user)
    return _postgres_user_rows(db_url, user)


def leaks(value: Any, marker: str) -> bool:
    """Whether ``marker`` shows anywhere in the value (its repr covers nested results)."""
    return marker in repr(value) or marker in str(value)
