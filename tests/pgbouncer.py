"""PgBouncer in transaction mode in front of the session's PostgreSQL, for the pooler tests.

The program is run by ``navi_memory/bench/pooler.py`` (the benchmarks' ``--pgbouncer`` too): a free
loopback port, every database of the server reachable (the ``*`` wildcard), so each test makes a
database of its own (``tests/pg.py``'s ``fresh_database``): PgBouncer refuses the ``options``
startup parameter the other PostgreSQL tests isolate schemas with. The server pool is kept small
(``POOL_SIZE``) so that concurrent tests make clients queue. Without the program the tests skip
(``.ci/run`` installs it where apt exists, and sets ``NAVI_MEMORY_TEST_PGBOUNCER_REQUIRED=1``).
"""

from __future__ import annotations

import os
from typing import Iterator
from urllib.parse import urlsplit

import pytest

from navi_memory.bench.pooler import POOLED, PgBouncer, PoolerMissing, version  # noqa: F401  (version: tests)

from .pg import PostgresServer, drop_database, fresh_database

REQUIRED_ENV = "NAVI_MEMORY_TEST_PGBOUNCER_REQUIRED"
POOL_SIZE = 4  # server connections per database and user


def start(server_url: str) -> PgBouncer:
    """PgBouncer in front of the server; skips without the program (fails where it is required)."""
    try:
        return PgBouncer.start(server_url, POOL_SIZE)
    except PoolerMissing as exc:
        if os.environ.get(REQUIRED_ENV) == "1":
            pytest.fail(f"pgbouncer is required here ({REQUIRED_ENV}=1) but not installed")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def pgbouncer_server(postgres_server: PostgresServer) -> Iterator[PgBouncer]:
    """PgBouncer in transaction mode in front of the session's PostgreSQL (skips without the program)."""
    bouncer = start(postgres_server.url)
    yield bouncer
    bouncer.stop()


@pytest.fixture
def pooled_url(postgres_server: PostgresServer, pgbouncer_server: PgBouncer) -> Iterator[str]:
    """A fresh database reached through PgBouncer (``?prepare_threshold=none``: PgBouncer before
    1.21 keeps no prepared statements), dropped afterwards."""
    direct = fresh_database(postgres_server.url)
    yield pgbouncer_server.url(urlsplit(direct).path.lstrip("/")) + POOLED
    drop_database(postgres_server.url, direct)
