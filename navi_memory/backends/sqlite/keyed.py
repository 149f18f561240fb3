"""SQLite side of keyed items (namespace + key, the LangGraph store's model): put (insert or
replace in one transaction), get, delete, TTL refresh and the namespaces of a user.

A mixin of ``SQLiteBackend``; ``items.ext_key`` holds the key (``key`` reads badly in SQL).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Sequence

from ...core.contract import NOT_INDEXED
from ...core.timeutil import to_db
from ..base import ItemRow, NewItem
from .rows import EMBED_TEXT, ITEM_SELECT, item_from_row, to_json


class SQLiteKeyed:
    """Keyed item reads and writes (mixed into ``SQLiteBackend``)."""

    _transaction: Any
    _ensure_user: Any
    _ensure_theme: Any
    _insert_rows: Any
    _mark_stale: Any
    _bump_gen: Any

    def put_keyed(self, item: NewItem, model: str | None, embed: bool, now: datetime) -> tuple[ItemRow, bool]:
        """Insert the item, or replace the one with its (user, namespace, key): same id and
        created_at, everything else from ``item``. ``embed`` False: no vector is kept (the row is
        marked ``NOT_INDEXED``). Returns the row and whether it needs embedding."""
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            old = conn.execute(f"SELECT i.id, {EMBED_TEXT} AS text FROM items i WHERE i.user_id = ?"
                               " AND i.namespace = ? AND i.ext_key = ?",
                               (item.user_id, item.namespace, item.key)).fetchone()
            if old is None:
                (item_id,) = self._insert_rows(conn, [item], model, stamp)
                conn.execute("UPDATE items SET ttl_minutes = ? WHERE id = ?", (item.ttl_minutes, item_id))
                needs = model is not None and embed
                if model is not None and not embed:
                    self._not_indexed(conn, item.user_id, item_id, model, stamp)
            else:
                item_id = old["id"]
                self._ensure_theme(conn, item.user_id, item.theme, stamp)
                conn.execute(
                    "UPDATE items SET type = ?, theme = ?, title = ?, content = ?, metadata = ?, expires_at = ?,"
                    " status = 'active', agent_id = ?, run_id = ?, ttl_minutes = ?, updated_at = ? WHERE id = ?",
                    (item.type, item.theme, item.title, item.content, to_json(item.metadata or {}),
                     to_db(item.expires_at), item.agent_id, item.run_id, item.ttl_minutes, stamp, item_id))
                needs = self._restamp(conn, item_id, item.user_id, old["text"], model, embed, stamp)
            row = conn.execute(f"{ITEM_SELECT} WHERE i.id = ?", (item_id,)).fetchone()
        return item_from_row(row), needs

    def _restamp(self, conn: Any, item_id: int, user_id: str, old_text: str, model: str | None, embed: bool,
                 stamp: str) -> bool:
        """After a replace: drop the vector (not embedded), mark it stale (text changed), or keep it."""
        if model is None:
            return False
        if not embed:
            self._not_indexed(conn, user_id, item_id, model, stamp)
            return False
        new_text = conn.execute(f"SELECT {EMBED_TEXT} FROM items i WHERE i.id = ?", (item_id,)).fetchone()[0]
        state = conn.execute("SELECT state, model FROM embeddings WHERE item_id = ?", (item_id,)).fetchone()
        if new_text != old_text or state is None or state["model"] != model or state["state"] != "ready":
            self._mark_stale(conn, user_id, item_id, model, stamp)
            return True
        return False

    def _not_indexed(self, conn: Any, user_id: str, item_id: int, model: str, stamp: str) -> None:
        """No vector for this item (a new generation: cached vectors of it are dropped)."""
        conn.execute("INSERT INTO embeddings (item_id, user_id, model, state, error, gen, updated_at)"
                     " VALUES (?, ?, ?, 'error', ?, ?, ?) ON CONFLICT (item_id) DO UPDATE SET state = 'error',"
                     " error = excluded.error, vector = NULL, dimensions = NULL, gen = excluded.gen,"
                     " updated_at = excluded.updated_at",
                     (item_id, user_id, model, NOT_INDEXED, self._bump_gen(conn, user_id), stamp))

    def get_keyed(self, user_id: str, namespace: str, key: str, now: datetime) -> ItemRow | None:
        with self._transaction(write=False) as conn:
            row = conn.execute(f"{ITEM_SELECT} WHERE i.user_id = ? AND i.namespace = ? AND i.ext_key = ?"
                               " AND (i.expires_at IS NULL OR i.expires_at > ?)",
                               (user_id, namespace, key, to_db(now))).fetchone()
        return None if row is None else item_from_row(row)

    def delete_keyed(self, user_id: str, namespace: str, key: str) -> bool:
        with self._transaction(write=True) as conn:
            return conn.execute("DELETE FROM items WHERE user_id = ? AND namespace = ? AND ext_key = ?",
                                (user_id, namespace, key)).rowcount > 0

    def touch_items(self, user_id: str, ids: Sequence[int], expires_at: datetime | None, now: datetime) -> int:
        """Move the expiry of the user's unexpired items ``ids`` (TTL refresh); updated_at stays."""
        with self._transaction(write=True) as conn:
            return conn.execute("UPDATE items SET expires_at = ? WHERE user_id = ? AND id IN"
                                " (SELECT value FROM json_each(?)) AND (expires_at IS NULL OR expires_at > ?)",
                                (to_db(expires_at), user_id, json.dumps([int(i) for i in ids]),
                                 to_db(now))).rowcount

    def refresh_ttl(self, user_id: str, ids: Sequence[int], now: datetime) -> int:
        """Each of the user's unexpired items ``ids`` that has a TTL expires its TTL from ``now``."""
        with self._transaction(write=True) as conn:
            rows = conn.execute("SELECT id, ttl_minutes FROM items WHERE user_id = ? AND id IN"
                                " (SELECT value FROM json_each(?)) AND ttl_minutes IS NOT NULL"
                                " AND (expires_at IS NULL OR expires_at > ?)",
                                (user_id, json.dumps([int(i) for i in ids]), to_db(now))).fetchall()
            for row in rows:  # the stored text form of a time is Python's: computed here, not in SQL
                conn.execute("UPDATE items SET expires_at = ? WHERE id = ?",
                             (to_db(now + timedelta(minutes=row["ttl_minutes"])), row["id"]))
        return len(rows)

    def sweep_keyed(self, user_id: str | None, now: datetime) -> int:
        """Delete the expired keyed items (of one user, or of every user)."""
        sql = "DELETE FROM items WHERE namespace IS NOT NULL AND expires_at IS NOT NULL AND expires_at <= ?"
        params: list[Any] = [to_db(now)]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        with self._transaction(write=True) as conn:
            return conn.execute(sql, params).rowcount

    def list_namespaces(self, user_id: str, prefix: str | None, now: datetime) -> list[str]:
        """The distinct namespaces of the user's unexpired keyed items (equal to or below ``prefix``)."""
        sql = ("SELECT DISTINCT namespace FROM items WHERE user_id = ? AND namespace IS NOT NULL"
               " AND (expires_at IS NULL OR expires_at > ?)")
        params: list[Any] = [user_id, to_db(now)]
        if prefix is not None:  # substr, not LIKE: SQLite's LIKE ignores ASCII case
            sql += " AND (namespace = ? OR substr(namespace, 1, ?) = ?)"
            params += [prefix, len(prefix) + 1, prefix + "."]
        with self._transaction(write=False) as conn:
            return [r[0] for r in conn.execute(sql, params)]
