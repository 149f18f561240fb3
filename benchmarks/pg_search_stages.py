"""Time of each backend call inside navi-memory's PostgreSQL search (the calls made at once are
timed each on its own thread; those sent together on one connection, ``run_shared``, as one line
named a+b), on the data ``pg_langchain_ab.py`` loaded (run that first).

    PYTHONPATH=. python benchmarks/pg_search_stages.py 100000 [QUERIES] [PGDATA]
"""

from __future__ import annotations

import collections
import os
import sys
import time
from typing import Any

import numpy as np

CALLS = ("lexical_hits", "persons_named", "semantic_hits", "semantic_scores", "neighbours",
         "rank_rows", "fetch_items")


def main(n: int, queries: int, pgdata: str) -> None:
    import pgserver

    from navi_memory import MemoryStore, Settings
    from navi_memory.bench.data import Corpus, Dataset, Vectors

    url = pgserver.get_server(pgdata, cleanup_mode=None).get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), queries + 21, 42)
    store = MemoryStore.open(url, embeddings=False, embedding_model="bench-384",
                             settings=Settings(url=url, embeddings="none"))
    spent: dict[str, list[float]] = collections.defaultdict(list)
    for name in CALLS:  # the store calls the backend's methods by name: time them on the instance
        def timed(*args: Any, _call: Any = getattr(store.backend, name), _name: str = name, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _call(*args, **kwargs)
            finally:
                spent[_name].append((time.perf_counter() - start) * 1000)
        setattr(store.backend, name, timed)
    shared = getattr(store.backend, "run_shared", None)  # calls sent together on one connection: timed as one

    def together(calls: Any) -> Any:
        start = time.perf_counter()
        try:
            return shared(calls)  # type: ignore[misc]
        finally:
            spent["+".join(c.method for c in calls)].append((time.perf_counter() - start) * 1000)
    if shared is not None:
        store.backend.run_shared = together
    total = []
    for i in range(1, queries + 21):
        if i == 21:  # after the warm-up
            spent.clear()
        start = time.perf_counter()
        store.search(data.queries[i], user_id=data.query_user(i), query_embedding=data.query_vectors[i])
        if i > 20:
            total.append((time.perf_counter() - start) * 1000)
    print(f"n={n} search p50 {np.percentile(total, 50):.2f} p95 {np.percentile(total, 95):.2f}"
          f" | load {os.getloadavg()[0]:.2f}")
    for name in [*CALLS, *sorted(set(spent) - set(CALLS))]:
        if spent[name]:
            p50, p95 = np.percentile(spent[name], [50, 95])
            print(f"  {name:20s} calls {len(spent[name]):4d}  p50 {p50:6.2f}  p95 {p95:6.2f}")
    store.close()


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    main(size, int(sys.argv[2]) if len(sys.argv) > 2 else 200,
         sys.argv[3] if len(sys.argv) > 3 else f"/tmp/navi-pg-ab-{size}")
