"""Vector checks and an in-memory cosine index (numpy).

``check_vector`` rejects NaN/inf and applies the fixed-dimension rule: a smaller
vector is zero-padded, a larger one is an error. ``VectorIndex`` holds unit-normalised float32
rows in a growable matrix so a brute-force search over 100k rows is one matrix-vector product.
From ``ann_from`` rows on, and when the optional ``usearch`` package is installed (extra ``fast``),
a graph (``navi_memory.ann``) is built in the background; once its recall check passes, ``top``
asks it for candidates and rescores them in float32, so the returned similarities are exact.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Sequence

import numpy as np

from . import ann
from .errors import EmbeddingError

log = logging.getLogger(__name__)

def check_vector(values: Sequence[float] | np.ndarray, dimensions: int | None = None) -> np.ndarray:
    """A finite float32 vector, zero-padded to ``dimensions`` when that is set."""
    try:
        vec = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as exc:
        raise EmbeddingError(f"embedding is not a numeric vector: {exc}") from exc
    if vec.ndim != 1:
        raise EmbeddingError(f"embedding must be one flat vector, got shape {vec.shape}")
    if vec.size == 0:
        raise EmbeddingError("embedding is empty")
    if not np.isfinite(vec).all():
        raise EmbeddingError("embedding contains NaN or infinite values")
    if dimensions is not None:
        if vec.size > dimensions:
            raise EmbeddingError(
                f"embedding has {vec.size} dimensions, more than the configured {dimensions}"
            )
        if vec.size < dimensions:
            vec = np.concatenate([vec, np.zeros(dimensions - vec.size, dtype=np.float32)])
    return vec


def to_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


def normalise(vec: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


class VectorIndex:
    """Cosine search over unit vectors keyed by integer id; thread-safe.

    ``top`` scans every row (exact) until a graph is ready: from ``ann_from`` live rows (None:
    never) a background thread builds one (``background=False``: in the calling thread)."""

    def __init__(self, dimensions: int, capacity: int = 1024, ann_from: int | None = None,
                 background: bool = True) -> None:
        self.dimensions = dimensions
        self.ann_from = ann_from
        self.background = background
        self._matrix = np.zeros((capacity, dimensions), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._live = np.zeros(capacity, dtype=bool)
        self._row_of: dict[int, int] = {}
        self._size = 0
        self._lock = threading.Lock()
        self._graph: ann.Graph | None = None
        self._changed: set[int] | None = None  # rows changed while a graph is being built
        self._builder: threading.Thread | None = None
        self._next_try = ann_from  # live rows at which to build (again, after a failed check)
        self.graph_recall: float | None = None  # the last recall check's figure
        self.graph_seconds: float | None = None

    def __len__(self) -> int:
        return len(self._row_of)

    @property
    def dead_rows(self) -> int:
        return self._size - len(self._row_of)

    @property
    def has_graph(self) -> bool:
        return self._graph is not None

    def nbytes(self) -> int:
        """Memory held by the rows (allocated capacity included) and the graph."""
        extra = 0 if self._graph is None else self._graph.nbytes()
        return self._matrix.nbytes + self._ids.nbytes + self._live.nbytes + extra

    def upsert_many(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise EmbeddingError(f"expected vectors of {self.dimensions} dimensions")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        with self._lock:
            rows = np.empty(len(vectors), dtype=np.int64)
            known = []
            for j, item_id in enumerate(ids):
                row = self._row_of.get(int(item_id))
                if row is None:
                    row = self._append_row()
                    self._row_of[int(item_id)] = row
                    self._ids[row] = int(item_id)
                    self._live[row] = True
                else:
                    known.append(row)
                rows[j] = row
            self._matrix[rows] = vectors
            if self._graph is not None:
                self._graph.remove(np.asarray(known, dtype=np.int64))
                self._graph.add(rows, vectors)
            if self._changed is not None:
                self._changed.update(rows.tolist())
            run_here = self._claim_build()
        if run_here:
            self._build()

    def remove(self, item_id: int) -> None:
        with self._lock:
            row = self._row_of.pop(int(item_id), None)
            if row is not None:
                self._live[row] = False
                if self._graph is not None:
                    self._graph.remove(np.asarray([row], dtype=np.int64))
                if self._changed is not None:
                    self._changed.add(row)

    def scores(self, query: np.ndarray, ids: Iterable[int]) -> dict[int, float]:
        """Cosine similarity of the query to each given id that has a vector."""
        q = normalise(np.asarray(query, dtype=np.float32))
        with self._lock:
            rows = [(i, self._row_of[i]) for i in ids if i in self._row_of]
            if not rows:
                return {}
            sims = self._matrix[[r for _, r in rows]] @ q
        return {i: float(s) for (i, _), s in zip(rows, sims)}

    def ranked(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All live ids and their similarities, best first."""
        q = normalise(np.asarray(query, dtype=np.float32))
        with self._lock:
            n = self._size
            sims = self._matrix[:n] @ q
            sims[~self._live[:n]] = -np.inf
            ids = self._ids[:n].copy()
        return ids, sims

    def top(self, query: np.ndarray, k: int, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` live ids most similar to the query and their cosine similarities, best first.
        ``exact`` scans every row even when a graph is ready."""
        q = normalise(np.asarray(query, dtype=np.float32))
        with self._lock:
            n, live = self._size, len(self._row_of)
            if self._graph is not None and not exact and k <= live // 8:  # a large k: the scan is as quick
                rows = self._graph.search(q, k)
                rows = rows[self._live[rows]]  # removals are applied to the graph too; kept as a guard
                sims = self._matrix[rows] @ q
            else:
                rows = None
                sims = self._matrix[:n] @ q
                if live < n:
                    sims[~self._live[:n]] = -np.inf
            order = top_k_order(sims, k)
            ids = self._ids[order if rows is None else rows[order]]
        return ids, sims[order]

    def wait_for_graph(self, timeout: float | None = None) -> bool:
        """Block until a background build (if any) has finished; True if a graph is in use."""
        builder = self._builder
        if builder is not None:
            builder.join(timeout)
        return self._graph is not None

    def _claim_build(self) -> bool:
        """Under the lock: start a build if one is due; True if the caller must run it (not background)."""
        if self._next_try is None or self._changed is not None or self._graph is not None:
            return False
        if len(self._row_of) < self._next_try or not ann.available():
            return False
        self._changed = set()  # also marks a build in progress
        if not self.background:
            return True
        # started under the lock, so wait_for_graph never meets a thread not yet started
        self._builder = threading.Thread(target=self._build, name="navi-memory-ann", daemon=True)
        self._builder.start()
        return False

    def _build(self) -> None:
        with self._lock:
            n = self._size
            matrix = self._matrix[:n]  # a view: growth replaces self._matrix, rows changed meanwhile are redone
            rows = np.flatnonzero(self._live[:n])
        try:
            built = ann.build(matrix, rows)
        except (RuntimeError, ValueError, MemoryError) as exc:  # the exact scan goes on serving
            log.warning("vector graph of %d rows not built, searches scan every row: %s", len(rows), exc)
            built = None
        with self._lock:
            changed, self._changed = self._changed or set(), None
            if built is None:
                self._next_try = None
                return
            self.graph_recall, self.graph_seconds = built.recall, built.seconds
            if built.graph is None:
                self._next_try = 2 * len(self._row_of)  # more rows may give the graph more structure
                log.info("vector graph recall %.3f < %.2f on %d rows: searches scan every row",
                         built.recall, ann.MIN_RECALL, len(rows))
                return
            redo = np.asarray(sorted(changed), dtype=np.int64)
            built.graph.remove(redo[redo < n])
            alive = redo[self._live[redo]]
            built.graph.add(alive, self._matrix[alive])
            self._graph = built.graph
            log.info("vector graph of %d rows ready in %.1f s (recall@10 %.3f)", len(rows), built.seconds,
                     built.recall)

    def _append_row(self) -> int:
        if self._size == len(self._ids):
            grow = max(1024, len(self._ids))
            self._matrix = np.vstack([self._matrix, np.zeros((grow, self.dimensions), np.float32)])
            self._ids = np.concatenate([self._ids, np.zeros(grow, np.int64)])
            self._live = np.concatenate([self._live, np.zeros(grow, bool)])
        self._size += 1
        return self._size - 1


def top_k_order(sims: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest finite values, best first."""
    k = min(k, sims.size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    # the k largest without negating (copying) the whole array; non-finite ones dropped after
    part = np.argpartition(sims, sims.size - k)[sims.size - k:] if k < sims.size else np.arange(sims.size)
    finite = np.isfinite(sims[part])
    if not finite.all():  # NaN sorts above everything, -inf may fill a short list: finite ones only
        keep = np.flatnonzero(np.isfinite(sims))
        kept: np.ndarray = keep[top_k_order(sims[keep], k)]
        return kept
    order: np.ndarray = part[np.argsort(-sims[part], kind="stable")]
    return order
