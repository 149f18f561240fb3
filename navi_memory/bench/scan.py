"""Search beside a bare float32 scan of the same vectors, timed in turn (``bench latency``).

For each timed query: ``store.search``, then ``matrix @ query`` + ``argpartition`` for the top 10
over the asking user's unit vectors (contiguous float32, prepared before timing), so load from
other processes falls on both alike. Also recall@10 of the store's vector index (its top 10
semantic candidates) against an exact scan, and the index's memory per 100k vectors.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..backends.base import Filters
from ..progress import Progress
from ..store import MemoryStore
from .data import Dataset
from .measure import load, stats


def _unit_rows(data: Dataset) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per asking user: (data rows, their unit float32 vectors as one contiguous matrix)."""
    out = {}
    for user in {int(u) for u in data.query_owner}:
        rows = np.flatnonzero(data.owner == user)
        matrix = np.ascontiguousarray(data.vectors[rows], dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        out[user] = (rows, matrix)
    return out


def bare_top(matrix: np.ndarray, query: np.ndarray, k: int = 10) -> np.ndarray:
    """Row numbers of the ``k`` best rows (unordered): the floor any exact search pays."""
    sims = matrix @ query
    k = min(k, sims.size)
    return np.argpartition(sims, sims.size - k)[sims.size - k:]


def compare(store: MemoryStore, data: Dataset, ids: np.ndarray, model: str, warmup: int,
            label: str) -> dict[str, Any]:
    """Interleaved search / bare scan timings, their ratio, recall@10 and index memory."""
    by_user = _unit_rows(data)
    search_ms, bare_ms, progress = [], [], Progress(label, len(data.queries) - 1)
    for index in range(1, len(data.queries)):
        user = int(data.query_owner[index])
        query = np.asarray(data.query_vectors[index], dtype=np.float32)
        unit = query / max(float(np.linalg.norm(query)), 1e-12)
        start = time.perf_counter()
        store.search(data.queries[index], user_id=data.users[user], query_embedding=query)
        middle = time.perf_counter()
        bare_top(by_user[user][1], unit)
        end = time.perf_counter()
        if index > warmup:
            search_ms.append((middle - start) * 1000.0)
            bare_ms.append((end - middle) * 1000.0)
        progress(index)
    progress.close()
    search, bare = stats(search_ms), stats(bare_ms)
    return {"search_ms": {**search, "load": load()}, "bare_scan_ms": bare,
            "ratio_p50": round(search["p50"] / bare["p50"], 3) if bare["p50"] > 0 else None,
            "recall_at_10": recall_at_10(store, data, ids, model, range(1, len(data.queries))),
            **index_memory(store, data)}


def recall_at_10(store: MemoryStore, data: Dataset, ids: np.ndarray, model: str, indexes: range) -> float:
    """Mean share of the exact top 10 (brute force over the asking user's vectors) that the
    backend's semantic candidates return."""
    exact = data.exact_top(ids, list(indexes), 10)
    now = datetime.now(timezone.utc)
    hits = 0
    for truth, index in zip(exact, indexes):
        filters = Filters(user_id=data.query_user(index), now=now)
        found = store.backend.semantic_hits(filters, model, np.asarray(data.query_vectors[index],
                                                                             dtype=np.float32), 10).scored
        hits += len(truth & {i for i, _ in found})
    return round(hits / (10 * len(exact)), 4) if exact else 1.0


def index_memory(store: MemoryStore, data: Dataset) -> dict[str, Any]:
    """Bytes the SQLite backend's in-memory vector indexes hold (graphs included), per 100k vectors;
    and whether one of them searches an approximate graph."""
    cache = getattr(store.backend, "vectors", None)
    if cache is None or not hasattr(cache, "memory"):
        return {}
    held, graph = cache.memory()
    return {"index_mb_per_100k": round(held / 1e6 * 100_000 / data.n, 1), "graph": graph}


def wait_for_graphs(store: MemoryStore) -> dict[str, Any]:
    """Let the SQLite backend finish building graphs for large users before timing; the build time
    and the recall its check measured on held-out rows (the largest user's)."""
    cache = getattr(store.backend, "vectors", None)
    if cache is None or not hasattr(cache, "wait_for_graphs"):
        return {}
    cache.wait_for_graphs()
    built = [ix for ix in cache.indexes() if ix.graph_seconds is not None]
    if not built:
        return {}
    largest = max(built, key=len)
    return {"graph_build_s": round(largest.graph_seconds, 1), "graph_check_recall": round(largest.graph_recall, 4)}
