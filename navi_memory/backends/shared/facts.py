"""Facts for both backends: upsert (placing a value said earlier in the fact's history), get,
delete, list and history, each fact with its searchable item kept in step.

Generator methods mixed into each backend and installed on its runners (``sansio.install``).
What differs by dialect comes from ``self.dialect``; the item steps a backend writes its own way
are its ``_insert`` and ``_mark_stale`` (generators). Two upserts of one new fact: PostgreSQL's
runner runs the loser again after its unique violation, SQLite's ``BEGIN IMMEDIATE`` queues it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from ...core import timeline
from ...core.contract import FACT_SORT_FIELDS
from ...errors import StorageError
from ...retrieval.query import like_pattern
from ...sansio import Op, operation, reads
from ..base import FactHistoryRow, FactRow, NewItem, PromotedFactRow
from .dialect import Dialect, Q, Row, ensure_theme, row_times

ALL_ROWS = 2**63 - 1  # the LIMIT of a list without one (SQLite refuses LIMIT NULL, PostgreSQL LIMIT -1)


class FactQueries:
    """Fact reads and writes (mixed into ``PostgresQueries`` and ``SQLiteBackend``)."""

    dialect: Dialect
    _insert: Callable[[Sequence[NewItem], str | None, datetime], Op[list[int]]]  # new items, their pending vectors
    # (user_id, item_id, model, now): its text changed, its vector is wrong
    _mark_stale: Callable[[str, int, str | None, datetime], Op[None]]

    @operation
    def upsert_fact(self, user_id: str, fact: Mapping[str, Any], item: NewItem, model: str | None,
                    now: datetime) -> Op[tuple[str, FactRow, str | None]]:
        """Add the fact, or place the value in the stored fact by when it was said
        (``timeline.place``); returns the action, the stored fact and the value it had before."""
        d, said = self.dialect, fact.get("observed_at") or now  # said: when the statement was made
        stamp = d.time(now)
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, stamp])
        rows: list[FactRow] = yield Q(f"SELECT * FROM facts WHERE user_id = %s"
                                      f" AND {d.null_safe_eq.format(column='agent_id')}"
                                      f" AND category = %s AND key = %s{d.for_update}",
                                      [user_id, fact.get("agent_id"), fact["category"], fact["key"]])
        previous: str | None
        if not rows:
            (item_id,) = yield from self._insert([item], model, now)
            inserted: list[Row] = yield Q(
                "INSERT INTO facts (user_id, category, key, value, source, confidence, source_context,"
                " source_session_id, source_message_id, person, expires_at, last_verified_at, created_at, updated_at,"
                " item_id, agent_id, run_id, observed_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                [user_id, fact["category"], fact["key"], fact["value"], fact["source"], fact["confidence"],
                 fact.get("source_context"), fact.get("source_session_id"), fact.get("source_message_id"),
                 fact.get("person"), d.time(fact.get("expires_at")), stamp, stamp, stamp, item_id,
                 fact.get("agent_id"), fact.get("run_id"), d.time(said)])
            fact_id: int = inserted[0]["id"]
            yield Q("UPDATE items SET fact_id = %s WHERE user_id = %s AND id = %s", [fact_id, user_id, item_id])
            action, previous = "added", None
        else:
            current = row_times(rows[0])
            fact_id, previous = current["id"], current["value"]
            history = [] if said >= current["observed_at"] else (yield from self._fact_history(user_id, [fact_id]))[fact_id]
            plan = timeline.place(current, history, fact, said)
            for span in plan.insert:
                yield Q("INSERT INTO fact_history (user_id, fact_id, value, source, confidence, source_context,"
                        " source_session_id, source_message_id, valid_from, valid_to)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [user_id, fact_id, *(span.statement.get(c) for c in timeline.STATEMENT_COLUMNS),
                         d.time(span.valid_from), d.time(span.valid_to)])
            for history_id, times in plan.edits.items():
                for column, value in times.items():  # column: valid_from or valid_to (timeline.place)
                    yield Q(f"UPDATE fact_history SET {column} = %s WHERE user_id = %s AND id = %s",
                            [d.time(value), user_id, history_id])
            action = plan.action
            if action == "unchanged":
                yield Q(f"UPDATE facts SET last_verified_at = %s, expires_at = coalesce(%s, expires_at),"
                        f" confidence = {d.greatest}(confidence, %s), run_id = coalesce(%s, run_id),"
                        " observed_at = coalesce(%s, observed_at) WHERE user_id = %s AND id = %s",
                        [stamp, d.time(fact.get("expires_at")), fact["confidence"], fact.get("run_id"),
                         d.time(plan.current_since), user_id, fact_id])
            elif action == "updated":
                yield Q("UPDATE facts SET value = %s, source = %s, confidence = %s, source_context = %s,"
                        " source_session_id = %s, source_message_id = %s, person = %s, expires_at = %s,"
                        " last_verified_at = %s, updated_at = %s, run_id = coalesce(%s, run_id), observed_at = %s"
                        " WHERE user_id = %s AND id = %s",
                        [fact["value"], fact["source"], fact["confidence"], fact.get("source_context"),
                         fact.get("source_session_id"), fact.get("source_message_id"), fact.get("person"),
                         d.time(fact.get("expires_at")), stamp, stamp, fact.get("run_id"), d.time(said), user_id,
                         fact_id])
            if action != "history":
                current_rows: list[FactRow] = yield Q(
                    "SELECT * FROM facts WHERE user_id = %s AND id = %s", [user_id, fact_id])
                yield from self._sync_fact_item(current_rows[0], item, model, now)
        rows = yield Q("SELECT * FROM facts WHERE user_id = %s AND id = %s", [user_id, fact_id])
        return action, row_times(rows[0]), previous

    def _sync_fact_item(self, fact: FactRow, item: NewItem, model: str | None, now: datetime) -> Op[None]:
        """Make the fact's searchable item match the stored fact (recreated if it was deleted)."""
        d, stamp = self.dialect, self.dialect.time(now)
        user_id, item_id = fact["user_id"], fact["item_id"]
        rows: list[Row] = [] if item_id is None else (
            yield Q("SELECT content, title FROM items WHERE user_id = %s AND id = %s", [user_id, item_id]))
        if item_id is None or not rows:  # no item (None: no rows either)
            (item_id,) = yield from self._insert([item], model, now)
            yield Q("UPDATE items SET fact_id = %s WHERE user_id = %s AND id = %s", [fact["id"], user_id, item_id])
            yield Q("UPDATE facts SET item_id = %s WHERE user_id = %s AND id = %s", [item_id, user_id, fact["id"]])
            rows = [{"content": item.content, "title": item.title}]
        yield ensure_theme(d, user_id, item.theme, now)
        yield Q("UPDATE items SET content = %s, title = %s, theme = %s, metadata = %s, source = %s, confidence = %s,"
                " person = %s, expires_at = %s, agent_id = %s, run_id = %s, updated_at = %s, observed_at = %s"
                " WHERE user_id = %s AND id = %s",
                [item.content, item.title, item.theme, d.json(item.metadata or {}), fact["source"], fact["confidence"],
                 fact["person"], d.time(fact["expires_at"]), fact["agent_id"], fact["run_id"], stamp,
                 d.time(fact["observed_at"]), user_id, item_id])
        if (rows[0]["content"], rows[0]["title"]) != (item.content, item.title):
            yield from self._mark_stale(user_id, item_id, model, now)

    @operation
    @reads
    def get_fact(self, user_id: str, category: str, key: str, agent_id: str | None = None) -> Op[FactRow | None]:
        rows: list[FactRow] = yield Q(f"SELECT * FROM facts WHERE user_id = %s"
                                      f" AND {self.dialect.null_safe_eq.format(column='agent_id')}"
                                      " AND category = %s AND key = %s", [user_id, agent_id, category, key])
        return row_times(rows[0]) if rows else None

    @operation
    def delete_facts(self, user_id: str, key: str, category: str | None, agent_id: str | None = None,
                     run_id: str | None = None, fact_id: int | None = None) -> Op[int]:
        d, text = self.dialect, "DELETE FROM facts WHERE user_id = %s AND key = %s"
        params: list[str | int] = [user_id, key]
        for column, value in (("category", category), ("agent_id", agent_id), ("run_id", run_id), ("id", fact_id)):
            if value is not None:
                text += f" AND {column} = %s"  # one of four known column names
                params.append(value)
        rows: list[Row] = yield Q(text + " RETURNING id, item_id", params)
        if rows:  # their promotions stay (a deleted fact is not promoted again) naming no fact, as
            # SQLite's foreign key leaves them; PostgreSQL has no key to facts (Citus)
            yield Q(f"UPDATE promotions SET fact_id = NULL WHERE user_id = %s AND {d.in_ids.format(column='fact_id')}",
                    [user_id, d.ids([r["id"] for r in rows])])
        item_ids = [r["item_id"] for r in rows if r["item_id"] is not None]
        if item_ids:
            yield Q(f"DELETE FROM items WHERE user_id = %s AND {d.in_ids.format(column='id')}", [user_id, d.ids(item_ids)])
        return len(rows)

    @operation
    @reads
    def list_facts(self, user_id: str | None, limit: int | None, offset: int, sort_by: str, descending: bool,
                   search: str | None, category: str | None, now: datetime, include_expired: bool = False,
                   agent_id: str | None = None, run_id: str | None = None) -> Op[list[FactRow]]:
        d, parts = self.dialect, ["TRUE"]
        params: list[Any] = []
        for column, value in (("user_id", user_id), ("category", category), ("agent_id", agent_id),
                              ("run_id", run_id)):
            if value is not None:
                parts.append(f"{column} = %s")  # known column names only
                params.append(value)
        if search:
            parts.append("(" + " OR ".join(d.like_any_case.format(column=column) + " ESCAPE '\\'"
                                           for column in ("key", "value", "category")) + ")")
            params.extend([like_pattern(search)] * 3)
        if not include_expired:
            parts.append("(expires_at IS NULL OR expires_at > %s)")
            params.append(d.time(now))
        if sort_by not in FACT_SORT_FIELDS:  # composed into the SQL: only the known column names
            raise StorageError(f"cannot sort facts by {sort_by!r}")
        order = f"{sort_by} {'DESC' if descending else 'ASC'}, updated_at DESC, id"
        rows: list[FactRow] = yield Q(
            f"SELECT * FROM facts WHERE {' AND '.join(parts)} ORDER BY {order} LIMIT %s OFFSET %s",
            [*params, ALL_ROWS if limit is None else limit, offset])
        return [row_times(r) for r in rows]

    @operation
    @reads
    def fact_history(self, user_id: str | None, fact_ids: Sequence[int]) -> Op[dict[int, list[FactHistoryRow]]]:
        return (yield from self._fact_history(user_id, fact_ids))

    def _fact_history(self, user_id: str | None, fact_ids: Sequence[int]) -> Op[dict[int, list[FactHistoryRow]]]:
        """Each fact's earlier values in the order they were said."""
        d = self.dialect
        out: dict[int, list[FactHistoryRow]] = {int(i): [] for i in fact_ids}
        user = "TRUE" if user_id is None else "user_id = %s"
        rows: list[FactHistoryRow] = yield Q(
            f"SELECT * FROM fact_history WHERE {user} AND {d.in_ids.format(column='fact_id')}"
            " ORDER BY valid_from, valid_to, id", ([] if user_id is None else [user_id]) + [d.ids(list(out))])
        for row in rows:
            out[row["fact_id"]].append(row_times(row))
        return out

    # -- promotion (its candidates read vectors: per dialect) -----------------------------------

    @operation
    def record_promotion(self, user_id: str, fact_id: int | None, item_ids: Sequence[int], now: datetime) -> Op[int]:
        """Mark items promoted into ``fact_id`` (items already promoted keep their record)."""
        d = self.dialect  # the WHERE also settles SQLite's reading of ON CONFLICT after a SELECT
        recorded: int = yield Q(
            "INSERT INTO promotions (user_id, item_id, fact_id, promoted_at) SELECT user_id, id, %s, %s"
                        f" FROM items WHERE user_id = %s AND {d.in_ids.format(column='id')} ON CONFLICT DO NOTHING",
            [fact_id, d.time(now), user_id, d.ids([int(i) for i in item_ids])])
        return recorded

    @operation
    @reads
    def promoted_facts(self, user_id: str, limit: int, now: datetime) -> Op[list[PromotedFactRow]]:
        """Unexpired facts made by the promotion job, most confirmed (most items) first."""
        rows: list[PromotedFactRow] = yield Q(
            "SELECT f.*, count(p.item_id) AS promoted_items FROM facts f JOIN promotions p"
            " ON p.user_id = f.user_id AND p.fact_id = f.id WHERE f.user_id = %s"
            " AND (f.expires_at IS NULL OR f.expires_at > %s) GROUP BY f.user_id, f.id"
            " ORDER BY promoted_items DESC, f.updated_at DESC, f.id LIMIT %s",
            [user_id, self.dialect.time(now), limit])
        return [row_times(r) for r in rows]
