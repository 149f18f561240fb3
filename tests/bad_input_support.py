"""Shared by the bad-input tests: a seeded store and the "raises, and nothing changed" check."""

from __future__ import annotations

import pytest

from navi_memory import NaviMemoryError

U = "alice"
MAX = 32 * 1024


def before_the_database(test):
    """For a test whose bad input every backend rejects before any SQL runs (the checks are the
    operations', shared by the backends): it runs on SQLite only, where the suite checks that its
    body opened no database connection (``pytest_runtest_call`` in conftest.py); running it on
    PostgreSQL too would prove nothing more. The cases that reach the database run on both."""
    return pytest.mark.parametrize("backend_name", ["sqlite"])(pytest.mark.before_the_database(test))


def seed(store):
    """One item, one fact (with history), a summary and a session for two users; returns the ids."""
    ids = {"item": store.add(user_id=U, content="I love lattes", tags=["drinks"]),
           "bob_item": store.add(user_id="bob", content="bob's note")}
    store.upsert_fact(user_id=U, category="preferences", key="drink", value="latte")
    store.upsert_fact(user_id=U, category="preferences", key="drink", value="flat white")
    store.set_summary("Alice likes coffee.", user_id=U)
    store.mark_session_extracted("s1", user_id=U)
    return ids


def unchanged_after(dump, call, error):
    """``call()`` raises ``error`` (a NaviMemoryError) and every table is as before."""
    before = dump()
    assert before["items"] and before["facts"] and before["embeddings"]
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, NaviMemoryError)
    assert dump() == before
    return info.value
