"""The users (listed, forgotten), their settings and their household (persons, single or multi
mode) for both backends.

Generator methods mixed into each backend and installed on its runners (``sansio.install``).
What differs by dialect comes from ``self.dialect``: times and the JSON lists (aliases, devices)
are bound through it, the row lock of an update is its ``for_update``. A second person of one
name (any case) breaks the unique index on ``(user_id, lower(display_name))`` and leaves as each
runner reports a driver error (``StorageError``; the store's operations check names first). The
promotion job's candidates read the vectors: each backend's ``persons`` module. Forgetting a
user deletes the ``users`` row (every table's rows go with it, ``ON DELETE CASCADE``) and whatever
the backend holds beside the tables (``_forget_vectors``: SQLite's in-memory vectors).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping

from ...core.contract import PERSON_COLUMNS, PERSON_LIST_COLUMNS
from ...sansio import Op, operation, reads
from ..base import PersonRow, UserRow, UserSettings
from .dialect import Count, Dialect, Q, Row, row_times
from .facts import ALL_ROWS
from .sessions import SESSION_TABLES

PERSON_TABLES = ("persons", "promotions")  # the household's rows (and the promotion job's), per user
PROMOTION_SKIP_TYPES = ("fact", "summary")  # items the promotion job never reads: facts already
_NEW_USER = "INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"
_NO_SETTINGS = UserSettings(household_mode="single", timezone=None, memory_off_since=None, household_name=None,
                            locale=None)
HOUSEHOLD_DETAILS = ("household_name", "locale")  # columns of users set by set_household_details


class PersonQueries:
    """Persons, household mode and user settings (mixed into ``PostgresQueries`` and ``SQLiteBackend``)."""

    dialect: Dialect
    # (user_id): drop what the backend holds of the user's vectors beside the tables
    _forget_vectors: Callable[[str], Op[None]]

    def _bound(self, column: str, value: Any) -> Any:
        """A person column's value as bound: the lists as JSON (empty when unset)."""
        return self.dialect.json(list(value or [])) if column in PERSON_LIST_COLUMNS else value

    @operation
    @reads
    def list_persons(self, user_id: str) -> Op[list[PersonRow]]:
        rows: list[PersonRow] = yield Q("SELECT * FROM persons WHERE user_id = %s ORDER BY id", [user_id])
        return [row_times(r) for r in rows]

    @operation
    @reads
    def household_mode(self, user_id: str) -> Op[str]:
        rows: list[Row] = yield Q("SELECT household_mode FROM users WHERE id = %s", [user_id])
        mode: str = rows[0]["household_mode"] if rows else "single"
        return mode

    @operation
    def insert_person(self, user_id: str, fields: Mapping[str, Any], now: datetime) -> Op[PersonRow]:
        stamp = self.dialect.time(now)
        yield Q(_NEW_USER, [user_id, stamp])
        rows: list[PersonRow] = yield Q(
            f"INSERT INTO persons (user_id, {', '.join(PERSON_COLUMNS)}, created_at, updated_at)"
            f" VALUES (%s, {', '.join(['%s'] * len(PERSON_COLUMNS))}, %s, %s) RETURNING *",
            [user_id, *(self._bound(c, fields.get(c)) for c in PERSON_COLUMNS), stamp, stamp])
        return row_times(rows[0])

    @operation
    def update_person(self, user_id: str, person_id: int, changes: Mapping[str, Any],
                      now: datetime) -> Op[PersonRow | None]:
        """Change a person; a new display name is carried to the items and facts about them."""
        d, stamp = self.dialect, self.dialect.time(now)
        old: list[Row] = yield Q(f"SELECT display_name FROM persons WHERE user_id = %s AND id = %s{d.for_update}",
                                 [user_id, person_id])
        if not old:
            return None
        columns = [c for c in PERSON_COLUMNS if c in changes]  # known column names only
        rows: list[PersonRow] = yield Q(f"UPDATE persons SET {''.join(f'{c} = %s, ' for c in columns)}updated_at = %s"
                                        " WHERE user_id = %s AND id = %s RETURNING *",
                                        [*(self._bound(c, changes[c]) for c in columns), stamp, user_id, person_id])
        old_name, new_name = old[0]["display_name"], changes.get("display_name")
        if new_name is not None and new_name != old_name:
            for table in ("items", "facts"):
                yield Q(f"UPDATE {table} SET person = %s, updated_at = %s WHERE user_id = %s"
                        " AND lower(person) = lower(%s)", [new_name, stamp, user_id, old_name])
        return row_times(rows[0])

    @operation
    def delete_person(self, user_id: str, person_id: int) -> Op[bool]:
        deleted: int = yield Q("DELETE FROM persons WHERE user_id = %s AND id = %s", [user_id, person_id])
        return deleted > 0

    @operation
    def set_household_mode(self, user_id: str, mode: str, primary_id: int | None, now: datetime) -> Op[None]:
        """Store the mode; ``primary_id``: the person who becomes role 'primary' (single -> multi)."""
        stamp = self.dialect.time(now)
        yield Q(_NEW_USER, [user_id, stamp])
        yield Q("UPDATE users SET household_mode = %s WHERE id = %s", [mode, user_id])
        if primary_id is not None:
            yield Q("UPDATE persons SET role = 'primary', updated_at = %s WHERE user_id = %s AND id = %s",
                    [stamp, user_id, primary_id])

    @operation
    @reads
    def user_settings(self, user_id: str) -> Op[UserSettings]:
        """The user's ``household_mode``, ``timezone``, ``memory_off_since``, ``household_name`` and
        ``locale`` in one read (defaults for an unknown user)."""
        rows: list[UserSettings] = yield Q("SELECT household_mode, timezone, memory_off_since, household_name, locale"
                                           " FROM users WHERE id = %s", [user_id])
        return row_times(rows[0]) if rows else _NO_SETTINGS.copy()

    @operation
    def set_memory_off(self, user_id: str, since: datetime | None, now: datetime) -> Op[None]:
        d = self.dialect
        yield Q("INSERT INTO users (id, created_at, memory_off_since) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET memory_off_since = excluded.memory_off_since",
                [user_id, d.time(now), d.time(since)])

    @operation
    def set_user_timezone(self, user_id: str, name: str | None, now: datetime) -> Op[None]:
        yield Q("INSERT INTO users (id, created_at, timezone) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET timezone = excluded.timezone", [user_id, self.dialect.time(now), name])

    @operation
    def set_household_details(self, user_id: str, changes: Mapping[str, Any], now: datetime) -> Op[None]:
        columns = [c for c in HOUSEHOLD_DETAILS if c in changes]  # known column names only
        yield Q(_NEW_USER, [user_id, self.dialect.time(now)])
        if columns:
            yield Q(f"UPDATE users SET {', '.join(f'{c} = %s' for c in columns)} WHERE id = %s",
                    [*(changes[c] for c in columns), user_id])

    # -- users -----------------------------------------------------------------------------

    @operation
    @reads
    def list_users(self, limit: int | None = None, offset: int = 0) -> Op[list[UserRow]]:
        rows: list[UserRow] = yield Q(
            "SELECT u.id, u.created_at, u.timezone, u.memory_off_since,"
            " (SELECT count(*) FROM items i WHERE i.user_id = u.id) AS items,"
            " (SELECT count(*) FROM facts f WHERE f.user_id = u.id) AS facts FROM users u ORDER BY u.id"
            " LIMIT %s OFFSET %s", [ALL_ROWS if limit is None else limit, offset])
        return [row_times(r) for r in rows]

    @operation
    def forget_user(self, user_id: str) -> Op[dict[str, int]]:
        """Delete the user and everything of theirs; the rows each table held."""
        counts: dict[str, int] = {}
        for table in ("items", "facts", "fact_history", "themes", "summaries", "session_state", "embeddings",
                      "next_embeddings",
                      *SESSION_TABLES, *PERSON_TABLES):  # known table names
            rows: list[Count] = yield Q(f"SELECT count(*) AS n FROM {table} WHERE user_id = %s", [user_id])
            counts[table] = rows[0]["n"]
        yield from self._forget_vectors(user_id)
        yield Q("DELETE FROM users WHERE id = %s", [user_id])
        return counts
