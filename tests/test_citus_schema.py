"""What the Citus distribution reads from the schema, checked on single-node PostgreSQL (so without a
cluster too): every table migrate creates is listed, in an order Citus can distribute them in."""

from __future__ import annotations

import psycopg
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.postgres import citus, schema

pytestmark = pytest.mark.postgres


def test_every_table_is_distributed_or_a_reference_table_in_foreign_key_order(pg_url):
    with MemoryStore.open(pg_url, embeddings=False) as store:
        assert not store.backend.distributed  # no citus here: nothing changes
    with psycopg.connect(pg_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        keys = conn.execute("SELECT c.conrelid::regclass::text, c.confrelid::regclass::text, a.attname"
                            " FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid"
                            " AND a.attnum = c.conkey[1] WHERE c.contype = 'f'"
                            " AND c.connamespace = current_schema()::regnamespace").fetchall()
    assert sorted(citus.TABLES) == sorted(tables)
    order = [table for table, _ in schema.DISTRIBUTED]
    column = dict(schema.DISTRIBUTED)
    for referencing, referenced, first in keys:
        # each key starts with the user column, and points at a table distributed before
        assert first == column[referencing] and order.index(referenced) < order.index(referencing)
