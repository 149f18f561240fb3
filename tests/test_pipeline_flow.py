"""The pipeline's flow end to end (issue 16, item 2): ingest then extract processes what was
ingested, "remember that ..." in an ingested file extracts it at once, and explicit statements
survive a chat model that cannot be reached, merging with the model's facts once it answers."""

from __future__ import annotations

import json

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory import cli
from navi_memory.pipeline import dedup
from navi_memory.pipeline.extract import ExtractedFact
from navi_memory.pipeline.llm import ChatClient, RetryPolicy

from .chat_fakes import ScriptedChat
from .fakes import FakeEmbeddings
from .test_cli import run
from .test_pipeline_extraction import U, chat, facts, reply, talk

DOWN = "http://127.0.0.1:1"  # nothing listens there: connection refused
STATEMENTS = ("Hi, my name is Eugene. I live in Berlin.", "Hi Eugene!",
              "Remember that I take the 8:15 train.", "Noted.")
RULE_FACTS = {("profile", "name"): "Eugene", ("profile", "location"): "Berlin",
              ("other", "commute_train"): "I take the 8:15 train"}


def unreachable() -> ChatClient:
    """A real Ollama client aimed at a closed port, retried quickly."""
    from langchain_ollama import ChatOllama

    return ChatClient.wrap(ChatOllama(model="llama3.2", base_url=DOWN), timeout=5,
                           retry=RetryPolicy(attempts=2, initial_wait=0.01, max_wait=0.02))


# -- the chat model is down: rules record, the LLM run later merges --------------------------------

def test_the_model_fails_then_answers_and_its_facts_merge_with_the_rules(store, clock):
    model = chat(store, *[ConnectionRefusedError("[Errno 111] Connection refused")] * 3,
                 reply(("profile", "name", "Eugene", "user_explicit"),   # same key, same value
                       ("profile", "city", "Berlin", "user_explicit"),   # an equivalent key
                       ("preferences", "commute", "takes the 8:15 train to work", "user_explicit"),  # reworded
                       ("technical", "editor", "Neovim", "conversation")),
                 "Eugene lives in Berlin and takes the 8:15 train.")
    talk(store, "s1", *STATEMENTS, "I edit everything in Neovim.", "Nice.")
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and "Connection refused" in report.error
    assert (report.added, report.llm_calls, report.chunks, report.used_llm) == (3, 1, 3, False)
    assert facts(store) == RULE_FACTS  # the explicit statements are not lost
    assert store.get_fact("commute_train", user_id=U).source == "user_explicit"
    session = store.get_session("s1", user_id=U, messages=False)
    assert (session.state, session.extracted_at, session.attempts) == ("error", None, 1)  # marked for a retry
    assert store.get_summary(user_id=U) is None  # no summary call against a model that is down
    assert len(model.calls) == 3

    clock.advance(minutes=31)
    [retry] = store.process_stale_sessions(user_id=U)
    assert (retry.state, retry.used_llm, retry.added, retry.updated, retry.unchanged) == ("extracted", True, 1, 1, 2)
    assert facts(store) == {("profile", "name"): "Eugene", ("profile", "location"): "Berlin",
                            ("other", "commute_train"): "takes the 8:15 train to work",
                            ("technical", "editor"): "Neovim"}  # merged, not doubled
    commute = store.get_fact("commute_train", user_id=U)
    assert [h.value for h in commute.history] == ["I take the 8:15 train"]
    assert retry.chunks == 0  # the turns were stored by the first run
    assert store.get_summary(user_id=U) == "Eugene lives in Berlin and takes the 8:15 train."
    session = store.get_session("s1", user_id=U, messages=False)
    assert (session.state, session.error, session.attempts) == ("extracted", None, 0)
    assert store.process_stale_sessions(user_id=U) == []


def test_an_unusable_reply_also_leaves_the_rule_facts(store):
    chat(store, "Sorry, I cannot help with that.", "Still no JSON.")
    talk(store, "s1", *STATEMENTS)
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and "unusable" in report.error and report.added == 3
    assert facts(store) == RULE_FACTS


def test_an_unreachable_chat_model_keeps_the_explicit_statements(store, clock):
    store.set_chat_model(unreachable())
    talk(store, "s1", *STATEMENTS)
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and report.added == 3 and report.llm_calls == 1
    assert facts(store) == RULE_FACTS
    assert store.usage_stats(user_id=U)["purposes"]["extract"]["failed"] == 1
    # it comes back: the retry merges, nothing is doubled
    chat(store, reply(("profile", "name", "Eugene", "user_explicit"),
                      ("other", "train", "8:15 train", "user_explicit")), "Eugene, Berlin, the 8:15 train.")
    clock.advance(minutes=31)
    [retry] = store.process_stale_sessions(user_id=U)
    assert (retry.state, retry.added, retry.updated) == ("extracted", 0, 1)
    assert facts(store) == {**RULE_FACTS, ("other", "commute_train"): "8:15 train"}


async def test_the_async_store_keeps_the_explicit_statements_too(db_url):
    store = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), chat_model=unreachable())
    try:
        await store.add_messages("s1", [{"role": "user" if i % 2 == 0 else "assistant", "content": text}
                                        for i, text in enumerate(STATEMENTS)], user_id=U, triggers=False)
        report = await store.extract_session("s1", user_id=U)
        assert report.state == "error" and report.added == 3
        assert {(f.category, f.key): f.value for f in await store.get_all_facts(user_id=U)} == RULE_FACTS
    finally:
        await store.close()


def test_adopt_takes_the_key_of_the_same_statement_recorded_by_the_rules():
    rule = {"category": "other", "key": "commute_train", "value": "I take the 8:15 train", "source": "user_explicit",
            "source_session_id": "s1", "source_context": 'user asked to remember: "Remember that I take ..."'}
    said = ExtractedFact("preferences", "commute", "takes the 8:15 train", "user_explicit", 90)
    assert dedup.adopt(said, [rule], "s1") == ExtractedFact("other", "commute_train", "takes the 8:15 train",
                                                             "user_explicit", 90)
    assert dedup.adopt(said, [rule], "s2") == said  # another session's statement: not this one
    assert dedup.adopt(said, [{**rule, "source_context": "the model said so"}], "s1") == said  # not a rule fact
    other = ExtractedFact("preferences", "tea", "green tea, no sugar", "user_explicit", 90)
    assert dedup.adopt(other, [rule], "s1") == other  # nothing in common


# -- the CLI: ingest, then the command it names --------------------------------------------------

@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'flow.db'}"


def write(tmp_path, messages, name="chat.json"):
    path = tmp_path / name
    path.write_text(json.dumps(messages))
    return str(path)


RECENT = [{"role": "user", "content": "I prefer short answers."}, {"role": "assistant", "content": "Okay."},
          {"role": "user", "content": "My name is Eugene."}]  # no timestamps: stored now, not stale


def test_ingest_then_the_command_it_names(db, tmp_path):
    out = run("ingest", "--user", "u1", "--session", "s1", write(tmp_path, RECENT), db=db).stdout
    assert "stored 3 messages in session s1 for u1 (run `navi-memory extract --user u1 --session s1`" in out
    assert "`navi-memory extract` for every pending session" in out
    out = run("extract", "--user", "u1", "--session", "s1", db=db).stdout
    assert "u1/s1: extracted by rules: 2 added" in out
    # and the other door it names: `extract` takes sessions never extracted, however recent
    run("ingest", "--user", "u1", "--session", "s2", write(tmp_path, [
        {"role": "user", "content": "I live in Lisbon."}], "two.json"), db=db)
    assert "no stale sessions" in run("extract", "--stale-only", db=db).stdout  # the old rule, on request
    [report] = json.loads(run("extract", "--json", db=db).stdout)
    assert (report["session_id"], report["state"], report["added"]) == ("s2", "extracted", 1)
    facts_now = json.loads(run("facts", "--user", "u1", "--json", db=db).stdout)
    assert {(f["key"], f["value"]) for f in facts_now} == {("name", "Eugene"), ("short_answers", "short answers"),
                                                           ("location", "Lisbon")}
    assert "no sessions to extract" in run("extract", db=db).stdout  # nothing left, nothing twice


def test_extract_holds_back_the_unanswered_turn_of_a_recent_session(db, tmp_path):
    run("ingest", "--user", "u1", "--session", "s1", write(tmp_path, RECENT), db=db)
    [report] = json.loads(run("extract", "--json", db=db).stdout)
    assert report["chunks"] == 1  # "My name is Eugene." may still get its answer
    assert report["added"] == 2  # but its statement is read
    [later] = json.loads(run("extract", "--stale-minutes", "0", "--json", db=db).stdout)
    assert (later["chunks"], later["added"], later["llm_calls"]) == (1, 0, 0)


def test_remember_that_in_an_ingested_file_extracts_it_at_once(db, tmp_path):
    path = write(tmp_path, [{"role": "user", "content": "Remember that my locker code is 4412."},
                            {"role": "assistant", "content": "Got it."}])
    out = run("ingest", "--user", "u1", "--session", "s1", path, db=db).stdout
    assert 'it asks to "remember" something: extracted now' in out and "u1/s1: extracted by rules: 1 added" in out
    facts_now = json.loads(run("facts", "--user", "u1", "--json", db=db).stdout)
    assert [(f["key"], f["value"]) for f in facts_now] == [("locker_code", "4412")]
    plain = write(tmp_path, [{"role": "user", "content": "Do you remember my locker code?"}], "q.json")
    assert "run `navi-memory extract" in run("ingest", "--user", "u1", "--session", "s2", plain, db=db).stdout


def test_remember_that_with_an_unreachable_chat_model(db, tmp_path):
    """`ingest` of "remember that ..." with the chat model down: the rules record it, the command
    says the session is retried (exit 2), and a later `extract` with a working model merges."""
    path = write(tmp_path, [{"role": "user", "content": "Remember that I take the 8:15 train."},
                            {"role": "assistant", "content": "Noted."}])
    env = {"NAVI_MEMORY_CHAT_MODEL": "llama3.2", "OLLAMA_HOST": DOWN, "NAVI_MEMORY_CHAT_ATTEMPTS": "2",
           "NAVI_MEMORY_CHAT_RETRY_WAIT": "0.01"}
    proc = run("ingest", "--user", "u1", "--session", "s1", path, db=db, env=env, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "u1/s1: error:" in proc.stdout and "the rules recorded 1 facts; retried on the next run" in proc.stdout
    facts_now = json.loads(run("facts", "--user", "u1", "--json", db=db).stdout)
    assert [(f["key"], f["value"]) for f in facts_now] == [("commute_train", "I take the 8:15 train")]
    [session] = json.loads(run("sessions", "--user", "u1", "--json", db=db).stdout)
    assert session["state"] == "error" and "connect" in session["error"].lower()


def test_the_cli_retry_with_a_working_model_merges(db, tmp_path, monkeypatch, capsys):
    model = ScriptedChat(script=[ConnectionRefusedError("Connection refused")] * 3 + [
        reply(("preferences", "morning_train", "the 8:15 train", "user_explicit")), "Takes the 8:15 train."])
    monkeypatch.setattr("navi_memory.store.resolve_chat_model",
                        lambda choice, settings: None if choice is False else ChatClient.wrap(
                            model, retry=RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.02)))
    monkeypatch.setenv("NAVI_MEMORY_EMBEDDINGS", "hashing")
    path = write(tmp_path, [{"role": "user", "content": "Remember that I take the 8:15 train."},
                            {"role": "assistant", "content": "Noted."}])
    assert cli.main(["--db", db, "ingest", "--user", "u1", "--session", "s1", path]) == 2
    assert "the rules recorded 1 facts" in capsys.readouterr().out
    assert cli.main(["--db", db, "extract", "--stale-minutes", "0"]) == 0
    assert "u1/s1: extracted by LLM: 0 added, 1 updated" in capsys.readouterr().out
    with MemoryStore.open(db, embeddings=False) as store:
        assert facts(store, "u1") == {("other", "commute_train"): "the 8:15 train"}
