"""Runners for ``PostgresQueries``: a blocking one on ``ConnectionPool``, a native async one on
``AsyncConnectionPool``. One pooled connection and one transaction per backend call (operations
marked ``reads`` run in autocommit: no BEGIN/COMMIT round trips); a call that loses a deadlock or a
serialization conflict to concurrent writers is run again whole (bounded, with jittered backoff:
``retry_delays``). Pooled connections are not checked before each call (a round trip per call);
a call whose connection turns out closed by the server before its first statement ran is run once
more after ``pool.check()``. A statement to run on a connection of its own (``Q.own_tx``: DDL)
never waits while the call's transaction is open (``_Apart``). How connections are made (the URL,
``prepare_threshold``, UTC): ``connect``. Driver errors leave as ``StorageError`` /
``BackendUnavailableError`` (only when the server cannot be reached) with the password masked.

The async runner's methods are the source: ``scripts/gen_sync.py`` writes the blocking runner's
from them (between the ``# gen_sync`` markers)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ...config import DatabaseURL
from ...errors import BackendUnavailableError, NaviMemoryError, StorageError, ValidationError
from ...sansio import Op, advance, install
from .connect import FROM_URL, pin_session, pin_session_async, pool_settings
from .persons import PostgresPromotionQueries
from .pipelined import AsyncSharedReads, SharedReads
from ..shared.dialect import Q
from .queries import PostgresQueries
from .search import PostgresSearchQueries
from . import replicas
from . import sql as q
from .sql import adapt_vectors
from .transfer import PostgresTransferQueries
from ..shared.facts import FactQueries
from ..shared.embeddings import EmbeddingQueries
from ..shared.items import ItemQueries
from ..shared.keyed import KeyedQueries
from ..shared.search import SearchReadQueries
from ..shared.persons import PersonQueries
from ..shared.sessions import SessionQueries
from ..shared.transfer import TransferQueries

log = logging.getLogger(__name__)

POOL_MIN, POOL_MAX, CONNECT_TIMEOUT = 1, 16, 10.0
CONFLICT_ATTEMPTS = 6
# SQLSTATE classes of a server that cannot be reached or cannot take the work now
_UNAVAILABLE_CLASSES = ("08", "53", "57")


class _Stale(Exception):
    """The server had closed the pooled connection (a restart, an idle timeout) before the call's
    first statement: nothing of the call ran, so running it again elsewhere repeats no commit."""

    def __init__(self, error: psycopg.OperationalError) -> None:
        super().__init__(str(error))
        self.error = error


class _Apart(Exception):
    """A statement to run on a connection of its own (``Q.own_tx``: DDL) came while the call's
    transaction was open. Waiting for it there would hold a server connection the whole time: through
    a transaction-mode pooler (PgBouncer) whose server connections were all held by such calls, the
    statement's connection would never get one. The call is rolled back, the statement run, and the
    call run again with its outcome."""

    def __init__(self, query: Q) -> None:
        super().__init__("a statement to run apart")
        self.query = query


def retry_delays(attempts: int = CONFLICT_ATTEMPTS, base: float = 0.01, cap: float = 0.5) -> list[float]:
    """Seconds to wait before each further attempt of a call that lost a deadlock or a
    serialization conflict: exponential with full jitter, so colliding writers spread out."""
    return [random.uniform(0, min(cap, base * 2 ** n)) for n in range(attempts - 1)]


def _conflict(exc: BaseException) -> bool:
    """Deadlock detected (40P01), serialization failure (40001), a unique violation (23505) or a
    foreign key violation (23503): the transaction was rolled back and running it again is the
    remedy. A unique violation is how two writers racing to create the same row (one fact key,
    one session) end: run again, the loser reads the winner's row and updates it. A foreign key
    violation is how a write ends whose user a concurrent ``forget`` deleted after the write saw
    it: run again, the write creates the user anew, as if it had come after."""
    return getattr(exc, "sqlstate", None) in ("40P01", "40001", "23505", "23503")


def _where(url: DatabaseURL) -> str:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.dsn or "")
        host, port = parts.hostname or "local socket", parts.port
    except ValueError:  # a port out of range, a bracket left open: the driver's error says the rest
        return "the server of the URL given"
    return f"{host}{':' + str(port) if port else ''}/{parts.path.lstrip('/') or '(default db)'}"


def _translate(url: DatabaseURL, exc: Exception) -> NaviMemoryError:
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
    if sqlstate == "54000" and "tsvector" in message:  # SQLite's index takes the same text: say what to do
        return ValidationError("the text is too long for PostgreSQL's full-text index (over 1 MB of words"
                               " and positions): store it in smaller parts")
    return StorageError(f"PostgreSQL error: {type(exc).__name__}: {message}")


def _wait(pool_wait: float | None, connect_timeout: float) -> float:
    """How long a call waits for a pooled connection: ``pool_wait``, else ``connect_timeout`` (the
    pool cannot tell a burst of calls on busy connections from a server that is down: while it is
    down every call waits this long before it fails, so the default stays short)."""
    return connect_timeout if pool_wait is None else pool_wait


def _configure(conn: psycopg.Connection) -> None:
    adapt_vectors(conn)
    pin_session(conn)


async def _configure_async(conn: psycopg.AsyncConnection) -> None:
    adapt_vectors(conn)
    await pin_session_async(conn)


@contextmanager
def _stale_if_dead(conn: Any, ran: bool) -> Iterator[None]:
    """A driver error on a connection that turns out closed before the call ran anything: ``_Stale``."""
    try:
        yield
    except psycopg.OperationalError as exc:
        if not ran and conn.broken:
            raise _Stale(exc) from exc
        raise


def _local_statements(conn: Any, query: Q) -> tuple[list[Any], list[str]]:
    """What goes with a ``Q.local`` statement: BEGIN and SET LOCAL before it, COMMIT after (in a
    call that has a transaction already, SET LOCAL alone: the call's COMMIT ends it)."""
    alone = conn.autocommit
    settings = [q.set_local(name, value) for name, value in query.local]
    return [*(["BEGIN"] if alone else []), *settings], ["COMMIT"] if alone else []


def _undo_failed(conn: Any) -> bool:
    """Whether a failed pipelined transaction is left open (to ROLLBACK) on a live connection."""
    return not conn.broken and conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


class PostgresBackend(SharedReads, PostgresQueries):
    """Blocking PostgreSQL backend."""

    def __init__(self, url: DatabaseURL, min_size: int = POOL_MIN, max_size: int = POOL_MAX,
                 connect_timeout: float = CONNECT_TIMEOUT, prepare_threshold: Any = FROM_URL,
                 pool_wait: float | None = None, **tuning: Any) -> None:
        self.replicas = replicas.take_options(tuning)
        self._init_state(url, **tuning)
        self._conninfo, kwargs = pool_settings(url, prepare_threshold)
        self._check(url, connect_timeout)
        self.pool = ConnectionPool(self._conninfo, min_size=min_size, max_size=max_size, open=False,
                                   kwargs=kwargs, configure=_configure, timeout=_wait(pool_wait, connect_timeout),
                                   name="navi-memory")
        try:
            self.pool.open(wait=True, timeout=connect_timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            self.pool.close()
            raise _translate(url, exc) from exc
        self._detect()
        replicas.open_pools(self.replicas, lambda u: pool_settings(u, prepare_threshold), max_size, _configure)

    def _check(self, url: DatabaseURL, timeout: float) -> None:
        try:
            psycopg.connect(self._conninfo, connect_timeout=max(1, int(timeout))).close()
        except psycopg.Error as exc:
            raise _translate(url, exc) from exc

    def _detect(self) -> None:
        self._run(self._read_features)

    # gen_sync: PostgresBackend, generated by scripts/gen_sync.py from its async source: do not edit
    def close(self) -> None:
        for replica in self.replicas.members:
            if replica.pool is not None:
                replica.pool.close()
        self.pool.close()

    def _own_tx(self, query: Q) -> Any:
        # A separate, unpooled connection: borrowing from the pool while every pooled connection
        # is held by a caller waiting for this statement would deadlock the pool.
        try:
            with psycopg.Connection.connect(self._conninfo, autocommit=True) as conn:
                with conn.transaction(), conn.cursor() as cur:
                    # DDL beside open transactions: never hang. LOCAL: a session setting would stay on
                    # a pooler's server connection, for its next clients.
                    cur.execute("SET LOCAL lock_timeout = '5s'")
                    cur.execute(query.text, query.params)
                    return self._result(cur)
        except psycopg.Error as exc:
            return exc

    def _run(self, make: Callable[[], Op[Any]], reads: bool = False) -> Any:
        """Run the call ``make()`` builds in one transaction (``reads``: in autocommit); again,
        whole, after a lost conflict or on a connection the server had closed. ``reads`` go to a
        replica that has replayed this backend's writes, if any (replicas.py)."""
        if reads and self.replicas.members:
            value = self._on_replica(lambda conn: self._drive(conn, make(), True))
            if value is not replicas.ON_PRIMARY:
                return value
        for delay in [*retry_delays(), None]:
            try:
                return self._run_fresh(make, reads)
            except (psycopg.Error, PoolTimeout) as exc:
                if delay is None or not _conflict(exc):
                    raise _translate(self.url, exc) from exc
                log.info("PostgreSQL call conflicted with another writer (%s); running it again", exc.sqlstate)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _run_fresh(self, make: Callable[[], Op[Any]], reads: bool) -> Any:
        """``_run_apart``; again, once, if the server had closed the pooled connection."""
        apart: list[tuple[Q, Any]] = []  # the call's statements run apart, with their outcomes
        try:
            return self._run_apart(make, reads, apart)
        except _Stale as stale:
            log.info("PostgreSQL had closed a pooled connection (%s); running the call again", stale)
        self.pool.check()  # after a restart every idle connection is dead: replace them all
        try:
            return self._run_apart(make, reads, apart)
        except _Stale as stale:
            raise stale.error from None

    def _run_apart(self, make: Callable[[], Op[Any]], reads: bool, apart: list[tuple[Q, Any]]) -> Any:
        """``_run_once``; again after each statement it gave its transaction up for (``_Apart``):
        each such statement runs once, a call has one or two (an extension, an index)."""
        while True:
            try:
                return self._run_once(make(), reads, apart)
            except _Apart as request:
                apart.append((request.query, self._own_tx(request.query)))

    def _ran_apart(self, conn: Any, query: Q, apart: list[tuple[Q, Any]]) -> Any:
        """The outcome of a ``Q.own_tx`` statement: run before, run now (no transaction open yet),
        or ``_Apart`` (the call's transaction is open)."""
        for done, value in apart:
            if done == query:
                return value
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise _Apart(query)
        value = self._own_tx(query)
        apart.append((query, value))
        return value

    def _run_once(self, gen: Op[Any], reads: bool = False, apart: list[tuple[Q, Any]] | None = None) -> Any:
        with self.pool.connection() as conn:
            value = self._drive(conn, gen, reads, apart)
            if self.replicas.members and conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
                with conn.cursor() as cur:
                    cur.execute(replicas.COMMIT_AND_POSITION)
                    wrote = (cur.fetchone() or {}).get("wrote")
                    cur.nextset()  # the COMMIT's
                    cur.nextset()  # the position's
                    if wrote:  # a call that only read must not wait for others' writes
                        self.replicas.wrote(replicas.position(cur.fetchall()))
            return value

    def _on_replica(self, run: Callable[[Any], Any]) -> Any:
        """``run(connection)`` on a replica that has replayed this backend's writes; ``ON_PRIMARY``
        when none can (none up, none far enough, a driver error there)."""
        replica = self.replicas.pick()
        if replica is None:
            return replicas.ON_PRIMARY
        try:
            if replica.suspect:
                replica.suspect = False
                replica.pool.check()  # after a restart every idle connection is dead
            with replica.pool.connection() as conn:
                if not conn.autocommit:
                    conn.set_autocommit(True)  # only reads here, each statement on its own
                if replica.replayed < self.replicas.written:
                    with conn.cursor() as cur:
                        cur.execute(replicas.REPLAYED)
                        replica.replayed = max(replica.replayed, replicas.position(cur.fetchall()))
                    if replica.replayed < self.replicas.written:
                        return replicas.ON_PRIMARY
                return run(conn)
        except (psycopg.Error, PoolTimeout, _Stale) as exc:
            self.replicas.failed(replica, exc.error if isinstance(exc, _Stale) else exc)
            return replicas.ON_PRIMARY

    def _drive(self, conn: Any, gen: Op[Any], reads: bool, apart: list[tuple[Q, Any]] | None = None) -> Any:
        """Run the operation ``gen`` on ``conn`` (``reads``: in autocommit; ``apart``: as ``_ran_apart``)."""
        with conn.cursor() as cur:
            if conn.autocommit != reads:
                conn.set_autocommit(reads)  # client side only: no round trip
            ran = False
            done, query = advance(gen, None)
            while not done:
                with _stale_if_dead(conn, ran):
                    if query.own_tx:
                        value = self._ran_apart(conn, query, [] if apart is None else apart)
                    elif query.many:
                        value = self._many(cur, query)
                    elif query.local:
                        value = self._with_local(conn, cur, query)
                    else:  # a script is several statements: never prepared (a prepared statement holds one)
                        cur.execute(query.text, query.params, prepare=False if query.script else None)
                        value = self._result(cur)
                ran = True
                done, query = advance(gen, value)
        return query

    def _with_local(self, conn: Any, cur: Any, query: Q) -> Any:
        """The statement with its SET LOCAL (and BEGIN/COMMIT), pipelined: one round trip."""
        before, after = _local_statements(conn, query)
        try:
            with conn.pipeline():
                for statement in before:
                    conn.execute(statement)
                cur.execute(query.text, query.params)
                for statement in after:
                    conn.execute(statement)
        except psycopg.Error:
            if _undo_failed(conn):
                conn.rollback()
            raise
        return self._result(cur)

    @staticmethod
    def _result(cur: Any) -> Any:
        return cur.fetchall() if cur.description is not None else cur.rowcount

    def _many(self, cur: Any, query: Q) -> int:
        """A statement for each of the query's rows: INSERTs as multi-row INSERTs, others executemany."""
        batches = q.rows_at_once(query.text, query.params or [],
                                 q.ROWS_PER_DISTRIBUTED_INSERT if self.distributed else q.ROWS_PER_INSERT)
        if batches is None:
            cur.executemany(query.text, query.params)
            return int(cur.rowcount)
        count = 0
        for text, params in batches:
            cur.execute(text, params)
            count += max(cur.rowcount, 0)
        return count
    # gen_sync: end


class AsyncPostgresBackend(AsyncSharedReads, PostgresQueries):
    """Native asyncio PostgreSQL backend; create with ``await AsyncPostgresBackend.connect(url)``."""

    def __init__(self, url: DatabaseURL, pool: AsyncConnectionPool, conninfo: str, **tuning: Any) -> None:
        """``conninfo``: the pool's (for connections of their own, beside it)."""
        self.replicas = replicas.take_options(tuning)
        self._init_state(url, **tuning)
        self._conninfo = conninfo
        self.pool = pool

    @classmethod
    async def connect(cls, url: DatabaseURL, min_size: int = POOL_MIN, max_size: int = POOL_MAX,
                      connect_timeout: float = CONNECT_TIMEOUT, prepare_threshold: Any = FROM_URL,
                      pool_wait: float | None = None, **tuning: Any) -> "AsyncPostgresBackend":
        conninfo, kwargs = pool_settings(url, prepare_threshold)
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=max(1, int(connect_timeout)))
            await conn.close()
        except psycopg.Error as exc:
            raise _translate(url, exc) from exc
        pool = AsyncConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False, kwargs=kwargs,
                                   configure=_configure_async, timeout=_wait(pool_wait, connect_timeout),
                                   name="navi-memory-async")
        try:
            await pool.open(wait=True, timeout=connect_timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            await pool.close()
            raise _translate(url, exc) from exc
        backend = cls(url, pool, conninfo, **tuning)
        await backend._run(backend._read_features)
        await replicas.open_pools_async(backend.replicas, lambda u: pool_settings(u, prepare_threshold), max_size,
                                        _configure_async)
        return backend

    # gen_sync: source of PostgresBackend
    async def close(self) -> None:
        for replica in self.replicas.members:
            if replica.pool is not None:
                await replica.pool.close()
        await self.pool.close()

    async def _own_tx(self, query: Q) -> Any:
        # A separate, unpooled connection: borrowing from the pool while every pooled connection
        # is held by a caller waiting for this statement would deadlock the pool.
        try:
            async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
                async with conn.transaction(), conn.cursor() as cur:
                    # DDL beside open transactions: never hang. LOCAL: a session setting would stay on
                    # a pooler's server connection, for its next clients.
                    await cur.execute("SET LOCAL lock_timeout = '5s'")
                    await cur.execute(query.text, query.params)
                    return await self._result(cur)
        except psycopg.Error as exc:
            return exc

    async def _run(self, make: Callable[[], Op[Any]], reads: bool = False) -> Any:
        """Run the call ``make()`` builds in one transaction (``reads``: in autocommit); again,
        whole, after a lost conflict or on a connection the server had closed. ``reads`` go to a
        replica that has replayed this backend's writes, if any (replicas.py)."""
        if reads and self.replicas.members:
            value = await self._on_replica(lambda conn: self._drive(conn, make(), True))
            if value is not replicas.ON_PRIMARY:
                return value
        for delay in [*retry_delays(), None]:
            try:
                return await self._run_fresh(make, reads)
            except (psycopg.Error, PoolTimeout) as exc:
                if delay is None or not _conflict(exc):
                    raise _translate(self.url, exc) from exc
                log.info("PostgreSQL call conflicted with another writer (%s); running it again", exc.sqlstate)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _run_fresh(self, make: Callable[[], Op[Any]], reads: bool) -> Any:
        """``_run_apart``; again, once, if the server had closed the pooled connection."""
        apart: list[tuple[Q, Any]] = []  # the call's statements run apart, with their outcomes
        try:
            return await self._run_apart(make, reads, apart)
        except _Stale as stale:
            log.info("PostgreSQL had closed a pooled connection (%s); running the call again", stale)
        await self.pool.check()  # after a restart every idle connection is dead: replace them all
        try:
            return await self._run_apart(make, reads, apart)
        except _Stale as stale:
            raise stale.error from None

    async def _run_apart(self, make: Callable[[], Op[Any]], reads: bool, apart: list[tuple[Q, Any]]) -> Any:
        """``_run_once``; again after each statement it gave its transaction up for (``_Apart``):
        each such statement runs once, a call has one or two (an extension, an index)."""
        while True:
            try:
                return await self._run_once(make(), reads, apart)
            except _Apart as request:
                apart.append((request.query, await self._own_tx(request.query)))

    async def _ran_apart(self, conn: Any, query: Q, apart: list[tuple[Q, Any]]) -> Any:
        """The outcome of a ``Q.own_tx`` statement: run before, run now (no transaction open yet),
        or ``_Apart`` (the call's transaction is open)."""
        for done, value in apart:
            if done == query:
                return value
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise _Apart(query)
        value = await self._own_tx(query)
        apart.append((query, value))
        return value

    async def _run_once(self, gen: Op[Any], reads: bool = False, apart: list[tuple[Q, Any]] | None = None) -> Any:
        async with self.pool.connection() as conn:
            value = await self._drive(conn, gen, reads, apart)
            if self.replicas.members and conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
                async with conn.cursor() as cur:
                    await cur.execute(replicas.COMMIT_AND_POSITION)
                    wrote = (await cur.fetchone() or {}).get("wrote")
                    cur.nextset()  # the COMMIT's
                    cur.nextset()  # the position's
                    if wrote:  # a call that only read must not wait for others' writes
                        self.replicas.wrote(replicas.position(await cur.fetchall()))
            return value

    async def _on_replica(self, run: Callable[[Any], Any]) -> Any:
        """``run(connection)`` on a replica that has replayed this backend's writes; ``ON_PRIMARY``
        when none can (none up, none far enough, a driver error there)."""
        replica = self.replicas.pick()
        if replica is None:
            return replicas.ON_PRIMARY
        try:
            if replica.suspect:
                replica.suspect = False
                await replica.pool.check()  # after a restart every idle connection is dead
            async with replica.pool.connection() as conn:
                if not conn.autocommit:
                    await conn.set_autocommit(True)  # only reads here, each statement on its own
                if replica.replayed < self.replicas.written:
                    async with conn.cursor() as cur:
                        await cur.execute(replicas.REPLAYED)
                        replica.replayed = max(replica.replayed, replicas.position(await cur.fetchall()))
                    if replica.replayed < self.replicas.written:
                        return replicas.ON_PRIMARY
                return await run(conn)
        except (psycopg.Error, PoolTimeout, _Stale) as exc:
            self.replicas.failed(replica, exc.error if isinstance(exc, _Stale) else exc)
            return replicas.ON_PRIMARY

    async def _drive(self, conn: Any, gen: Op[Any], reads: bool, apart: list[tuple[Q, Any]] | None = None) -> Any:
        """Run the operation ``gen`` on ``conn`` (``reads``: in autocommit; ``apart``: as ``_ran_apart``)."""
        async with conn.cursor() as cur:
            if conn.autocommit != reads:
                await conn.set_autocommit(reads)  # client side only: no round trip
            ran = False
            done, query = advance(gen, None)
            while not done:
                with _stale_if_dead(conn, ran):
                    if query.own_tx:
                        value = await self._ran_apart(conn, query, [] if apart is None else apart)
                    elif query.many:
                        value = await self._many(cur, query)
                    elif query.local:
                        value = await self._with_local(conn, cur, query)
                    else:  # a script is several statements: never prepared (a prepared statement holds one)
                        await cur.execute(query.text, query.params, prepare=False if query.script else None)
                        value = await self._result(cur)
                ran = True
                done, query = advance(gen, value)
        return query

    async def _with_local(self, conn: Any, cur: Any, query: Q) -> Any:
        """The statement with its SET LOCAL (and BEGIN/COMMIT), pipelined: one round trip."""
        before, after = _local_statements(conn, query)
        try:
            async with conn.pipeline():
                for statement in before:
                    await conn.execute(statement)
                await cur.execute(query.text, query.params)
                for statement in after:
                    await conn.execute(statement)
        except psycopg.Error:
            if _undo_failed(conn):
                await conn.rollback()
            raise
        return await self._result(cur)

    @staticmethod
    async def _result(cur: Any) -> Any:
        return await cur.fetchall() if cur.description is not None else cur.rowcount

    async def _many(self, cur: Any, query: Q) -> int:
        """A statement for each of the query's rows: INSERTs as multi-row INSERTs, others executemany."""
        batches = q.rows_at_once(query.text, query.params or [],
                                 q.ROWS_PER_DISTRIBUTED_INSERT if self.distributed else q.ROWS_PER_INSERT)
        if batches is None:
            await cur.executemany(query.text, query.params)
            return int(cur.rowcount)
        count = 0
        for text, params in batches:
            await cur.execute(text, params)
            count += max(cur.rowcount, 0)
        return count
    # gen_sync: end


def iter_once(query: Q) -> Op[Any]:
    """A one-statement operation."""
    return (yield query)


for _queries in (PostgresSearchQueries, PostgresPromotionQueries, PostgresTransferQueries,
                 ItemQueries, KeyedQueries, FactQueries, SessionQueries, PersonQueries, EmbeddingQueries,
                 SearchReadQueries, TransferQueries, PostgresQueries):
    install(PostgresBackend, _queries, sync=True)
    install(AsyncPostgresBackend, _queries, sync=False)
