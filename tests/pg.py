"""A PostgreSQL server for the tests: $NAVI_MEMORY_TEST_POSTGRES_URL, or pgserver (PG 16 + pgvector)."""

from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

ENV_URL = "NAVI_MEMORY_TEST_POSTGRES_URL"


def with_search_path(url: str, schema: str) -> str:
    """The URL with ``options=-c search_path=<schema>,public`` (public keeps the extensions visible)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-c search_path={schema},public"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def with_option(url: str, option: str) -> str:
    """The URL with ``-c option`` added to its ``options`` (a server setting for its connections)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} -c {option}".strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


@dataclass
class PostgresServer:
    url: str
    handle: Any = None
    schemas: list[str] = field(default_factory=list)

    @classmethod
    def start(cls) -> "PostgresServer":
        url = os.environ.get(ENV_URL)
        handle = None
        if not url:
            pgserver = pytest.importorskip("pgserver", reason=f"set {ENV_URL} or install pgserver")
            handle = pgserver.get_server(tempfile.mkdtemp(prefix="navi-pg-"), cleanup_mode="delete")
            url = handle.get_uri()
        server = cls(url, handle)
        if handle is not None:
            server.skip_durability()
        server.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        return server

    def skip_durability(self) -> None:
        """The throwaway server never survives a crash of its machine, so it needs no flush to disk at
        each commit: every test's schema (about 90 DDL statements) is then made without waiting on the
        disk. What the tests check (rows, transactions, locks, crash of a client) is unchanged."""
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            self.execute(f"ALTER SYSTEM SET {name} = off")
        self.execute("SELECT pg_reload_conf()")

    def execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(statement)

    def fresh_schema_url(self) -> str:
        schema = "t_" + uuid.uuid4().hex[:12]
        self.execute(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        return with_search_path(self.url, schema)

    def drop_schema(self, url: str) -> None:
        schema = dict(parse_qsl(urlsplit(url).query))["options"].split("=", 1)[1].split(",")[0]
        self.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cleanup()


def dump_schema(url: str) -> dict[str, list[tuple]]:
    """All rows of all tables of the URL's schema, each table sorted."""
    import psycopg
    from psycopg import sql

    out: dict[str, list[tuple]] = {}
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            " AND table_type = 'BASE TABLE' ORDER BY table_name")]
        for table in tables:
            rows = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))).fetchall()
            out[table] = sorted(rows, key=repr)
    return out


NOVECTOR_ENV_URL = "NAVI_MEMORY_TEST_POSTGRES_NOVECTOR_URL"
DEBIAN_SOCKET_URL = "postgresql:///postgres?host=/var/run/postgresql"


def novector_server_url() -> str | None:
    """A PostgreSQL without pgvector (the machine's Debian PostgreSQL 15), if one is reachable."""
    import psycopg

    url = os.environ.get(NOVECTOR_ENV_URL) or DEBIAN_SOCKET_URL
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            has_vector = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    except psycopg.Error:
        return None
    return None if has_vector else url


def fresh_database(server_url: str) -> str:
    """Create an empty database on the server; returns its URL."""
    import psycopg

    name = "navi_t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(server_url)
    return f"{parts.scheme}://{parts.netloc}/{name}" + (f"?{parts.query}" if parts.query else "")


def drop_database(server_url: str, url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# What a used schema must still have to be handed out again: the version, every column (its type,
# default and generation) and every index but the models' vector indexes (those a fresh schema would
# create at its first vector anyway), every constraint; read from pg_catalog (information_schema's
# views took twice as long in a new connection)
_SHAPE = ("SELECT (SELECT max(version) FROM navi_schema_migrations) AS version,"
          " (SELECT string_agg(c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod) || ':'"
          "  || a.attnotnull || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ':' || a.attgenerated::text,"
          "  ',' ORDER BY c.relname, a.attname)"
          "  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
          "  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
          "  WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0"
          "  AND NOT a.attisdropped) AS columns,"
          " (SELECT string_agg(pg_get_indexdef(i.indexrelid), ',' ORDER BY c.relname) FROM pg_index i"
          "  JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = current_schema()::regnamespace"
          "  AND c.relname NOT LIKE 'embeddings_hnsw_%') AS indexes,"
          " (SELECT string_agg(conname, ',' ORDER BY conname) FROM pg_constraint"
          "  WHERE connamespace = current_schema()::regnamespace) AS constraints")


class SchemaPool:
    """Migrated schemas of a server, each used by one test at a time and emptied for the next (the
    ``postgres`` and ``citus`` backend parameters). A fresh schema costs about 0.1-0.2 s on pgserver
    (its ~90 DDL statements, then the drop) and 1.5 s on the Citus cluster (12 tables distributed);
    emptying one, a round trip. A test leaves behind only its rows (deleted, the id sequences
    restarted) and the models' vector indexes (partial, per model and size: another test's vectors
    never enter them); a schema whose shape it changed (an older version, a dropped column) is dropped
    instead of reused. A test that needs a schema nobody used takes ``pg_url``."""

    def __init__(self, server: "PostgresServer") -> None:
        self.server = server
        self.free: list[str] = []
        self.shapes: dict[str, dict[str, Any]] = {}

    def take(self) -> str:
        if self.free:
            return self.free.pop()
        from navi_memory import MemoryStore
        from navi_memory.backends.postgres import schema

        url = self.server.fresh_schema_url()
        MemoryStore.open(url, embeddings=False).close()  # migrate (on Citus: the tables distributed)
        self.shapes[url] = self._shape(url)
        assert self.shapes[url]["version"] == schema.LATEST_VERSION
        return url

    def give_back(self, url: str) -> None:
        import psycopg
        from psycopg.rows import dict_row

        from navi_memory.backends.postgres import schema

        # one round trip: the shape read, then every table emptied (each row's references before it)
        # and the id sequences restarted, whatever the shape (a schema that changed is dropped anyway)
        emptied = "".join(f"; DELETE FROM {table}" for table, _ in reversed(schema.DISTRIBUTED))
        restarted = ("; SELECT setval(format('%I', sequencename)::regclass, 1, false) FROM pg_sequences"
                     " WHERE schemaname = current_schema()")
        try:
            with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
                kept = conn.execute(_SHAPE + emptied + restarted).fetchone() == self.shapes[url]
        except psycopg.Error:  # a table gone
            kept = False
        if kept:
            self.free.append(url)
            return
        del self.shapes[url]
        self.server.drop_schema(url)

    def close(self) -> None:
        for url in self.shapes:
            self.server.drop_schema(url)
        self.free, self.shapes = [], {}

    @staticmethod
    def _shape(url: str) -> dict[str, Any]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            row = conn.execute(_SHAPE).fetchone()
        assert row is not None
        return row
