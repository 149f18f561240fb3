"""An approximate nearest-neighbour graph for users with many vectors (HNSW from the optional
``usearch`` package, extra ``fast``).

A search then visits a few thousand int8 vectors instead of scanning every float32 row. The graph
only proposes candidates: ``VectorIndex`` rescores them in float32, so similarities stay exact.
It is trusted only after a recall check on the user's own vectors: rows held out of the build are
asked as queries, and their exact top 10 (a scan) must be found at ``MIN_RECALL`` or better. On
vectors without structure (uniform noise) no setting passes and the exact scan stays in use.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

ANN_FROM = 20_000  # live rows from which a user's index gets a graph (None/0 on the backend: never)
MIN_RECALL = 0.98  # recall@10 against the exact scan the graph must reach on held-out rows
EXPANSIONS = (64, 128, 256, 512, 1024, 2048)  # candidates per search tried, smallest first; rescored in float32
CONNECTIVITY, EXPANSION_ADD = 16, 128  # HNSW edges per node and build-time breadth (usearch's M, efC)
CHECK_QUERIES, CHECK_K = 100, 10
_INT8_MAX = 127
_loaded: list[Any] = []  # usearch's Index class, or None when the package is missing


def available() -> bool:
    if not _loaded:
        if not {"onnxruntime", "usearch.compiled"} & sys.modules.keys() and importlib.util.find_spec("onnxruntime"):
            # usearch's wheel links libstdc++ statically and exports its symbols: onnxruntime >= 1.23
            # loaded after it crashes the process (SIGSEGV in its locale setup), loaded before it is
            # fine. So an ONNX reranker still works once a graph was built (~70 ms, once).
            import onnxruntime  # noqa: F401
        try:
            from usearch.index import Index
        except ImportError:
            log.debug("usearch is not installed: vector search stays an exact scan")
            _loaded.append(None)
        else:
            _loaded.append(Index)
    return _loaded[0] is not None


class Graph:
    """HNSW over int8 copies of unit vectors, keyed by the caller's row numbers."""

    def __init__(self, dimensions: int, scale: float) -> None:
        if not available():
            raise RuntimeError("usearch is not installed (pip install 'navi-memory[fast]')")
        self.scale = scale  # one scale for every row keeps int8 dot products comparable
        self.expansion = EXPANSIONS[-1]
        self._index = _loaded[0](ndim=dimensions, metric="ip", dtype="i8", connectivity=CONNECTIVITY,
                                 expansion_add=EXPANSION_ADD)
        self._per_row = 0.0  # bytes per row, measured at _measured_rows (usearch's figure takes ~1 ms)
        self._measured_rows = 0

    def quantise(self, vectors: np.ndarray) -> np.ndarray:
        # a later row with a larger component is clipped: that only moves it among the candidates
        return np.clip(np.rint(vectors * self.scale), -_INT8_MAX, _INT8_MAX).astype(np.int8)

    def add(self, rows: np.ndarray, vectors: np.ndarray, threads: int = 1) -> None:
        if len(rows):
            rows, last = np.unique(np.asarray(rows)[::-1], return_index=True)  # a row twice: its last vector
            self._index.add(rows.astype(np.uint64), self.quantise(vectors[::-1][last]), threads=threads)

    def remove(self, rows: np.ndarray) -> None:
        if len(rows):
            self._index.remove(np.asarray(rows, dtype=np.uint64))

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        """Rows of about the ``count`` nearest (at least ``expansion`` are visited), unordered."""
        count = max(count, self.expansion)
        self._index.expansion_search = count
        found = self._index.search(self.quantise(query), count, threads=1)
        return np.asarray(found.keys[:len(found)], dtype=np.int64)

    def __len__(self) -> int:
        return len(self._index)

    def nbytes(self) -> int:
        rows = len(self._index)
        if rows > 1.25 * self._measured_rows or rows < 0.8 * self._measured_rows:
            self._per_row, self._measured_rows = self._index.memory_usage / max(rows, 1), rows
        return int(self._per_row * rows)


@dataclass
class Built:
    graph: Graph | None  # None: no expansion reached MIN_RECALL
    recall: float  # measured at the chosen (or, when none passed, the largest) expansion
    seconds: float


def scale_for(vectors: np.ndarray) -> float:
    peak = float(np.abs(vectors).max(initial=0.0))
    return _INT8_MAX / peak if peak > 0 else 1.0


def build(matrix: np.ndarray, rows: np.ndarray, seed: int = 0) -> Built:
    """A graph of ``matrix[rows]`` (unit vectors), checked and given the smallest expansion that
    reaches ``MIN_RECALL``; the held-out check rows are added last."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    held = np.sort(rng.choice(rows, size=min(CHECK_QUERIES, len(rows) // 10), replace=False))
    kept = np.setdiff1d(rows, held, assume_unique=True)
    graph = Graph(matrix.shape[1], scale_for(matrix[rows[: min(len(rows), 50_000)]]))
    graph.add(kept, matrix[kept], threads=os.cpu_count() or 1)
    recall = 0.0
    if len(held):
        queries = matrix[held]
        outside = np.ones(len(matrix), dtype=bool)
        outside[kept] = False
        exact: list[set[int]] = []
        for part in np.array_split(queries, max(1, len(queries) // 25)):  # bounded memory at 1M rows
            sims = matrix @ part.T  # exact, over the graph's rows only
            sims[outside] = -np.inf
            exact += [set(np.argpartition(-col, CHECK_K)[:CHECK_K].tolist()) for col in sims.T]
        for expansion in EXPANSIONS:
            graph.expansion = expansion
            hits = 0
            for query, wanted in zip(queries, exact):
                found = graph.search(query, CHECK_K)
                best = found[np.argsort(-(matrix[found] @ query))[:CHECK_K]]
                hits += len(wanted.intersection(best.tolist()))
            recall = hits / (CHECK_K * len(held))
            if recall >= MIN_RECALL:
                break
        if recall < MIN_RECALL:
            return Built(None, recall, time.perf_counter() - start)
    graph.add(held, matrix[held])
    return Built(graph, recall if len(held) else 1.0, time.perf_counter() - start)
