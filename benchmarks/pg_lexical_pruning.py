"""Experiment, not part of the store: the lexical candidate query as the PostgreSQL backend sends it
(all query terms ORed, ranked with ts_rank_cd) against a variant that matches only on the terms
found in at most 1 % of rows according to ANALYZE (pg_stats.most_common_elems of
items.content_tsv) and still ranks with all terms. One user holding N items from the latency
benchmark's generator; 200 timed queries after 20. Prints p50 / p95 of both and the mean overlap
of their top 10s. Needs pgserver.

    python benchmarks/pg_lexical_pruning.py 200000
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main(n: int) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import pgserver
    import psycopg
    from psycopg import sql

    from navi_memory import MemoryStore, Settings
    from navi_memory.backends import postgres_sql as q
    from navi_memory.backends.base import Filters
    from navi_memory.bench.data import USER, Corpus, Dataset, Vectors
    from navi_memory.models import utcnow
    from navi_memory.retrieval.query import query_terms

    server = pgserver.get_server(tempfile.mkdtemp(prefix="navi-lex-"), cleanup_mode="delete")
    url = server.get_uri()
    data = Dataset.create(Corpus(42), n, "one", 1, Vectors("gaussian", 8, 42), 221, 42)
    with MemoryStore.open(url, embeddings=False, settings=Settings(url=url, embeddings="none")) as store:
        for batch in data.batches(1000):
            store.add_many([{k: v for k, v in item.items() if k != "embedding"} for item in batch])
    pruned_query = sql.SQL(
        "SELECT i.id, ts_rank_cd(i.content_tsv, websearch_to_tsquery('english', %s)) AS score FROM items i"
        " WHERE i.content_tsv @@ websearch_to_tsquery('english', %s) AND {} ORDER BY score DESC, i.id LIMIT %s")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE items")
        lexemes, freqs = conn.execute("SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
                                      " WHERE tablename = 'items' AND attname = 'content_tsv'").fetchone()
        share = dict(zip(lexemes, freqs))
        filters = Filters(user_id=USER, now=utcnow())
        cond, cond_params = q.where(filters)
        full_ms, pruned_ms, overlap = [], [], []
        for index in range(1, 221):
            terms = query_terms(data.queries[index])
            lexeme = {t: conn.execute("SELECT (to_tsvector('english', %s)::text)", [t]).fetchone()[0].split(":")[0]
                      .strip("'") for t in terms}
            rare = [t for t in terms if share.get(lexeme[t], 0.0) <= 0.01] or [
                min(terms, key=lambda t: share.get(lexeme[t], 0.0))]
            start = time.perf_counter()
            full = conn.execute(*q.lexical_candidates(filters, terms, 50)).fetchall()
            middle = time.perf_counter()
            pruned = conn.execute(pruned_query.format(cond),
                                  [" or ".join(terms), " or ".join(rare), *cond_params, 50]).fetchall()
            end = time.perf_counter()
            if index > 20:
                full_ms.append((middle - start) * 1000)
                pruned_ms.append((end - middle) * 1000)
                top = {r[0] for r in full[:10]}
                overlap.append(len(top & {r[0] for r in pruned[:10]}) / max(1, len(top)))
    server.cleanup()

    def stats(ms: list[float]) -> list[float]:
        return [round(float(np.percentile(ms, p)), 2) for p in (50, 95)]

    return {"n": n, "all_terms_ms_p50_p95": stats(full_ms), "rare_terms_ms_p50_p95": stats(pruned_ms),
            "top10_overlap": round(float(np.mean(overlap)), 3)}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)))
