"""Schema version 4 (household persons, promotions) on databases created by earlier versions."""

from __future__ import annotations

import psycopg
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.sqlite.schema import LATEST_VERSION

from .helpers import sqlite_at_version


def test_a_version_3_sqlite_database_gets_the_household(tmp_path):
    path = tmp_path / "v3.db"
    conn = sqlite_at_version(path, 3)
    conn.execute("INSERT INTO users (id, created_at) VALUES ('alice', '2024-01-01T00:00:00.000000Z')")
    conn.close()
    with MemoryStore.open(f"sqlite:///{path}", embeddings=False) as store:
        assert store.migrate() == LATEST_VERSION
        assert store.household_mode(user_id="alice") == "single"
        store.add_person("Alice", user_id="alice", aliases=["me"])
        assert store.resolve_person_ref("me", user_id="alice").display_name == "Alice"
        assert store.forget(user_id="alice")["persons"] == 1


@pytest.mark.postgres
def test_a_version_3_postgres_schema_gets_the_household(postgres_server):
    url = postgres_server.fresh_schema_url()
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            store.add(user_id="alice", content="an item from before")
        with psycopg.connect(url, autocommit=True) as conn:  # back to what version 3 left
            conn.execute("DROP TABLE promotions")
            conn.execute("DROP TABLE persons")
            conn.execute("ALTER TABLE users DROP COLUMN household_mode")
            conn.execute("DELETE FROM navi_schema_migrations WHERE version >= 4")
        with MemoryStore.open(url, embeddings=False) as store:
            assert store.backend.schema_version() == LATEST_VERSION
            assert store.household_mode(user_id="alice") == "single"
            store.add_person("Alice", user_id="alice")
            store.set_household_mode("multi", user_id="alice")
            assert store.get_person("Alice", user_id="alice").role == "primary"
            assert store.migrate() == LATEST_VERSION  # idempotent
    finally:
        postgres_server.drop_schema(url)


@pytest.mark.postgres
def test_a_version_2_postgres_schema_gets_the_context_column_and_its_full_text(postgres_server):
    url = postgres_server.fresh_schema_url()
    old_tsv = ("setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
               "setweight(to_tsvector('english', content), 'B')")
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            store.add(user_id="alice", content="an item from before")
        with psycopg.connect(url, autocommit=True) as conn:  # back to what version 2 left
            conn.execute("ALTER TABLE items DROP COLUMN content_tsv")
            conn.execute("ALTER TABLE items DROP COLUMN context")
            conn.execute(f"ALTER TABLE items ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({old_tsv}) STORED")
            conn.execute("DELETE FROM navi_schema_migrations WHERE version >= 3")
        with MemoryStore.open(url, embeddings=False) as store:
            assert store.backend.schema_version() == LATEST_VERSION
            store.add(user_id="alice", content="the ferry to Bergen", context="we talked about fjords")
            assert [r["content"] for r in store.search("fjords", user_id="alice")] == ["the ferry to Bergen"]
            assert store.search("before", user_id="alice")[0]["content"] == "an item from before"
            assert store.migrate() == LATEST_VERSION  # idempotent
    finally:
        postgres_server.drop_schema(url)
