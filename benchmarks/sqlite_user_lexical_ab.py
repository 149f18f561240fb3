"""SQLite lexical candidates of one user: the per-user index (``lexical_hits``, BM25 with the user's
statistics) beside FTS5's ``bm25()`` on the shared ``items_fts`` (``_shared_candidates``, the query used
before, statistics of every user), on one database built by the current code. CPU time of this thread
(``thread_time``: other processes' load counts less than in wall time), the overlap of the two top k,
and the CPU time of ``add_many`` when it builds the database (only when ``--dir`` does not hold it yet).

    PYTHONPATH=. python benchmarks/sqlite_user_lexical_ab.py --layout one [--n 100000] [--dir /tmp/lexab]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import numpy as np

from navi_memory.backends.base import Filters
from navi_memory.bench.data import Corpus, Dataset, Vectors
from navi_memory.bench.measure import open_store
from navi_memory.retrieval.search import SearchPlan

sys.path.insert(0, str(Path(__file__).parent))
from sqlite_lexical_ab import alternately, summary  # noqa: E402


def build(path: Path, data: Dataset) -> None:
    store = open_store(f"sqlite:///{path}", "bench")
    cpu = 0.0
    for rows in data.batches(1000):
        start = time.process_time()
        store.add_many(rows)
        cpu += time.process_time() - start
    store.close()
    print(f"built {path}: add_many CPU {cpu:.1f} s, {data.n / cpu:.0f} items per CPU second, load {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--layout", default="one")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", default="/tmp/navi-user-lexical-ab")
    args = parser.parse_args()
    data = Dataset.create(Corpus(42), args.n, args.layout, 1000, Vectors("lowrank", 8, 42), args.queries + 21, 42)
    path = Path(args.dir) / f"bench-{args.n}-{args.layout}.db"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        build(path, data)
    store = open_store(f"sqlite:///{path}", None)
    backend = store.backend
    asked = []
    for i in range(len(data.queries)):
        plan = SearchPlan.create(data.queries[i], "weighted")
        asked.append((data.query_user(i), list(plan.terms), plan.k))
    spent: dict[str, list[float]] = {"shared index": [], "per user": []}
    overlap = []
    for n, (user, terms, k) in enumerate(asked):
        f = Filters(user_id=user, now=datetime.now(timezone.utc))
        calls = {"shared index": partial(backend._shared_candidates, f, terms, k),
                 "per user": lambda: backend.lexical_hits(f, terms, k).scored}
        got = alternately(calls, n, spent if n >= 21 else None)
        if n >= 21:
            ours, shared = ({i for i, _ in got[name]} for name in ("per user", "shared index"))
            overlap.append(len(ours & shared) / max(1, len(shared)))
    print(f"{args.layout} n={args.n}: CPU ms {summary(spent)} | same rows in the top k {np.mean(overlap):.3f}"
          f" | load {os.getloadavg()[0]:.2f}")
    store.close()


if __name__ == "__main__":
    main()
