"""Vector checks and an in-memory cosine index (numpy).

``check_vector`` rejects NaN/inf and applies the fixed-dimension rule of seed 002: a smaller
vector is zero-padded, a larger one is an error. ``VectorIndex`` holds unit-normalised float32
rows in a growable matrix so a brute-force search over 100k rows is one matrix-vector product.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

import numpy as np

from .errors import EmbeddingError


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
    """Exact cosine search over unit vectors keyed by integer id; thread-safe."""

    def __init__(self, dimensions: int, capacity: int = 1024) -> None:
        self.dimensions = dimensions
        self._matrix = np.zeros((capacity, dimensions), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._live = np.zeros(capacity, dtype=bool)
        self._row_of: dict[int, int] = {}
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._row_of)

    @property
    def dead_rows(self) -> int:
        return self._size - len(self._row_of)

    def upsert_many(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise EmbeddingError(f"expected vectors of {self.dimensions} dimensions")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        with self._lock:
            for item_id, vec in zip(ids, vectors):
                row = self._row_of.get(int(item_id))
                if row is None:
                    row = self._append_row()
                    self._row_of[int(item_id)] = row
                    self._ids[row] = int(item_id)
                    self._live[row] = True
                self._matrix[row] = vec

    def remove(self, item_id: int) -> None:
        with self._lock:
            row = self._row_of.pop(int(item_id), None)
            if row is not None:
                self._live[row] = False

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
    k = min(k, int(np.isfinite(sims).sum()))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-sims, k - 1)[:k] if k < sims.size else np.arange(sims.size)
    part = part[np.isfinite(sims[part])]
    return part[np.argsort(-sims[part], kind="stable")]
