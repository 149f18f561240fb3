"""PostgreSQL storage of the household (persons, single or multi mode) and the promotion job's
candidates (they read the vector column; the ``promotions`` it records: ``shared/facts.py``).

Generator methods mixed into ``PostgresQueries`` (installed on both runners by ``pool``);
each runs as one transaction and names ``user_id`` first (Citus-ready, like the rest).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from ...core.contract import PERSON_COLUMNS, PERSON_LIST_COLUMNS
from ...sansio import Op, operation
from .sql import Q, row_times

PERSON_TABLES = ("persons", "promotions")
PROMOTION_SKIP_TYPES = ["fact", "summary"]  # fact mirrors and summaries are facts already


def _value(column: str, value: object) -> object:
    return Jsonb(list(value or [])) if column in PERSON_LIST_COLUMNS else value  # type: ignore[call-overload]


class PostgresPersonQueries:
    """Persons, household mode and promotions (mixed into ``PostgresQueries``)."""

    @operation
    def list_persons(self, user_id: str) -> Op:
        rows = yield Q("SELECT * FROM persons WHERE user_id = %s ORDER BY id", [user_id])
        return [row_times(r) for r in rows]

    @operation
    def household_mode(self, user_id: str) -> Op:
        rows = yield Q("SELECT household_mode FROM users WHERE id = %s", [user_id])
        return rows[0]["household_mode"] if rows else "single"

    @operation
    def insert_person(self, user_id: str, fields: dict, now: datetime) -> Op:
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, now])
        query = sql.SQL("INSERT INTO persons (user_id, {}, created_at, updated_at) VALUES (%s, {}, %s, %s)"
                        " RETURNING *").format(sql.SQL(", ").join(map(sql.Identifier, PERSON_COLUMNS)),
                                               sql.SQL(", ").join(sql.Placeholder() * len(PERSON_COLUMNS)))
        rows = yield Q(query, [user_id, *(_value(c, fields.get(c)) for c in PERSON_COLUMNS), now, now])
        return row_times(rows[0])

    @operation
    def update_person(self, user_id: str, person_id: int, changes: dict, now: datetime) -> Op:
        """Change a person; a new display name is carried to the items and facts about them."""
        old = yield Q("SELECT display_name FROM persons WHERE user_id = %s AND id = %s FOR UPDATE",
                      [user_id, person_id])
        if not old:
            return None
        columns = [c for c in PERSON_COLUMNS if c in changes]
        sets = sql.SQL(", ").join([sql.SQL("{} = %s").format(sql.Identifier(c)) for c in columns]
                                  + [sql.SQL("updated_at = %s")])
        rows = yield Q(sql.SQL("UPDATE persons SET {} WHERE user_id = %s AND id = %s RETURNING *").format(sets),
                       [*(_value(c, changes[c]) for c in columns), now, user_id, person_id])
        new_name = changes.get("display_name")
        if new_name is not None and new_name != old[0]["display_name"]:
            for table in ("items", "facts"):
                yield Q(sql.SQL("UPDATE {} SET person = %s, updated_at = %s WHERE user_id = %s"
                                " AND lower(person) = lower(%s)").format(sql.Identifier(table)),
                        [new_name, now, user_id, old[0]["display_name"]])
        return row_times(rows[0])

    @operation
    def delete_person(self, user_id: str, person_id: int) -> Op:
        count = yield Q("DELETE FROM persons WHERE user_id = %s AND id = %s", [user_id, person_id])
        return count > 0

    @operation
    def set_household_mode(self, user_id: str, mode: str, primary_id: int | None, now: datetime) -> Op:
        """Store the mode; ``primary_id``: the person who becomes role 'primary' (single -> multi)."""
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, now])
        yield Q("UPDATE users SET household_mode = %s WHERE id = %s", [mode, user_id])
        if primary_id is not None:
            yield Q("UPDATE persons SET role = 'primary', updated_at = %s WHERE user_id = %s AND id = %s",
                    [now, user_id, primary_id])

    @operation
    def user_settings(self, user_id: str) -> Op:
        """The user's ``household_mode``, ``timezone`` and ``memory_off_since`` in one read
        (defaults for an unknown user)."""
        rows = yield Q("SELECT household_mode, timezone, memory_off_since FROM users WHERE id = %s", [user_id])
        return dict(rows[0]) if rows else {"household_mode": "single", "timezone": None, "memory_off_since": None}

    @operation
    def set_memory_off(self, user_id: str, since: datetime | None, now: datetime) -> Op:
        yield Q("INSERT INTO users (id, created_at, memory_off_since) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET memory_off_since = EXCLUDED.memory_off_since", [user_id, now, since])

    @operation
    def set_user_timezone(self, user_id: str, name: str | None, now: datetime) -> Op:
        yield Q("INSERT INTO users (id, created_at, timezone) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET timezone = EXCLUDED.timezone", [user_id, now, name])

    # -- promotion ----------------------------------------------------------------------------

    @operation
    def promotion_candidates(self, user_id: str, model: str, now: datetime, limit: int) -> Op:
        """The user's newest active, unexpired items with a ready ``model`` vector (fact mirrors and
        summaries excluded), with ``vector`` and ``promoted`` (already in a promotion)."""
        rows = yield Q(
            "SELECT i.id, i.type, i.theme, i.title, i.content, i.person, i.created_at, i.observed_at,"
            " e.embedding::real[] AS vector, p.item_id IS NOT NULL AS promoted, f.id AS fact_id FROM items i"
            " JOIN embeddings e ON e.user_id = i.user_id AND e.item_id = i.id AND e.state = 'ready' AND e.model = %s"
            " LEFT JOIN promotions p ON p.user_id = i.user_id AND p.item_id = i.id"
            " LEFT JOIN facts f ON f.user_id = p.user_id AND f.id = p.fact_id"
            " WHERE i.user_id = %s AND i.status = 'active' AND i.type <> ALL(%s)"
            " AND (i.expires_at IS NULL OR i.expires_at > %s) AND e.embedding IS NOT NULL"
            " ORDER BY i.id DESC LIMIT %s", [model, user_id, PROMOTION_SKIP_TYPES, now, limit])
        for r in rows:
            r["vector"] = np.asarray(r["vector"], dtype=np.float32)
            row_times(r)
        return rows
