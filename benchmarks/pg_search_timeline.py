"""When, inside one navi-memory PostgreSQL search, each statement is sent and its rows are read,
in ms from the start of ``store.search`` (median over the timed searches), on the data
``pg_langchain_ab.py`` loaded (run that first). It shows what a search waits for: the HNSW
statement (``semantic``), the full-text side beside it (``estimates``, ``persons``, ``lexical``),
then the Python between the last candidate rows and the page fetch (``fetch``).

    PYTHONPATH=. python benchmarks/pg_search_timeline.py 10000 [QUERIES] [PGDATA]

It wraps ``psycopg.Cursor.execute`` and ``fetchall`` to take the times (a few microseconds each).
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any

import numpy as np

KINDS = (("ts_rank", "lexical"), ("<=>", "semantic"), ("WITH rel", "estimates"), ("DISTINCT person", "persons"),
         ("i.user_id, i.id, i.theme", "fetch"))


def _kind(query: Any) -> str:
    text = query if isinstance(query, str) else repr(query)
    for marker, name in KINDS:
        if marker in text:
            return name
    return text.split()[0].strip("[(\"'").lower() if text.strip() else "?"


def main(n: int, queries: int, pgdata: str) -> None:
    import pgserver
    import psycopg

    from navi_memory import MemoryStore, Settings
    from navi_memory.bench.data import Corpus, Dataset, Vectors

    url = pgserver.get_server(pgdata, cleanup_mode=None).get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), queries + 21, 42)
    store = MemoryStore.open(url, embeddings=False, embedding_model="bench-384",
                             settings=Settings(url=url, embeddings="none"))
    events: list[tuple[float, str]] = []
    kind_of: dict[int, str] = {}
    execute, fetchall = psycopg.Cursor.execute, psycopg.Cursor.fetchall

    def timed_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        kind_of[id(self)] = kind = _kind(query)
        events.append((time.perf_counter(), f"send {kind}"))
        return execute(self, query, params, **kw)

    def timed_fetchall(self: Any) -> Any:
        rows = fetchall(self)
        events.append((time.perf_counter(), f"read {kind_of.get(id(self), '?')}"))
        return rows

    psycopg.Cursor.execute, psycopg.Cursor.fetchall = timed_execute, timed_fetchall  # type: ignore[method-assign]
    at: dict[str, list[float]] = collections.defaultdict(list)
    for i in range(1, queries + 21):
        events.clear()
        start = time.perf_counter()
        store.search(data.queries[i], user_id=data.query_user(i), query_embedding=data.query_vectors[i])
        end = time.perf_counter()
        if i > 20:
            seen: collections.Counter[str] = collections.Counter()
            for moment, name in events:
                seen[name] += 1
                at[name if seen[name] == 1 else f"{name} #{seen[name]}"].append((moment - start) * 1000)
            at["search returns"].append((end - start) * 1000)
    store.close()
    for name, values in sorted(at.items(), key=lambda item: float(np.median(item[1]))):
        print(f"{name:24s} {len(values):4d} searches  median {np.median(values):6.2f} ms")


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    main(size, int(sys.argv[2]) if len(sys.argv) > 2 else 300,
         sys.argv[3] if len(sys.argv) > 3 else f"/tmp/navi-pg-ab-{size}")
