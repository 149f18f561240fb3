"""An on-disk cache of embeddings for benchmarks: repeated runs over the same texts skip the model.

Keyed by model name and text (SHA-256), stored in one SQLite file under a cache directory (by
default in the system temp dir). Only the benchmarks use it: the product embeds what it is given.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..embeddings import Embedder

DEFAULT_DIR = Path(tempfile.gettempdir()) / "navi-memory-bench-cache"


class CachedEmbeddings:
    """A LangChain-style ``Embeddings`` that asks ``provider`` only for texts it has not seen."""

    def __init__(self, provider: Any, model: str, directory: Path = DEFAULT_DIR) -> None:
        self.provider = provider
        self.model = model
        directory.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(directory / "embeddings.sqlite", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(t) for t in texts]
        found: dict[str, list[float]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = self.provider.embed_documents(missing)
            rows = [(self._key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(missing, vectors)]
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
            for key, blob in rows:  # as a later run reads them back: float32
                found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        self._db.close()


def cached(embedder: Embedder | None, directory: Path = DEFAULT_DIR) -> Embedder | None:
    """``embedder`` with its vectors cached on disk (same model name, so stored rows match)."""
    if embedder is None:
        return None
    return Embedder(lambda: CachedEmbeddings(embedder.provider, embedder.model_name, directory),
                    embedder.model_name, embedder.dimensions, passage_chars=embedder.passage_chars)
