"""Measuring one store: timed searches with their percentiles, timed bulk ingest, the load
average beside them. Shared by ``bench.latency``, ``bench.postgres`` and ``bench.peers``."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..config import Settings
from ..progress import Progress
from ..store import MemoryStore
from .data import Dataset


def stats(ms: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(ms, dtype=float)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3),
            "mean": round(float(arr.mean()), 3)}


def load() -> float:
    """The 1-minute load average (other jobs on the machine skew latency figures)."""
    return round(os.getloadavg()[0], 2)


def timed_search(store: MemoryStore, query: str, user: str, vector: np.ndarray | None) -> float:
    start = time.perf_counter()
    store.search(query, user_id=user, query_embedding=vector)
    return (time.perf_counter() - start) * 1000.0


def time_queries(label: str, data: Dataset, warmup: int,
                 search: Callable[[int], Any]) -> tuple[dict[str, Any], list[Any]]:
    """Call ``search(i)`` for every query after the first (which opens caches and indexes); the
    latency stats of those after the warm-up, with the load, and what each call returned."""
    times, answers, progress = [], [], Progress(label, len(data.queries) - 1)
    for index in range(1, len(data.queries)):
        start = time.perf_counter()
        answers.append(search(index))
        elapsed = (time.perf_counter() - start) * 1000.0
        if index > warmup:
            times.append(elapsed)
        progress(index)
    progress.close()
    return {**stats(times), "load": load()}, answers


def search_series(store: MemoryStore, label: str, data: Dataset, warmup: int, vectors: bool = True) -> dict[str, Any]:
    """Timed ``store.search`` calls over the dataset's queries (hybrid, or lexical without vectors)."""
    def search(index: int) -> None:
        store.search(data.queries[index], user_id=data.query_user(index),
                     query_embedding=data.query_vectors[index] if vectors else None)

    return time_queries(label, data, warmup, search)[0]


def ingest(store: MemoryStore, data: Dataset, batch: int, label: str) -> tuple[float, np.ndarray]:
    """``add_many`` the whole dataset; (seconds spent inside add_many, item ids in data order)."""
    seconds, ids, progress = 0.0, [], Progress(label, data.n)
    for rows in data.batches(batch):
        start = time.perf_counter()
        ids.extend(store.add_many(rows))
        seconds += time.perf_counter() - start
        progress(len(ids))
    progress.close()
    return seconds, np.asarray(ids, dtype=np.int64)


def open_store(url: str, model: str | None, **backend_options: Any) -> MemoryStore:
    settings = Settings(url=url, embeddings="none")  # the environment must not change what is measured
    return MemoryStore.open(url, embeddings=False, embedding_model=model, settings=settings,
                            backend_options=backend_options or None)
