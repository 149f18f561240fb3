"""SQLite's part of the household concern: the promotion job's candidates (they read the vector
blobs). The household itself and the user settings: ``shared/persons.py``; the ``promotions``
the job records: ``shared/facts.py``.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Callable, ContextManager, cast

from ...core.timeutil import from_db, to_db
from ...vectors import from_blob
from ..base import PromotionCandidate
from ..shared.persons import PROMOTION_SKIP_TYPES


class SQLitePromotion:
    """The promotion job's candidates (mixed into ``SQLiteBackend``)."""

    _transaction: Callable[..., ContextManager[sqlite3.Connection]]  # (write): a transaction, or a savepoint in one

    def promotion_candidates(self, user_id: str, model: str, now: datetime, limit: int) -> list[PromotionCandidate]:
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
        out: list[PromotionCandidate] = []
        for r in rows:
            d = dict(r)
            d["vector"], d["promoted"], d["created_at"] = from_blob(d["vector"]), bool(d["promoted"]), \
                from_db(d["created_at"])
            d["observed_at"] = from_db(d["observed_at"])
            out.append(cast("PromotionCandidate", d))  # the columns of the SELECT above
        return out
