"""The embedding job's statements for both backends: items still without a vector of the model,
how many items are in each state, and moving users to a new model (``reembed``).

Storing vectors and resetting them stay with each backend (``store_embeddings``,
``reset_embeddings``, and the two hooks of a move, ``_next_vector`` and ``_adopt_next``): SQLite
keeps blobs and a per-user generation its in-memory indexes follow, PostgreSQL a pgvector column and
an index per model.

A move to a new model keeps every search on one model: a user's searches read the old vectors
(``embeddings``) until the new model's vector of each of the user's items waits in
``next_embeddings``; ``cut_over`` then replaces them all in one transaction and records the model
in ``users.embedding_model``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from ...core.contract import NOT_INDEXED
from ...sansio import Op, operation, reads
from .dialect import Count, Dialect, Q, Row

# items ``i`` stored with ``embed=False``: never embedded, whatever the model (one %s: NOT_INDEXED)
_NOT_SKIPPED = ("NOT EXISTS (SELECT 1 FROM embeddings s WHERE s.user_id = i.user_id AND s.item_id = i.id"
                " AND s.error = %s)")
# the items ``i`` of one user (%s) still to embed into ``next_embeddings`` (%s: the model; %s: NOT_INDEXED)
_WITHOUT_NEXT = ("i.user_id = %s AND NOT EXISTS (SELECT 1 FROM next_embeddings n WHERE n.user_id = i.user_id"
                 f" AND n.item_id = i.id AND n.model = %s) AND {_NOT_SKIPPED}")


def moving_condition(model: str, moving_to: str | None) -> tuple[str, list[Any]]:
    """While the store moves to the model ``moving_to``: a condition on items ``i`` keeping those of
    users whose searches read ``model`` (the users moved over when it is ``moving_to``, the others
    when it is the old model), so no vector of the other model lands among a user's."""
    if moving_to is None:
        return "", []
    moved = "EXISTS" if model == moving_to else "NOT EXISTS"
    return f" AND {moved} (SELECT 1 FROM users u WHERE u.id = i.user_id AND u.embedding_model = %s)", [moving_to]


class EmbeddingQueries:
    """The embedding job's reads (mixed into both backends)."""

    dialect: Dialect
    has_vector: bool
    _next_column: str  # the vector column of ``next_embeddings``
    # each backend's: a vector as ``next_embeddings`` binds it, and the copy of the user's waiting
    # vectors over their ``embeddings`` rows (not over an item stored with ``embed=False``)
    _next_vector: Callable[[np.ndarray], Any]
    _adopt_next: Callable[[str, str, datetime], Op[None]]

    @operation
    @reads
    def pending_embeddings(self, model: str, user_id: str | None, limit: int, after_id: int,
                           moving_to: str | None = None) -> Op[list[tuple[int, str, str]]]:
        """(item_id, user_id, text) of items without a ready vector of ``model``, by id after ``after_id``
        (none where vectors cannot be stored). ``moving_to``: see ``moving_condition``."""
        if not self.has_vector:
            return []
        user, params = ("", []) if user_id is None else (" AND i.user_id = %s", [user_id])
        moving, moving_params = moving_condition(model, moving_to)
        rows: list[Row] = yield Q(
            f"SELECT i.id, i.user_id, {self.dialect.embed_text} AS text FROM items i LEFT JOIN embeddings e"
            " ON e.user_id = i.user_id AND e.item_id = i.id WHERE i.id > %s"
            " AND (e.item_id IS NULL OR e.model <> %s OR e.state <> 'ready')"
            f" AND (e.error IS NULL OR e.error <> %s){user}{moving} ORDER BY i.id LIMIT %s",
            [after_id, model, NOT_INDEXED, *params, *moving_params, limit])
        return [(r["id"], r["user_id"], r["text"]) for r in rows]

    @operation
    @reads
    def embedding_stats(self, model: str | None, previous: str | None = None) -> Op[dict[str, int]]:
        """Items, and vectors by state: ready, pending, error, skipped (not indexed), of another
        model, and missing (no row at all). With ``previous`` (a move from that model in
        progress), its vectors by state apart: ``previous_ready``, ``previous_pending``, ``previous_error``."""
        items: list[Count] = yield Q("SELECT count(*) AS n FROM items")
        total = items[0]["n"]
        rows: list[Row] = yield Q(
            "SELECT CASE WHEN state = 'error' AND error = %s THEN 'skipped' ELSE state END AS state,"
            " CASE WHEN model = %s THEN 'current' WHEN model = %s THEN 'previous' ELSE 'other' END AS kind,"
            " count(*) AS n FROM embeddings GROUP BY 1, 2", [NOT_INDEXED, model, previous])
        stats: dict[str, int] = {"items": total, "ready": 0, "pending": 0, "error": 0, "skipped": 0, "other_model": 0}
        if previous is not None:
            stats.update(previous_ready=0, previous_pending=0, previous_error=0)
        for row in rows:
            if row["state"] == "skipped" or row["kind"] == "current":
                stats[row["state"]] += row["n"]
            elif row["kind"] == "previous":
                stats[f"previous_{row['state']}"] += row["n"]
            else:
                stats["other_model"] += row["n"]
        stats["missing"] = total - sum(r["n"] for r in rows)
        return stats

    # -- moving to another model (``reembed``) ---------------------------------------------------------

    @operation
    @reads
    def serving_model(self, user_id: str) -> Op[str | None]:
        """The model ``cut_over`` last moved the user's vectors to (None: never moved, or no such user)."""
        rows: list[Row] = yield Q("SELECT embedding_model FROM users WHERE id = %s", [user_id])
        serving: str | None = rows[0]["embedding_model"] if rows else None
        return serving

    @operation
    @reads
    def users_to_move(self, model: str, after: str, limit: int) -> Op[list[str]]:
        """Ids of users whose vectors are not yet of ``model``, in order after ``after``."""
        rows: list[Row] = yield Q(
            "SELECT id FROM users WHERE id > %s AND (embedding_model IS NULL OR embedding_model <> %s)"
            " ORDER BY id LIMIT %s", [after, model, limit])
        return [r["id"] for r in rows]

    @operation
    @reads
    def pending_next(self, model: str, user_id: str, limit: int, after_id: int) -> Op[list[tuple[int, str, str]]]:
        """(item_id, user_id, text) of the user's items still without a vector of ``model`` waiting to
        replace theirs (none where vectors cannot be stored), by id after ``after_id``."""
        if not self.has_vector:
            return []
        rows: list[Row] = yield Q(f"SELECT i.id, i.user_id, {self.dialect.embed_text} AS text FROM items i"
                                  f" WHERE {_WITHOUT_NEXT} AND i.id > %s ORDER BY i.id LIMIT %s",
                                  [user_id, model, NOT_INDEXED, after_id, limit])
        return [(r["id"], r["user_id"], r["text"]) for r in rows]

    @operation
    def store_next_embeddings(self, model: str, results: Sequence[tuple[int, str, str, np.ndarray]],
                              now: datetime) -> Op[int]:
        """Keep (item_id, user_id, embedded_text, vector) rows as the items' vectors of ``model`` to be;
        an item whose text changed since it was read (or that was deleted) is skipped."""
        stored, column = 0, self._next_column
        for item_id, user_id, text, vector in results:
            written: int = yield Q(
                f"INSERT INTO next_embeddings (user_id, item_id, model, dimensions, {column}, updated_at)"
                " SELECT i.user_id, i.id, %s, %s, %s, %s FROM items i"
                f" WHERE i.user_id = %s AND i.id = %s AND {self.dialect.embed_text} = %s"
                f" ON CONFLICT ({self.dialect.item_row_key}) DO UPDATE SET model = excluded.model,"
                f" dimensions = excluded.dimensions, {column} = excluded.{column},"
                " updated_at = excluded.updated_at",
                [model, int(vector.size), self._next_vector(vector), self.dialect.time(now),
                 user_id, item_id, text])
            stored += written
        return stored

    @operation
    def cut_over(self, user_id: str, model: str, now: datetime) -> Op[bool]:
        """Move the user's searches to ``model`` if every item of theirs that is embedded has its
        vector of ``model`` waiting: those replace the old ones, all in this transaction. False (and
        nothing changed) while some are missing; True once the user is on ``model``."""
        rows: list[Row] = yield Q(
            f"SELECT embedding_model FROM users WHERE id = %s{self.dialect.for_update}", [user_id])
        if not rows or rows[0]["embedding_model"] == model:
            return bool(rows)
        missing: list[Count] = yield Q(f"SELECT count(*) AS n FROM items i WHERE {_WITHOUT_NEXT}",
                                       [user_id, model, NOT_INDEXED])
        if missing[0]["n"]:
            return False
        yield from self._adopt_next(user_id, model, now)
        yield Q("DELETE FROM next_embeddings WHERE user_id = %s", [user_id])
        yield Q("UPDATE users SET embedding_model = %s WHERE id = %s", [model, user_id])
        return True

    @operation
    @reads
    def reembed_progress(self, model: str) -> Op[dict[str, int]]:
        """Users on ``model`` and users still to move; vectors of ``model`` waiting to replace others."""
        rows: list[Row] = yield Q(
            "SELECT CASE WHEN embedding_model = %s THEN 1 ELSE 0 END AS moved, count(*) AS n FROM users"
            " GROUP BY 1", [model])
        users: dict[bool, int] = {bool(r["moved"]): r["n"] for r in rows}
        waiting: list[Count] = yield Q("SELECT count(*) AS n FROM next_embeddings WHERE model = %s", [model])
        return {"users_moved": users.get(True, 0), "users_to_move": users.get(False, 0),
                "vectors_waiting": waiting[0]["n"]}
