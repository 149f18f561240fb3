"""Per-user in-memory vector indexes for the SQLite backend, kept fresh by a generation counter.

Every transaction that changes a user's embeddings bumps ``users.vec_gen`` and stamps the changed
rows with the new value, so a reader (in any process) loads only rows with ``gen`` above what it
has seen. Deleted or filtered rows are harmless: candidates are re-checked against ``items``.
Vectors are grouped by size, so a stray vector of another size never mixes with the others.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ... import ann
from ...vectors import VectorIndex, from_blob

@dataclass
class _Entry:
    indexes: dict[int, VectorIndex]  # by vector size
    gen: int

    def nbytes(self) -> int:
        return sum(ix.nbytes() for ix in self.indexes.values())


class VectorCache:
    def __init__(self, max_bytes: int = 1 << 30, ann_from: int | None = ann.ANN_FROM) -> None:
        self.max_bytes = max_bytes
        self.ann_from = ann_from or None  # rows from which a user's vectors get a graph
        self._entries: OrderedDict[tuple[int, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def index_for(self, conn: sqlite3.Connection, user_id: str, model: str, dimensions: int) -> VectorIndex | None:
        """The user's index of ``model`` vectors of this size, refreshed; call inside a read transaction."""
        row = conn.execute("SELECT pk, vec_gen FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is None:
            return None
        key = (row[0], model)
        with self._lock:
            entry = self._entries.get(key) or _Entry({}, -1)
            if entry.gen < row[1]:
                self._refresh(conn, user_id, model, entry)
                entry.gen = row[1]
            self._entries[key] = entry
            self._entries.move_to_end(key)
            self._evict()
            return entry.indexes.get(dimensions)

    def memory(self) -> tuple[int, bool]:
        """Bytes held by every cached index, and whether any of them searches a graph."""
        indexes = self.indexes()
        return sum(ix.nbytes() for ix in indexes), any(ix.has_graph for ix in indexes)

    def wait_for_graphs(self, timeout: float | None = None) -> list[VectorIndex]:
        """Wait for graphs being built; the cached indexes that search one."""
        return [ix for ix in self.indexes() if ix.wait_for_graph(timeout)]

    def indexes(self) -> list[VectorIndex]:
        with self._lock:
            return [ix for e in self._entries.values() for ix in e.indexes.values()]

    def drop_user(self, user_pk: int) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[0] == user_pk]:
                del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _refresh(self, conn: sqlite3.Connection, user_id: str, model: str, entry: _Entry) -> None:
        rows = conn.execute(
            "SELECT item_id, state = 'ready' AND model = ? AND vector IS NOT NULL, vector "
            "FROM embeddings WHERE user_id = ? AND gen > ? ORDER BY item_id",
            (model, user_id, entry.gen),
        ).fetchall()
        batches: dict[int, tuple[list[int], list[bytes]]] = {}  # by blob length
        for item_id, usable, blob in rows:
            for index in entry.indexes.values():
                index.remove(item_id)
            if usable:
                ids, blobs = batches.setdefault(len(blob), ([], []))
                ids.append(item_id)
                blobs.append(blob)
        for width, (ids, blobs) in batches.items():
            size = width // 4
            if size not in entry.indexes:
                entry.indexes[size] = VectorIndex(size, capacity=max(1024, len(ids)), ann_from=self.ann_from)
            # one buffer for all rows instead of an array per row and a vstack
            entry.indexes[size].upsert_many(ids, from_blob(b"".join(blobs)).reshape(len(ids), size))

    def _evict(self) -> None:
        total = sum(e.nbytes() for e in self._entries.values())
        while total > self.max_bytes and len(self._entries) > 1:
            _, oldest = self._entries.popitem(last=False)
            total -= oldest.nbytes()
