"""Keyed items (namespace + key, the LangGraph store's model) for both backends: put (insert or
replace in one transaction), get, delete, TTL refresh, sweep and the namespaces of a user.

Generator methods mixed into each backend and installed on its runners (``sansio.install``);
``items.ext_key`` holds the key (``key`` reads badly in SQL). What differs by dialect comes from
``self.dialect``; the steps a backend writes its own way are its ``_insert``, ``_mark_stale`` and
``_not_indexed`` (generators).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Sequence

from ...sansio import Op, operation, reads
from ..base import ItemRow, NewItem
from .dialect import ITEM_SELECT, Dialect, Q, Row, ensure_theme, row_times


class KeyedQueries:
    """Keyed item reads and writes (mixed into ``PostgresQueries`` and ``SQLiteBackend``)."""

    dialect: Dialect
    has_vector: bool
    _insert: Callable[[Sequence[NewItem], str | None, datetime], Op[list[int]]]  # new items, their pending vectors
    # (user_id, item_id, model, now): its text changed, its vector is wrong
    _mark_stale: Callable[[str, int, str | None, datetime], Op[None]]
    # (user_id, item_id, model, now): keep no vector for it (embed=False)
    _not_indexed: Callable[[str, int, str, datetime], Op[None]]

    @operation
    def put_keyed(self, item: NewItem, model: str | None, embed: bool, now: datetime) -> Op[tuple[ItemRow, bool]]:
        """Insert the item, or replace the one with its (user, namespace, key): same id and
        created_at, everything else from ``item``. ``embed`` False: no vector is kept (the row is
        marked ``NOT_INDEXED``). Returns the row and whether it needs embedding (or, replaced, the
        vector given with ``item``)."""
        d = self.dialect
        if d.key_lock is not None:  # two puts of a new key would both insert: the second would break the unique index
            yield Q(d.key_lock, [f"navi_memory_keyed\x1f{item.user_id}\x1f{item.namespace}\x1f{item.key}"])
        old: list[Row] = yield Q(
            f"SELECT i.id, {d.embed_text} AS text FROM items i WHERE i.user_id = %s AND i.namespace = %s"
            f" AND i.ext_key = %s{d.for_update}", [item.user_id, item.namespace, item.key])
        indexed = model if self.has_vector else None  # the model of the vectors kept, if any
        if not old:
            (item_id,) = yield from self._insert([item], model, now)
            yield Q("UPDATE items SET ttl_minutes = %s WHERE user_id = %s AND id = %s",
                    [item.ttl_minutes, item.user_id, item_id])
            if indexed is not None and not embed:
                yield from self._not_indexed(item.user_id, item_id, indexed, now)
            needs = indexed is not None and embed and item.vector is None  # a vector given was inserted with it
            return (yield from self._keyed_row(item.user_id, item_id)), needs
        item_id, stamp = old[0]["id"], d.time(now)
        yield ensure_theme(d, item.user_id, item.theme, now)
        yield Q("UPDATE items SET type = %s, theme = %s, title = %s, content = %s, metadata = %s, expires_at = %s,"
                " status = 'active', agent_id = %s, run_id = %s, ttl_minutes = %s, updated_at = %s"
                " WHERE user_id = %s AND id = %s",
                [item.type, item.theme, item.title, item.content, d.json(item.metadata or {}), d.time(item.expires_at),
                 item.agent_id, item.run_id, item.ttl_minutes, stamp, item.user_id, item_id])
        needs = False
        if indexed is not None and not embed:
            yield from self._not_indexed(item.user_id, item_id, indexed, now)
        elif indexed is not None:
            new: list[Row] = yield Q(f"SELECT {d.embed_text} AS text FROM items i WHERE i.user_id = %s AND i.id = %s",
                                     [item.user_id, item_id])
            state: list[Row] = yield Q("SELECT state, model FROM embeddings WHERE user_id = %s AND item_id = %s",
                                       [item.user_id, item_id])
            needs = (new[0]["text"] != old[0]["text"] or not state or state[0]["model"] != model
                     or state[0]["state"] != "ready")
            if needs:
                yield from self._mark_stale(item.user_id, item_id, model, now)
        return (yield from self._keyed_row(item.user_id, item_id)), needs

    def _keyed_row(self, user_id: str, item_id: int) -> Op[ItemRow]:
        rows: list[ItemRow] = yield Q(ITEM_SELECT + " WHERE i.user_id = %s AND i.id = %s", [user_id, item_id])
        return row_times(rows[0])

    @operation
    @reads
    def get_keyed(self, user_id: str, namespace: str, key: str, now: datetime) -> Op[ItemRow | None]:
        rows: list[ItemRow] = yield Q(ITEM_SELECT + " WHERE i.user_id = %s AND i.namespace = %s AND i.ext_key = %s"
                                      " AND (i.expires_at IS NULL OR i.expires_at > %s)",
                                      [user_id, namespace, key, self.dialect.time(now)])
        return row_times(rows[0]) if rows else None

    @operation
    def delete_keyed(self, user_id: str, namespace: str, key: str) -> Op[bool]:
        deleted: int = yield Q("DELETE FROM items WHERE user_id = %s AND namespace = %s AND ext_key = %s",
                               [user_id, namespace, key])
        return deleted > 0

    @operation
    def touch_items(self, user_id: str, ids: Sequence[int], expires_at: datetime | None, now: datetime) -> Op[int]:
        """Move the expiry of the user's unexpired items ``ids`` (TTL refresh); updated_at stays."""
        d = self.dialect
        touched: int = yield Q(f"UPDATE items SET expires_at = %s WHERE user_id = %s"
                               f" AND {d.in_ids.format(column='id')} AND (expires_at IS NULL OR expires_at > %s)",
                               [d.time(expires_at), user_id, d.ids(ids), d.time(now)])
        return touched

    @operation
    def refresh_ttl(self, user_id: str, ids: Sequence[int], now: datetime) -> Op[int]:
        """Each of the user's unexpired items ``ids`` that has a TTL expires its TTL from ``now``."""
        d = self.dialect
        refreshed: int = yield Q(
            f"UPDATE items SET expires_at = {d.plus_minutes.format(time='%s', minutes='ttl_minutes')}"
            f" WHERE user_id = %s AND {d.in_ids.format(column='id')} AND ttl_minutes IS NOT NULL"
            " AND (expires_at IS NULL OR expires_at > %s)",
            [d.time(now), user_id, d.ids(ids), d.time(now)])
        return refreshed

    @operation
    def sweep_keyed(self, user_id: str | None, now: datetime) -> Op[int]:
        """Delete the expired keyed items (of one user, or of every user)."""
        text = "DELETE FROM items WHERE namespace IS NOT NULL AND expires_at IS NOT NULL AND expires_at <= %s"
        params: list[Any] = [self.dialect.time(now)]
        if user_id is not None:
            text += " AND user_id = %s"
            params.append(user_id)
        swept: int = yield Q(text, params)
        return swept

    @operation
    @reads
    def list_namespaces(self, user_id: str, prefix: str | None, now: datetime) -> Op[list[str]]:
        """The distinct namespaces of the user's unexpired keyed items (equal to or below ``prefix``)."""
        text = ("SELECT DISTINCT namespace FROM items WHERE user_id = %s AND namespace IS NOT NULL"
                " AND (expires_at IS NULL OR expires_at > %s)")
        params: list[Any] = [user_id, self.dialect.time(now)]
        if prefix is not None:  # substr, not LIKE: SQLite's LIKE ignores ASCII case
            text += " AND (namespace = %s OR substr(namespace, 1, %s) = %s)"
            params += [prefix, len(prefix) + 1, prefix + "."]
        rows: list[Row] = yield Q(text, params)
        return [r["namespace"] for r in rows]
