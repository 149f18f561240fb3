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


