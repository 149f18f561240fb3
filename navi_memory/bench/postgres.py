"""The latency benchmark on PostgreSQL: bulk load, HNSW build, search latency, ANN recall, peers.

For each N and layout the benchmark creates its own database on the server (``navi_bench_<n>_<layout>``,
dropped at the end unless ``--keep``), opens the backend with ``defer_vector_index=True``, loads the
items with ``add_many``, runs ``VACUUM ANALYZE`` and builds the HNSW index once with the backend's
``build_vector_index`` (pgvector's advice for bulk loads). Then: first search, timed hybrid and
lexical searches, and a sweep over ``hnsw.ef_search`` that times ``semantic_hits`` (the ANN
query alone) and compares its top 10 with exact search (numpy brute force over the same vectors
of the same user). Other ``--hnsw m:ef_construction`` pairs rebuild the index and repeat the sweep.
Last, ``--maintained`` more items go in with the index in place (ingest with the index maintained).
On a Citus cluster (``--postgres citus``, ``bench.cluster``) each run uses the coordinator's own
database instead, emptied; with ``--pgbouncer`` (``bench.pooler``) the store connects through
PgBouncer while the benchmark's own statements (VACUUM, EXPLAIN, sizes) go to the server directly.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..backends import open_backend
from ..backends.base import Filters
from ..config import Settings, parse_url
from ..errors import ConfigurationError
from ..models import utcnow
from ..store import MemoryStore
from .data import Corpus, Dataset

PGSERVER_SETTINGS = {"shared_buffers": "4GB", "maintenance_work_mem": "2GB", "effective_cache_size": "12GB",
                     "max_wal_size": "8GB", "checkpoint_timeout": "30min"}
CANDIDATES = 50  # what search asks semantic_hits for (weighted fusion)


def _ints(text: str) -> list[int]:
    return [int(p) for p in text.split(",") if p.strip()]


def _pairs(text: str) -> list[tuple[int, int]]:
    try:
        return [(int(m), int(efc)) for m, efc in (p.split(":") for p in text.split(",") if p.strip())]
    except ValueError:
        raise argparse.ArgumentTypeError("expected m:ef_construction pairs, e.g. 16:64,32:128") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("PostgreSQL (with --db postgresql://... or --postgres pgserver|citus)")
    g.add_argument("--ef-search", type=_ints, default=[40, 100, 200], metavar="LIST",
                   help="hnsw.ef_search values of the recall sweep (default 40,100,200); searches use the backend's")
    g.add_argument("--hnsw", type=_pairs, default=[(16, 64)], metavar="M:EFC,...",
                   help="index builds to compare (default 16:64, the backend's); the first one serves the searches")
    g.add_argument("--recall-queries", type=int, default=100,
                   help="queries of the recall sweep (default 100; 0: no sweep)")
    g.add_argument("--maintenance-work-mem", default="2GB", help="for the index build (default 2GB)")
    g.add_argument("--maintained", type=int, default=2000,
                   help="items added after the build, with the index maintained (default 2000; 0: skip)")
    g.add_argument("--compare-sqlite", action="store_true", help="run the same data and queries on SQLite")
    g.add_argument("--keep", action="store_true", help="keep the benchmark databases")
    g.add_argument("--workers", type=int, default=2, help="--postgres citus: workers of the cluster (default 2)")
    g.add_argument("--shard-count", type=int, default=32,
                   help="--postgres citus: shards per distributed table (default 32, Citus' own)")
    g.add_argument("--pgbouncer", action="store_true",
                   help="the store connects through PgBouncer in transaction mode in front of the server")
    g.add_argument("--pool-size", type=int, default=8,
                   help="--pgbouncer: server connections per database and user (default 8)")


class Server:
    """The server the databases are made on: a URL, a tuned throwaway pgserver or a Citus cluster of
    its own (``cluster``: each run in the coordinator's database, see ``bench.cluster``), and
    PgBouncer in front of it when asked (``bouncer``: the store's connections go through it)."""

    def __init__(self, url: str, handle: Any = None, cluster: Any = None) -> None:
        self.url, self.handle, self.cluster = url, handle, cluster
        self.bouncer: Any = None

    @classmethod
    def start(cls, db: str | None, args: argparse.Namespace, tmp: Path) -> "Server":
        kind = getattr(args, "postgres", None)
        if kind == "citus":
            from . import cluster

            if args.workers < 1 or args.shard_count < 1:
                raise ConfigurationError("--workers and --shard-count must be positive")
            citus = cluster.start(args.workers, args.shard_count)
            server = cls(citus.url, cluster=citus)
        elif kind == "pgserver":
            server = cls._pgserver(tmp)
        elif not db:
            raise ConfigurationError("give --db postgresql://... or --postgres pgserver|citus")
        else:
            server = cls(db)
        if getattr(args, "pgbouncer", False):
            from .pooler import PgBouncer

            try:
                server.bouncer = PgBouncer.start(server.url, args.pool_size)
            except BaseException:
                server.stop()
                raise
        return server

    @classmethod
    def _pgserver(cls, tmp: Path) -> "Server":
        try:
            from pgserver.postgres_server import get_server
        except ImportError:
            raise ConfigurationError("--postgres pgserver needs the pgserver package (pip install pgserver)") from None
        pgdata = tmp / "pg"
        first = get_server(pgdata, cleanup_mode="stop")
        import psycopg
        from psycopg import sql

        with psycopg.connect(first.get_uri(), autocommit=True) as conn:
            for name, value in PGSERVER_SETTINGS.items():
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        first.cleanup()  # stops it; started again below with the settings
        handle = get_server(pgdata, cleanup_mode="delete")
        return cls(handle.get_uri(), handle)

    @property
    def target(self) -> str:
        """What is measured, for the tables: postgres or citus Nw, /pgb behind PgBouncer."""
        name = "postgres" if self.cluster is None else f"citus {len(self.cluster.workers)}w"
        return name + ("/pgb" if self.bouncer is not None else "")

    def store_url(self, url: str) -> str:
        """The URL the store opens: ``url`` itself, or the same database through PgBouncer."""
        if self.bouncer is None:
            return url
        from urllib.parse import urlsplit

        from .pooler import POOLED

        pooled: str = self.bouncer.url(urlsplit(url).path.lstrip("/")) + POOLED
        return pooled

    def execute(self, statement: Any, params: Any = None, url: str | None = None) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(url or self.url, autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def create_database(self, name: str, maintenance_work_mem: str) -> str:
        """A fresh database ``name`` (on a Citus cluster: the coordinator's own, emptied) and its URL."""
        from psycopg import sql

        if self.cluster is not None:  # workers take maintenance_work_mem from their settings
            self.drop_database(name)
            return self.url
        self.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        self.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        # every connection to it, the peers' too, builds indexes with the same memory
        self.execute(sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = {}").format(
            sql.Identifier(name), sql.Literal(maintenance_work_mem)))
        return _with_database(self.url, name)

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        if self.cluster is not None:
            from .cluster import empty_public

            empty_public(self.url)
            return
        self.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def settings(self) -> dict[str, str]:
        names = ["server_version", "shared_buffers", "maintenance_work_mem", "max_parallel_maintenance_workers",
                 "work_mem", "effective_cache_size", "fsync", "synchronous_commit", "citus.shard_count",
                 "citus.propagate_set_commands"]
        rows = self.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", [names])
        out = {n: f"{s}{'' if u is None else ' x ' + u}" for n, s, u in rows}
        out["pgvector"] = (self.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
                           or [("absent",)])[0][0]
        if self.cluster is not None:
            from .cluster import version

            out["citus"], out["citus_workers"] = version(self.url), str(len(self.cluster.workers))
        if self.bouncer is not None:
            from .pooler import version as pooler_version

            out["pgbouncer"] = ".".join(map(str, pooler_version()))
        return out

    def index_bytes(self, index: str, url: str) -> int:
        """Size of the index (on a Citus cluster: of its shards, ``<index>_<shard id>`` on the workers)."""
        if self.cluster is None:
            return int(self.execute("SELECT pg_relation_size(%s::regclass)", [index], url=url)[0][0])
        command = ("SELECT coalesce(sum(pg_relation_size(oid)), 0) FROM pg_class WHERE relkind = 'i'"
                   f" AND relname ~ '^{index}_[0-9]+$'")
        rows = self.execute("SELECT result FROM run_command_on_workers(%s)", [command], url=url)
        return sum(int(r[0]) for r in rows)

    def stop(self) -> None:
        if self.bouncer is not None:
            self.bouncer.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if self.handle is not None:
            self.handle.cleanup()


def _with_database(url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def _load() -> float:
    from .measure import load

    return load()


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def recall_sweep(backend: Any, data: Dataset, ids: np.ndarray, model: str, ef_values: list[int], count: int,
                 exact_modes: list[int]) -> list[dict[str, Any]]:
    """Recall@10 of ``semantic_hits`` against brute force, and its latency, per ef_search."""
    indexes = list(range(1, min(count, len(data.queries) - 1) + 1))
    truth = data.exact_top(ids, indexes)
    saved = backend.ef_search, backend.exact_below
    rows = []
    try:
        for exact_below in exact_modes:
            for ef in ef_values:
                backend.ef_search, backend.exact_below = ef, exact_below
                times, hits, short = [], 0, 0
                for i, want in zip(indexes, truth):
                    filters = Filters(user_id=data.query_user(i), now=utcnow())
                    seconds, found = _timed(lambda: backend.semantic_hits(
                        filters, model, data.query_vectors[i], CANDIDATES).scored)
                    times.append(seconds * 1000.0)
                    hits += len(want & {item for item, _ in found[:10]})
                    short += len(found) < min(CANDIDATES, int(np.sum(data.owner == data.query_owner[i])))
                arr = np.asarray(times)
                rows.append({"ef_search": ef, "exact_below": exact_below,
                             "recall_at_10": round(hits / (10 * len(truth)), 4),
                             "short_results": short, "p50": round(float(np.percentile(arr, 50)), 3),
                             "p95": round(float(np.percentile(arr, 95)), 3), "load": _load()})
    finally:
        backend.ef_search, backend.exact_below = saved
    return rows


def run_size(server: Server, data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    """Load, index and time one dataset in a database of its own."""
    from psycopg import sql

    from ..backends.postgres.pool import PostgresBackend
    from ..backends.postgres.sql import vector_index_name, vector_index_text
    from . import measure

    name = f"navi_bench_{data.n}_{data.layout}"
    url = server.create_database(name, args.maintenance_work_mem)  # direct: maintenance, EXPLAIN, peers
    model, label = f"bench-{args.dim}", f"{server.target} n={data.n} {data.layout}"
    store_url = server.store_url(url)
    settings = Settings(url=store_url, embeddings="none")
    backend = open_backend(parse_url(store_url), defer_vector_index=True)
    if not isinstance(backend, PostgresBackend):  # what a postgresql:// URL opens
        raise ConfigurationError(f"the PostgreSQL benchmark opened {type(backend).__name__}")
    backend.migrate()
    store = MemoryStore(backend, None, settings=settings, embedding_model=model)
    lexical = MemoryStore(backend, None, settings=settings, embedding_model=None)
    result: dict[str, Any] = {"backend": "postgresql", "target": server.target, "n": data.n, "layout": data.layout,
                              "users": len(data.users), "server": server.settings()}
    try:
        result["ingest_load"] = _load()
        ingest_s, ids = measure.ingest(store, data, args.batch, f"{label} ingest")
        result["ingest_items_per_s"] = round(data.n / ingest_s, 1)
        result["vacuum_analyze_s"] = round(_timed(lambda: server.execute("VACUUM ANALYZE", url=url))[0], 2)
        builds = []
        for position, (m, efc) in enumerate(args.hnsw):
            if position:
                server.execute(sql.SQL("DROP INDEX {}").format(vector_index_name(model, args.dim)), url=url)
            load_before = _load()
            seconds, _ = _timed(lambda: backend.build_vector_index(model, args.dim, m, efc, args.maintenance_work_mem))
            build = {"m": m, "ef_construction": efc, "build_s": round(seconds, 1), "load": load_before,
                     "index_mb": round(server.index_bytes(vector_index_text(model, args.dim), url) / 2**20, 1)}
            print(f"{label}: HNSW m={m} ef_construction={efc} built in {seconds:.1f} s", flush=True)
            modes = [backend.exact_below, 0] if data.layout != "one" and position == 0 else [backend.exact_below]
            build["sweep"] = (recall_sweep(backend, data, ids, model, args.ef_search, args.recall_queries, modes)
                              if args.recall_queries > 0 else [])  # 0: no recall sweep
            builds.append(build)
            if position == 0:
                result["index_build_s"], result["index_load"] = build["build_s"], load_before
                result["first_search_ms"] = round(1000 * _timed(lambda: store.search(
                    data.queries[0], user_id=data.query_user(0), query_embedding=data.query_vectors[0]))[0], 3)
                result["search_ms"] = measure.search_series(store, f"{label} search", data, args.warmup)
                result["lexical_search_ms"] = measure.search_series(lexical, f"{label} lexical", data, args.warmup,
                                                                    vectors=False)
                result["plans"] = explain(url, data, model)
                if "langchain" in args.peers:
                    from . import peers

                    result["peers"] = {"langchain": peers.langchain(url, data, ids, args)}
        if len(args.hnsw) > 1:  # searches ran on the first build: put it back for the maintained ingest
            server.execute(sql.SQL("DROP INDEX {}").format(vector_index_name(model, args.dim)), url=url)
            backend.build_vector_index(model, args.dim, *args.hnsw[0], args.maintenance_work_mem)
        result["builds"] = builds
        if args.maintained:
            extra = Dataset.create(Corpus(args.seed + 1), args.maintained, data.layout, len(data.users),
                                   _vectors_of(args), 1, args.seed + 1)
            result["maintained_load"] = _load()
            seconds, _ = measure.ingest(store, extra, args.batch, f"{label} maintained ingest")
            result["maintained_ingest_items_per_s"] = round(args.maintained / seconds, 1)
    finally:
        backend.close()
        if not args.keep:
            server.drop_database(name)
    return result


def _vectors_of(args: argparse.Namespace) -> Any:
    from .data import Vectors

    return Vectors(args.vectors, args.dim, args.seed)


def explain(url: str, data: Dataset, model: str) -> dict[str, str]:
    """EXPLAIN ANALYZE of the first timed query's candidate queries, as the backend sends them."""
    import psycopg
    from psycopg import sql

    from ..backends.postgres import sql as q
    from ..retrieval.query import query_terms

    filters = Filters(user_id=data.query_user(1), now=utcnow())
    vector = data.query_vectors[1]
    queries = {"lexical": q.lexical_candidates(filters, query_terms(data.queries[1]), CANDIDATES),
               "semantic": q.semantic_candidates(filters, model, int(vector.size), vector, CANDIDATES)}
    out = {}
    with psycopg.connect(url) as conn:
        q.adapt_vectors(conn)
        conn.execute("SET hnsw.ef_search = 100")
        for name, (text, params) in queries.items():
            rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + text, params).fetchall()
            out[name] = re.sub(r"'\[[-+0-9.,e]+\]'", "'[...]'", "\n".join(r[0] for r in rows))
    return out


def format_details(report: dict[str, Any]) -> str:
    lines = ["", "PostgreSQL: index builds and ANN recall@10 of semantic_hits (k=50) vs brute force"]
    lines.append(f"{'layout':<7} {'N':>9} {'m':>3} {'efc':>4} {'build s':>8} {'MB':>7} {'ef_search':>9}"
                 f" {'exact<':>7} {'recall':>7} {'short':>5} {'p50 ms':>7} {'p95 ms':>7} {'load':>5}")
    for r in report["results"]:
        for b in r.get("builds", []):
            for s in b["sweep"]:
                lines.append(f"{r['layout']:<7} {r['n']:>9,} {b['m']:>3} {b['ef_construction']:>4} {b['build_s']:>8.1f}"
                             f" {b['index_mb']:>7.0f} {s['ef_search']:>9} {s['exact_below']:>7}"
                             f" {s['recall_at_10']:>7.3f}"
                             f" {s['short_results']:>5} {s['p50']:>7.2f} {s['p95']:>7.2f} {s['load']:>5.2f}")
    lines.append("")
    lines.append(f"{'layout':<7} {'N':>9} {'bulk ingest/s':>13} {'maintained/s':>12} {'vs sqlite p50/p95':>18}")
    for r in report["results"]:
        s = r["search_ms"]
        sqlite = r["sqlite"]["search_ms"] if "sqlite" in r else None
        sq = "-" if sqlite is None else f"{s['p50'] / sqlite['p50']:.2f} / {s['p95'] / sqlite['p95']:.2f}"
        lines.append(f"{r['layout']:<7} {r['n']:>9,} {r['ingest_items_per_s']:>13,.0f}"
                     f" {r.get('maintained_ingest_items_per_s', 0):>12,.0f} {sq:>18}")
    for r in report["results"]:
        if "langchain" in r.get("peers", {}):
            from . import peers

            lines.append(peers.format_langchain(r))
    return "\n".join(lines)
