"""PostgreSQL side of keyed items (namespace + key, the LangGraph store's model): put (insert or
replace in one transaction), get, delete, TTL refresh and the namespaces of a user.

Generator methods mixed into ``PostgresQueries`` (installed on both runners by ``pool``).
``items.ext_key`` holds the key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from psycopg import sql
from psycopg.types.json import Jsonb

from ...core.contract import NOT_INDEXED
from ...core.keyed import like_prefix
from ...sansio import Op, operation
from ..base import NewItem
from . import sql as q
from .sql import Q, row_times


class PostgresKeyedQueries:
    """Keyed item reads and writes (mixed into ``PostgresQueries``)."""

    has_vector: bool
    _insert: Any
    _mark_stale: Any
    _item_by_id: Any

    @operation
    def put_keyed(self, item: NewItem, model: str | None, embed: bool, now: datetime) -> Op:
        """Insert the item, or replace the one with its (user, namespace, key): same id and
        created_at, everything else from ``item``. ``embed`` False: no vector is kept (the row is
        marked ``NOT_INDEXED``). Returns the row and whether it needs embedding."""
        # two puts of a new key would both insert: the second would break the unique index
        yield Q("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"navi_memory_keyed\x1f{item.user_id}\x1f{item.namespace}\x1f{item.key}"])
        text = sql.SQL("SELECT i.id, {} AS text FROM items i WHERE i.user_id = %s AND i.namespace = %s"
                       " AND i.ext_key = %s").format(q.EMBED_TEXT)
        old = yield Q(text + sql.SQL(" FOR UPDATE"), [item.user_id, item.namespace, item.key])
        indexed = model is not None and self.has_vector
        if not old:
            (item_id,) = yield from self._insert([item], model, now)
            yield Q("UPDATE items SET ttl_minutes = %s WHERE user_id = %s AND id = %s",
                    [item.ttl_minutes, item.user_id, item_id])
            if indexed and not embed:
                yield from self._not_indexed(item.user_id, item_id, model, now)
            return (yield from self._item_by_id(item.user_id, item_id)), indexed and embed
        item_id = old[0]["id"]
        yield Q("INSERT INTO themes (user_id, slug, display_name, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING", [item.user_id, item.theme, item.theme.title(), now, now])
        yield Q("UPDATE items SET type = %s, theme = %s, title = %s, content = %s, metadata = %s, expires_at = %s,"
                " status = 'active', agent_id = %s, run_id = %s, ttl_minutes = %s, updated_at = %s"
                " WHERE user_id = %s AND id = %s",
                [item.type, item.theme, item.title, item.content, Jsonb(item.metadata or {}), item.expires_at,
                 item.agent_id, item.run_id, item.ttl_minutes, now, item.user_id, item_id])
        needs = False
        if indexed and not embed:
            yield from self._not_indexed(item.user_id, item_id, model, now)
        elif indexed:
            new = yield Q(sql.SQL("SELECT {} AS text FROM items i WHERE i.user_id = %s AND i.id = %s").format(
                q.EMBED_TEXT), [item.user_id, item_id])
            state = yield Q("SELECT state, model FROM embeddings WHERE user_id = %s AND item_id = %s",
                            [item.user_id, item_id])
            needs = (new[0]["text"] != old[0]["text"] or not state or state[0]["model"] != model
                     or state[0]["state"] != "ready")
            if needs:
                yield from self._mark_stale(item.user_id, item_id, model, now)
        return (yield from self._item_by_id(item.user_id, item_id)), needs

    def _not_indexed(self, user_id: str, item_id: int, model: str, now: datetime) -> Op:
        yield Q("INSERT INTO embeddings (user_id, item_id, model, state, error, updated_at)"
                " VALUES (%s, %s, %s, 'error', %s, %s) ON CONFLICT (user_id, item_id) DO UPDATE SET state = 'error',"
                " error = excluded.error, embedding = NULL, dimensions = NULL, updated_at = excluded.updated_at",
                [user_id, item_id, model, NOT_INDEXED, now])

    @operation
    def get_keyed(self, user_id: str, namespace: str, key: str, now: datetime) -> Op:
        rows = yield Q(q.ITEM_SELECT + sql.SQL(" WHERE i.user_id = %s AND i.namespace = %s AND i.ext_key = %s"
                                               " AND (i.expires_at IS NULL OR i.expires_at > %s)"),
                       [user_id, namespace, key, now])
        return row_times(rows[0]) if rows else None

    @operation
    def delete_keyed(self, user_id: str, namespace: str, key: str) -> Op:
        return (yield Q("DELETE FROM items WHERE user_id = %s AND namespace = %s AND ext_key = %s",
                        [user_id, namespace, key])) > 0

    @operation
    def touch_items(self, user_id: str, ids: Sequence[int], expires_at: datetime | None, now: datetime) -> Op:
        """Move the expiry of the user's unexpired items ``ids`` (TTL refresh); updated_at stays."""
        return (yield Q("UPDATE items SET expires_at = %s WHERE user_id = %s AND id = ANY(%s)"
                        " AND (expires_at IS NULL OR expires_at > %s)", [expires_at, user_id, list(ids), now]))

    @operation
    def refresh_ttl(self, user_id: str, ids: Sequence[int], now: datetime) -> Op:
        """Each of the user's unexpired items ``ids`` that has a TTL expires its TTL from ``now``."""
        return (yield Q("UPDATE items SET expires_at = %s + ttl_minutes * interval '1 minute' WHERE user_id = %s"
                        " AND id = ANY(%s) AND ttl_minutes IS NOT NULL AND (expires_at IS NULL OR expires_at > %s)",
                        [now, user_id, list(ids), now]))

    @operation
    def sweep_keyed(self, user_id: str | None, now: datetime) -> Op:
        """Delete the expired keyed items (of one user, or of every user)."""
        text = "DELETE FROM items WHERE namespace IS NOT NULL AND expires_at IS NOT NULL AND expires_at <= %s"
        params: list[Any] = [now]
        if user_id is not None:
            text += " AND user_id = %s"
            params.append(user_id)
        return (yield Q(text, params))

    @operation
    def list_namespaces(self, user_id: str, prefix: str | None, now: datetime) -> Op:
        """The distinct namespaces of the user's unexpired keyed items (equal to or below ``prefix``)."""
        text = ("SELECT DISTINCT namespace FROM items WHERE user_id = %s AND namespace IS NOT NULL"
                " AND (expires_at IS NULL OR expires_at > %s)")
        params: list[Any] = [user_id, now]
        if prefix is not None:
            text += " AND (namespace = %s OR namespace LIKE %s)"
            params += [prefix, like_prefix(prefix)]
        return [r["namespace"] for r in (yield Q(text, params))]
