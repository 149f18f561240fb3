"""Short reads of one ``at_once`` sent together on one connection (psycopg's pipeline mode).

Each round sends the next statement of every call not yet finished in one batch and reads their
results together: N calls take one pooled connection, no worker thread, and as many round trips
as the longest of them has statements. The calls are ``reads`` operations (autocommit, no common
snapshot needed). The long statement of a search (the HNSW scan of ``semantic_candidates``) is
left to run on a connection of its own, beside them. When anything goes wrong (a driver error, a
connection the server closed, an error an operation raises), the calls run again one by one
through the ordinary runner, which reports each call's own error: they only read.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Sequence

import psycopg
from psycopg_pool import PoolTimeout

from ...calls import BackendCall
from ...errors import NaviMemoryError
from ...sansio import Op, advance
from .queries import PostgresQueries
from .sql import Q

log = logging.getLogger(__name__)

# Calls that keep a connection of their own: their statement is long, the others overlap it.
ALONE = frozenset({"semantic_candidates", "semantic_hits"})
Outcome = tuple[Any, NaviMemoryError | None]


class _Unshared(Exception):
    """A statement pipelining would change (executemany, its own transaction, a SET LOCAL)."""


def can_share(method: str) -> bool:
    """Whether calls of ``method`` may be sent together with other such calls."""
    fn = getattr(PostgresQueries, method, None)
    return bool(getattr(fn, "_navi_reads", False)) and method not in ALONE


def _start(backend: Any, calls: Sequence[BackendCall]) -> tuple[list[Op], list[Any], dict[int, Q]]:
    """Each call's generator, the values of those already finished, the first statement of the others."""
    gens = [functools.partial(getattr(PostgresQueries, c.method), backend, **c.kwargs)() for c in calls]
    values: list[Any] = [None] * len(gens)
    pending: dict[int, Q] = {}
    for i, gen in enumerate(gens):
        _step(gens, i, None, values, pending)
    return gens, values, pending


def _step(gens: list[Op], i: int, value: Any, values: list[Any], pending: dict[int, Q]) -> None:
    done, out = advance(gens[i], value)
    if done:
        values[i] = out
    elif out.many or out.own_tx or out.local:
        raise _Unshared(out)
    else:
        pending[i] = out


def _result(cur: Any) -> Any:
    return cur.fetchall() if cur.description is not None else cur.rowcount


_FALLBACK = (psycopg.Error, PoolTimeout, NaviMemoryError, _Unshared)


class SharedReads:
    """``run_shared`` for ``PostgresBackend``."""

    pool: Any

    @staticmethod
    def can_share(method: str) -> bool:
        return can_share(method)

    def run_shared(self, calls: Sequence[BackendCall]) -> list[Outcome]:
        """Each call's (value, error), the calls sent together on one connection."""
        try:
            return [(value, None) for value in self._pipelined(calls)]
        except _FALLBACK as exc:
            log.debug("pipelined reads failed (%s); running them one by one", exc)
        out: list[Outcome] = []
        for call in calls:
            try:
                out.append((getattr(self, call.method)(**call.kwargs), None))
            except NaviMemoryError as exc:
                out.append((None, exc))
        return out

    def _pipelined(self, calls: Sequence[BackendCall]) -> list[Any]:
        gens, values, pending = _start(self, calls)
        with self.pool.connection() as conn:
            conn.autocommit = True
            while pending:
                cursors = {}
                with conn.pipeline():
                    for i, query in pending.items():
                        cursors[i] = cur = conn.cursor()
                        cur.execute(query.text, query.params)
                pending = {}
                for i, cur in cursors.items():
                    with cur:
                        _step(gens, i, _result(cur), values, pending)
        return values


class AsyncSharedReads:
    """``run_shared`` for ``AsyncPostgresBackend``."""

    pool: Any

    @staticmethod
    def can_share(method: str) -> bool:
        return can_share(method)

    async def run_shared(self, calls: Sequence[BackendCall]) -> list[Outcome]:
        """As ``SharedReads.run_shared``, awaited."""
        try:
            return [(value, None) for value in await self._pipelined(calls)]
        except _FALLBACK as exc:
            log.debug("pipelined reads failed (%s); running them one by one", exc)
        out: list[Outcome] = []
        for call in calls:
            try:
                out.append((await getattr(self, call.method)(**call.kwargs), None))
            except NaviMemoryError as exc:
                out.append((None, exc))
        return out

    async def _pipelined(self, calls: Sequence[BackendCall]) -> list[Any]:
        gens, values, pending = _start(self, calls)
        async with self.pool.connection() as conn:
            if not conn.autocommit:
                await conn.set_autocommit(True)
            while pending:
                cursors = {}
                async with conn.pipeline():
                    for i, query in pending.items():
                        cursors[i] = cur = conn.cursor()
                        await cur.execute(query.text, query.params)
                pending = {}
                for i, cur in cursors.items():
                    async with cur:
                        rows = await cur.fetchall() if cur.description is not None else cur.rowcount
                        _step(gens, i, rows, values, pending)
        return values
