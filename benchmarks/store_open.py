"""Median time of ``MemoryStore.open`` on a new PostgreSQL schema (the migration) and again on it
(a current schema: reads only), on a throwaway pgserver with durability off as the tests run it.

    python benchmarks/store_open.py [OPENS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit


def with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-c search_path={schema},public"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def main(opens: int) -> None:
    import pgserver
    import psycopg

    from navi_memory import MemoryStore

    server = pgserver.get_server(tempfile.mkdtemp(prefix="navi-open-"), cleanup_mode="delete")
    base = server.get_uri()
    with psycopg.connect(base, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = off")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    new, current = [], []
    try:
        for _ in range(opens):
            schema = "t_" + uuid.uuid4().hex[:10]
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            url = with_search_path(base, schema)
            for times in (new, current):
                start = time.perf_counter()
                MemoryStore.open(url, embeddings=False).close()
                times.append(1000 * (time.perf_counter() - start))
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        server.cleanup()
    print(f"open on a new schema: {statistics.median(new):.0f} ms; on a current one: {statistics.median(current):.0f} ms"
          f" (medians of {opens})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
