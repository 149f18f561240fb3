"""SQLite storage of the household (persons, single or multi mode) and of the promotion job.

A mixin of ``SQLiteBackend`` (its ``_transaction`` and ``_ensure_user``); each write method is one
transaction. The promotion job's candidates (they read the vector blobs); the ``promotions`` it records
are written by ``shared/facts.py``.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from ...core.contract import PERSON_COLUMNS, PERSON_LIST_COLUMNS
from ...core.timeutil import from_db, to_db
from ...vectors import from_blob

PERSON_TABLES = ("persons", "promotions")
# items the promotion job never reads: fact mirrors and summaries are facts already
PROMOTION_SKIP_TYPES = ("fact", "summary")


def person_from_row(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    for column in PERSON_LIST_COLUMNS:
        d[column] = json.loads(d[column] or "[]")
    d["created_at"], d["updated_at"] = from_db(d["created_at"]), from_db(d["updated_at"])
    return d


class SQLitePersons:
    """Persons, household mode and promotions (mixed into ``SQLiteBackend``)."""

    _transaction: Any
    _ensure_user: Any

    def list_persons(self, user_id: str) -> list[dict]:
        with self._transaction(write=False) as conn:
            rows = conn.execute("SELECT * FROM persons WHERE user_id = ? ORDER BY id", (user_id,)).fetchall()
        return [person_from_row(r) for r in rows]

    def household_mode(self, user_id: str) -> str:
        with self._transaction(write=False) as conn:
            row = conn.execute("SELECT household_mode FROM users WHERE id = ?", (user_id,)).fetchone()
        return "single" if row is None else row[0]

    def insert_person(self, user_id: str, fields: dict, now: datetime) -> dict:
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            self._ensure_user(conn, user_id, stamp)
            values = [json.dumps(fields.get(c) or []) if c in PERSON_LIST_COLUMNS else fields.get(c)
                      for c in PERSON_COLUMNS]
            cur = conn.execute(f"INSERT INTO persons (user_id, {', '.join(PERSON_COLUMNS)}, created_at, updated_at)"
                               f" VALUES (?, {', '.join('?' * len(PERSON_COLUMNS))}, ?, ?)",
                               (user_id, *values, stamp, stamp))
            row = conn.execute("SELECT * FROM persons WHERE id = ?", (cur.lastrowid,)).fetchone()
        return person_from_row(row)

    def update_person(self, user_id: str, person_id: int, changes: dict, now: datetime) -> dict | None:
        """Change a person; a new display name is carried to the items and facts about them."""
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            old = conn.execute("SELECT display_name FROM persons WHERE user_id = ? AND id = ?",
                               (user_id, person_id)).fetchone()
            if old is None:
                return None
            sets = [f"{c} = ?" for c in PERSON_COLUMNS if c in changes]
            values = [json.dumps(changes[c] or []) if c in PERSON_LIST_COLUMNS else changes[c]
                      for c in PERSON_COLUMNS if c in changes]
            conn.execute(f"UPDATE persons SET {', '.join([*sets, 'updated_at = ?'])} WHERE user_id = ? AND id = ?",
                         (*values, stamp, user_id, person_id))
            new_name = changes.get("display_name")
            if new_name is not None and new_name != old[0]:
                for table in ("items", "facts"):
                    conn.execute(f"UPDATE {table} SET person = ?, updated_at = ? WHERE user_id = ?"
                                 " AND lower(person) = lower(?)", (new_name, stamp, user_id, old[0]))
            row = conn.execute("SELECT * FROM persons WHERE id = ?", (person_id,)).fetchone()
        return person_from_row(row)

    def delete_person(self, user_id: str, person_id: int) -> bool:
        with self._transaction(write=True) as conn:
            return conn.execute("DELETE FROM persons WHERE user_id = ? AND id = ?",
                                (user_id, person_id)).rowcount > 0

    def set_household_mode(self, user_id: str, mode: str, primary_id: int | None, now: datetime) -> None:
        """Store the mode; ``primary_id``: the person who becomes role 'primary' (single -> multi)."""
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            self._ensure_user(conn, user_id, stamp)
            conn.execute("UPDATE users SET household_mode = ? WHERE id = ?", (mode, user_id))
            if primary_id is not None:
                conn.execute("UPDATE persons SET role = 'primary', updated_at = ? WHERE user_id = ? AND id = ?",
                             (stamp, user_id, primary_id))

    def user_settings(self, user_id: str) -> dict:
        """The user's ``household_mode``, ``timezone`` and ``memory_off_since`` in one read
        (defaults for an unknown user)."""
        with self._transaction(write=False) as conn:
            row = conn.execute("SELECT household_mode, timezone, memory_off_since FROM users WHERE id = ?",
                               (user_id,)).fetchone()
        if row is None:
            return {"household_mode": "single", "timezone": None, "memory_off_since": None}
        return dict(row, memory_off_since=from_db(row["memory_off_since"]) if row["memory_off_since"] else None)

    def set_memory_off(self, user_id: str, since: datetime | None, now: datetime) -> None:
        with self._transaction(write=True) as conn:
            self._ensure_user(conn, user_id, to_db(now))
            conn.execute("UPDATE users SET memory_off_since = ? WHERE id = ?",
                         (None if since is None else to_db(since), user_id))

    def set_user_timezone(self, user_id: str, name: str | None, now: datetime) -> None:
        with self._transaction(write=True) as conn:
            self._ensure_user(conn, user_id, to_db(now))
            conn.execute("UPDATE users SET timezone = ? WHERE id = ?", (name, user_id))

    # -- promotion ----------------------------------------------------------------------------

    def promotion_candidates(self, user_id: str, model: str, now: datetime, limit: int) -> list[dict]:
        """The user's newest active, unexpired items with a ready ``model`` vector (fact mirrors and
        summaries excluded), with ``vector`` and ``promoted`` (already in a promotion)."""
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT i.id, i.type, i.theme, i.title, i.content, i.person, i.created_at, i.observed_at, e.vector,"
                " p.item_id IS NOT NULL AS promoted, p.fact_id FROM items i"
                " JOIN embeddings e ON e.item_id = i.id AND e.state = 'ready' AND e.model = ?"
                " LEFT JOIN promotions p ON p.item_id = i.id"
                f" WHERE i.user_id = ? AND i.status = 'active' AND i.type NOT IN {PROMOTION_SKIP_TYPES}"
                " AND (i.expires_at IS NULL OR i.expires_at > ?) AND e.vector IS NOT NULL"
                " ORDER BY i.id DESC LIMIT ?", (model, user_id, to_db(now), limit)).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["vector"], d["promoted"], d["created_at"] = from_blob(d["vector"]), bool(d["promoted"]), \
                from_db(d["created_at"])
            d["observed_at"] = from_db(d["observed_at"])
            out.append(d)
        return out
