"""Per-user in-memory vector indexes for the SQLite backend, kept fresh by a generation counter.

Every transaction that changes a user's embeddings bumps ``users.vec_gen`` and stamps the changed
rows with the new value, so a reader (in any process) loads only rows with ``gen`` above what it
has seen. Deleted or filtered rows are harmless: candidates are re-checked against ``items``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..vectors import VectorIndex, from_blob

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    index: VectorIndex | None
    gen: int


class VectorCache:
    def __init__(self, max_bytes: int = 1 << 30) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def index_for(self, conn: sqlite3.Connection, user_id: str, model: str) -> VectorIndex | None:
        """The user's index for ``model``, refreshed; call inside a read transaction."""
        row = conn.execute("SELECT pk, vec_gen FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is None:
            return None
        key = (row[0], model)
        with self._lock:
            entry = self._entries.get(key) or _Entry(None, -1)
            if entry.gen < row[1]:
                self._refresh(conn, user_id, model, entry)
                entry.gen = row[1]
            self._entries[key] = entry
            self._entries.move_to_end(key)
            self._evict()
            return entry.index

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
        ids, vectors = [], []
        for item_id, usable, blob in rows:
            if not usable:
                if entry.index is not None:
                    entry.index.remove(item_id)
                continue
            vec = from_blob(blob)
            if entry.index is None:
                entry.index = VectorIndex(vec.size, capacity=max(1024, len(rows)))
            if vec.size != entry.index.dimensions:
                log.warning("skipping vector of item %s: %d dimensions, index has %d",
                            item_id, vec.size, entry.index.dimensions)
                continue
            ids.append(item_id)
            vectors.append(vec)
        if ids and entry.index is not None:
            entry.index.upsert_many(ids, np.vstack(vectors))

    def _evict(self) -> None:
        def size(e: _Entry) -> int:
            return 0 if e.index is None else (len(e.index) + e.index.dead_rows) * e.index.dimensions * 4

        total = sum(size(e) for e in self._entries.values())
        while total > self.max_bytes and len(self._entries) > 1:
            _, oldest = self._entries.popitem(last=False)
            total -= size(oldest)
