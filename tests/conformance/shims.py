"""LangGraph's store classes as its own test suites build them, made of ``NaviStore``.

The conformance harness (``harness.py``) copies this file beside LangGraph's unchanged test files
and its conftest puts these classes where the tests import ``SqliteStore``, ``PostgresStore``,
``InMemoryStore`` and their async twins from. Each builds what a user moving to navi-memory
builds: a ``MemoryStore`` (or ``AsyncMemoryStore``) whose embedder is the index's ``embed``, and
``NaviStore(store, user_id=..., index={"fields": ...}, ttl=...)`` over it. Only the construction
differs (connection strings, ``setup()``, the index keys LangGraph's stores read themselves).

``NAVI_CONFORMANCE_BACKEND`` (``sqlite`` or ``postgres``) says where every store lives, whatever
the test asked for: on SQLite a file of its own, on PostgreSQL a database of its own on
``NAVI_CONFORMANCE_POSTGRES_URL``. The same connection string reaches the same database again.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import uuid
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.integrations.langgraph import NaviStore

BACKEND = os.environ.get("NAVI_CONFORMANCE_BACKEND", "sqlite")
SERVER_URL = os.environ.get("NAVI_CONFORMANCE_POSTGRES_URL", "")
USER = "conformance"  # the user a one-user application binds
_PLACES: dict[str, str] = {}


def _on_server(database: str) -> str:
    parts = urlsplit(SERVER_URL)
    return urlunsplit(parts._replace(path="/" + database))


def _new_database() -> str:
    import psycopg

    name = "navi_" + uuid.uuid4().hex[:12]
    with psycopg.connect(SERVER_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return _on_server(name)


def place(conn_string: str) -> str:
    """The navi-memory URL for a LangGraph connection string (``:memory:``: a new database each time)."""
    if conn_string in _PLACES:
        return _PLACES[conn_string]
    if BACKEND == "postgres":
        if conn_string.startswith(("postgres://", "postgresql://")):
            url = "postgresql://" + conn_string.split("://", 1)[1]  # the test made this database
        else:
            url = _new_database()
    else:
        url = "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="navi-conformance-"), "store.db")
    if conn_string != ":memory:":
        _PLACES[conn_string] = url
    return url


def _parts(index: dict[str, Any] | None) -> tuple[Any, dict[str, Any] | None]:
    """(the embedder, NaviStore's index) from a LangGraph index config."""
    if index is None:
        return False, None
    fields = index.get("fields") or index.get("text_fields")
    own: dict[str, Any] = {"fields": list(fields)} if fields else {}
    if "distance_type" in index:
        own["distance_type"] = index["distance_type"]
    return index.get("embed") or False, own


class _Setup:
    MIGRATIONS: list[Any] = []  # the tests edit their store's migrations list; NaviStore migrates itself

    url: str

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        """A cursor on the store's database (the fixtures drop LangGraph's migration table with it)."""
        if self.url.startswith("sqlite"):
            conn = sqlite3.connect(self.url[len("sqlite:///"):], isolation_level=None)
            try:
                yield conn.cursor()
            finally:
                conn.close()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn, conn.cursor() as cur:
            yield cur


class _Sync(_Setup, NaviStore):
    def __init__(self, memory: MemoryStore, url: str, index: dict[str, Any] | None = None,
                 ttl: Any = None) -> None:
        super().__init__(memory, user_id=USER, index=index, ttl=ttl)
        self.memory, self.url = memory, url

    def setup(self) -> None:
        self.memory.migrate()

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, index: dict[str, Any] | None = None, ttl: Any = None,
                         **_connection: Any) -> Iterator[Any]:
        url = place(conn_string)
        embed, fields = _parts(index)
        memory = MemoryStore.open(url, embeddings=embed)
        try:
            yield cls(memory, url, fields, ttl)
        finally:
            memory.close()


class _AsyncCursor:
    """A SQLite cursor with the async methods the fixtures await."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.cursor = cursor

    async def execute(self, *args: Any) -> Any:
        return self.cursor.execute(*args)

    async def fetchall(self) -> list[Any]:
        return self.cursor.fetchall()

    async def fetchone(self) -> Any:
        return self.cursor.fetchone()


class _Async(_Setup, NaviStore):
    @asynccontextmanager  # type: ignore[override]
    async def _cursor(self) -> AsyncIterator[Any]:
        if self.url.startswith("sqlite"):
            conn = sqlite3.connect(self.url[len("sqlite:///"):], isolation_level=None)
            try:
                yield _AsyncCursor(conn.cursor())
            finally:
                conn.close()
            return
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn, conn.cursor() as cur:
            yield cur

    def __init__(self, memory: AsyncMemoryStore, url: str, index: dict[str, Any] | None = None,
                 ttl: Any = None) -> None:
        super().__init__(memory, user_id=USER, index=index, ttl=ttl)
        self.memory, self.url = memory, url

    async def setup(self) -> None:
        await self.memory.migrate()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, *, index: dict[str, Any] | None = None, ttl: Any = None,
                               **_connection: Any) -> AsyncIterator[Any]:
        url = place(conn_string)
        embed, fields = _parts(index)
        memory = await AsyncMemoryStore.open(url, embeddings=embed)
        try:
            yield cls(memory, url, fields, ttl)
        finally:
            await memory.close()


class SqliteStore(_Sync):
    pass


class PostgresStore(_Sync):
    pass


class AsyncSqliteStore(_Async):
    pass


class AsyncPostgresStore(_Async):
    pass


class InMemoryStore(_Sync):
    """``InMemoryStore(index=..., ttl=...)``: a new database each time (closed when collected)."""

    def __init__(self, *, index: dict[str, Any] | None = None, ttl: Any = None) -> None:  # type: ignore[override]
        url = place(":memory:")
        embed, fields = _parts(index)
        super().__init__(MemoryStore.open(url, embeddings=embed), url, fields, ttl)

    def __del__(self) -> None:
        try:
            self.memory.close()
        except Exception:  # noqa: BLE001 - the interpreter may be shutting down
            pass
