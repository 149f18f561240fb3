"""Faults of the things memory depends on: the embedding provider, the chat model, the database.

The providers are real clients (langchain-ollama over HTTP) talking to ``FakeOllama``, a local
server that can hang past the client timeout, fail, or answer. Simpler outages (an exception
from the provider object) are covered in test_embeddings.py and test_pipeline_extraction.py; a
killed PostgreSQL connection in test_postgres.py. Here: timeouts, HTTP errors, a model failing
half-way through a run, and a PostgreSQL server stopped and started under a running store.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from urllib.parse import parse_qsl, urlsplit

import pytest

from navi_memory import AsyncMemoryStore, BackendUnavailableError, MemoryStore, Settings

from .chat_fakes import ScriptedChat
from .ollama_server import FakeOllama

pytest.importorskip("langchain_ollama")

U = "alice"
TIMEOUT = 0.5


@pytest.fixture
def ollama():
    server = FakeOllama(hang_seconds=TIMEOUT * 4)
    yield server
    server.close()


def _settings(db_url: str, ollama: FakeOllama) -> Settings:
    return Settings(url=db_url, ollama_host=ollama.url, embedding_model="fake-embed", embedding_timeout=TIMEOUT,
                    chat_host=ollama.url, chat_timeout=TIMEOUT)


@pytest.mark.parametrize("fault", ["hang", "error"])
def test_embedder_timeout_or_error_keeps_writes_searches_lexically_and_backfill_heals(db_url, ollama, clock, fault):
    ollama.mode = fault
    with MemoryStore.open(db_url, embeddings="ollama", settings=_settings(db_url, ollama), clock=clock) as store:
        ids = [store.add(user_id=U, content=f"coffee note {n}") for n in range(3)]
        assert ollama.requests["/api/embed"] == 1  # after one failure the provider is left alone for a while
        for item_id in ids:
            assert store.get(item_id, user_id=U).embedding.state in ("pending", "error")
        results = store.search("coffee note", user_id=U)
        assert {r.id for r in results} == set(ids)
        assert not any(r.signals["semantic"] for r in results) and all(r.signals["fts"] for r in results)
        status = store.embedding_status()
        assert status["ready"] == 0 and status["pending"] + status["error"] == 3

        ollama.mode = "ok"
        report = store.backfill()
        assert (report.embedded, report.failed, report.remaining) == (3, 0, 0)
        assert all(store.get(i, user_id=U).embedding.state == "ready" for i in ids)
        store.embedder.reset_backoff()  # the outage's back-off window is over
        assert store.search("coffee note", user_id=U)[0].signals["semantic"] is True


async def test_async_store_embedder_timeout_keeps_the_write(db_url, ollama, clock):
    ollama.mode = "hang"
    store = await AsyncMemoryStore.open(db_url, embeddings="ollama", settings=_settings(db_url, ollama), clock=clock)
    try:
        item_id = await store.add(user_id=U, content="written while the provider hangs")
        assert (await store.get(item_id, user_id=U)).embedding.state in ("pending", "error")
        ollama.mode = "ok"
        assert (await store.backfill()).embedded == 1
    finally:
        await store.close()


EXTRACTION = {"facts": [{"category": "profile", "key": "home_city", "value": "Lisbon", "source": "user_explicit"}],
              "notes": []}


def _conversation(store: MemoryStore, sid: str = "s1") -> None:
    store.add_messages(sid, [{"role": "user", "content": "I moved to Lisbon last spring, I love the light."},
                             {"role": "assistant", "content": "Lisbon is lovely."}], user_id=U, triggers=False)


@pytest.mark.parametrize("fault", ["hang", "error"])
def test_chat_model_timeout_marks_the_session_error_and_a_later_run_retries(db_url, ollama, clock, fault):
    ollama.mode = fault
    with MemoryStore.open(db_url, embeddings=False, settings=_settings(db_url, ollama), chat_model="fake-chat",
                          clock=clock) as store:
        _conversation(store)
        report = store.extract_session("s1", user_id=U)
        assert report.state == "error" and "fake-chat" in report.error
        session = store.get_session("s1", user_id=U)
        assert session.state == "error" and session.extracted_at is None and len(session.messages) == 2
        # only the explicit statement, recorded by the rules; no summary
        assert [(f.key, f.value) for f in store.get_all_facts(user_id=U)] == [("location", "Lisbon")]
        assert store.get_summary(user_id=U) is None
        assert store.usage_stats(user_id=U)["totals"]["failed_calls"] >= 1

        ollama.mode = "ok"
        ollama.replies = [json.dumps(EXTRACTION), "The user lives in Lisbon."]
        clock.advance(minutes=31)
        [retry] = store.process_stale_sessions(user_id=U)
        assert (retry.session_id, retry.state, retry.unchanged) == ("s1", "extracted", 1)
        # the model's home_city is the rules' location: merged, not doubled
        assert [(f.key, f.value) for f in store.get_all_facts(user_id=U)] == [("location", "Lisbon")]
        assert store.get_session("s1", user_id=U, messages=False).state == "extracted"


def test_a_model_failing_half_way_leaves_nothing_half_written(store, clock):
    # a cut-off reply, then the repair request times out (each of its 3 attempts): the run is an
    # error and writes nothing of the model's (the rules still record the explicit statement)
    store.set_chat_model(ScriptedChat(script=['{"facts": [{"category": "profile", "key": "home_ci',
                                              *[TimeoutError("repair timed out")] * 3]))
    _conversation(store)
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and "timed out" in report.error
    assert [(f.key, f.value) for f in store.get_all_facts(user_id=U)] == [("location", "Lisbon")]
    assert store.get_summary(user_id=U) is None
    chunks = lambda: store.list_items(user_id=U, types=["note"], theme="conversation")  # noqa: E731
    assert len(chunks()) == 1  # the turn itself is kept (it is not the model's output)

    store.set_chat_model(ScriptedChat(script=[json.dumps(EXTRACTION), "The user lives in Lisbon."]))
    clock.advance(minutes=31)
    [retry] = store.process_stale_sessions(user_id=U)
    assert retry.state == "extracted"
    facts = store.get_all_facts(user_id=U, include_history=True)
    assert [(f.key, f.value, len(f.history)) for f in facts] == [("location", "Lisbon", 0)]
    assert store.get_summary(user_id=U) == "The user lives in Lisbon."
    assert len(chunks()) == 1  # stored once, not once per attempt


def test_a_summary_timeout_keeps_the_facts_and_the_next_run_writes_the_summary(store, clock):
    store.set_chat_model(ScriptedChat(script=[json.dumps(EXTRACTION), *[TimeoutError("summary timed out")] * 3]))
    _conversation(store)
    assert store.extract_session("s1", user_id=U).state == "extracted"
    assert [f.value for f in store.get_all_facts(user_id=U)] == ["Lisbon"] and store.get_summary(user_id=U) is None
    store.set_chat_model(ScriptedChat(script=[json.dumps(EXTRACTION), "The user lives in Lisbon."]))
    _conversation(store, "s2")
    assert store.extract_session("s2", user_id=U).state == "extracted"
    assert store.get_summary(user_id=U) == "The user lives in Lisbon."


# -- PostgreSQL stopped and started under a running store ---------------------------------------------

@pytest.fixture
def own_postgres():
    """A PostgreSQL server of this test's own (it is stopped and started)."""
    pgserver = pytest.importorskip("pgserver")
    handle = pgserver.get_server(tempfile.mkdtemp(prefix="navi-pg-restart-"), cleanup_mode="delete")
    url = handle.get_uri()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    socket_dir = dict(parse_qsl(urlsplit(url).query)).get("host") or str(handle.pgdata)

    def stop() -> None:
        pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=handle.pgdata, user=handle.system_user)

    def start() -> None:
        pgserver.pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(handle.log), "start"],
                        pgdata=handle.pgdata, user=handle.system_user)

    yield url, stop, start
    # pgserver stops only the postmaster it started: after the test's restart it would delete the
    # data directory under a running server (a flaky teardown), so the test's own server stops first.
    import subprocess

    try:
        stop()
    except subprocess.CalledProcessError:  # already stopped by the test
        pass
    handle.cleanup()


RECOVERY_ATTEMPTS = 30  # each a store call failing after the 2 s connect timeout: about a minute at most


def _until_back(call) -> int:
    """Call until the pool has reconnected; returns the number of failed attempts (each one a
    BackendUnavailableError after the connect timeout, never a hang or another error)."""
    for failed in range(RECOVERY_ATTEMPTS):
        try:
            call()
            return failed
        except BackendUnavailableError:
            continue
    raise AssertionError("the pool did not recover")


@pytest.mark.postgres
def test_postgres_restart_mid_run_the_pool_recovers(own_postgres):
    url, stop, start = own_postgres
    with MemoryStore.open(url, embeddings="hashing", backend_options={"connect_timeout": 2}) as store:
        before = [store.add(user_id=U, content=f"before the restart {n}") for n in range(5)]
        stop()
        with pytest.raises(BackendUnavailableError):
            store.add(user_id=U, content="while the server is down")
        with pytest.raises(BackendUnavailableError):
            store.search("restart", user_id=U)
        start()
        waited = _until_back(lambda: store.add(user_id=U, content="after the restart 0"))
        print(f"sync pool: first write after the restart succeeded after {waited} failed attempt(s)")
        after = [store.list_items(user_id=U, limit=1)[0].id]
        after += [store.add(user_id=U, content=f"after the restart {n}") for n in range(1, 5)]
        stored = {i.id for i in store.list_items(user_id=U, limit=100)}
        assert stored == set(before + after)
        assert store.search("restart", user_id=U, limit=20)
        assert store.embedding_status()["ready"] == 10


@pytest.mark.postgres
async def test_postgres_restart_mid_run_the_async_pool_recovers(own_postgres):
    url, stop, start = own_postgres
    store = await AsyncMemoryStore.open(url, embeddings="hashing", backend_options={"connect_timeout": 2})
    try:
        await asyncio.gather(*(store.add(user_id=U, content=f"before {n}") for n in range(8)))
        await asyncio.to_thread(stop)
        with pytest.raises(BackendUnavailableError):
            await store.add(user_id=U, content="while the server is down")
        await asyncio.to_thread(start)
        failed = 0
        while True:  # the pool reconnects on its own back-off schedule (docs/reliability.md)
            try:
                await store.add(user_id=U, content="after 0")
                break
            except BackendUnavailableError:
                failed += 1
                assert failed < RECOVERY_ATTEMPTS, "the async pool did not recover"
        print(f"async pool: first write after the restart succeeded after {failed} failed attempt(s)")
        await asyncio.gather(*(store.add(user_id=U, content=f"after {n}") for n in range(1, 8)))
        assert len(await store.list_items(user_id=U, limit=100)) == 16
    finally:
        await store.close()
