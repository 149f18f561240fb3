"""When extraction runs, on both backends: stale sessions (with the clock), every N user messages,
"remember that ...", in the background without blocking (sync and async), no-LLM mode, forget."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.backends.sqlite.schema import LATEST_VERSION, MIGRATIONS

from .chat_fakes import ScriptedChat
from .fakes import FakeClock, FakeEmbeddings
from .test_pipeline_extraction import chat, facts, reply, talk

U = "alice"


def say(store, sid, text, answer="Okay.", **kwargs):
    return store.add_messages(sid, [{"role": "user", "content": text}, {"role": "assistant", "content": answer}],
                              user_id=U, **kwargs)


# -- no-LLM mode ------------------------------------------------------------------------------

def test_no_llm_mode_keeps_turns_and_explicit_statements(store):
    assert store.chat_model is None
    talk(store, "s1", "Hi! My name is Eugene and I live in Berlin.", "Nice to meet you.",
         "Can you recommend a book about birds?", "Try 'The Genius of Birds'.")
    report = store.extract_session("s1", user_id=U)
    assert (report.state, report.used_llm, report.llm_calls, report.added, report.chunks) == (
        "extracted", False, 0, 2, 2)
    assert facts(store) == {("profile", "name"): "Eugene", ("profile", "location"): "Berlin"}
    assert {f.source for f in store.get_all_facts(user_id=U)} == {"user_explicit"}
    assert store.get_summary(user_id=U) == "About the user: name: Eugene; location: Berlin."
    hits = store.search("book about birds", user_id=U, theme="conversation")
    assert hits and hits[0].content.startswith("User: Can you recommend a book about birds?")
    assert hits[0].metadata == {} and store.get(hits[0].id, user_id=U).source_ref == {
        "session_id": "s1", "first_seq": 3, "last_seq": 4}


def test_no_llm_rules_supersede_like_the_llm(store, clock):
    say(store, "s1", "I live in Berlin.", background=False, triggers=False)
    store.extract_session("s1", user_id=U)
    clock.advance(days=1)
    say(store, "s2", "Remember that I moved to Hamburg.", background=False)
    location = store.get_fact("location", user_id=U, category="profile")
    assert location.value == "Hamburg" and [h.value for h in location.history] == ["Berlin"]
    assert len(store.summary_history(user_id=U)) == 2


# -- in-conversation triggers -------------------------------------------------------------------

def test_every_n_user_messages(store):
    store.pipeline.background = False
    fired = []
    for i in range(1, 11):
        result = say(store, "s1", f"Message {i}: I like topic {i}.")
        fired.append((i, result.triggers, result.report.state if result.report else None))
    assert [f for f in fired if f[1]] == [(5, ["every_n"], "extracted"), (10, ["every_n"], "extracted")]
    session = store.get_session("s1", user_id=U, messages=False)
    assert session.user_messages == 10 and session.state == "extracted"


def test_every_n_holds_back_the_unanswered_turn(store):
    store.pipeline.background = False
    store.pipeline.extract_every = 1
    store.add_messages("s1", [{"role": "user", "content": "I play the cello."}], user_id=U)
    assert store.list_items(user_id=U, theme="conversation") == []
    store.add_messages("s1", [{"role": "assistant", "content": "Lovely!"}, {"role": "user", "content": "And piano."}],
                       user_id=U)
    [chunk] = store.list_items(user_id=U, theme="conversation")
    assert chunk.content == "User: I play the cello.\nAssistant: Lovely!"


def test_remember_that_triggers_at_once(store):
    model = chat(store, reply(("other", "train", "takes the 8:15 train", "user_explicit")), "Takes the 8:15 train.")
    store.pipeline.background = False
    result = say(store, "s1", "Please remember that I take the 8:15 train.")
    assert result.triggers == ["remember"] and result.report.state == "extracted"
    assert len(model.calls) == 2 and ("other", "train") in facts(store)


def test_add_message_one_at_a_time(store):
    store.pipeline.background = False
    store.add_message("s1", "user", "Remember that my locker code is 4411.", user_id=U)
    assert facts(store) == {("other", "locker_code"): "4411"}
    store.add_message("s1", "assistant", "", user_id=U, tool_calls=[{"name": "note", "args": {}, "id": "n1"}])
    store.add_message("s1", "tool", "saved", user_id=U, tool_call_id="n1")
    session = store.get_session("s1", user_id=U)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]
    assert session.messages[1].tool_calls[0].name == "note" and session.messages[2].seq == 3


# -- stale sessions -----------------------------------------------------------------------------

def test_stale_sessions_are_processed_when_a_new_session_starts(store, clock):
    store.pipeline.background = False
    say(store, "s1", "I live in Oslo.", triggers=False)
    clock.advance(minutes=29)
    store.start_session(user_id=U, session_id="s2")
    assert store.get_session("s1", user_id=U, messages=False).state == "open"  # not stale yet
    clock.advance(minutes=2)
    session = store.start_session(user_id=U, session_id="s3")
    assert session.session_id == "s3" and session.state == "open"
    assert store.get_session("s1", user_id=U, messages=False).state == "extracted"
    assert facts(store) == {("profile", "location"): "Oslo"}


def test_a_new_session_created_by_messages_also_processes_stale_ones(store, clock):
    store.pipeline.background = False
    say(store, "s1", "I live in Oslo.", triggers=False)
    clock.advance(hours=1)
    say(store, "s2", "Hello again.")
    assert store.get_session("s1", user_id=U, messages=False).state == "extracted"
    assert store.get_session("s2", user_id=U, messages=False).state == "open"


def test_activity_after_extraction_makes_a_session_stale_again(store, clock):
    model = chat(store, reply(("profile", "name", "Eugene", "user_explicit")), "Eugene.",
                 reply(("preferences", "units", "metric", "user_explicit")), "Eugene, metric.")
    say(store, "s1", "I'm Eugene.", triggers=False)
    clock.advance(minutes=31)
    assert [r.session_id for r in store.process_stale_sessions(user_id=U)] == ["s1"]
    assert store.process_stale_sessions(user_id=U) == []
    clock.advance(minutes=5)
    say(store, "s1", "I use metric units.", triggers=False)
    assert store.process_stale_sessions(user_id=U) == []  # active 0 minutes ago
    clock.advance(minutes=31)
    [again] = store.process_stale_sessions(user_id=U)
    assert again.added == 1 and "I'm Eugene." not in model.prompt(2).split("[New since then:]")[1]


def test_process_stale_sessions_of_all_users(store, clock):
    for user in ("alice", "bob"):
        store.add_messages("s", [{"role": "user", "content": f"My name is {user}."}], user_id=user, triggers=False)
    clock.advance(minutes=45)
    reports = store.process_stale_sessions(all_users=True)
    assert sorted((r.user_id, r.added) for r in reports) == [("alice", 1), ("bob", 1)]
    assert store.process_stale_sessions(all_users=True, stale_minutes=0) == []


def test_a_running_session_is_not_processed_twice(store, clock):
    store.pipeline.background = False
    say(store, "s1", "I live in Rome.", triggers=False)
    store._backend.claim_session(U, "s1", clock.now, clock.now)
    report = store.extract_session("s1", user_id=U)
    assert (report.state, report.reason) == ("skipped", "another run is processing this session")
    clock.advance(minutes=31)  # the claim's lease (10 minutes) has run out
    assert store.extract_session("s1", user_id=U).state == "extracted"


def test_failing_sessions_stop_being_retried_after_max_attempts(store, clock):
    store.pipeline.max_attempts = 2
    chat(store, "garbage", "garbage", "garbage", "garbage")
    say(store, "s1", "I'm Eugene.", triggers=False)
    clock.advance(minutes=31)
    assert [r.state for r in store.process_stale_sessions(user_id=U)] == ["error"]
    assert [r.state for r in store.process_stale_sessions(user_id=U)] == ["error"]
    assert store.process_stale_sessions(user_id=U) == []
    assert store.get_session("s1", user_id=U, messages=False).attempts == 2
    say(store, "s1", "Hello?", triggers=False)  # new activity: tries again
    clock.advance(minutes=31)
    assert len(store.process_stale_sessions(user_id=U)) == 1


# -- background ---------------------------------------------------------------------------------

def test_background_extraction_does_not_block_the_caller(store):
    gate = threading.Event()
    model = chat(store, reply(("profile", "name", "Eugene", "user_explicit")), "Eugene.")
    model.gate = gate
    # returning while the gate is closed is the proof: an inline extraction would wait in the gate,
    # fail after 30 s ("gate never opened") and never store the fact checked below
    result = say(store, "s1", "Remember that my name is Eugene.")
    again = say(store, "s1", "Remember that, really.")
    assert result.scheduled and not again.scheduled  # one job per session
    assert facts(store) == {}
    gate.set()
    assert store.wait_for_background(timeout=30)
    assert facts(store) == {("profile", "name"): "Eugene"} and len(model.calls) == 2


def test_stale_sessions_are_processed_in_the_background(store, clock):
    say(store, "s1", "I live in Oslo.", triggers=False)
    clock.advance(hours=2)
    store.start_session(user_id=U, session_id="s2")
    assert store.wait_for_background(timeout=30)
    assert facts(store) == {("profile", "location"): "Oslo"}


@pytest.fixture
async def astore(new_db_url):
    clock = FakeClock()
    s = await AsyncMemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock)
    s.clock = clock
    yield s
    await s.close()


async def test_async_store_extracts_in_a_task_without_blocking(astore):
    release = asyncio.Event()
    model = ScriptedChat(script=[reply(("profile", "name", "Eugene", "user_explicit")), "Eugene."], agate=release)
    astore.set_chat_model(model)
    result = await astore.add_messages("s1", [{"role": "user", "content": "Remember: my name is Eugene."}],
                                       user_id=U)
    assert result.scheduled and result.triggers == ["remember"]
    assert await astore.get_all_facts(user_id=U) == []
    release.set()
    assert await astore.wait_for_background(timeout=30)
    assert [(f.key, f.value) for f in await astore.get_all_facts(user_id=U)] == [("name", "Eugene")]
    stats = await astore.usage_stats(user_id=U)
    assert stats["totals"]["llm_calls"] == 2


async def test_async_and_sync_stores_give_the_same_reports(astore, new_db_url):
    script = [reply(("profile", "location", "Berlin", "user_explicit")), "Berlin.",
              reply(("profile", "city", "Munich", "user_explicit")), "Munich."]
    sync = MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=FakeClock(),
                            chat_model=ScriptedChat(script=list(script)))
    astore.set_chat_model(ScriptedChat(script=list(script)))
    out = []
    try:
        for runner in (sync, astore):
            async def call(value):
                return await value if asyncio.iscoroutine(value) else value
            reports = []
            for sid, text in (("s1", "I live in Berlin."), ("s2", "I moved to Munich.")):
                await call(runner.add_messages(sid, [{"role": "user", "content": text}], user_id=U, triggers=False))
                report = await call(runner.extract_session(sid, user_id=U))
                reports.append((report.state, report.added, report.updated, report.llm_calls))
            fact = await call(runner.get_fact("location", user_id=U))
            out.append((reports, fact.value, [h.value for h in fact.history]))
    finally:
        sync.close()
    assert out[0] == out[1] == ([("extracted", 1, 0, 2), ("extracted", 0, 1, 2)], "Munich", ["Berlin"])


# -- storage --------------------------------------------------------------------------------------

def test_forget_removes_sessions_messages_and_costs(store):
    chat(store, reply(("profile", "name", "Eugene", "user_explicit")), "Eugene.")
    say(store, "s1", "I'm Eugene.", triggers=False)
    store.extract_session("s1", user_id=U)
    say(store, "s1", "bob's message", triggers=False)
    counts = store.forget(user_id=U)
    assert (counts["session_state"], counts["messages"], counts["llm_calls"]) == (1, 4, 2)
    assert store.list_sessions(user_id=U) == [] and store.usage_stats(user_id=U)["totals"]["llm_calls"] == 0


def test_ingested_history_keeps_its_timestamps(store, clock):
    store.add_messages("old", [{"role": "user", "content": "I'm Eugene.", "created_at": "2024-01-01T10:00:00Z"},
                               {"role": "assistant", "content": "Hi.", "timestamp": "2024-01-01T10:01:00Z"}],
                       user_id=U, triggers=False)
    session = store.get_session("old", user_id=U)
    assert session.last_active.isoformat() == "2024-01-01T10:01:00+00:00"
    assert session.created_at.isoformat() == "2024-01-01T10:00:00+00:00"
    assert [r.session_id for r in store.process_stale_sessions(user_id=U)] == ["old"]


def test_a_version_1_sqlite_database_is_upgraded(tmp_path):
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for statement in MIGRATIONS[0][1]:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_migrations VALUES (1, datetime('now'))")
    conn.execute("INSERT INTO users (id, created_at) VALUES ('alice', '2024-01-01T00:00:00.000000Z')")
    conn.execute("INSERT INTO session_state VALUES ('alice', 'old', '2024-01-02T00:00:00.000000Z',"
                 " '2024-01-02T00:00:00.000000Z')")
    conn.commit()
    conn.close()
    with MemoryStore.open(f"sqlite:///{path}", embeddings=False) as store:
        assert store.migrate() == LATEST_VERSION
        assert store.get_extracted_at("old", user_id=U).isoformat() == "2024-01-02T00:00:00+00:00"
        say(store, "old", "I live in Riga.", triggers=False)
        assert store.extract_session("old", user_id=U).added == 1


def test_the_turn_held_back_mid_conversation_is_stored_when_the_session_goes_stale(store, clock):
    store.pipeline.background = False
    store.pipeline.extract_every = 1
    result = say(store, "s1", "I collect vinyl records.", "Which genres?")
    assert result.triggers == ["every_n"] and store.list_items(user_id=U, theme="conversation") == []
    clock.advance(minutes=31)
    [report] = store.process_stale_sessions(user_id=U)
    assert (report.chunks, report.llm_calls, report.changes) == (1, 0, [])
    assert [c.content for c in store.list_items(user_id=U, theme="conversation")] == [
        "User: I collect vinyl records.\nAssistant: Which genres?"]
    assert store.process_stale_sessions(user_id=U) == []


def test_without_turn_chunks_sessions_do_not_stay_stale(store, clock):
    store.pipeline.store_turns = False
    say(store, "s1", "I live in Oslo.", triggers=False)
    clock.advance(minutes=31)
    [report] = store.process_stale_sessions(user_id=U)
    assert report.chunks == 0 and report.added == 1
    assert store.list_items(user_id=U, theme="conversation") == []
    assert store.process_stale_sessions(user_id=U) == []


def test_a_turn_stored_by_a_later_pass_has_the_turn_before_as_context(store):
    store.pipeline.background = False
    store.pipeline.extract_every = 1
    store.pipeline.context_messages = 0  # the turn before is read back whatever the extraction context
    store.add_messages("s1", [{"role": "user", "content": "I play the cello."},
                              {"role": "assistant", "content": "Lovely! How long?"},
                              {"role": "user", "content": "Since I was six."}], user_id=U)
    assert len(store.list_items(user_id=U, theme="conversation")) == 1  # the open turn is held back
    store.add_messages("s1", [{"role": "assistant", "content": "Impressive."},
                              {"role": "user", "content": "Thanks."}], user_id=U)
    chunks = sorted(store.list_items(user_id=U, theme="conversation"), key=lambda c: c.id)
    assert [c.content for c in chunks] == ["User: I play the cello.\nAssistant: Lovely! How long?",
                                           "User: Since I was six.\nAssistant: Impressive."]
    assert [c.context for c in chunks] == [None, chunks[0].content]
