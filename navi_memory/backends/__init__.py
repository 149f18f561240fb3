"""Storage backends behind one protocol (see ``base.Backend``); drivers are imported on demand."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import TYPE_CHECKING, Any, cast

from ..config import DatabaseURL
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .base import Backend


def _require_postgres() -> None:
    for module in ("psycopg", "psycopg_pool"):
        if importlib.util.find_spec(module) is None:
            raise ConfigurationError("PostgreSQL needs the 'postgres' extra: pip install 'navi-memory[postgres]'")


def open_backend(url: DatabaseURL, read_only: bool = False, **options: Any) -> Backend:
    """The blocking backend for a parsed URL. ``read_only``: create nothing (no SQLite file or
    folder; PostgreSQL creates nothing before ``migrate`` anyway)."""
    if url.scheme == "sqlite":
        import inspect

        from ..errors import ValidationError
        from .sqlite import SQLiteBackend

        known = [name for name in inspect.signature(SQLiteBackend.__init__).parameters
                 if name not in ("self", "path", "create")]
        unknown = sorted(set(options) - set(known))
        if unknown:  # as PostgreSQL's: named, not a TypeError from the constructor
            raise ValidationError(f"unknown SQLite backend options {unknown}; known: {known}")
        # the Protocol's methods are installed on the class at import (sansio.install), which mypy does not see
        return SQLiteBackend(url.path or ":memory:", create=not read_only, **options)  # type: ignore[abstract]
    _require_postgres()
    from .postgres.pool import PostgresBackend

    # its methods are installed from the query generators (checked by tests/test_backend_protocol.py)
    return cast("Backend", PostgresBackend(url, **options))


async def open_async_backend(url: DatabaseURL, read_only: bool = False, **options: Any) -> Any:
    """The asyncio backend: native for PostgreSQL, worker threads for SQLite."""
    if url.scheme == "sqlite":
        return ThreadedBackend(await asyncio.to_thread(open_backend, url, read_only, **options))
    _require_postgres()
    from .postgres.pool import AsyncPostgresBackend

    return await AsyncPostgresBackend.connect(url, **options)


class ThreadedBackend:
    """Runs a blocking backend's methods in worker threads (SQLite has no async driver)."""

    def __init__(self, backend: Backend) -> None:
        self.sync = backend

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.sync, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(attr, *args, **kwargs)

        return call
