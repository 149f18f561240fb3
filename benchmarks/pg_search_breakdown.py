"""Where a hybrid search's time goes on PostgreSQL, per backend call, for several backend_options.

Loads N items of one user (the latency benchmark's generator: Zipf-like words, 384-d ``lowrank``
vectors, seed 42) into a throwaway pgserver, runs VACUUM ANALYZE, builds the HNSW index, then for
each set of backend options times 200 searches after 20 warm-up ones and prints the search p50 /
p95 and the p50 / p95 of each backend call it made (lexical_hits includes its statistics
lookup), plus the mean top-10 overlap with the first option set's results.

    python benchmarks/pg_search_breakdown.py 200000 '{}' '{"lexical_row_budget": 0}'

With ``NAVI_BREAKDOWN_PGDATA=DIR`` the server's data stays in DIR and a later run with the same N
skips the load and the index build (to measure again when the machine is quiet).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CALLS = ("lexical_hits", "semantic_hits", "semantic_scores", "neighbours", "persons_named",
         "fetch_items", "substring_candidates")


def _percentiles(values: list[float]) -> list[float]:
    return [round(float(np.percentile(values, p)), 2) for p in (50, 95)]


def measure(store, data, warmup: int = 20, timed: int = 200) -> tuple[dict, list[list[int]]]:
    backend = store.backend
    spent: dict[str, list[float]] = collections.defaultdict(list)
    originals = {name: getattr(backend, name) for name in CALLS}
    for name, fn in originals.items():
        def timed_call(*args, _fn=fn, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent[_name].append(1000 * (time.perf_counter() - start))
        setattr(backend, name, timed_call)
    totals, tops = [], []
    try:
        for index in range(1, warmup + timed + 1):
            if index == warmup + 1:
                spent.clear()
            start = time.perf_counter()
            results = store.search(data.queries[index], user_id=data.query_user(index),
                                   query_embedding=data.query_vectors[index])
            if index > warmup:
                totals.append(1000 * (time.perf_counter() - start))
                tops.append([r.id for r in results[:10]])
    finally:
        for name, fn in originals.items():
            setattr(backend, name, fn)
    report = {"search_ms": _percentiles(totals), "calls_ms": {k: _percentiles(v) for k, v in spent.items()}}
    return report, tops


def main(n: int, option_sets: list[dict]) -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import pgserver
    import psycopg

    from navi_memory import MemoryStore, Settings
    from navi_memory.backends import open_backend
    from navi_memory.bench import latency
    from navi_memory.bench.data import Corpus, Dataset, Vectors
    from navi_memory.config import parse_url

    keep = os.environ.get("NAVI_BREAKDOWN_PGDATA")
    server = pgserver.get_server(keep or tempfile.mkdtemp(prefix="navi-breakdown-"),
                                 cleanup_mode=None if keep else "delete")
    url = server.get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), 221, 42)
    loader = open_backend(parse_url(url), defer_vector_index=True)
    loader.migrate()
    model = "bench-384"
    with psycopg.connect(url) as conn:
        loaded = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    if loaded not in (0, n):
        raise SystemExit(f"{keep} holds {loaded} items, not {n}")
    if not loaded:
        latency.ingest(MemoryStore(loader, None, settings=Settings(url=url, embeddings="none"),
                                   embedding_model=model), data, 1000, f"n={n} ingest")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        loader.build_vector_index(model, 384, 16, 64, "2GB")
    loader.close()
    reports, baseline = [], None
    for options in option_sets:
        with MemoryStore.open(url, embeddings=False, embedding_model=model, backend_options=options) as store:
            report, tops = measure(store, data)
        if baseline is None:
            baseline = tops
        overlap = [len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(baseline, tops)]
        report.update(options=options, n=n, top10_overlap_with_first=round(float(np.mean(overlap)), 3),
                      load=round(os.getloadavg()[0], 2))
        print(json.dumps(report), flush=True)
        reports.append(report)
    if not keep:
        server.cleanup()
    return reports


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000,
         [json.loads(a) for a in sys.argv[2:]] or [{}])
