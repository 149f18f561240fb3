"""The benchmark's own Citus cluster (``navi-memory bench latency --postgres citus``).

The cluster comes from the checkout's ``scripts/citus_cluster.py`` (Citus built once against
pgserver's PostgreSQL 16 + pgvector, then a coordinator and its workers on loopback), imported by
path only when asked: the package never imports ``scripts/`` otherwise, and an installed wheel
without the checkout says so. Every node gets the single-node benchmark's durability (fsync and
synchronous commit on, unlike the test cluster) and memory settings scaled to its share of the
machine. The benchmark works in the coordinator's own database (a database created on a
coordinator later has no Citus and no workers), in its ``public`` schema (PgBouncer refuses the
``options`` a schema of its own would need), emptied of the store's tables between runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ConfigurationError

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "citus_cluster.py"
MODULE = "citus_cluster"
# per node; the single node's are PGSERVER_SETTINGS (bench.postgres): each worker holds half the data.
# A worker builds its shards' indexes at once (up to 16): 1 GB each with parallel helpers ran a 24 GB
# machine out of memory at 1M items; a shard's graph at 1M in 32 shards needs under 100 MB.
NODE_SETTINGS = {"shared_buffers": "2GB", "maintenance_work_mem": "128MB", "max_parallel_maintenance_workers": "0",
                 "effective_cache_size": "6GB",
                 "max_wal_size": "4GB", "checkpoint_timeout": "30min",
                 "fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def citus_module() -> ModuleType:
    """``scripts/citus_cluster.py`` of the checkout (a script, not a package module)."""
    if MODULE not in sys.modules:
        if not SCRIPT.is_file():
            raise ConfigurationError(f"--postgres citus needs a checkout of navi-memory: {SCRIPT} not found")
        spec = importlib.util.spec_from_file_location(MODULE, SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[MODULE]


def start(workers: int, shard_count: int) -> Any:
    """A coordinator and ``workers`` workers (built first if missing); ``stop()`` ends them."""
    module = citus_module()
    settings = {**NODE_SETTINGS, "citus.shard_count": str(shard_count)}
    try:
        return module.CitusCluster.start(workers=workers, settings=settings)
    except module.BuildImpossible as exc:
        raise ConfigurationError(f"no Citus cluster on this machine: {exc}") from exc


# the store's tables in public: every table there but an extension's (pgvector's, Citus')
_TABLES = ("SELECT format('%I', c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
           " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT EXISTS (SELECT 1 FROM pg_depend d"
           " WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')")


def empty_public(url: str) -> None:
    """Drop every table of the ``public`` schema at ``url`` (on a coordinator: their shards too)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(_TABLES).fetchall()]
        if tables:
            conn.execute(f"DROP TABLE IF EXISTS {', '.join(tables)} CASCADE")


def version(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
    return row[0] if row else "absent"
