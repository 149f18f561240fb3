"""PostgreSQL's part of the household concern: the promotion job's candidates (they read the
vector column). The household itself and the user settings: ``shared/persons.py``; the
``promotions`` the job records: ``shared/facts.py``.

A generator method mixed into ``PostgresQueries`` (installed on both runners by ``pool``).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from ...sansio import Op, operation
from ..shared.persons import PROMOTION_SKIP_TYPES
from ..base import PromotionCandidate
from ..shared.dialect import Q, row_times


class PostgresPromotionQueries:
    """The promotion job's candidates (mixed into ``PostgresQueries``)."""

    @operation
    def promotion_candidates(self, user_id: str, model: str, now: datetime,
                             limit: int) -> Op[list[PromotionCandidate]]:
        """The user's newest active, unexpired items with a ready ``model`` vector (fact mirrors and
        summaries excluded), with ``vector`` and ``promoted`` (already in a promotion)."""
        rows: list[PromotionCandidate] = yield Q(
            "SELECT i.id, i.type, i.theme, i.title, i.content, i.person, i.created_at, i.observed_at,"
            " e.embedding::real[] AS vector, p.item_id IS NOT NULL AS promoted, f.id AS fact_id FROM items i"
            " JOIN embeddings e ON e.user_id = i.user_id AND e.item_id = i.id AND e.state = 'ready' AND e.model = %s"
            " LEFT JOIN promotions p ON p.user_id = i.user_id AND p.item_id = i.id"
            " LEFT JOIN facts f ON f.user_id = p.user_id AND f.id = p.fact_id"
            " WHERE i.user_id = %s AND i.status = 'active' AND i.type <> ALL(%s)"
            " AND (i.expires_at IS NULL OR i.expires_at > %s) AND e.embedding IS NOT NULL"
            " ORDER BY i.id DESC LIMIT %s", [model, user_id, list(PROMOTION_SKIP_TYPES), now, limit])
        for r in rows:
            r["vector"] = np.asarray(r["vector"], dtype=np.float32)
            row_times(r)
        return rows
