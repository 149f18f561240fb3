"""Search p50 / p95 with each candidate word's folding kept (``lexical._folded``'s cache) against
folded again every time, the two taking turns search by search in one process.

The latency benchmark's data (one user, Zipf-like words, 384-d ``lowrank`` vectors, seed 42):

    python benchmarks/folded_words_ab.py sqlite 20000
    NAVI_BREAKDOWN_PGDATA=/tmp/bd100k python benchmarks/folded_words_ab.py postgresql 100000

PostgreSQL reads the server ``benchmarks/pg_search_breakdown.py`` loaded into ``NAVI_BREAKDOWN_PGDATA``
(run it first with the same N); SQLite loads a temporary file.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main(backend: str, n: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from navi_memory import MemoryStore, Settings
    from navi_memory.backends import open_backend
    from navi_memory.bench import latency
    from navi_memory.bench.data import Corpus, Dataset, Vectors
    from navi_memory.config import parse_url
    from navi_memory.retrieval import lexical

    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("lowrank", 384, 42), 221, 42)
    model = "bench-384"
    if backend == "postgresql":
        import pgserver

        url = pgserver.get_server(os.environ["NAVI_BREAKDOWN_PGDATA"], cleanup_mode=None).get_uri()
    else:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='navi-fold-')}/bench.db"
        loader = open_backend(parse_url(url))
        loader.migrate()
        latency.ingest(MemoryStore(loader, None, settings=Settings(url=url, embeddings="none"),
                                   embedding_model=model), data, 1000, f"n={n} ingest")
        loader.close()
    arms = {"folded again": lexical._folded.__wrapped__, "kept": lexical._folded}
    spent: dict[str, list[float]] = {name: [] for name in arms}
    with MemoryStore.open(url, embeddings=False, embedding_model=model) as store:
        def search(i: int) -> None:
            store.search(data.queries[i], user_id=data.query_user(i), query_embedding=data.query_vectors[i])

        for i in range(1, 21):
            search(i)
        for _ in range(2):
            for i in range(21, 221):
                for name in list(arms) if i % 2 else list(arms)[::-1]:
                    lexical._folded = arms[name]
                    start = time.perf_counter()
                    search(i)
                    spent[name].append(1000 * (time.perf_counter() - start))
        lexical._folded = arms["kept"]
    for name, times in spent.items():
        times.sort()
        print(f"{backend} n={n} {name}: p50 {statistics.median(times):.2f} ms, p95 {times[int(0.95 * len(times))]:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
