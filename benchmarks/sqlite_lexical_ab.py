"""SQLite lexical candidates at 100k across users (the shared FTS5 index, ``_shared_candidates``): the backend's query beside the query used before the narrow
one (rank the best max(4k, 200) in FTS5, join items, filter), on the database of
``sqlite_search_ab.py`` (build it with that script first). CPU time of this thread (``thread_time``), so
load from other processes counts less than in wall time; whether the candidates and their order are
identical; and with ``--budget N`` (approximate, ``lexical_row_budget``) recall of the top k.

    PYTHONPATH=. python benchmarks/sqlite_lexical_ab.py [--budget 1000 --budget 2000]
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timezone
from functools import partial

import numpy as np

from navi_memory.backends.base import Filters
from navi_memory.backends.sqlite.backend import SQLiteBackend
from navi_memory.backends.sqlite.search import filter_sql
from navi_memory.bench.data import Corpus, Dataset, Vectors
from navi_memory.retrieval.query import fts5_or_expression
from navi_memory.retrieval.search import SearchPlan


def wide(backend: SQLiteBackend, filters: Filters, terms: list[str], k: int) -> list[tuple[int, float]]:
    where, params = filter_sql(filters)
    sql = ("SELECT i.id, f.rank FROM (SELECT rowid, bm25(items_fts, 2.0, 1.0, 0.3) AS rank FROM items_fts"
           " WHERE items_fts MATCH ? ORDER BY rank LIMIT ?) f JOIN items i ON i.id = f.rowid"
           f" WHERE {where} ORDER BY f.rank LIMIT ?")
    expression = fts5_or_expression(terms)
    with backend._transaction(write=False) as conn:
        rows = conn.execute(sql, [expression, max(4 * k, 200), *params, k]).fetchall()
        if len(rows) < k:
            rows = conn.execute(sql, [expression, -1, *params, k]).fetchall()
    return [(r[0], -float(r[1])) for r in rows]


def alternately(calls: dict, n: int, spent: dict[str, list[float]] | None) -> dict:
    """Each call's result; its CPU milliseconds appended to ``spent`` (None: not timed). Which runs
    first alternates with ``n`` (warm caches)."""
    got = {}
    for name in sorted(calls, reverse=n % 2 == 1):
        start = time.thread_time()
        got[name] = calls[name]()
        if spent is not None:
            spent.setdefault(name, []).append((time.thread_time() - start) * 1000)
    return got


def summary(spent: dict[str, list[float]]) -> str:
    return " | ".join(f"{name} p50 {np.median(v):.2f} p95 {np.percentile(v, 95):.2f}" for name, v in spent.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", default="/tmp/navi-search-ab")
    parser.add_argument("--budget", type=int, action="append", default=[])
    args = parser.parse_args()
    data = Dataset.create(Corpus(42), args.n, "one", 1000, Vectors("gaussian", 384, 42), args.queries + 21, 42)
    asked = []
    for i in range(21, len(data.queries)):
        plan = SearchPlan.create(data.queries[i], "weighted")
        asked.append((data.query_user(i), list(plan.terms), plan.k))
    for budget in [None, *args.budget]:
        backend = SQLiteBackend(f"{args.dir}/bench-{args.n}.db", create=False, lexical_row_budget=budget)
        spent: dict[str, list[float]] = {"before": [], "now": []}
        same, recall = 0, []
        for n, (user, terms, k) in enumerate(asked):
            f = Filters(user_id=user, now=datetime.now(timezone.utc))
            calls = {"before": partial(wide, backend, f, terms, k),
                     "now": partial(backend._shared_candidates, f, terms, k)}
            got = alternately(calls, n, spent)
            reference, ours = got["before"], got["now"]
            same += ours == reference
            recall.append(len({i for i, _ in ours} & {i for i, _ in reference}) / max(1, len(reference)))
        print(f"budget {budget}: CPU ms {summary(spent)} | identical {same}/{len(asked)} | recall@k {np.mean(recall):.3f}"
              f" | load {os.getloadavg()[0]:.2f}")
        backend.close()


if __name__ == "__main__":
    main()
