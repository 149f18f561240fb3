"""The seam under the storage generators shared by SQLite and PostgreSQL (``backends/shared``):
each runner runs one call in one transaction and sends back rows of the same types, and the
SQLite dialect renders and binds what the shared text says."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from navi_memory.backends.shared.dialect import ITEM_SELECT, Q
from navi_memory.backends.sqlite.runner import SQLITE, add_minutes
from navi_memory.core.timeutil import to_db


def _statement(query: Q):
    return (yield query)


def test_sqlite_renders_the_shared_placeholders():
    assert SQLITE.render("SELECT %s WHERE a LIKE 'x%%' AND b = %s") == "SELECT ? WHERE a LIKE 'x%' AND b = ?"


def test_navi_add_minutes_stores_the_time_as_to_db_does():
    now = datetime(2024, 2, 28, 23, 30, tzinfo=timezone.utc)
    assert add_minutes(to_db(now), 90.5) == to_db(now + timedelta(minutes=90.5)) == "2024-02-29T01:00:30.000000Z"
    assert add_minutes(None, 5) is None and add_minutes(to_db(now), None) is None


def test_a_shared_statement_reads_the_same_types_on_both_backends(store):
    item = store.put_keyed(user_id="u1", namespace=("prefs",), key="drink", content="tea",
                           metadata={"cup": "large"}, ttl_minutes=5)
    (row,) = store.backend._run(lambda: _statement(Q(ITEM_SELECT + " WHERE i.id = %s", [item.id])))
    assert row["created_at"].utcoffset() == timedelta(0) and row["expires_at"] == item.expires_at
    assert (row["metadata"], row["tags"], row["pinned"], row["source_ref"]) == ({"cup": "large"}, [], False, None)
    assert (row["namespace"], row["ext_key"], row["ttl_minutes"]) == ("prefs", "drink", 5)


def test_a_shared_call_that_fails_writes_nothing(store):
    item = store.put_keyed(user_id="u1", namespace=("prefs",), key="drink", content="tea")

    def delete_then_fail():
        assert (yield Q("DELETE FROM items WHERE id = %s", [item.id])) == 1
        raise RuntimeError("after the delete")

    with pytest.raises(RuntimeError):
        store.backend._run(delete_then_fail)
    assert store.get_keyed(user_id="u1", namespace=("prefs",), key="drink").id == item.id


def test_refresh_ttl_stores_the_text_form_of_a_time_on_sqlite(tmp_path, clock):
    from navi_memory import MemoryStore

    path = tmp_path / "m.db"
    with MemoryStore.open(f"sqlite:///{path}", embeddings=False, clock=clock) as store:
        item = store.put_keyed(user_id="u1", namespace=("ns",), key="k", content="x", ttl_minutes=10)
        clock.advance(minutes=3)
        assert store.refresh_ttl([item.id], user_id="u1") == 1
    with sqlite3.connect(path) as conn:
        (stored,) = conn.execute("SELECT expires_at FROM items WHERE id = ?", (item.id,)).fetchone()
    assert stored == to_db(clock() + timedelta(minutes=10))
