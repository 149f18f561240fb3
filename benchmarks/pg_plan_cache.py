"""The wrapped HNSW statement of a search, planned afresh each time (the plain form, PostgreSQL's
own choice of custom plans) against the plan-fixed form under one generic plan (``Pins``), on
two connections, query by query, the order alternating; and whether they return the same rows.
On the data ``pg_langchain_ab.py`` loaded (run that first; its server settings are kept).

    PYTHONPATH=. python benchmarks/pg_plan_cache.py 10000 [QUERIES] [PGDATA]
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np


def main(n: int, queries: int, pgdata: str) -> None:
    import pgserver
    import psycopg
    from psycopg.rows import dict_row

    from navi_memory.backends.base import Beside, Filters
    from navi_memory.backends.postgres import sql as q
    from navi_memory.bench.data import Corpus, Dataset, Vectors
    from navi_memory.models import utcnow

    url = pgserver.get_server(pgdata, cleanup_mode=None).get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), queries + 21, 42)
    forms = ("plain", "pinned")
    conns = {}
    for form in forms:
        conn = psycopg.connect(url, row_factory=dict_row, autocommit=True)
        q.adapt_vectors(conn)
        conn.execute("SET hnsw.ef_search = 300")
        conn.execute("SET plan_cache_mode = " + ("force_generic_plan" if form == "pinned" else "auto"))
        conns[form] = conn
    times: dict[str, list[float]] = {form: [] for form in forms}
    differ = 0
    for i in range(1, queries + 21):
        f = Filters(user_id=data.query_user(i), now=utcnow())
        vector = np.asarray(data.query_vectors[i], dtype=np.float32)
        statements = {form: q.hits_beside(*q.semantic_candidates(
            f, "bench-384", 384, vector, 50, wide=True, index_depth=300 if form == "pinned" else None),
            f, Beside(model="bench-384", neighbours=True)) for form in forms}
        rows = {}
        for form in forms if i % 2 else forms[::-1]:
            start = time.perf_counter()
            rows[form] = [(r["id"], round(r["score"], 6)) for r in conns[form].execute(*statements[form]).fetchall()]
            if i > 20:
                times[form].append((time.perf_counter() - start) * 1000)
        differ += rows["plain"] != rows["pinned"]
    for form in forms:
        plans = conns[form].execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements").fetchall()
        print(f"{form:7s} p50 {statistics.median(times[form]):6.2f} ms  p95 {np.percentile(times[form], 95):6.2f} ms"
              f"  plans {plans}")
    print(f"queries whose rows or scores differ: {differ} of {queries}")


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    main(size, int(sys.argv[2]) if len(sys.argv) > 2 else 300,
         sys.argv[3] if len(sys.argv) > 3 else f"/tmp/navi-pg-ab-{size}")
