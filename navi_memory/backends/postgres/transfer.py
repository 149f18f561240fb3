"""PostgreSQL's own steps of export/import (``shared/transfer.py`` holds the rest): vectors in
pgvector's column and its index, the ids of restored items from the items sequence, and a plan's
calls run as generators inside the plan's (one transaction on one connection)."""

from __future__ import annotations

import inspect
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from ...calls import BackendCall
from ...sansio import Op, operation
from ..shared.dialect import Q


def _parse_vector(text: str | None) -> np.ndarray | None:
    """pgvector's text form ``[1,2]`` or a ``real[]``'s ``{1,2}``."""
    if text is None:
        return None
    body = text.strip()[1:-1]
    return np.array([float(x) for x in body.split(",")] if body else [], dtype=np.float32)


def _query_generator(cls: type, name: str) -> Callable[..., Op[Any]]:
    """The generator method ``name`` of the query classes (the runner's public methods of that
    name each run in their own transaction)."""
    for klass in cls.__mro__:
        fn = klass.__dict__.get(name)
        if fn is not None and inspect.isgeneratorfunction(fn) and getattr(fn, "_navi_operation", False):
            return fn  # type: ignore[no-any-return]
    raise TypeError(f"a transaction plan may only call backend methods, not {name!r}")


class PostgresTransferQueries:
    """What export/import does PostgreSQL's way (mixed into ``PostgresQueries``)."""

    _ensure_vector_index: Callable[[str, int], Op[None]]  # (model, dimensions): the index, created if missing
    _exported_vector = "e.embedding::text"  # a vector, or without pgvector a real[]
    _vector_of = staticmethod(_parse_vector)

    @operation
    def ensure_vector_index(self, model: str, dimensions: int) -> Op[None]:
        """The model's vector index, created if missing (after an import's commit: created inside
        its transaction, the index would wait on the import's own locks)."""
        yield from self._ensure_vector_index(model, dimensions)

    def _in_plan(self, call: BackendCall) -> Op[Any]:
        """The call's generator, run inside the plan's."""
        return (yield from _query_generator(type(self), call.method)(self, **call.kwargs))

    def _restore_vectors(self, rows: Sequence[tuple[str, int, str, np.ndarray]], now: datetime) -> Op[None]:
        yield Q("INSERT INTO embeddings (user_id, item_id, model, dimensions, state, embedding, updated_at)"
                " VALUES (%s, %s, %s, %s, 'ready', %s::vector, %s)",
                [(user_id, item_id, model, int(vector.size), vector, now) for user_id, item_id, model, vector in rows],
                many=True)
