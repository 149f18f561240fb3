"""Search beside a bare scan at 100k on SQLite, for A/B runs of two checkouts (run each with its
own PYTHONPATH, one after the other). The database is built once (``bench latency``'s generator,
one user, seed 42, lowrank vectors unless --vectors gaussian) under --dir and reused, so only search is timed.

    PYTHONPATH=. python benchmarks/sqlite_search_ab.py            # search p50/p95, bare p50, ratio
    PYTHONPATH=. python benchmarks/sqlite_search_ab.py --stages   # median ms of each backend call
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import navi_memory.bench  # noqa: F401  # before numpy: idle OpenBLAS threads sleep at once (see there)
import numpy as np
from navi_memory.backends.base import Filters
from navi_memory.bench.data import Corpus, Dataset, Vectors
from navi_memory.bench.measure import ingest, open_store
from navi_memory.bench.scan import _unit_rows, bare_top, wait_for_graphs
from navi_memory.retrieval.search import SearchPlan

MODEL = "bench-384"


def stages(store, data, by_user, queries: range) -> dict[str, float]:
    """Each candidate call on its own (as the search makes them), beside the bare scan."""
    backend, spent = store.backend, {k: [] for k in ("bare", "fts", "semantic", "scores", "neighbours", "rows")}
    for i in queries:
        user = int(data.query_owner[i])
        query = np.asarray(data.query_vectors[i], np.float32)
        f = Filters(user_id=data.users[user], now=datetime.now(timezone.utc))
        plan = SearchPlan.create(data.queries[i], "weighted")
        marks = [time.perf_counter()]
        bare_top(by_user[user][1], query / np.linalg.norm(query))
        marks.append(time.perf_counter())
        lexical = backend.lexical_hits(f, plan.terms, plan.k).scored
        marks.append(time.perf_counter())
        semantic = backend.semantic_hits(f, MODEL, query, plan.k).scored
        marks.append(time.perf_counter())
        extra = backend.semantic_scores(f, MODEL, query, plan.missing_semantic(lexical, semantic))
        marks.append(time.perf_counter())
        fused = plan.fuse(lexical, semantic, [], extra)
        backend.neighbours(f, list(fused))
        marks.append(time.perf_counter())
        backend.rank_rows(f.user_id, list(fused))
        backend.fetch_items(f.user_id, list(fused)[:10])
        marks.append(time.perf_counter())
        for name, a, b in zip(spent, marks, marks[1:]):
            spent[name].append((b - a) * 1000)
    return {k: round(float(np.median(v)), 2) for k, v in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", default="/tmp/navi-search-ab")
    parser.add_argument("--stages", action="store_true")
    parser.add_argument("--vectors", choices=("lowrank", "gaussian"), default="lowrank")
    args = parser.parse_args()
    data = Dataset.create(Corpus(42), args.n, "one", 1000, Vectors(args.vectors, 384, 42), args.queries + 21, 42)
    path = Path(args.dir) / f"bench-{args.n}{'' if args.vectors == 'gaussian' else '-' + args.vectors}.db"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        loader = open_store(f"sqlite:///{path}", MODEL)
        ingest(loader, data, 1000, "ingest")
        loader.close()
    store = open_store(f"sqlite:///{path}", MODEL)
    by_user = _unit_rows(data)

    def search(i: int) -> None:
        store.search(data.queries[i], user_id=data.query_user(i), query_embedding=data.query_vectors[i])

    for i in range(1, 21):
        search(i)
    print(wait_for_graphs(store) or "no graph")
    timed = range(21, len(data.queries))
    if args.stages:
        print(stages(store, data, by_user, timed), f"load {os.getloadavg()[0]:.2f}")
        return
    ours, bare = [], []
    for i in timed:
        user = int(data.query_owner[i])
        query = np.asarray(data.query_vectors[i], np.float32)
        start = time.perf_counter()
        search(i)
        middle = time.perf_counter()
        bare_top(by_user[user][1], query / np.linalg.norm(query))
        ours.append((middle - start) * 1000)
        bare.append((time.perf_counter() - middle) * 1000)
    s, b = np.percentile(ours, [50, 95]), np.percentile(bare, [50, 95])
    print(f"search p50 {s[0]:.2f} p95 {s[1]:.2f} | bare p50 {b[0]:.2f} | ratio {s[0] / b[0]:.2f}"
          f" | load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
