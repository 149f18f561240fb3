"""navi-memory's PostgreSQL search against langchain-postgres' hybrid search on the same server and
rows, query by query, the order of the two alternating (the second search of a query runs on warm
caches, so a fixed order favours one side). N items of one user (``bench latency``'s generator,
``lowrank`` vectors, seed 42); HNSW m=16, ef_construction=64, ef_search 300 on both sides.

    PYTHONPATH=. python benchmarks/pg_langchain_ab.py 100000 [QUERIES] [PGDATA] [--tuned]

The pgserver data directory (default /tmp/navi-pg-ab-N) is kept: a later run skips the load.
pgserver starts with PostgreSQL's defaults (shared_buffers 128 MB: at 100k neither HNSW index
fits, and both sides read pages from the OS cache); ``--tuned`` restarts it with the settings of
``navi-memory bench latency --postgres pgserver`` (shared_buffers 4 GB, ...) and keeps them.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np


def main(n: int, queries: int, pgdata: str, tuned: bool) -> None:
    import pgserver
    import psycopg
    from psycopg import sql
    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import weighted_sum_ranking
    from langchain_postgres.v2.indexes import HNSWIndex, HNSWQueryOptions

    from navi_memory import MemoryStore, Settings
    from navi_memory.backends import open_backend
    from navi_memory.bench import latency
    from navi_memory.bench.data import Corpus, Dataset, Vectors
    from navi_memory.bench.peers import CANDIDATES, hybrid_config, sqlalchemy_url, vectors_only
    from navi_memory.config import parse_url

    from navi_memory.bench.postgres import PGSERVER_SETTINGS

    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        wanted = PGSERVER_SETTINGS if tuned else {name: None for name in PGSERVER_SETTINGS}
        for name, value in wanted.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
                         if value is not None else sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
        buffers = conn.execute("SHOW shared_buffers").fetchone()[0]
    if buffers != ("4GB" if tuned else "128MB"):  # shared_buffers takes a restart
        server.cleanup()  # stops it (cleanup_mode "stop"); started again with the settings
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
    url = server.get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), queries + 21, 42)
    model, settings = "bench-384", Settings(url=url, embeddings="none")
    with psycopg.connect(url) as conn:
        loaded = bool(conn.execute("SELECT to_regclass('lc')").fetchone()[0])

    def config(query: str = "") -> object:
        return hybrid_config(query, CANDIDATES, weighted_sum_ranking)

    engine = PGEngine.from_connection_string(sqlalchemy_url(url))
    if not loaded:
        loader = open_backend(parse_url(url), defer_vector_index=True)
        loader.migrate()
        latency.ingest(MemoryStore(loader, None, settings=settings, embedding_model=model), data, 1000, "ingest")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        loader.build_vector_index(model, 384, 16, 64, "2GB")
        loader.close()
        engine.init_vectorstore_table("lc", 384, metadata_columns=[Column("user_id", "TEXT", nullable=False)],
                                      id_column=Column("langchain_id", "BIGINT", nullable=False),
                                      hybrid_search_config=config(), overwrite_existing=True)
    peer = PGVectorStore.create_sync(engine, vectors_only(), "lc", metadata_columns=["user_id"],
                                     id_column="langchain_id", hybrid_search_config=config(),
                                     index_query_options=HNSWQueryOptions(ef_search=300))
    if not loaded:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO lc (langchain_id, content, embedding, content_tsv, user_id, langchain_metadata)"
                         " SELECT i.id, i.content, e.embedding::vector(384), to_tsvector('pg_catalog.english',"
                         " i.content), i.user_id, '{}'::json FROM items i JOIN embeddings e"
                         " ON e.user_id = i.user_id AND e.item_id = i.id")
            peer.apply_vector_index(HNSWIndex(m=16, ef_construction=64))
            peer.apply_hybrid_search_index()
            conn.execute("CREATE INDEX ON lc (user_id)")
            conn.execute("VACUUM ANALYZE lc")
    store = MemoryStore.open(url, embeddings=False, embedding_model=model, settings=settings)

    def ours(i: int) -> None:
        store.search(data.queries[i], user_id=data.query_user(i), query_embedding=data.query_vectors[i])

    def theirs(i: int) -> None:
        peer.similarity_search_with_score_by_vector(data.query_vectors[i].tolist(), k=10,
                                                    filter={"user_id": {"$eq": data.query_user(i)}},
                                                    hybrid_search_config=config(data.queries[i]))

    spent: dict[str, list[float]] = {"navi": [], "langchain": []}
    for i in range(1, queries + 21):
        pair = [("navi", ours), ("langchain", theirs)]
        for name, fn in pair if i % 2 == 0 else pair[::-1]:
            start = time.perf_counter()
            fn(i)
            if i > 20:
                spent[name].append((time.perf_counter() - start) * 1000)
    a, b = (np.percentile(spent[k], [50, 95]) for k in ("navi", "langchain"))
    print(f"n={n} shared_buffers {'4GB' if tuned else '128MB'} navi p50 {a[0]:.2f} p95 {a[1]:.2f}"
          f" | langchain p50 {b[0]:.2f} p95 {b[1]:.2f}"
          f" | langchain/navi p50 {b[0] / a[0]:.2f} p95 {b[1] / a[1]:.2f} | load {os.getloadavg()[0]:.2f}")
    store.close()
    engine._run_as_sync(engine.close())


if __name__ == "__main__":
    tuned = "--tuned" in sys.argv
    argv = [a for a in sys.argv[1:] if a != "--tuned"]
    size = int(argv[0]) if argv else 100_000
    main(size, int(argv[1]) if len(argv) > 1 else 200, argv[2] if len(argv) > 2 else f"/tmp/navi-pg-ab-{size}", tuned)
