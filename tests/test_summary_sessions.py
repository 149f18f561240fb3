"""Summaries with versions, session extraction marks, forget() and the admin user list."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime, timezone

import pytest

from navi_memory import Summary

from .helpers import count_rows, dump_tables, fts_integrity_ok, table_names

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


U = "alice"
USER_TABLES = ("items", "facts", "fact_history", "themes", "summaries", "session_state", "embeddings", "next_embeddings",
               "messages", "llm_calls", "persons", "promotions")


def test_summary_is_none_until_set(store):
    assert store.get_summary(user_id=U) is None
    assert store.summary_history(user_id=U) == []


def test_set_summary_keeps_versions(store, clock):
    first = store.set_summary("Alice likes tea.", user_id=U)
    assert isinstance(first, Summary) and (first.version, first.content, first.created_at) == (
        1, "Alice likes tea.", clock.now)
    clock.advance(1)
    second = store.set_summary("  Alice switched to coffee.  ", user_id=U)
    assert (second.version, second.content) == (2, "Alice switched to coffee.")
    assert store.get_summary(user_id=U) == "Alice switched to coffee."
    history = store.summary_history(user_id=U)
    assert [(s.version, s.content) for s in history] == [(2, "Alice switched to coffee."), (1, "Alice likes tea.")]
    assert history[1].created_at < history[0].created_at
    assert [s.version for s in store.summary_history(user_id=U, limit=1)] == [2]


def test_summaries_are_per_user(store):
    store.set_summary("about alice", user_id=U)
    assert store.get_summary(user_id="bob") is None
    assert store.set_summary("about bob", user_id="bob").version == 1
    assert store.get_summary(user_id=U) == "about alice"


def test_session_extraction_marks(store, clock):
    assert store.get_extracted_at("s1", user_id=U) is None
    assert store.mark_session_extracted("s1", user_id=U) == clock.now
    assert store.get_extracted_at("s1", user_id=U) == clock.now
    later = clock.advance(hours=3)
    store.mark_session_extracted("s1", user_id=U)
    assert store.get_extracted_at("s1", user_id=U) == later
    assert store.get_extracted_at("s1", user_id="bob") is None
    assert store.get_extracted_at("s2", user_id=U) is None


def test_session_mark_at_an_explicit_time(store):
    when = store.mark_session_extracted("s9", user_id=U, at="2024-05-01T10:00:00+02:00")
    assert when == datetime(2024, 5, 1, 8, 0, tzinfo=timezone.utc)
    assert store.get_extracted_at("s9", user_id=U) == when


def populate(store, user):
    store.add(user_id=user, content=f"{user} likes lattes", theme="drinks")
    store.add(user_id=user, content=f"{user} went hiking", theme="travel")
    store.upsert_fact(user_id=user, category="profile", key="name", value=user)
    store.upsert_fact(user_id=user, category="profile", key="name", value=user.upper())
    store.set_summary(f"All about {user}", user_id=user)
    store.set_summary(f"More about {user}", user_id=user)
    store.mark_session_extracted("s1", user_id=user)
    store.add_person(user.title(), user_id=user)


def test_forget_removes_every_row_of_the_user_and_keeps_others(store, db_path):
    populate(store, "alice")
    populate(store, "bob")
    bob_before = {t: count_rows(db_path, t, "user_id = ?", ("bob",)) for t in USER_TABLES}
    with closing(sqlite3.connect(db_path)) as conn:  # the per-user lexical index keys rows by the user's pk
        alice_pk = conn.execute("SELECT pk FROM users WHERE id = 'alice'").fetchone()[0]
    counts = store.forget(user_id="alice")
    assert counts == {"items": 3, "facts": 1, "fact_history": 1, "themes": 3, "summaries": 4,
                      "session_state": 1, "embeddings": 3, "next_embeddings": 0, "messages": 0, "llm_calls": 0,
                      "persons": 1, "promotions": 0}
    for table in USER_TABLES:
        assert count_rows(db_path, table, "user_id = ?", ("alice",)) == 0, table
    assert count_rows(db_path, "users", "id = ?", ("alice",)) == 0
    for table in ("lex_rows", "lex_users"):  # the per-user lexical index forgot alice's words and counts
        assert count_rows(db_path, table, "user_pk = ?", (alice_pk,)) == 0, table
    assert {t: count_rows(db_path, t, "user_id = ?", ("bob",)) for t in USER_TABLES} == bob_before
    fts_integrity_ok(db_path)  # the FTS index forgot alice's text too
    dump = repr(dump_tables(db_path))
    assert "alice likes" not in dump and "All about alice" not in dump
    assert store.search("*", user_id="alice") == []
    assert store.search("lattes", user_id="alice") == []
    assert store.get_all_facts(user_id="alice") == [] and store.get_summary(user_id="alice") is None
    assert {r.content for r in store.search("lattes", user_id="bob")} >= {"bob likes lattes"}
    assert store.get_fact("name", user_id="bob").value == "BOB"


def test_every_user_table_is_covered_by_forget(db_path, store):
    populate(store, "alice")
    user_tables = set()
    for table in table_names(db_path):
        if table.startswith(("items_fts", "lex_fts")) or table in ("sqlite_sequence", "schema_migrations"):
            continue
        user_tables.add(table)
    assert user_tables == set(USER_TABLES) | {"users", "lex_rows", "lex_users"}


def test_forget_then_reuse_the_same_user_id(store):
    populate(store, "alice")
    store.forget(user_id="alice")
    item = store.add(user_id="alice", content="fresh start with lattes")
    results = store.search("lattes", user_id="alice")
    assert [r.id for r in results] == [item] and results[0].signals["semantic"] is True
    assert store.set_summary("new", user_id="alice").version == 1


def test_forget_unknown_user_is_a_no_op(store, db_path):
    populate(store, "bob")
    before = dump_tables(db_path)
    assert set(store.forget(user_id="nobody").values()) == {0}
    assert dump_tables(db_path) == before


def test_list_users_counts_items_and_facts(store):
    populate(store, "alice")
    store.add(user_id="bob", content="x")
    users = {u["id"]: u for u in store.list_users()}
    assert (users["alice"]["items"], users["alice"]["facts"]) == (3, 1)
    assert (users["bob"]["items"], users["bob"]["facts"]) == (1, 0)
