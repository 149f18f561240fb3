"""The server backend: PostgreSQL with pgvector (HNSW), tsvector GIN and optional pg_trgm.

``queries`` (and its mixins ``search``, ``sessions``, ``persons``, ``transfer``, ``keyed``) write
each backend method once, as a generator of statements (``sql.Q``); ``pool`` runs them on psycopg's
blocking or asyncio pool (connections made as ``connect`` says), one transaction per call, and
``pipelined`` sends the short reads of one ``at_once`` together on one connection; ``schema`` holds
the numbered migrations. Importing this package needs psycopg (the ``postgres`` extra)."""

from .pool import AsyncPostgresBackend, PostgresBackend

__all__ = ["AsyncPostgresBackend", "PostgresBackend"]
