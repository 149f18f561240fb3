"""Runners for ``PostgresQueries``: a blocking one on ``ConnectionPool``, a native async one on
``AsyncConnectionPool``. One pooled connection and one transaction per backend call; a call that
loses a deadlock or a serialization conflict to concurrent writers is run again whole (bounded,
with jittered backoff: ``retry_delays``); driver errors leave as ``StorageError`` /
``BackendUnavailableError`` (only when the server cannot be reached) with the password masked."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Callable

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ...config import DatabaseURL
from ...errors import BackendUnavailableError, StorageError
from ...sansio import Op, advance, install
from .keyed import PostgresKeyedQueries
from .persons import PostgresPersonQueries
from .queries import PostgresQueries, Q
from .search import PostgresSearchQueries
from .sessions import PostgresSessionQueries
from .sql import adapt_vectors
from .transfer import PostgresTransferQueries

log = logging.getLogger(__name__)

POOL_MIN, POOL_MAX, CONNECT_TIMEOUT = 1, 16, 10.0
CONFLICT_ATTEMPTS = 6
# SQLSTATE classes of a server that cannot be reached or cannot take the work now
_UNAVAILABLE_CLASSES = ("08", "53", "57")


def retry_delays(attempts: int = CONFLICT_ATTEMPTS, base: float = 0.01, cap: float = 0.5) -> list[float]:
    """Seconds to wait before each further attempt of a call that lost a deadlock or a
    serialization conflict: exponential with full jitter, so colliding writers spread out."""
    return [random.uniform(0, min(cap, base * 2 ** n)) for n in range(attempts - 1)]


def _conflict(exc: BaseException) -> bool:
    """Deadlock detected (40P01) or serialization failure (40001): the transaction was rolled back
    and running it again is the documented remedy."""
    return getattr(exc, "sqlstate", None) in ("40P01", "40001")


def _where(url: DatabaseURL) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url.dsn or "")
    host = parts.hostname or "local socket"
    return f"{host}{':' + str(parts.port) if parts.port else ''}/{parts.path.lstrip('/') or '(default db)'}"


def _translate(url: DatabaseURL, exc: Exception) -> StorageError:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    password = None
    try:
        from urllib.parse import urlsplit

        password = urlsplit(url.dsn or "").password
    except ValueError:
        pass
    if password:
        message = message.replace(password, "***")
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(exc, PoolTimeout) or (isinstance(exc, psycopg.OperationalError) and (
            sqlstate is None or sqlstate.startswith(_UNAVAILABLE_CLASSES))):
        return BackendUnavailableError(f"PostgreSQL at {_where(url)} is unavailable: {message}")
    if _conflict(exc):
        message = f"{message} (still conflicting after {CONFLICT_ATTEMPTS} attempts)"
    return StorageError(f"PostgreSQL error: {type(exc).__name__}: {message}")


def utc_conninfo(url: DatabaseURL) -> str:
    """The connection string with the session time zone pinned to UTC and the date style to ISO
    (the ``options`` the URL already has kept, ours last so they win): timestamps then read back as
    stored whatever the server's, database's or role's defaults (in Europe/Oslo,
    9999-12-31T23:59:59Z would read as year 10000 and fail; psycopg cannot read timestamptz text in
    the ``SQL``, ``German`` or ``Postgres`` date styles at all)."""
    try:
        options = conninfo_to_dict(url.dsn or "").get("options") or ""
        return make_conninfo(url.dsn or "", options=f"{options} -c TimeZone=UTC -c DateStyle=ISO".strip())
    except psycopg.Error as exc:
        raise _translate(url, exc) from exc


async def _adapt_vectors_async(conn: psycopg.AsyncConnection) -> None:
    adapt_vectors(conn)


def _result(cur: Any) -> Any:
    return cur.fetchall() if cur.description is not None else cur.rowcount


class PostgresBackend(PostgresQueries):
    """Blocking PostgreSQL backend."""

    def __init__(self, url: DatabaseURL, min_size: int = POOL_MIN, max_size: int = POOL_MAX,
                 connect_timeout: float = CONNECT_TIMEOUT, **tuning: Any) -> None:
        self._init_state(url, **tuning)
        self._conninfo = utc_conninfo(url)
        self._check(url, connect_timeout)
        self.pool = ConnectionPool(self._conninfo, min_size=min_size, max_size=max_size, open=False,
                                   kwargs={"row_factory": dict_row}, configure=adapt_vectors, check=ConnectionPool.check_connection,
                                   timeout=connect_timeout, name="navi-memory")
        try:
            self.pool.open(wait=True, timeout=connect_timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            self.pool.close()
            raise _translate(url, exc) from exc
        self._detect()

    def _check(self, url: DatabaseURL, timeout: float) -> None:
        try:
            psycopg.connect(self._conninfo, connect_timeout=max(1, int(timeout))).close()
        except psycopg.Error as exc:
            raise _translate(url, exc) from exc

    def _detect(self) -> None:
        rows = self._run(lambda: iter_once(Q("SELECT extname FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')")))
        names = {r["extname"] for r in rows}
        self.has_vector, self.has_trgm = "vector" in names, "pg_trgm" in names

    def close(self) -> None:
        self.pool.close()

    def _own_tx(self, query: Q) -> Any:
        # A separate, unpooled connection: borrowing from the pool while every pooled connection
        # is held by a caller waiting for this statement would deadlock the pool.
        try:
            with psycopg.connect(self._conninfo, autocommit=True) as conn, conn.cursor() as cur:
                cur.execute("SET lock_timeout = '5s'")  # DDL beside open transactions: never hang
                cur.execute(query.text, query.params)
                return _result(cur)
        except psycopg.Error as exc:
            return exc

    def _run(self, make: Callable[[], Op]) -> Any:
        """Run the call ``make()`` builds in one transaction; again, whole, after a lost conflict."""
        for delay in [*retry_delays(), None]:
            try:
                return self._run_once(make())
            except (psycopg.Error, PoolTimeout) as exc:
                if delay is None or not _conflict(exc):
                    raise _translate(self.url, exc) from exc
                log.info("PostgreSQL call conflicted with another writer (%s); running it again", exc.sqlstate)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _run_once(self, gen: Op) -> Any:
        with self.pool.connection() as conn, conn.cursor() as cur:
            done, query = advance(gen, None)
            while not done:
                if query.own_tx:
                    value = self._own_tx(query)
                elif query.many:
                    cur.executemany(query.text, query.params)
                    value = cur.rowcount
                else:
                    cur.execute(query.text, query.params)
                    value = _result(cur)
                done, query = advance(gen, value)
            return query


class AsyncPostgresBackend(PostgresQueries):
    """Native asyncio PostgreSQL backend; create with ``await AsyncPostgresBackend.connect(url)``."""

    def __init__(self, url: DatabaseURL, pool: AsyncConnectionPool, **tuning: Any) -> None:
        self._init_state(url, **tuning)
        self._conninfo = utc_conninfo(url)
        self.pool = pool

    @classmethod
    async def connect(cls, url: DatabaseURL, min_size: int = POOL_MIN, max_size: int = POOL_MAX,
                      connect_timeout: float = CONNECT_TIMEOUT, **tuning: Any) -> "AsyncPostgresBackend":
        conninfo = utc_conninfo(url)
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=max(1, int(connect_timeout)))
            await conn.close()
        except psycopg.Error as exc:
            raise _translate(url, exc) from exc
        pool = AsyncConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False,
                                   kwargs={"row_factory": dict_row}, configure=_adapt_vectors_async, check=AsyncConnectionPool.check_connection,
                                   timeout=connect_timeout, name="navi-memory-async")
        try:
            await pool.open(wait=True, timeout=connect_timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            await pool.close()
            raise _translate(url, exc) from exc
        backend = cls(url, pool, **tuning)
        rows = await backend._run(lambda: iter_once(Q("SELECT extname FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')")))
        names = {r["extname"] for r in rows}
        backend.has_vector, backend.has_trgm = "vector" in names, "pg_trgm" in names
        return backend

    async def close(self) -> None:
        await self.pool.close()

    async def _own_tx(self, query: Q) -> Any:
        try:
            async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
                async with conn.cursor() as cur:
                    await cur.execute("SET lock_timeout = '5s'")
                    await cur.execute(query.text, query.params)
                    return await cur.fetchall() if cur.description is not None else cur.rowcount
        except psycopg.Error as exc:
            return exc

    async def _run(self, make: Callable[[], Op]) -> Any:
        """As ``PostgresBackend._run``, awaited."""
        for delay in [*retry_delays(), None]:
            try:
                return await self._run_once(make())
            except (psycopg.Error, PoolTimeout) as exc:
                if delay is None or not _conflict(exc):
                    raise _translate(self.url, exc) from exc
                log.info("PostgreSQL call conflicted with another writer (%s); running it again", exc.sqlstate)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _run_once(self, gen: Op) -> Any:
        async with self.pool.connection() as conn, conn.cursor() as cur:
            done, query = advance(gen, None)
            while not done:
                if query.own_tx:
                    value = await self._own_tx(query)
                elif query.many:
                    await cur.executemany(query.text, query.params)
                    value = cur.rowcount
                else:
                    await cur.execute(query.text, query.params)
                    value = await cur.fetchall() if cur.description is not None else cur.rowcount
                done, query = advance(gen, value)
            return query


def iter_once(query: Q) -> Op:
    """A one-statement operation."""
    return (yield query)


for _queries in (PostgresSearchQueries, PostgresSessionQueries, PostgresPersonQueries, PostgresTransferQueries,
                 PostgresKeyedQueries, PostgresQueries):
    install(PostgresBackend, _queries, sync=True)
    install(AsyncPostgresBackend, _queries, sync=False)
