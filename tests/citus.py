"""The Citus cluster of the tests: $NAVI_MEMORY_TEST_CITUS_URL (a coordinator of your own), or a
coordinator and two workers started from ``scripts/citus_cluster.py`` (Citus built once into the cache).

Tests needing it are marked ``citus`` and put in ``xdist_group("citus")`` so that one test process
starts one cluster (``pytestmark`` of their modules). Without a compiler, make, pgserver or the Citus
source they skip, saying which; with ``NAVI_MEMORY_TEST_CITUS_REQUIRED=1`` (``.ci/run``) they fail instead.
A build that runs and fails is always an error.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import pytest

from .pg import PostgresServer

ENV_URL = "NAVI_MEMORY_TEST_CITUS_URL"
REQUIRED_ENV = "NAVI_MEMORY_TEST_CITUS_REQUIRED"
WORKERS = 2
# few shards per table: each test's schema distributes 13 tables, and each shard is a table to create
SETTINGS = {"citus.shard_count": "4"}


def cluster_module() -> ModuleType:
    """``scripts/citus_cluster.py`` (a script, not a package module)."""
    from navi_memory.bench.cluster import citus_module

    return citus_module()


def start_cluster(workers: int, settings: dict[str, str]) -> Any:
    """A cluster started from the cached build; where the build is impossible the test skips,
    saying why (fails when $NAVI_MEMORY_TEST_CITUS_REQUIRED=1, as in CI)."""
    require_build()
    return cluster_module().CitusCluster.start(workers=workers, settings=settings)


def require_build() -> None:
    """Citus built into the cache (first if missing), or the test skips saying why (fails when
    $NAVI_MEMORY_TEST_CITUS_REQUIRED=1, as in CI)."""
    module = cluster_module()
    try:
        module.build()
    except module.BuildImpossible as exc:
        if os.environ.get(REQUIRED_ENV) == "1":
            pytest.fail(f"Citus is required here ({REQUIRED_ENV}=1) but cannot be built: {exc}")
        pytest.skip(f"no Citus cluster: {exc} (or set {ENV_URL})")


class CitusServer(PostgresServer):
    """The coordinator, handing out a fresh schema per test (``fresh_schema_url``) like the
    single-node server; ``cluster`` is None for a cluster of the caller's ($NAVI_MEMORY_TEST_CITUS_URL)."""

    cluster: Any = None

    @classmethod
    def start(cls) -> "CitusServer":
        url = os.environ.get(ENV_URL)
        if url:
            return cls(url)
        cluster = start_cluster(WORKERS, SETTINGS)
        server = cls(cluster.url)
        server.cluster = cluster
        return server

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


# What a used schema must still have to be handed out again: the version, every column and every index
# but the models' vector indexes (those a fresh schema would create at its first vector anyway).
_SHAPE = ("SELECT (SELECT max(version) FROM navi_schema_migrations) AS version,"
          " (SELECT string_agg(table_name || '.' || column_name || ':' || data_type || ':' || is_nullable"
          "  || ':' || coalesce(column_default, ''), ',' ORDER BY table_name, column_name)"
          "  FROM information_schema.columns WHERE table_schema = current_schema()) AS columns,"
          " (SELECT string_agg(indexdef, ',' ORDER BY indexname) FROM pg_indexes"
          "  WHERE schemaname = current_schema() AND indexname NOT LIKE 'embeddings_hnsw_%') AS indexes,"
          " (SELECT string_agg(conname, ',' ORDER BY conname) FROM pg_constraint"
          "  WHERE connamespace = current_schema()::regnamespace) AS constraints")


class SchemaPool:
    """Migrated schemas on the coordinator for the ``citus`` backend parameter, each used by one test at a
    time and emptied for the next: a fresh schema costs about 1.5 s on the cluster (distributing 12
    tables, then dropping them), emptying one 0.1 s. A test leaves behind only its rows (deleted, the
    id sequences restarted) and the models' vector indexes; a schema whose shape it changed (an older
    version, a dropped column) is dropped instead of reused."""

    def __init__(self, server: CitusServer) -> None:
        self.server = server
        self.free: list[str] = []
        self.shapes: dict[str, dict[str, Any]] = {}

    def take(self) -> str:
        if self.free:
            return self.free.pop()
        from navi_memory import MemoryStore
        from navi_memory.backends.postgres import schema

        url = self.server.fresh_schema_url()
        MemoryStore.open(url, embeddings=False).close()  # migrate: the tables distributed
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
