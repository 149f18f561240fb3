"""Peers of the latency benchmark: the same data and the same queries, timed in the same run.

``bm25``: plain BM25 (bm25s, Okapi, English stop words, no stemming), one index per user, as an
application keeping a keyword index per user would; it is compared with navi-memory's lexical
search as well as its hybrid one. Ingest = tokenising and indexing every user's texts.

``langgraph``: LangGraph's ``InMemoryStore`` with an index (``{"dims": D, "embed": fn, "fields":
["text"]}``), one namespace per user, each item ``put`` on its own (the store's API). ``fn`` looks
the precomputed vectors up by text (as lists, the ``Embeddings`` contract, converted before
timing), so what is timed is the store, not an embedding model. Its search scores every vector
of the namespace (numpy over Python lists) and sorts in Python: exact, hence its recall@10
against brute force is a check of the wiring, not of an index. Memory grows with N (Python floats:
about 12 KB per 384-d item), so it is skipped above ``--langgraph-max-n``.

``langchain``: langchain-postgres ``PGVectorStore`` with its hybrid search (dense HNSW query plus
``ts_rank_cd`` full-text query, fused in Python by ``weighted_sum_ranking``), one table with the
user as a metadata column, filtered per query like navi-memory. Its table is filled server-side
from navi-memory's rows (``INSERT ... SELECT``: its own ``add_embeddings`` inserts one row per
transaction, which is timed separately on a sample), then it gets its own indexes through its API
(``apply_vector_index(HNSWIndex(m, ef_construction))``, ``apply_hybrid_search_index()``) and a
btree on the user column, as anyone filtering by user would add. ``hnsw.ef_search`` is set to the
backend's (``HNSWQueryOptions``), and each search asks for 50 candidates per signal like
navi-memory's weighted fusion. PostgreSQL only.

Every peer returns 10 results per query, like ``store.search``'s default limit.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import time
from importlib.metadata import version
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigurationError
from .data import Dataset

PEERS = ("bm25", "langgraph", "langchain")
LOCAL = ("bm25", "langgraph")  # run in-process, next to any backend
TABLE, SAMPLE_TABLE = "langchain_bench", "langchain_bench_ingest"
CANDIDATES = 50
LIMIT = 10


def sqlalchemy_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def check(names: list[str], postgres: bool) -> None:
    if "langchain" in names and not postgres:
        raise ConfigurationError("the langchain peer runs on PostgreSQL:"
                                 " add --postgres pgserver or --db postgresql://...")


def run_local(data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    """The in-process peers asked for in ``--peers``, in order."""
    out: dict[str, Any] = {}
    for name in args.peers:
        if name == "bm25":
            out[name] = bm25(data, args)
        elif name == "langgraph":
            if data.n > args.langgraph_max_n:
                out[name] = {"backend": "langgraph InMemoryStore", "skipped": f"N above --langgraph-max-n"
                             f" {args.langgraph_max_n:,} (memory and time grow linearly: every search scores"
                             " every vector from Python lists)"}
            else:
                out[name] = langgraph(data, args)
    return out


def _by_user(data: Dataset) -> dict[int, np.ndarray]:
    order = np.argsort(data.owner, kind="stable")
    bounds = np.flatnonzero(np.diff(data.owner[order])) + 1
    return {int(data.owner[rows[0]]): rows for rows in np.split(order, bounds) if len(rows)}


def bm25_tokens(texts: list[str]) -> list[list[str]]:
    """bm25s' tokenizer: lower case, words of 2+ characters, English stop words out, no stemming."""
    import bm25s

    tokens: list[list[str]] = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    return tokens


def bm25_index(texts: list[str]) -> Any:
    """A bm25s BM25 (Okapi, k1 1.5, b 0.75) over ``texts``."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on import: one line per index built
    tokens = bm25_tokens(texts)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    return retriever


def bm25(data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    """bm25s indexes, one per user; timed retrieval of the top 10 for every query."""
    from .measure import load, time_queries

    importlib.import_module("bm25s")  # before the clock starts: importing is not ingesting
    ingest_load = load()
    start = time.perf_counter()
    indexes = {user: (bm25_index([data.texts[i] for i in rows]), rows) for user, rows in _by_user(data).items()}
    seconds = time.perf_counter() - start

    def search(i: int) -> list[int]:
        found = indexes.get(int(data.query_owner[i]))
        if found is None:
            return []
        retriever, rows = found
        docs, _ = retriever.retrieve(bm25_tokens([data.queries[i]]), k=min(LIMIT, len(rows)), show_progress=False)
        return [int(rows[d]) for d in docs[0]]

    stats, _ = time_queries(f"bm25 n={data.n} {data.layout} search", data, args.warmup, search)
    return {"backend": "bm25s " + version("bm25s"), "ingest_items_per_s": round(data.n / seconds, 1),
            "ingest_load": ingest_load, "search_ms": stats, "compare_with": "lexical_search_ms"}


def langgraph(data: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    """LangGraph InMemoryStore with a vector index fed the precomputed vectors; put and search timed."""
    from langgraph.store.base import IndexConfig
    from langgraph.store.memory import InMemoryStore

    from ..progress import Progress
    from .measure import load, time_queries

    vectors: dict[str, list[float]] = {}
    for text, vector in zip(data.texts, data.vectors):
        vectors.setdefault(text, vector.tolist())  # a repeated text keeps its first vector
    for text, vector in zip(data.queries, data.query_vectors):
        vectors[text] = vector.tolist()  # queries have no capital or full stop: never an item's text

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [vectors[t] for t in texts]

    index: IndexConfig = {"dims": int(data.vectors.shape[1]), "embed": embed, "fields": ["text"]}
    store = InMemoryStore(index=index)
    label = f"langgraph n={data.n} {data.layout}"
    ingest_load, progress, seconds = load(), Progress(f"{label} put", data.n), 0.0
    for start_row in range(0, data.n, args.batch):
        start = time.perf_counter()
        for i in range(start_row, min(start_row + args.batch, data.n)):
            store.put(("bench", data.users[data.owner[i]]), str(i), {"text": data.texts[i]})
        seconds += time.perf_counter() - start
        progress(min(start_row + args.batch, data.n))
    progress.close()

    def search(i: int) -> list[int]:
        found = store.search(("bench", data.query_user(i)), query=data.queries[i], limit=LIMIT)
        return [int(item.key) for item in found]

    stats, answers = time_queries(f"{label} search", data, args.warmup, search)
    indexes = list(range(1, min(args.recall_queries, len(data.queries) - 1) + 1))
    truth = data.exact_top(np.arange(data.n), indexes)
    hits = sum(len(want & set(answers[i - 1])) for i, want in zip(indexes, truth))
    return {"backend": "langgraph InMemoryStore " + version("langgraph"),
            "ingest_items_per_s": round(data.n / seconds, 1),
            "ingest_load": ingest_load, "search_ms": stats, "compare_with": "search_ms",
            "recall_at_10": round(hits / (LIMIT * len(indexes)), 4)}


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Peer latency divided by navi-memory's in the same run: > 1 means the peer is slower."""
    out = {}
    for name, peer in result.get("peers", {}).items():
        if "search_ms" not in peer:
            continue
        row = {}
        for ours in ("search_ms", "lexical_search_ms"):
            row[ours.removesuffix("_ms")] = {p: round(peer["search_ms"][p] / result[ours][p], 3)
                                             for p in ("p50", "p95")}
        out[name] = row
    return out


def format_ratios(report: dict[str, Any]) -> str:
    lines = ["", "Peers, same data and queries (ratio = peer / navi-memory; hybrid search, and lexical search)",
             f"{'peer':<12} {'ours on':<10} {'layout':<7} {'N':>9} {'ingest/s':>10} {'p50 ms':>8} {'p95 ms':>8}"
             f" {'load':>5} {'vs hybrid p50/p95':>18} {'vs lexical p50/p95':>19}"]
    for r in report["results"]:
        for name, peer in r.get("peers", {}).items():
            if "search_ms" not in peer:
                lines.append(f"{name:<12} {r['backend']:<10} {r['layout']:<7} {r['n']:>9,} skipped: {peer['skipped']}")
                continue
            s, q = peer["search_ms"], r["ratios"][name]
            ingest = peer.get("ingest_items_per_s", peer.get("api_ingest_items_per_s", 0))
            lines.append(f"{name:<12} {r['backend']:<10} {r['layout']:<7} {r['n']:>9,} {ingest:>10,.0f}"
                         f" {s['p50']:>8.2f} {s['p95']:>8.2f} {s['load']:>5.2f}"
                         f" {q['search']['p50']:>8.2f} / {q['search']['p95']:<7.2f}"
                         f" {q['lexical_search']['p50']:>8.2f} / {q['lexical_search']['p95']:<7.2f}")
    return "\n".join(lines)


def vectors_only() -> Any:
    """A LangChain ``Embeddings`` that refuses to embed: the benchmarks pass every vector themselves."""
    from langchain_core.embeddings import Embeddings

    class VectorsOnly(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("the benchmark passes vectors")

        def embed_query(self, text: str) -> list[float]:
            raise RuntimeError("the benchmark passes vectors")

    return VectorsOnly()


def hybrid_config(query: str, candidates: int, fusion: Any) -> Any:
    """langchain-postgres hybrid search: ``candidates`` from its dense and full-text queries, fused by ``fusion``."""
    from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig

    return HybridSearchConfig(tsv_column="content_tsv", fts_query=query, primary_top_k=candidates,
                              secondary_top_k=candidates, fusion_function=fusion)


def langchain(url: str, data: Dataset, ids: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Load, index and time langchain-postgres PGVectorStore hybrid search on the same data."""
    import psycopg
    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import weighted_sum_ranking
    from langchain_postgres.v2.indexes import HNSWIndex, HNSWQueryOptions
    from psycopg import sql

    from ..backends.postgres.queries import PostgresQueries
    from .measure import load, time_queries

    def config(query: str = "") -> Any:
        return hybrid_config(query, CANDIDATES, weighted_sum_ranking)

    ef_search, (m, efc) = PostgresQueries.ef_search, args.hnsw[0]
    engine = PGEngine.from_connection_string(sqlalchemy_url(url))
    out: dict[str, Any] = {"backend": "langchain-postgres " + version("langchain-postgres"), "ef_search": ef_search,
                           "compare_with": "search_ms"}
    try:
        def table(name: str) -> Any:
            engine.init_vectorstore_table(name, args.dim, metadata_columns=[Column("user_id", "TEXT", nullable=False)],
                                          id_column=Column("langchain_id", "BIGINT", nullable=False),
                                          hybrid_search_config=config(), overwrite_existing=True)
            return PGVectorStore.create_sync(engine, vectors_only(), name, metadata_columns=["user_id"],
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

        def search(i: int) -> None:
            store.similarity_search_with_score_by_vector(
                data.query_vectors[i].tolist(), k=10, filter={"user_id": {"$eq": data.query_user(i)}},
                hybrid_search_config=config(data.queries[i]))

        out["search_ms"] = time_queries(f"langchain n={data.n} {data.layout} search", data, args.warmup, search)[0]

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
    lc = r["peers"]["langchain"]
    s = lc["search_ms"]
    return (f"{lc['backend']} ({r['layout']}, N={r['n']:,}): hybrid p50 {s['p50']:.2f} ms, p95 {s['p95']:.2f} ms"
            f" (load {s['load']:.2f}); dense recall@10 {lc['recall_at_10']:.3f} at ef_search {lc['ef_search']};"
            f" HNSW build {lc['index_build_s']:.1f} s; add_embeddings {lc['api_ingest_items_per_s']:,.0f} rows/s"
            f" ({lc['api_ingest_rows']} rows); server-side copy {lc['copy_s']:.1f} s")
