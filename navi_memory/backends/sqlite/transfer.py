"""SQLite's own steps of export/import (``shared/transfer.py`` holds the rest): the vectors as
blobs stamped with the user's vector generation, the ids of restored items, and a plan's calls
made as savepoints of its transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from ...calls import BackendCall
from ...core.timeutil import to_db
from ...sansio import Op
from ...vectors import from_blob, to_blob
from ..shared.dialect import Native, Q


class SQLiteTransfer:
    """What export/import does SQLite's way (mixed into ``SQLiteBackend``)."""

    _next_gen: Callable[[str], Op[int]]  # (user_id): the user's next vector generation
    _exported_vector = "e.vector"

    @staticmethod
    def _vector_of(blob: bytes | None) -> np.ndarray | None:
        return None if blob is None else from_blob(blob)

    def ensure_vector_index(self, model: str, dimensions: int) -> None:
        """Nothing to build: SQLite searches its vectors in memory."""

    def _in_plan(self, call: BackendCall) -> Op[Any]:
        """The public method, inside the plan's transaction: a savepoint of it."""
        return (yield Native(lambda conn: getattr(self, call.method)(**call.kwargs)))

    def _restore_vectors(self, rows: Sequence[tuple[str, int, str, np.ndarray]], now: datetime) -> Op[None]:
        """Store ready vectors under a new generation of each user's (the vector cache reloads them)."""
        gens: dict[str, int] = {}
        for user_id in sorted({r[0] for r in rows}):
            gens[user_id] = yield from self._next_gen(user_id)
        yield Q("INSERT INTO embeddings (item_id, user_id, model, dimensions, state, vector, gen, updated_at)"
                " VALUES (%s, %s, %s, %s, 'ready', %s, %s, %s)",
                [(item_id, user_id, model, int(vector.size), to_blob(vector), gens[user_id], to_db(now))
                 for user_id, item_id, model, vector in rows], many=True)
