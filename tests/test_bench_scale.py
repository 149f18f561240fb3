"""The latency benchmark's scale-out targets run end to end on tiny sizes: a Citus cluster of its
own (``--postgres citus``) and PgBouncer in front (``--pgbouncer``). Figures are not checked, only
that the run reached the target it names and that its per-user searches routed to one shard."""

from __future__ import annotations

import pytest

from navi_memory.bench import latency
from navi_memory.bench.pooler import program
from navi_memory.errors import ConfigurationError

from .citus import require_build
from .test_bench import TINY

SPREAD = [*TINY, "--layout", "spread", "--users", "4", "--recall-queries", "4", "--ef-search", "40",
          "--maintained", "30"]
needs_pgbouncer = pytest.mark.skipif(program() is None, reason="pgbouncer is not installed (apt-get install pgbouncer)")


def test_pgbouncer_needs_postgresql_and_citus_its_sizes():
    with pytest.raises(ConfigurationError, match="--pgbouncer needs PostgreSQL"):
        latency.main([*TINY, "--pgbouncer"])
    with pytest.raises(ConfigurationError, match="--workers and --shard-count"):
        latency.main([*TINY, "--postgres", "citus", "--workers", "0"])


@pytest.mark.postgres
@needs_pgbouncer
def test_postgres_benchmark_through_pgbouncer(postgres_server):
    report = latency.main([*SPREAD, "--db", postgres_server.url, "--pgbouncer", "--pool-size", "2"])
    (result,) = report["results"]
    assert result["target"] == "postgres/pgb" and result["server"]["pgbouncer"]
    assert result["ingest_items_per_s"] > 0 and result["lexical_search_ms"]["p95"] > 0
    assert result["builds"][0]["index_mb"] > 0 and result["maintained_ingest_items_per_s"] > 0


@pytest.mark.citus
@pytest.mark.xdist_group("citus")
@needs_pgbouncer
def test_citus_benchmark_through_pgbouncer_routes_each_search_to_one_shard():
    require_build()
    report = latency.main([*SPREAD, "--postgres", "citus", "--shard-count", "2", "--pgbouncer"])
    (result,) = report["results"]
    assert result["target"] == "citus 2w/pgb" and result["server"]["citus_workers"] == "2"
    assert result["server"]["fsync"] == "on"  # durable, as the single node is
    assert result["ingest_items_per_s"] > 0 and result["search_ms"]["p95"] > 0
    assert result["builds"][0]["index_mb"] > 0  # the shards' indexes, summed over the workers
    for plan in result["plans"].values():
        assert "Task Count: 1" in plan and "Execution Time" in plan
