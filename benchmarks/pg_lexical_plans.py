"""The full-text candidate statement (``sql.lexical_candidates``, the word-weighted ranking) as the
server plans it: a table never analysed (a new store; rows written faster than autovacuum looks) and
an analysed one, each under custom plans (planned with the values) and under the generic plan a
prepared statement gets (psycopg prepares a statement run five times on a connection). A fresh
pgserver, ``N`` notes for each of three users (autovacuum off on ``items``), one user's search of
``TERMS`` words; p50 over ``REPEAT`` runs of the same statement.

    PYTHONPATH=. python benchmarks/pg_lexical_plans.py [N] [REPEAT]

Run it with ``PYTHONPATH`` at an older checkout to compare code (the statement comes from there).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone

TERMS = ["worker", "5", "write", "13", "coffee", "trains"]
WORDS = ("coffee trains morning evening dog cat walk park lunch meeting project report doctor sister"
         " brother music guitar book read write worker garden rain").split()


def main(n: int, repeat: int) -> None:
    import pgserver
    import psycopg

    from navi_memory import MemoryStore
    from navi_memory.backends.base import Filters
    from navi_memory.backends.postgres import sql as q

    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as pgdata:
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
        url = server.get_uri()
        with MemoryStore.open(url, embeddings=False) as store:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ALTER TABLE items SET (autovacuum_enabled = false)")
            for user in ("alice", "bob", "carol"):
                store.add_many([{"user_id": user, "content": f"worker {k % 16} write {k} about "
                                 + " ".join(rng.sample(WORDS, 5))} for k in range(n)])
        filters = Filters(user_id="alice", now=datetime.now(timezone.utc), types=("note",))
        text, params = q.lexical_candidates(filters, TERMS, 50)
        print(f"{n} notes a user, 3 users; {len(TERMS)} words; p50 of {repeat} runs (ms)")
        for analysed in (False, True):
            for mode in ("force_custom_plan", "force_generic_plan"):
                with psycopg.connect(url, autocommit=True) as conn:
                    if analysed:
                        conn.execute("ANALYZE items")
                    conn.execute(f"SET plan_cache_mode = {mode}")
                    conn.execute(text, params, prepare=True).fetchall()
                    times = []
                    for _ in range(repeat):
                        start = time.perf_counter()
                        conn.execute(text, params, prepare=True).fetchall()
                        times.append((time.perf_counter() - start) * 1000)
                print(f"  {'analysed' if analysed else 'never analysed':15} {mode.split('_')[1]:8}"
                      f" {statistics.median(times):10.1f}")
        server.cleanup()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
