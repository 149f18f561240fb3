"""Peers of the LoCoMo benchmark: the same turns and questions, ranked without navi-memory.

Every peer indexes each conversation's turns on their own (the text ``locomo.turn_items`` gives
navi-memory, without the previous-turn context or any other field) and returns the top 20 dia_ids
of the asking conversation for each question (as many as navi-memory's run asks for:
``search_depth(--budget)``); ``locomo.ask`` scores them exactly as it scores navi-memory. Nothing
here is tuned to LoCoMo: each peer runs with its usual settings.

* ``bm25``: bm25s (Okapi BM25, k1 1.5, b 0.75), English stop words, no stemming.
* ``dense``: cosine between the question's and the turns' embeddings, from the same embedder as
  navi-memory's run (all-MiniLM-L6-v2 with ``--embeddings minilm``).
* ``langchain``: langchain-postgres ``PGVectorStore`` hybrid search on PostgreSQL: its dense
  query and its ``ts_rank_cd`` full-text query (40 candidates each), fused by its
  ``reciprocal_rank_fusion``, filtered by conversation; the same vectors as ``dense``, added with
  its ``add_embeddings``; exact vector search (no ANN index for a few thousand rows).
* ``engram``: engram-search's ``RetrievalPipeline`` (dense + its BM25 + its name and quoted-phrase
  boosts, fused by RRF k=60; no temporal boost, LoCoMo's questions carry no date) over the same
  turns and the same vectors (its ``Embedder`` replaced by the run's embedder: the local MiniLM
  rather than its default bge-large download); with ``--reranker``, the same reranker re-orders its
  top 20 candidates, as engram's cross-encoder stage does; without, engram's local default (off).

Latency includes embedding the question, as navi-memory's does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import ConfigurationError
from .locomo_data import BUDGET, ask, search_depth, turn_items

PEERS = ("bm25", "dense", "langchain", "engram")
PACKAGES = {"bm25": "bm25s", "langchain": "langchain-postgres", "engram": "engram-search"}
LANGCHAIN_CANDIDATES = 40
DATABASE = "navi_bench_locomo_langchain"
ENGRAM_RERANK_POOL = 20  # engram-search 0.1.7 re-orders this many fused candidates (RetrievalPipeline.search)


def check_installed(peers: list[str]) -> None:
    """A clear error, before any work, when a peer's package is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    for name in peers:
        package = PACKAGES.get(name)
        if package is None:
            continue
        try:
            version(package)
        except PackageNotFoundError as exc:
            raise ConfigurationError(f"the {name} peer needs the package {package}, which is not installed"
                                     f" (pip install {package})") from exc


def run(samples: list[dict[str, Any]], args: argparse.Namespace, embedder: Any, tmp: Path,
        reranker: Any = None) -> dict[str, Any]:
    """Each peer of ``args.peers`` on the samples: ``{name: report}`` in ``locomo.ask``'s shape.
    ``reranker`` (navi-memory's, or None) is the engram peer's cross-encoder stage."""
    check_installed(args.peers)
    budget = getattr(args, "budget", BUDGET)
    depth = search_depth(budget)
    turns = {s["sample_id"]: turn_items(s) for s in samples}
    needs_vectors = [p for p in args.peers if p != "bm25"]
    if needs_vectors and embedder is None:
        raise ConfigurationError(f"the {', '.join(needs_vectors)} peer(s) need embeddings (not --embeddings none)")
    vectors = _embed_turns(turns, embedder) if needs_vectors else {}
    out = {}
    for name in args.peers:
        if name == "bm25":
            search = _bm25(turns, depth)
        elif name == "dense":
            search = _dense(turns, vectors, embedder, depth)
        elif name == "engram":
            search = _engram(turns, vectors, embedder, reranker, depth)
        else:
            out[name] = _langchain(samples, turns, vectors, embedder, args, tmp)
            continue
        out[name] = ask(samples, search, f"{name} questions", budget)
        if name == "engram":
            from importlib.metadata import version

            out[name]["backend"] = "engram-search " + version("engram-search")
            # engram's own stage: its top ENGRAM_RERANK_POOL by the model's score alone
            out[name]["reranker"] = ({"name": reranker.to_dict()["name"], "depth": ENGRAM_RERANK_POOL, "weight": 1.0}
                                     if reranker else None)
    return out


def _embed_turns(turns: dict[str, list[dict[str, Any]]], embedder: Any) -> dict[str, np.ndarray]:
    from ..progress import Progress

    progress, done, out = Progress("peer embeddings", sum(len(t) for t in turns.values())), 0, {}
    for user, items in turns.items():
        out[user] = np.asarray(embedder.embed_documents([i["content"] for i in items]), dtype=np.float32)
        done += len(items)
        progress(done)
    progress.close()
    return out


def _dia_ids(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["dia_id"] for i in items]


def _bm25(turns: dict[str, list[dict[str, Any]]], depth: int) -> Callable[[str, str], list[str]]:
    from .peers import bm25_index, bm25_tokens

    indexes = {user: (bm25_index([i["content"] for i in items]), _dia_ids(items)) for user, items in turns.items()}

    def search(user: str, question: str) -> list[str]:
        retriever, ids = indexes[user]
        docs, scores = retriever.retrieve(bm25_tokens([question]), k=min(depth, len(ids)), show_progress=False)
        return [ids[d] for d, s in zip(docs[0], scores[0]) if s > 0]  # zero: no query word in the turn

    return search


def _dense(turns: dict[str, list[dict[str, Any]]], vectors: dict[str, np.ndarray],
           embedder: Any, depth: int) -> Callable[[str, str], list[str]]:
    unit = {u: v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for u, v in vectors.items()}
    ids = {u: _dia_ids(items) for u, items in turns.items()}

    def search(user: str, question: str) -> list[str]:
        query = np.asarray(embedder.embed_query(question), dtype=np.float32)
        scores = unit[user] @ (query / max(float(np.linalg.norm(query)), 1e-12))
        return [ids[user][i] for i in np.argsort(-scores, kind="stable")[:depth]]

    return search


def _unit(vector: Any) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / max(float(np.linalg.norm(array)), 1e-12)


class _EngramEmbedder:
    """engram's ``Embedder`` interface (``encode_query``) over the run's embedder."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def encode_query(self, text: str) -> np.ndarray:
        return _unit(self.embedder.embed_query(text))


class _EngramReranker:
    """engram's reranker interface (``rerank``: (index, score), best first) over navi-memory's."""

    def __init__(self, reranker: Any) -> None:
        self.reranker = reranker

    def rerank(self, query: str, documents: list[str], top_k: int | None = None) -> list[tuple[int, float]]:
        scores = self.reranker.score(query, documents)
        ranked = sorted(enumerate(scores), key=lambda pair: -pair[1])
        return [(index, float(value)) for index, value in ranked[:top_k or None]]


def _engram(turns: dict[str, list[dict[str, Any]]], vectors: dict[str, np.ndarray], embedder: Any,
            reranker: Any, depth: int) -> Callable[[str, str], list[str]]:
    from engram.backends.base import Document
    from engram.retrieval.pipeline import RetrievalPipeline

    pipeline = RetrievalPipeline(embedder=_EngramEmbedder(embedder), use_reranker=reranker is not None,
                                 reranker=_EngramReranker(reranker) if reranker is not None else None)
    documents = {user: [Document(id=item["metadata"]["dia_id"], text=item["content"], embedding=_unit(vector))
                        for item, vector in zip(items, vectors[user])] for user, items in turns.items()}

    def search(user: str, question: str) -> list[str]:
        return [doc.id for doc in pipeline.search(question, documents[user], top_k=depth)]

    return search


def _langchain(samples: list[dict[str, Any]], turns: dict[str, list[dict[str, Any]]], vectors: dict[str, np.ndarray],
               embedder: Any, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from importlib.metadata import version

    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.engine import ColumnDict
    from langchain_postgres.v2.hybrid_search_config import reciprocal_rank_fusion

    from .peers import sqlalchemy_url, hybrid_config, vectors_only
    from .postgres import Server

    def config(query: str = "") -> Any:
        return hybrid_config(query, LANGCHAIN_CANDIDATES, reciprocal_rank_fusion)

    server = Server.start(None if args.postgres == "pgserver" else args.postgres, args, tmp)
    engine = None
    try:
        url = server.create_database(DATABASE, "256MB")
        engine = PGEngine.from_connection_string(sqlalchemy_url(url))
        dim = int(next(iter(vectors.values())).shape[1])
        columns: list[Column | ColumnDict] = [Column("user_id", "TEXT", nullable=False),
                                              Column("dia_id", "TEXT", nullable=False)]
        engine.init_vectorstore_table("locomo_turns", dim, metadata_columns=columns, hybrid_search_config=config())
        store = PGVectorStore.create_sync(engine, vectors_only(), "locomo_turns",
                                          metadata_columns=["user_id", "dia_id"], hybrid_search_config=config())
        for user, items in turns.items():
            store.add_embeddings([i["content"] for i in items], vectors[user].tolist(),
                                 [{"user_id": user, "dia_id": d} for d in _dia_ids(items)])
        store.apply_hybrid_search_index()

        def search(user: str, question: str) -> list[str]:
            query = [float(x) for x in embedder.embed_query(question)]
            found = store.similarity_search_with_score_by_vector(
                query, k=search_depth(getattr(args, "budget", BUDGET)), filter={"user_id": {"$eq": user}}, hybrid_search_config=config(question))
            return [doc.metadata["dia_id"] for doc, _ in found]

        report = ask(samples, search, "langchain questions", getattr(args, "budget", BUDGET))
        report["backend"] = "langchain-postgres " + version("langchain-postgres")
        return report
    finally:
        if engine is not None:
            engine._run_as_sync(engine.close())
        if not getattr(args, "keep", False):
            server.drop_database(DATABASE)
        server.stop()
