"""Recall@10 of the HNSW candidates against exact nearest neighbours, navi-memory's index and
langchain-postgres' table side by side, on the data ``pg_langchain_ab.py`` loaded (run that
first), each at the ef_search it searches with (navi-memory: ``max(ef_search, k)`` = 300 for k 50;
langchain-postgres: the ``HNSWQueryOptions(ef_search=300)`` the A/B passes), and at pgvector's
default 40 for comparison.

    PYTHONPATH=. python benchmarks/pg_ann_recall.py 100000 [QUERIES] [PGDATA]
"""

from __future__ import annotations

import sys

import numpy as np

K, CANDIDATES = 10, 50


def main(n: int, queries: int, pgdata: str) -> None:
    import pgserver
    import psycopg
    from pgvector.psycopg.vector import VectorDumper

    from navi_memory.bench.data import Corpus, Dataset, Vectors

    url = pgserver.get_server(pgdata, cleanup_mode=None).get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), queries + 21, 42)
    ours = ("SELECT e.item_id AS id FROM embeddings e WHERE e.user_id = %s AND e.model = 'bench-384'"
            " AND e.dimensions = 384 AND e.state = 'ready' ORDER BY e.embedding::vector(384) <=> %s::vector(384)"
            " LIMIT %s")
    theirs = "SELECT langchain_id AS id FROM lc WHERE user_id = %s ORDER BY embedding <=> %s::vector(384) LIMIT %s"
    exact = ("SELECT item_id AS id FROM embeddings WHERE user_id = %s AND model = 'bench-384'"
             " ORDER BY embedding <=> %s::vector LIMIT %s")  # the uncast column: no index serves it
    found: dict[str, list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.adapters.register_dumper(np.ndarray, VectorDumper)
        for i in range(1, queries + 1):
            user, vector = data.query_user(i), np.asarray(data.query_vectors[i], dtype=np.float32)
            truth = {r[0] for r in conn.execute(exact, [user, vector, K])}
            for ef in (300, 40):
                for name, text in (("navi-memory", ours), ("langchain-postgres", theirs)):
                    with conn.transaction():
                        conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                        got = [r[0] for r in conn.execute(text, [user, vector, CANDIDATES])][:K]
                    found.setdefault(f"{name} ef_search {ef}", []).append(len(truth & set(got)) / K)
    for name, values in found.items():
        print(f"n={n} {name}: recall@{K} {np.mean(values):.3f} over {queries} queries")


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    main(size, int(sys.argv[2]) if len(sys.argv) > 2 else 100,
         sys.argv[3] if len(sys.argv) > 3 else f"/tmp/navi-pg-ab-{size}")
