"""Vector checks and an in-memory cosine index (numpy).

``check_vector`` rejects NaN/inf and applies the fixed-dimension rule: a smaller
vector is zero-padded, a larger one is an error. ``VectorIndex`` holds unit-normalised float32
rows in a growable matrix so a brute-force search over 100k rows is one matrix-vector product.
From ``QUANTISE_FROM`` rows on (off by default), and when the optional ``usearch`` package is
installed (extra ``fast``), an int8 copy is scanned first (a quarter of the memory traffic, SIMD) and only its
best ``RESCORE_FACTOR * k`` rows are scored again in float32, so the returned similarities are exact.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .errors import EmbeddingError

log = logging.getLogger(__name__)

# Off by default: at 100k x 384 on a 2-core machine the int8 path measured no faster than the
# float32 scan (docs/benchmarks.md). Set a row count (e.g. 20_000) to turn it on.
QUANTISE_FROM: int | None = None
RESCORE_FACTOR = 2  # int8 candidates per wanted row, rescored in float32
_INT8_MAX = 127
_usearch: list[Callable[..., Any] | None] = []  # the loaded usearch.index.search, or [None]


def _int8_search() -> Callable[..., Any] | None:
    if not _usearch:
        try:
            from usearch.index import search
        except ImportError:
            log.debug("usearch is not installed: vector search stays an exact float32 scan")
            search = None
        _usearch.append(search)
    return _usearch[0]


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

    ``top`` is exact below ``quantise_from`` rows (None: always) or without usearch; above, it
    picks candidates by an int8 scan and rescores them in float32."""

    def __init__(self, dimensions: int, capacity: int = 1024, quantise_from: int | None = QUANTISE_FROM) -> None:
        self.dimensions = dimensions
        self.quantise_from = quantise_from
        self._matrix = np.zeros((capacity, dimensions), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._live = np.zeros(capacity, dtype=bool)
        self._row_of: dict[int, int] = {}
        self._size = 0
        self._q8: np.ndarray | None = None  # int8 rows, built once the index is large enough
        self._scale = 0.0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._row_of)

    @property
    def dead_rows(self) -> int:
        return self._size - len(self._row_of)

    @property
    def quantised(self) -> bool:
        return self._q8 is not None

    def nbytes(self) -> int:
        """Memory held by the rows (allocated capacity included)."""
        extra = 0 if self._q8 is None else self._q8.nbytes
        return self._matrix.nbytes + self._ids.nbytes + self._live.nbytes + extra

    def upsert_many(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise EmbeddingError(f"expected vectors of {self.dimensions} dimensions")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        with self._lock:
            rows = np.empty(len(vectors), dtype=np.int64)
            for j, item_id in enumerate(ids):
                row = self._row_of.get(int(item_id))
                if row is None:
                    row = self._append_row()
                    self._row_of[int(item_id)] = row
                    self._ids[row] = int(item_id)
                    self._live[row] = True
                rows[j] = row
            self._matrix[rows] = vectors
            if self._q8 is not None:
                self._q8[rows] = self._quantise(vectors)
            elif self.quantise_from is not None and len(self._row_of) >= self.quantise_from \
                    and _int8_search() is not None:
                self._build_int8()

    def remove(self, item_id: int) -> None:
        with self._lock:
            row = self._row_of.pop(int(item_id), None)
            if row is not None:
                self._live[row] = False
                if self._q8 is not None:
                    self._q8[row] = 0

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
        ``exact`` scans every row in float32 even when an int8 copy exists."""
        q = normalise(np.asarray(query, dtype=np.float32))
        with self._lock:
            n, live = self._size, len(self._row_of)
            pool = RESCORE_FACTOR * k + (n - live)  # dead int8 rows score 0 and may crowd the pool
            search = _int8_search()
            if self._q8 is not None and not exact and search is not None and pool < n // 4:
                q8 = self._quantise(q[None, :])[0]
                found = search(self._q8[:n], q8, pool, "ip", exact=True, threads=1)  # keys = rows
                rows = np.asarray(found.keys[:len(found)], dtype=np.int64)
                rows = rows[self._live[rows]]
                sims = self._matrix[rows] @ q
            else:
                rows = None
                sims = self._matrix[:n] @ q
                if live < n:
                    sims[~self._live[:n]] = -np.inf
            order = top_k_order(sims, k)
            ids = self._ids[order if rows is None else rows[order]]
        return ids, sims[order]

    def _quantise(self, vectors: np.ndarray) -> np.ndarray:
        # one scale for every row keeps int8 dot products comparable across rows; a later row
        # with a larger component is clipped, which only moves it within the rescored pool
        return np.clip(np.rint(vectors * self._scale), -_INT8_MAX, _INT8_MAX).astype(np.int8)

    def _build_int8(self) -> None:
        n = self._size
        peak = float(np.abs(self._matrix[:n][self._live[:n]]).max(initial=0.0))
        self._scale = _INT8_MAX / peak if peak > 0 else 1.0
        self._q8 = np.zeros((len(self._ids), self.dimensions), dtype=np.int8)
        self._q8[:n] = self._quantise(self._matrix[:n])
        self._q8[:n][~self._live[:n]] = 0

    def _append_row(self) -> int:
        if self._size == len(self._ids):
            grow = max(1024, len(self._ids))
            self._matrix = np.vstack([self._matrix, np.zeros((grow, self.dimensions), np.float32)])
            self._ids = np.concatenate([self._ids, np.zeros(grow, np.int64)])
            self._live = np.concatenate([self._live, np.zeros(grow, bool)])
            if self._q8 is not None:
                self._q8 = np.vstack([self._q8, np.zeros((grow, self.dimensions), np.int8)])
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
        return keep[top_k_order(sims[keep], k)]
    return part[np.argsort(-sims[part], kind="stable")]
