"""Schema version 5 (agent and run scopes, keyed items, the metadata GIN index) on databases
created by version 4: every row, fact history and promotion survives the upgrade."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.sqlite.schema import LATEST_VERSION

from .helpers import sqlite_at_version

STAMP = "2024-01-01T00:00:00.000000Z"


def _version_4_sqlite(path) -> None:
    conn = sqlite_at_version(path, 4)
    conn.execute("INSERT INTO users (id, created_at) VALUES ('alice', ?)", (STAMP,))
    conn.execute("INSERT INTO themes (user_id, slug, display_name, created_at, updated_at)"
                 " VALUES ('alice', 'general', 'General', ?, ?)", (STAMP, STAMP))
    conn.execute("INSERT INTO items (user_id, theme, type, content, created_at, updated_at)"
                 " VALUES ('alice', 'general', 'note', 'an item from before', ?, ?)", (STAMP, STAMP))
    for key in ("city", "pet", "gone"):
        conn.execute("INSERT INTO facts (user_id, category, key, value, source, confidence, created_at, updated_at)"
                     " VALUES ('alice', 'profile', ?, 'x', 'conversation', 70, ?, ?)", (key, STAMP, STAMP))
    conn.execute("DELETE FROM facts WHERE key = 'gone'")  # its id (3) must never come back
    conn.execute("INSERT INTO fact_history (fact_id, user_id, value, source, confidence, valid_from, valid_to)"
                 " VALUES (1, 'alice', 'Paris', 'conversation', 70, ?, ?)", (STAMP, STAMP))
    conn.execute("INSERT INTO promotions (item_id, user_id, fact_id, promoted_at) VALUES (1, 'alice', 2, ?)", (STAMP,))
    conn.close()


def test_a_version_4_sqlite_database_upgrades_and_keeps_every_fact_link(tmp_path):
    path = tmp_path / "v4.db"
    _version_4_sqlite(path)
    with MemoryStore.open(f"sqlite:///{path}", embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        facts = store.get_all_facts(user_id="alice", include_history=True, sort_by="created_at", sort_order="asc")
        assert [(f.id, f.key, f.agent_id) for f in facts] == [(1, "city", None), (2, "pet", None)]
        assert [h.value for h in facts[0].history] == ["Paris"]
        added = store.upsert_fact(user_id="alice", category="profile", key="job", value="baker")
        assert added.fact.id == 4  # AUTOINCREMENT survives the rebuild of the table
        store.add(user_id="alice", content="scoped", agent_id="planner", run_id="r1")
        assert store.migrate() == LATEST_VERSION
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT fact_id FROM promotions").fetchall() == [(2,)]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"items_user_agent", "items_user_run", "items_user_namespace_key", "facts_identity",
            "facts_user_updated"} <= indexes
    conn.close()


@pytest.mark.postgres
def test_a_version_4_postgres_schema_upgrades(postgres_server):
    url = postgres_server.fresh_schema_url()
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            store.add(user_id="alice", content="an item from before", metadata={"colour": "red"})
            store.upsert_fact(user_id="alice", category="profile", key="city", value="Paris")
            store.upsert_fact(user_id="alice", category="profile", key="city", value="Rome")
        with psycopg.connect(url, autocommit=True) as conn:  # back to what version 4 left
            for index in ("items_user_agent", "items_user_run", "items_user_namespace_key", "items_metadata_gin",
                          "facts_identity", "facts_user_agent", "items_keyed_expiry"):
                conn.execute(f"DROP INDEX {index}")
            for column in ("agent_id", "run_id", "namespace", "ext_key", "ttl_minutes"):
                conn.execute(f"ALTER TABLE items DROP COLUMN {column}")
            conn.execute("ALTER TABLE facts DROP COLUMN agent_id")
            conn.execute("ALTER TABLE facts DROP COLUMN run_id")
            conn.execute("ALTER TABLE session_state DROP COLUMN agent_id")
            conn.execute("ALTER TABLE session_state DROP COLUMN run_id")
            conn.execute("ALTER TABLE facts ADD CONSTRAINT facts_user_id_category_key_key UNIQUE (user_id, category, key)")
            conn.execute("DELETE FROM navi_schema_migrations WHERE version >= 5")
        with MemoryStore.open(url, embeddings=False) as store:
            assert store.backend.schema_version() == LATEST_VERSION
            fact = store.get_fact("city", user_id="alice")
            assert fact.value == "Rome" and [h.value for h in fact.history] == ["Paris"] and fact.agent_id is None
            item = store.add(user_id="alice", content="scoped", agent_id="planner", run_id="r1")
            assert store.get(item, user_id="alice").agent_id == "planner"
            assert store.migrate() == LATEST_VERSION  # idempotent
        with psycopg.connect(url) as conn:
            names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
            assert {"items_metadata_gin", "facts_identity", "items_user_namespace_key"} <= names
            constraints = {r[0] for r in conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'facts'::regclass")}
            assert "facts_user_id_category_key_key" not in constraints
    finally:
        postgres_server.drop_schema(url)


def test_scopes_travel_through_export_and_import(store, new_db_url, clock):
    store.add(user_id="u1", content="the planner's own note", agent_id="planner", run_id="run-1")
    store.add(user_id="u1", content="a shared note")
    store.put_keyed(user_id="u1", namespace=("prefs", "food"), key="tea", content="green tea", agent_id="planner",
                    ttl_minutes=90)
    records: list[dict] = []
    store.export(records.append, user_id="u1")
    items = {r["content"]: r for r in records if r.get("type") == "item"}
    assert (items["the planner's own note"]["agent_id"], items["the planner's own note"]["run_id"]) == ("planner", "run-1")
    assert items["a shared note"]["agent_id"] is None
    with MemoryStore.open(new_db_url(), embeddings=False, clock=clock) as target:
        target.import_records(records)
        got = {i.content: (i.agent_id, i.run_id) for i in target.list_items(user_id="u1")}
        keyed = target.get_keyed(user_id="u1", namespace=("prefs", "food"), key="tea")
        again: list[dict] = []
        target.export(again.append, user_id="u1")
    assert got == {"the planner's own note": ("planner", "run-1"), "a shared note": (None, None),
                   "green tea": ("planner", None)}
    assert keyed is not None and (keyed.content, keyed.ttl_minutes) == ("green tea", 90)
    strip = lambda rs: sorted((r["content"], r["agent_id"], r["run_id"]) for r in rs if r.get("type") == "item")  # noqa: E731
    assert strip(again) == strip(records)


def test_a_keyed_item_already_in_the_store_is_not_imported_again(store, new_db_url, clock):
    store.put_keyed(user_id="u1", namespace=("prefs",), key="tea", content="green tea")
    records: list[dict] = []
    store.export(records.append, user_id="u1")
    with MemoryStore.open(new_db_url(), embeddings=False, clock=clock) as target:
        target.put_keyed(user_id="u1", namespace=("prefs",), key="tea", content="black tea")
        report = target.import_records(records)
        assert report.skipped.get("item") == 1 and not report.added.get("item")
        assert target.get_keyed(user_id="u1", namespace=("prefs",), key="tea").content == "black tea"
