"""The seam under the storage generators shared by SQLite and PostgreSQL (``backends/shared``):
each runner runs one call in one transaction and sends back rows of the same types, and the
SQLite dialect renders and binds what the shared text says."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from navi_memory.backends.shared.dialect import ITEM_SELECT, Q
from navi_memory.backends.sqlite.runner import SQLITE, add_minutes
from navi_memory.core.timeutil import from_db, to_db

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


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


def test_a_fact_and_its_item_store_times_in_the_text_form_of_to_db_on_sqlite(tmp_path, clock):
    """The shared fact generators read times back as datetimes and bind them again (the item
    mirrors the fact's expiry and statement time): the stored text stays ``to_db``'s."""
    from navi_memory import MemoryStore

    path = tmp_path / "m.db"
    expires, said = clock() + timedelta(days=3), clock() - timedelta(hours=2)
    with MemoryStore.open(f"sqlite:///{path}", embeddings=False, clock=clock) as store:
        store.upsert_fact(user_id="u1", category="profile", key="city", value="Lisbon", expires_at=expires,
                          observed_at=said)
        clock.advance(minutes=5)
        store.upsert_fact(user_id="u1", category="profile", key="city", value="Porto", expires_at=expires)
        store.upsert_fact(user_id="u1", category="profile", key="city", value="Faro", expires_at=expires,
                          observed_at=said - timedelta(hours=1))  # said before both: history only
        fact = store.get_fact(user_id="u1", category="profile", key="city")
    with sqlite3.connect(path) as conn:
        stored = conn.execute("SELECT f.expires_at, f.observed_at, f.updated_at, i.expires_at, i.observed_at"
                              " FROM facts f JOIN items i ON i.id = f.item_id").fetchone()
        spans = conn.execute("SELECT value, valid_from, valid_to FROM fact_history ORDER BY valid_from").fetchall()
    assert fact.value == "Porto"
    assert stored == (to_db(expires), to_db(clock()), to_db(clock()), to_db(expires), to_db(clock()))
    assert [value for value, _, _ in spans] == ["Faro", "Lisbon"]
    assert all(to_db(from_db(t)) == t for _, start, end in spans for t in (start, end))


def test_a_shared_fact_and_an_agents_fact_of_one_key_are_two_facts(store):
    store.upsert_fact(user_id="u1", category="profile", key="tone", value="formal")
    store.upsert_fact(user_id="u1", category="profile", key="tone", value="casual", agent_id="a1")
    assert store.get_fact(user_id="u1", category="profile", key="tone").value == "formal"
    assert store.get_fact(user_id="u1", category="profile", key="tone", agent_id="a1").value == "casual"
    assert store.upsert_fact(user_id="u1", category="profile", key="tone", value="formal").action == "unchanged"


def test_a_promoted_fact_reads_the_same_types_on_both_backends(store):
    change = store.upsert_fact(user_id="u1", category="profile", key="drink", value="tea")
    now = datetime.now(timezone.utc)
    db = store.backend
    assert db.record_promotion(user_id="u1", fact_id=change.fact.id, item_ids=[change.fact.item_id], now=now) == 1
    assert db.record_promotion(user_id="u1", fact_id=change.fact.id, item_ids=[change.fact.item_id], now=now) == 0
    (row,) = db.promoted_facts(user_id="u1", limit=5, now=now)
    assert (row["id"], row["value"], row["promoted_items"]) == (change.fact.id, "tea", 1)
    assert all(isinstance(row[k], datetime) and row[k].utcoffset() == timedelta(0)
               for k in ("created_at", "updated_at", "last_verified_at", "observed_at"))


def test_a_session_reads_the_same_types_on_both_backends(store):
    db, now = store.backend, datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    calls = [{"id": "c1", "name": "lookup", "args": {"q": "tea"}}]
    session, created = db.append_messages("u1", "s1", [{"role": "user", "content": "hi"},
                                                       {"role": "assistant", "content": "", "tool_calls": calls}], now)
    assert created and session["message_count"] == 2 and session["last_active"] == now
    assert session["created_at"].utcoffset() == timedelta(0)
    (again, created) = db.open_session("u1", "s1", now - timedelta(hours=1))
    assert not created and again["last_active"] == now  # an earlier time never moves last_active back
    got = db.get_session("u1", "s1")
    assert [m["tool_calls"] for m in got["messages"]] == [[], calls]
    assert got["messages"][0]["created_at"] == now
    assert db.redact_messages("u1", "s1", [2], "[removed]") == 1
    assert db.get_session("u1", "s1")["messages"][1]["tool_calls"] == []


def test_usage_counts_each_session_of_a_purpose_once(store):
    db, now = store.backend, datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    call = {"purpose": "extract", "model": None, "input_tokens": 10, "output_tokens": 2, "estimated": False, "ok": True}
    db.append_messages("u1", "s1", [{"role": "user", "content": "hi"}], now)
    db.finish_session("u1", "s1", {"state": "extracted"}, [call, dict(call, ok=False)], now)
    db.record_llm_calls("u1", [call], now)  # outside any session: counts as one more
    stats = db.usage_stats("u1", 5)
    assert stats["purposes"] == {"extract": {"calls": 3, "input_tokens": 30, "output_tokens": 6, "failed": 1,
                                             "sessions": 2}}
    assert stats["models"]["unknown"]["sessions"] == 2 and stats["states"] == {"extracted": {"sessions": 1,
                                                                                              "messages": 1}}
    (costliest,) = stats["sessions"]
    assert (costliest["llm_calls"], costliest["input_tokens"], costliest["extracted_at"]) == (2, 20, now)


def test_a_person_and_the_user_settings_read_the_same_types_on_both_backends(store):
    db, now = store.backend, datetime.now(timezone.utc)
    row = db.insert_person(user_id="u1", fields={"display_name": "Zoë", "aliases": ["Z", "zozo"], "devices": ["tab-1"]},
                           now=now)
    assert (row["display_name"], row["aliases"], row["devices"], row["role"]) == ("Zoë", ["Z", "zozo"], ["tab-1"], None)
    changed = db.update_person(user_id="u1", person_id=row["id"], changes={"aliases": [], "role": "child"},
                               now=now + timedelta(seconds=1))
    (listed,) = db.list_persons(user_id="u1")
    assert listed == changed and (changed["aliases"], changed["devices"], changed["role"]) == ([], ["tab-1"], "child")
    assert all(isinstance(r[k], datetime) and r[k].utcoffset() == timedelta(0)
               for r in (row, changed) for k in ("created_at", "updated_at"))
    assert changed["updated_at"] - changed["created_at"] == timedelta(seconds=1)
    db.set_memory_off(user_id="u1", since=now, now=now)
    settings = db.user_settings(user_id="u1")
    assert settings["memory_off_since"] == now and settings["memory_off_since"].utcoffset() == timedelta(0)
    assert db.user_settings(user_id="nobody") == {"household_mode": "single", "timezone": None, "memory_off_since": None,
                                                  "household_name": None, "locale": None}


def test_a_second_person_of_one_name_is_a_storage_error_that_writes_nothing(store):
    """The store's operations refuse it first; a race past them meets the unique index, which
    each runner reports as ``StorageError`` (PostgreSQL's after running the call again)."""
    from navi_memory.errors import StorageError

    db, now = store.backend, datetime.now(timezone.utc)
    first = db.insert_person(user_id="u1", fields={"display_name": "Ana"}, now=now)
    other = db.insert_person(user_id="u1", fields={"display_name": "Bo"}, now=now)
    with pytest.raises(StorageError):
        db.insert_person(user_id="u1", fields={"display_name": "ANA", "aliases": ["x"]}, now=now)
    with pytest.raises(StorageError):
        db.update_person(user_id="u1", person_id=other["id"], changes={"display_name": "ana"}, now=now)
    assert db.list_persons(user_id="u1") == [first, other]


def test_users_and_embedding_states_read_the_same_on_both_backends(store):
    store.add(user_id="u2", content="tea in the morning")
    store.add(user_id="u1", content="coffee after lunch")
    db = store.backend
    listed = db.list_users()  # no limit: every user
    assert [(u["id"], u["items"], u["facts"]) for u in listed] == [("u1", 1, 0), ("u2", 1, 0)]
    assert listed[0]["created_at"].utcoffset() == timedelta(0) and listed[0]["memory_off_since"] is None
    assert [u["id"] for u in db.list_users(limit=1, offset=1)] == ["u2"]
    stats = db.embedding_stats(store._ops.memory._shared.model)
    assert (stats["items"], stats["ready"] + stats["pending"], stats["missing"], stats["other_model"]) == (2, 2, 0, 0)
    assert db.embedding_stats("another-model")["other_model"] == 2
    assert db.forget_user("u1")["items"] == 1 and [u["id"] for u in db.list_users()] == ["u2"]


def test_an_export_page_reads_the_same_types_on_both_backends(store, clock):
    db, now = store.backend, clock()
    item_id = store.add(user_id="u1", content="oat milk lattes", tags=["coffee"], metadata={"cup": "large"},
                        source_ref={"session_id": "s1"}, pinned=True, expires_days=3)
    (row,) = db.export_items(user_id="u1", after_id=0, limit=10, ids=None, with_vectors=True)
    assert (row["id"], row["tags"], row["metadata"], row["source_ref"], row["key"]) == (
        item_id, ["coffee"], {"cup": "large"}, {"session_id": "s1"}, None)
    assert row["pinned"] is True  # a bool, not SQLite's 1
    assert (row["created_at"], row["expires_at"], row["observed_at"]) == (now, now + timedelta(days=3), None)
    assert all(row[k].utcoffset() == timedelta(0) for k in ("created_at", "updated_at", "expires_at"))
    vector = row["emb_vector"]
    assert row["emb_state"] == "ready" and vector.dtype == np.float32 and vector.shape == (row["emb_dims"],)
    assert db.export_items(user_id="u1", after_id=0, limit=0, ids=[item_id], with_vectors=False)[0]["emb_vector"] is None
    calls = [{"id": "c1", "name": "lookup", "arguments": "{\"q\": \"tea\"}"}]
    db.append_messages("u1", "s1", [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": "", "tool_calls": calls}], now)
    db.record_llm_calls("u1", [{"purpose": "summary", "model": None, "input_tokens": 3, "output_tokens": 1,
                                "estimated": True, "ok": False, "error": "timeout"}], now)
    messages = db.export_page(kind="messages", user_id="u1", after=None, limit=10)
    assert [(m["seq"], m["tool_calls"], m["created_at"]) for m in messages] == [(1, [], now), (2, calls, now)]
    assert [m["seq"] for m in db.export_page(kind="messages", user_id="u1", after=["s1", 1], limit=10)] == [2]
    (session,) = db.export_page(kind="sessions", user_id="u1", after=None, limit=10)
    assert (session["last_active"], session["extracted_at"], session["message_count"]) == (now, None, 2)
    (call,) = db.export_page(kind="llm_calls", user_id="u1", after=None, limit=10)
    assert call["estimated"] is True and call["ok"] is False  # bools, not SQLite's 1 and 0
    assert (call["model"], call["created_at"]) == (None, now)
    (user,) = db.export_page(kind="users", user_id="u1", after=None, limit=10)
    assert user == {"id": "u1", "created_at": now, "household_mode": "single", "timezone": None,
                    "memory_off_since": None, "household_name": None, "locale": None}


def test_restored_items_take_ids_never_used_before_on_both_backends(store):
    """SQLite reserves them by AUTOINCREMENT's rule (after the highest id ever used), PostgreSQL
    from the items sequence: an id freed by a delete is never given again."""
    first = store.add(user_id="u1", content="kept")
    last = store.add(user_id="u1", content="deleted after the export")
    records: list[dict] = []
    store.export(records.append, user_id="u1")
    store.delete(last, user_id="u1")
    pairs: list[tuple[int, int]] = []
    store.import_records(records, user_map={"u1": "u2"}, id_map=lambda user_id, old, new: pairs.append((old, new)))
    assert [old for old, _ in pairs] == [first, last] and all(new > last for _, new in pairs)
    assert sorted(new for _, new in pairs) == [new for _, new in pairs]
    assert store.backend.max_item_id() == pairs[-1][1]


def test_the_persons_a_query_names_are_found_alike_on_both_backends(store):
    db, now = store.backend, datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    db.insert_person(user_id="u1", fields={"display_name": "Sarah Connor", "aliases": ["Mum"]}, now=now)
    store.add(user_id="u1", content="Tom plays chess", person="Tom")
    assert sorted(db.persons_named("u1", ["sarah", "mum", "tom", "kyle"])) == ["Sarah Connor", "Tom"]
    assert db.persons_named("u1", ["connor"]) == [] and db.persons_named("u2", ["tom"]) == []
    assert db.persons_named("u1", []) == [] and db.past_statements([]) == []
