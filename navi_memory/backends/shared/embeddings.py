"""The embedding job's reads for both backends: items still without a vector of the model, and
how many items are in each state.

Storing vectors and resetting them stay with each backend (``store_embeddings``,
``reset_embeddings``): SQLite keeps blobs and a per-user generation its in-memory indexes follow,
PostgreSQL a pgvector column and an index per model.
"""

from __future__ import annotations

from typing import Any

from ...core.contract import NOT_INDEXED
from ...sansio import Op, operation, reads
from .dialect import Dialect, Q


class EmbeddingQueries:
    """The embedding job's reads (mixed into both backends)."""

    dialect: Dialect
    has_vector: bool

    @operation
    @reads
    def pending_embeddings(self, model: str, user_id: str | None, limit: int, after_id: int) -> Op:
        """(item_id, user_id, text) of items without a ready vector of ``model``, by id after ``after_id``
        (none where vectors cannot be stored)."""
        if not self.has_vector:
            return []
        user, params = ("", []) if user_id is None else (" AND i.user_id = %s", [user_id])
        rows = yield Q(f"SELECT i.id, i.user_id, {self.dialect.embed_text} AS text FROM items i LEFT JOIN embeddings e"
                       " ON e.user_id = i.user_id AND e.item_id = i.id WHERE i.id > %s"
                       " AND (e.item_id IS NULL OR e.model <> %s OR e.state <> 'ready')"
                       f" AND (e.error IS NULL OR e.error <> %s){user} ORDER BY i.id LIMIT %s",
                       [after_id, model, NOT_INDEXED, *params, limit])
        return [(r["id"], r["user_id"], r["text"]) for r in rows]

    @operation
    @reads
    def embedding_stats(self, model: str | None) -> Op:
        """Items, and vectors by state: ready, pending, error, skipped (not indexed), of another
        model, and missing (no row at all)."""
        total = (yield Q("SELECT count(*) AS n FROM items"))[0]["n"]
        rows = yield Q("SELECT CASE WHEN state = 'error' AND error = %s THEN 'skipped' ELSE state END AS state,"
                       " model = %s AS current, count(*) AS n FROM embeddings GROUP BY 1, 2", [NOT_INDEXED, model])
        stats: dict[str, Any] = {"items": total, "ready": 0, "pending": 0, "error": 0, "skipped": 0, "other_model": 0}
        for row in rows:
            stats[row["state"] if row["current"] or row["state"] == "skipped" else "other_model"] += row["n"]
        stats["missing"] = total - sum(r["n"] for r in rows)
        return stats
