"""Peers for the PostgreSQL benchmark, on the same server, data and queries (imported lazily).

``langchain``: langchain-postgres ``PGVectorStore`` with its hybrid search (dense HNSW query plus
``ts_rank_cd`` full-text query, fused in Python by ``weighted_sum_ranking``), one table with the
user as a metadata column, filtered per query like navi-memory. Its table is filled server-side
from navi-memory's rows (``INSERT ... SELECT``: its own ``add_embeddings`` inserts one row per
transaction, which is timed separately on a sample), then it gets its own indexes through its API
(``apply_vector_index(HNSWIndex(m, ef_construction))``, ``apply_hybrid_search_index()``) and a
btree on the user column, as anyone filtering by user would add. ``hnsw.ef_search`` is set to the
backend's (``HNSWQueryOptions``), and each search asks for 50 candidates per signal like
navi-memory's weighted fusion.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from .data import Dataset

TABLE, SAMPLE_TABLE = "langchain_bench", "langchain_bench_ingest"
CANDIDATES = 50


def _sqlalchemy_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def _stats(ms: list[float]) -> dict[str, float]:
    arr = np.asarray(ms)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3),
            "mean": round(float(arr.mean()), 3)}


def langchain(url: str, data: Dataset, ids: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Load, index and time langchain-postgres PGVectorStore hybrid search on the same data."""
    from importlib.metadata import version

    import psycopg
    from langchain_core.embeddings import Embeddings
    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig, weighted_sum_ranking
    from langchain_postgres.v2.indexes import HNSWIndex, HNSWQueryOptions
    from psycopg import sql

    from ..backends.postgres import PostgresQueries
    from ..progress import Progress
    from .latency import load

    class VectorsOnly(Embeddings):  # every call passes its vector: nothing is embedded
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("the benchmark passes vectors")

        def embed_query(self, text: str) -> list[float]:
            raise RuntimeError("the benchmark passes vectors")

    def config(query: str = "") -> Any:
        return HybridSearchConfig(tsv_column="content_tsv", fts_query=query, primary_top_k=CANDIDATES,
                                  secondary_top_k=CANDIDATES, fusion_function=weighted_sum_ranking)

    ef_search, (m, efc) = PostgresQueries.ef_search, args.hnsw[0]
    engine = PGEngine.from_connection_string(_sqlalchemy_url(url))
    out: dict[str, Any] = {"backend": "langchain-postgres " + version("langchain-postgres"), "ef_search": ef_search}
    try:
        def table(name: str) -> Any:
            engine.init_vectorstore_table(name, args.dim, metadata_columns=[Column("user_id", "TEXT", nullable=False)],
                                          id_column=Column("langchain_id", "BIGINT", nullable=False),
                                          hybrid_search_config=config(), overwrite_existing=True)
            return PGVectorStore.create_sync(engine, VectorsOnly(), name, metadata_columns=["user_id"],
                                             id_column="langchain_id", hybrid_search_config=config(),
                                             index_query_options=HNSWQueryOptions(ef_search=ef_search))

        sample = table(SAMPLE_TABLE)
        rows = min(2000, data.n)
        start = time.perf_counter()
        sample.add_embeddings(data.texts[:rows], [v.tolist() for v in data.vectors[:rows]],
                              [{"user_id": data.users[data.owner[i]]} for i in range(rows)],
                              [int(i) for i in ids[:rows]])
        out["api_ingest_items_per_s"] = round(rows / (time.perf_counter() - start), 1)
        out["api_ingest_rows"] = rows

        store = table(TABLE)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(SAMPLE_TABLE)))
            start = time.perf_counter()
            conn.execute(sql.SQL(
                "INSERT INTO {} (langchain_id, content, embedding, content_tsv, user_id, langchain_metadata)"
                " SELECT i.id, i.content, e.embedding::vector({d}), to_tsvector('pg_catalog.english', i.content),"
                " i.user_id, '{{}}'::json FROM items i JOIN embeddings e ON e.user_id = i.user_id AND e.item_id = i.id"
            ).format(sql.Identifier(TABLE), d=sql.Literal(args.dim)))
            out["copy_s"] = round(time.perf_counter() - start, 1)
            out["index_load"] = load()
            start = time.perf_counter()
            store.apply_vector_index(HNSWIndex(m=m, ef_construction=efc))
            out["index_build_s"] = round(time.perf_counter() - start, 1)
            start = time.perf_counter()
            store.apply_hybrid_search_index()
            conn.execute(sql.SQL("CREATE INDEX ON {} (user_id)").format(sql.Identifier(TABLE)))
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(TABLE)))
            out["other_indexes_s"] = round(time.perf_counter() - start, 1)

        times, progress = [], Progress(f"langchain n={data.n} {data.layout} search", len(data.queries) - 1)
        for i in range(1, len(data.queries)):
            user = {"user_id": {"$eq": data.query_user(i)}}
            start = time.perf_counter()
            store.similarity_search_with_score_by_vector(data.query_vectors[i].tolist(), k=10, filter=user,
                                                         hybrid_search_config=config(data.queries[i]))
            if i > args.warmup:
                times.append((time.perf_counter() - start) * 1000.0)
            progress(i)
        progress.close()
        out["search_ms"] = {**_stats(times), "load": load()}

        indexes = list(range(1, min(args.recall_queries, len(data.queries) - 1) + 1))
        hits = 0
        for i, want in zip(indexes, data.exact_top(ids, indexes)):
            dense = store.similarity_search_with_score_by_vector(  # no fts_query: the dense query alone
                data.query_vectors[i].tolist(), k=10, filter={"user_id": {"$eq": data.query_user(i)}})
            hits += len(want & {int(doc.id) for doc, _ in dense[:10]})
        out["recall_at_10"] = round(hits / (10 * len(indexes)), 4)
    finally:
        engine._run_as_sync(engine.close())
    return out


def format_langchain(r: dict[str, Any]) -> str:
    lc = r["langchain"]
    s = lc["search_ms"]
    return (f"{lc['backend']} ({r['layout']}, N={r['n']:,}): hybrid p50 {s['p50']:.2f} ms, p95 {s['p95']:.2f} ms"
            f" (load {s['load']:.2f}); dense recall@10 {lc['recall_at_10']:.3f} at ef_search {lc['ef_search']};"
            f" HNSW build {lc['index_build_s']:.1f} s; add_embeddings {lc['api_ingest_items_per_s']:,.0f} rows/s"
            f" ({lc['api_ingest_rows']} rows); server-side copy {lc['copy_s']:.1f} s")
