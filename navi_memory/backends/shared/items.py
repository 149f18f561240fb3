"""Items for both backends: the filters of a listing, and items read, changed, deleted, listed,
counted and fetched by id, with their themes.

Generator methods mixed into each backend and installed on its runners (``sansio.install``).
What touches how vectors are stored is each backend's own step: the ids of new items
(``_reserve_item_ids``), their vectors (``_insert_vectors``), a changed item's vector marked
stale (``_mark_stale``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from ...core.contract import theme_display_name
from ...errors import ValidationError
from ...sansio import Op, operation, reads
from ..base import ORDER_COLUMNS, Filters, ItemRow, NewItem, RankRow, ThemeRow, scope_columns
from .dialect import ITEM_SELECT, Count, Dialect, Q, Row, ensure_theme, row_times

# The columns ``update_item`` may change (the operations check each value first).
ITEM_COLUMNS = ("type", "title", "content", "theme", "tags", "status", "pinned", "source", "source_ref",
                "person", "confidence", "observed_at", "expires_at", "metadata", "context")
_JSON_COLUMNS = frozenset({"tags", "source_ref", "metadata"})
_TIME_COLUMNS = frozenset({"observed_at", "expires_at"})
RANK_COLUMNS = ("id", "created_at", "observed_at", "pinned", "person", "title", "content")


def where(d: Dialect, f: Filters) -> tuple[str, list[Any]]:
    """The WHERE conditions on items ``i`` for a filter set, with their parameters."""
    clauses: list[str] = ["1=1"]
    params: list[Any] = []

    def add(text: str, *values: Any) -> None:
        clauses.append(text)
        params.extend(values)

    if f.user_id is not None:
        add("i.user_id = %s", f.user_id)
    if f.status != "any":
        add("i.status = %s", f.status)
    if f.theme is not None:
        add("i.theme = %s", f.theme)
    if f.types:
        add(f"i.type IN ({', '.join(['%s'] * len(f.types))})", *f.types)
    if f.since is not None:
        add("i.created_at >= %s", d.time(f.since))
    if f.person is not None:
        add("i.person = %s", f.person)
    if not f.include_expired:
        add("(i.expires_at IS NULL OR i.expires_at > %s)", d.time(f.now))
    if f.namespace_prefix is not None:
        add(*_flat(d.under_namespace(f.namespace_prefix)))
    for column in ("agent_id", "run_id"):
        if getattr(f, column) is not None:
            add(f"i.{column} = %s", getattr(f, column))  # one of two known column names
    if f.metadata:
        add("i.fact_id IS NULL")  # facts have no metadata of their own: they never pass a filter
        for condition in f.metadata:
            add(*_flat(d.metadata(condition)))
    return " AND ".join(clauses), params


def _flat(clause: tuple[str, list[Any]]) -> list[Any]:
    return [clause[0], *clause[1]]


def in_scope(agent_id: str | None, run_id: str | None) -> tuple[str, list[str]]:
    """The conditions on items ``i`` (and their parameters) of the scopes that are set."""
    pairs = scope_columns(agent_id, run_id)
    return "".join(f" AND i.{column} = %s" for column, _ in pairs), [value for _, value in pairs]


class ItemQueries:
    """Item reads and writes (mixed into both backends)."""

    dialect: Dialect
    _reserve_item_ids: Callable[[int], Op[list[int]]]  # (count): ids for new items, in order
    # (ids, items, model, now): each new item's vector, or its pending row
    _insert_vectors: Callable[[Sequence[int], Sequence[NewItem], str, datetime], Op[None]]
    # (user_id, item_id, model, now): its text changed, its vector is wrong
    _mark_stale: Callable[[str, int, str | None, datetime], Op[None]]

    @operation
    def insert_items(self, items: Sequence[NewItem], model: str | None, now: datetime) -> Op[list[int]]:
        return (yield from self._insert(items, model, now))

    def _insert(self, items: Sequence[NewItem], model: str | None, now: datetime) -> Op[list[int]]:
        """Insert new items with the users and themes they need, and (``model`` set) their vectors
        or pending rows; their ids, in order. Also the step of facts and chunks writing items."""
        if not items:
            return []
        d, stamp = self.dialect, self.dialect.time(now)
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                [(u, stamp) for u in sorted({it.user_id for it in items})], many=True)
        yield Q("INSERT INTO themes (user_id, slug, display_name, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING", [(u, t, theme_display_name(t), stamp, stamp)
                                            for u, t in sorted({(it.user_id, it.theme) for it in items})], many=True)
        ids = yield from self._reserve_item_ids(len(items))
        yield Q("INSERT INTO items (user_id, id, theme, type, title, content, tags, status, pinned, source, source_ref,"
                " person, confidence, observed_at, expires_at, metadata, context, agent_id, run_id, namespace, ext_key,"
                " created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s, %s, %s, %s, %s, %s)",
                [(it.user_id, i, it.theme, it.type, it.title, it.content, d.json(list(it.tags)), it.status, it.pinned,
                  it.source, d.json(it.source_ref), it.person, it.confidence, d.time(it.observed_at),
                  d.time(it.expires_at), d.json(it.metadata or {}), it.context, it.agent_id, it.run_id, it.namespace,
                  it.key, stamp, stamp) for i, it in zip(ids, items)], many=True)
        if model is not None:
            yield from self._insert_vectors(ids, items, model, now)
        return ids

    @operation
    @reads
    def get_item(self, user_id: str, item_id: int, agent_id: str | None = None,
                 run_id: str | None = None) -> Op[ItemRow | None]:
        scope, scoped = in_scope(agent_id, run_id)
        rows: list[ItemRow] = yield Q(
            ITEM_SELECT + f" WHERE i.user_id = %s AND i.id = %s{scope}", [user_id, item_id, *scoped])
        return row_times(rows[0]) if rows else None

    @operation
    def update_item(self, user_id: str, item_id: int, changes: Mapping[str, Any], model: str | None,
                    now: datetime, agent_id: str | None = None, run_id: str | None = None) -> Op[ItemRow | None]:
        """Change the item's columns; a change of the text it is embedded from marks its vector stale.
        The item, or None when the user has none of this id in the scope."""
        d = self.dialect
        unknown = set(changes) - set(ITEM_COLUMNS)
        if unknown:
            raise ValidationError(f"not item fields: {sorted(unknown)}")
        text = f"SELECT {d.embed_text} AS text FROM items i WHERE i.user_id = %s AND i.id = %s"
        scope, scoped = in_scope(agent_id, run_id)  # the row locked below stays in the scope until commit
        old: list[Row] = yield Q(text + scope + d.for_update, [user_id, item_id, *scoped])
        if not old:
            return None
        if "theme" in changes:
            yield ensure_theme(d, user_id, changes["theme"], now)
        values = [d.json(v) if k in _JSON_COLUMNS else d.time(v) if k in _TIME_COLUMNS else v
                  for k, v in changes.items()]
        assignments = "".join(f"{column} = %s, " for column in changes)  # known column names only
        yield Q(f"UPDATE items SET {assignments}updated_at = %s WHERE user_id = %s AND id = %s",
                [*values, d.time(now), user_id, item_id])
        new: list[Row] = yield Q(text, [user_id, item_id])
        if new[0]["text"] != old[0]["text"]:
            yield from self._mark_stale(user_id, item_id, model, now)
        rows: list[ItemRow] = yield Q(ITEM_SELECT + " WHERE i.user_id = %s AND i.id = %s", [user_id, item_id])
        return row_times(rows[0])

    @operation
    def delete_item(self, user_id: str, item_id: int, agent_id: str | None = None,
                    run_id: str | None = None) -> Op[bool]:
        scope, scoped = in_scope(agent_id, run_id)
        deleted: int = yield Q(f"DELETE FROM items AS i WHERE i.user_id = %s AND i.id = %s{scope}",
                        [user_id, item_id, *scoped])
        return deleted > 0

    @operation
    @reads
    def list_items(self, filters: Filters, limit: int, offset: int, order: str = "created") -> Op[list[ItemRow]]:
        d = self.dialect
        cond, params = where(d, filters)
        # The page's ids first, then their columns: a deep OFFSET skips bare index entries, not
        # joined rows (a deep page of a 100k-item user is about 4x faster on SQLite).
        order_by = f"ORDER BY i.{ORDER_COLUMNS[order]} DESC, i.id DESC"  # a known column name
        # the user said of the outer read too: Citus routes a statement to the user's shard only when
        # every read of a distributed table in it names the user
        user, users = ("", []) if filters.user_id is None else ("i.user_id = %s AND ", [filters.user_id])
        rows: list[ItemRow] = yield Q(
            f"{self._by_ids()} WHERE {user}({d.item_key}) IN (SELECT {d.item_key} FROM items i"
            f" WHERE {cond} {order_by} LIMIT %s OFFSET %s) {order_by}", [*users, *params, limit, offset])
        return [row_times(r) for r in rows]

    def _by_ids(self) -> str:
        return ITEM_SELECT.replace("FROM items i", f"FROM items i{self.dialect.by_id}", 1)

    @operation
    @reads
    def count_items(self, filters: Filters) -> Op[int]:
        cond, params = where(self.dialect, filters)
        rows: list[Count] = yield Q(f"SELECT count(*) AS n FROM items i WHERE {cond}", params)
        return rows[0]["n"]

    @operation
    @reads
    def fetch_items(self, user_id: str | None, ids: Sequence[int]) -> Op[list[ItemRow]]:
        rows: list[ItemRow] = yield self._of_ids(self._by_ids(), user_id, ids)
        return [row_times(r) for r in rows]

    @operation
    @reads
    def rank_rows(self, user_id: str | None, ids: Sequence[int]) -> Op[list[RankRow]]:
        # a few columns instead of whole rows (and no embeddings join): search re-ranks ~100, shows ~10
        columns = ", ".join(f"i.{c}" for c in RANK_COLUMNS)
        rows: list[RankRow] = yield self._of_ids(f"SELECT {columns} FROM items i{self.dialect.by_id}", user_id, ids)
        return [row_times(r) for r in rows]

    def _of_ids(self, select: str, user_id: str | None, ids: Sequence[int]) -> Q:
        d = self.dialect
        cond, params = d.in_ids.format(column="i.id"), [d.ids(ids)]
        if user_id is not None:
            cond, params = f"i.user_id = %s AND {cond}", [user_id, *params]
        return Q(f"{select} WHERE {cond}", params)

    def _themes(self, user_id: str, now: datetime, slug: str | None = None,
                scope: Mapping[str, str] | None = None) -> Op[list[ThemeRow]]:
        """The user's themes (or the one ``slug``) with their active-item counts, largest first.
        ``scope`` (agent_id / run_id): items written in it only, and only the themes holding one:
        another agent's theme names are its memory too."""
        one, params = (" AND t.slug = %s", [slug]) if slug is not None else ("", [])
        given = scope or {}
        scoped = [(column, given[column]) for column in ("agent_id", "run_id") if given.get(column)]
        within = "".join(f" AND i.{column} = %s" for column, _ in scoped)
        rows: list[ThemeRow] = yield Q(
            "SELECT t.slug, t.display_name, t.description, t.created_at,"
            " (SELECT count(*) FROM items i WHERE i.user_id = t.user_id AND i.theme = t.slug"
            f"  AND i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > %s){within}) AS active_count"
            f" FROM themes t WHERE t.user_id = %s{one} ORDER BY active_count DESC, t.slug",
            [self.dialect.time(now), *(value for _, value in scoped), user_id, *params])
        return [row_times(r) for r in rows if not scoped or r["active_count"] > 0]

    @operation
    @reads
    def list_themes(self, user_id: str, now: datetime, scope: Mapping[str, str] | None = None) -> Op[list[ThemeRow]]:
        return (yield from self._themes(user_id, now, scope=scope))

    @operation
    def set_theme(self, user_id: str, slug: str, changes: Mapping[str, Any], now: datetime) -> Op[ThemeRow]:
        """Create the theme unless it exists, then change its ``display_name`` and/or ``description``."""
        d = self.dialect
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, d.time(now)])
        yield ensure_theme(d, user_id, slug, now)
        columns = [c for c in ("display_name", "description") if c in changes]  # known column names only
        if columns:
            yield Q(f"UPDATE themes SET {''.join(f'{c} = %s, ' for c in columns)}updated_at = %s"
                    " WHERE user_id = %s AND slug = %s", [*(changes[c] for c in columns), d.time(now), user_id, slug])
        return (yield from self._themes(user_id, now, slug))[0]
