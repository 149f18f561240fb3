"""What a search reads beside its candidates, written once for both backends: the persons a query
names and the earlier values of facts with the session they were said in. The candidate queries
themselves (full-text, vector, substring, session neighbours) are each dialect's own.
"""

from __future__ import annotations

from typing import Sequence

from ...sansio import Op, operation, reads
from ..base import PastStatement
from .dialect import Dialect, Q, Row


def _one_of(values: Sequence[str]) -> str:
    return f"IN ({', '.join(['%s'] * len(values))})"


class SearchReadQueries:
    """Reads beside a search (mixed into both backends)."""

    dialect: Dialect

    @operation
    @reads
    def persons_named(self, user_id: str, names: Sequence[str]) -> Op[list[str]]:
        """The persons whose name (case-insensitive) is one of ``names``: on this user's items, and
        in the household by display name, first name or alias."""
        if not names:
            return []
        d, wanted, one_of = self.dialect, list(names), _one_of(names)
        rows: list[Row] = yield Q(
            f"SELECT DISTINCT person FROM items WHERE user_id = %s AND person IS NOT NULL"
            f" AND lower(person) {one_of} UNION SELECT display_name FROM persons p WHERE p.user_id = %s"
            f" AND (lower(p.display_name) {one_of}"
            f" OR {d.first_word.format(text='lower(p.display_name)')} {one_of}"
            f" OR EXISTS (SELECT 1 FROM {d.json_list.format(column='p.aliases')}"
            f" WHERE lower(a.value) {one_of}))", [user_id, *wanted, user_id, *wanted, *wanted, *wanted])
        return [r["person"] for r in rows]

    @operation
    @reads
    def past_statements(self, user_ids: Sequence[str]) -> Op[list[PastStatement]]:
        """The earlier values of these users' facts with the session they were said in
        (``fact_history`` rows with a ``source_session_id``), each with its user, its fact's key,
        current value and item: few per user, read beside a search's page."""
        if not user_ids:
            return []
        rows: list[PastStatement] = yield Q(
            "SELECT h.user_id, h.source_session_id AS session_id, h.source_message_id AS message_id,"
            " h.value, f.key, f.value AS current_value, f.item_id FROM fact_history h JOIN facts f"
            f" ON f.user_id = h.user_id AND f.id = h.fact_id WHERE h.user_id {_one_of(user_ids)}"
            " AND h.source_session_id IS NOT NULL", list(user_ids))
        return rows
