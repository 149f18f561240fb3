"""Ingest throughput and search latency of a backend at growing sizes (``navi-memory bench latency``).

For each N and layout: a fresh database, N items with precomputed vectors (fixed seed) and short
sentences drawn from a Zipf-like vocabulary (``bench.data``), ingested with ``add_many`` in
batches. Then the first search, a warm-up, and Q timed hybrid searches whose query vectors are
precomputed (``query_embedding=``), so no embedding model is ever called; then the same queries
lexically, on a store opened without embeddings. On PostgreSQL (``--db postgresql://...``,
``--postgres pgserver`` or a Citus cluster of its own, ``--postgres citus``; the store through
PgBouncer with ``--pgbouncer``) ``bench.postgres`` adds the index build, ANN recall and the peers.
The SQLite path uses only numpy and the standard library.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..config import parse_url
from ..errors import ConfigurationError
from . import BLAS_THREAD_TIMEOUT, write_report
from .data import LAYOUTS, USER, VECTOR_KINDS, Corpus, Dataset, Vectors
from .measure import ingest, load, open_store, search_series, timed_search
from .scan import compare, wait_for_graphs

__all__ = ["USER", "Corpus", "add_arguments", "run", "main", "run_size", "format_table"]


def _sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1:], 1)
        try:
            value = int(float(part.rstrip("km")) * scale)
        except (ValueError, OverflowError):  # "x", or "inf" / "1e400"
            raise argparse.ArgumentTypeError(f"not a size: {part!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"sizes must be positive, got {part!r}")
        sizes.append(value)
    return sizes


def _names(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [p.strip() for p in text.split(",") if p.strip()]
        if not names or any(n not in allowed for n in names):
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)} (comma-separated)")
        return names
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # dest bench_db: the global --db / $NAVI_MEMORY_URL name the user's real memory, never benchmarked
    parser.add_argument("--db", dest="bench_db", metavar="URL", default=None,
                        help="SQLite: fresh database URL, '{n}' is replaced by N (default: a file in a temp dir)."
                             " PostgreSQL: a server URL; the benchmark creates and drops its own databases there."
                             " The global --db and $NAVI_MEMORY_URL are not used")
    parser.add_argument("--postgres", choices=["pgserver", "citus"], default=None,
                        help="benchmark PostgreSQL on a throwaway pgserver (PG 16 + pgvector) in a temp dir, or on a"
                             " throwaway Citus cluster of --workers workers (scripts/citus_cluster.py of the checkout)")
    parser.add_argument("--n", type=_sizes, default=_sizes("10000,100000"),
                        help="comma-separated item counts, e.g. 10000,100000 or 10k,100k")
    parser.add_argument("--layout", type=_names(LAYOUTS), default=["one"],
                        help="one (all items of one user), spread (uniform over --users users), skewed (user"
                             " sizes ~ 1/rank); comma-separated, e.g. one,spread")
    parser.add_argument("--users", type=int, default=1000,
                        help="users of the spread and skewed layouts (default 1000)")
    parser.add_argument("--vectors", choices=VECTOR_KINDS, default="lowrank",
                        help="lowrank (default: 32-d latent + noise; its effective dimension is close to that of"
                             " all-MiniLM-L6-v2 sentence embeddings) or gaussian (iid, no structure: the worst case"
                             " for an approximate graph)")
    parser.add_argument("--ann-from", type=int, default=None, metavar="ROWS",
                        help="SQLite: a user's vectors from which an approximate graph may serve (default: the"
                             " backend's, 20000; 0: never, always the exact scan)")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per N (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed searches before timing (default 20)")
    parser.add_argument("--dim", type=int, default=384, help="vector dimensions (default 384)")
    parser.add_argument("--batch", type=int, default=1000, help="items per add_many call (default 1000)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", default=None, help="also write the results here")
    from .peers import PEERS

    parser.add_argument("--peers", type=_names(PEERS), default=[],
                        help="the same data and queries on peers, timed in the same run (dev extra): bm25 (bm25s),"
                             " langgraph (InMemoryStore with an index), langchain (langchain-postgres PGVectorStore"
                             " hybrid, PostgreSQL only); comma-separated")
    parser.add_argument("--langgraph-max-n", type=int, default=200_000,
                        help="skip the langgraph peer above this N (default 200000: it keeps Python lists)")
    from . import postgres

    postgres.add_arguments(parser)


def run_size(url: str, data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    """Ingest the dataset into the fresh SQLite database at ``url`` and time searches on it."""
    if parse_url(url).path == ":memory:":
        raise ConfigurationError("the latency benchmark needs a database file (two stores open it)")
    model = f"bench-{args.dim}"
    ann_from = getattr(args, "ann_from", None)
    store = open_store(url, model, **({} if ann_from is None else {"ann_from": ann_from or None}))
    lexical = None
    label = f"sqlite n={data.n} {data.layout}"
    try:
        if store.list_users():
            raise ConfigurationError(f"{url} already holds data; the benchmark needs a fresh database")
        ingest_load = load()
        ingest_s, ids = ingest(store, data, args.batch, f"{label} ingest")
        first_ms = timed_search(store, data.queries[0], data.query_user(0), data.query_vectors[0])
        graph = wait_for_graphs(store)  # built in the background after the first search loaded the vectors
        scan = compare(store, data, ids, model, args.warmup, f"{label} search")
        lexical = open_store(url, None)
        plain = search_series(lexical, f"{label} lexical", data, args.warmup, vectors=False)
    finally:
        store.close()
        if lexical is not None:
            lexical.close()
    return {"backend": "sqlite", "n": data.n, "layout": data.layout, "users": len(data.users),
            "ingest_items_per_s": round(data.n / ingest_s, 1), "ingest_load": ingest_load,
            "lexical_search_ms": plain, "first_search_ms": round(first_ms, 3), **scan, **graph}


def _environment() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "machine": platform.machine(), "processor": platform.processor() or None,
            "python": platform.python_version(), "numpy": np.__version__, "sqlite": sqlite3.sqlite_version,
            "openblas_thread_timeout": BLAS_THREAD_TIMEOUT}


def _scan_columns(row: dict[str, Any]) -> str:
    """Bare-scan p50, search/bare ratio, recall@10 of the vector index, its memory (SQLite rows)."""
    if "bare_scan_ms" not in row:
        return ""
    mb = row.get("index_mb_per_100k")
    return (f" {row['bare_scan_ms']['p50']:>8.2f} {row['ratio_p50']:>6.2f} {row['recall_at_10']:>6.3f}"
            f" {'-' if mb is None else f'{mb:,.0f}':>8}{_graph_note(row)}")


def _graph_note(row: dict[str, Any]) -> str:
    if "graph_build_s" not in row:
        return ""
    if not row.get("graph"):  # built but its recall check failed: the exact scan served
        return f"  graph rejected (check recall {row['graph_check_recall']:.3f})"
    return f"  graph (built {row['graph_build_s']:.1f} s, check recall {row['graph_check_recall']:.3f})"


def format_table(report: dict[str, Any]) -> str:
    head = (f"{'backend':<14} {'layout':<7} {'N':>9} {'ingest/s':>10} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}"
            f" {'lex p50':>8} {'lex p95':>8} {'load':>5} {'bare p50':>8} {'ratio':>6} {'R@10':>6} {'MB/100k':>8}")
    timeout = report["environment"].get("openblas_thread_timeout")
    title = (f"dim {report['dim']} ({report['vectors']}), {report['queries']} timed queries"
             f" after {report['warmup']} warm-up, add_many batches of {report['batch']},"
             f" OPENBLAS_THREAD_TIMEOUT {timeout or 'default'}")
    lines = [title, head]
    for r in report["results"]:
        for row in [r] + [r[p] for p in ("sqlite",) if p in r]:
            s, lx = row["search_ms"], row["lexical_search_ms"]
            lines.append(f"{row.get('target', row['backend']):<14} {row['layout']:<7} {row['n']:>9,} {row['ingest_items_per_s']:>10,.0f}"
                         f" {row['first_search_ms']:>9.1f} {s['p50']:>8.2f} {s['p95']:>8.2f} {lx['p50']:>8.2f}"
                         f" {lx['p95']:>8.2f} {s['load']:>5.2f}{_scan_columns(row)}")
    if any(r["backend"] == "postgresql" for r in report["results"]):
        from . import postgres

        lines.append(postgres.format_details(report))
    if any(r.get("peers") for r in report["results"]):
        from .peers import format_ratios

        lines.append(format_ratios(report))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark for every size and layout; print a table, write JSON if asked, return the report."""
    if args.queries < 1 or args.warmup < 0 or args.dim < 1 or args.batch < 1 or args.users < 1:
        raise ConfigurationError("--queries, --dim, --batch and --users must be positive, --warmup not negative")
    db = getattr(args, "bench_db", None)
    postgres = bool(getattr(args, "postgres", None)) or (db is not None and parse_url(db).scheme == "postgresql")
    if getattr(args, "pgbouncer", False) and not postgres:
        raise ConfigurationError("--pgbouncer needs PostgreSQL: --postgres pgserver|citus or --db postgresql://...")
    if db and not postgres and "{n}" not in db and len(args.n) * len(args.layout) > 1:
        raise ConfigurationError("put '{n}' in --db when benchmarking several sizes: each needs a fresh database")
    from . import peers

    peers.check(args.peers, postgres)
    corpus, vectors = Corpus(args.seed), Vectors(args.vectors, args.dim, args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="navi-bench-") as tmp:
        server = None
        if postgres:
            from . import postgres as pg

            server = pg.Server.start(db, args, Path(tmp))
        try:
            for n in args.n:
                for layout in args.layout:
                    data = Dataset.create(corpus, n, layout, args.users, vectors, args.warmup + args.queries + 1,
                                          args.seed)
                    sqlite_url = (db.replace("{n}", str(n)) if db and not postgres
                                  else f"sqlite:///{Path(tmp) / f'bench-{n}-{layout}.db'}")
                    if server is None:
                        result = run_size(sqlite_url, data, args)
                    else:
                        result = pg.run_size(server, data, args)
                        if args.compare_sqlite:
                            result["sqlite"] = run_size(sqlite_url, data, args)
                            Path(sqlite_url.removeprefix("sqlite:///")).unlink(missing_ok=True)
                    local = peers.run_local(data, args)
                    if local:
                        result["peers"] = {**result.get("peers", {}), **local}
                    if result.get("peers"):
                        result["ratios"] = peers.ratios(result)
                    results.append(result)
                    del data
        finally:
            if server is not None:
                server.stop()
    report = {"dim": args.dim, "vectors": args.vectors, "results": results, "queries": args.queries,
              "warmup": args.warmup, "batch": args.batch, "seed": args.seed,
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "environment": _environment()}
    print(format_table(report))
    if args.json_out:
        write_report(args.json_out, report)
    return report


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="navi-memory bench latency", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
