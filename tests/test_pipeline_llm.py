"""Hardened chat calls: retries of transient failures, pacing, reasoning blocks, local JSON repair."""

from __future__ import annotations

import json

import pytest

from navi_memory import AsyncMemoryStore, Settings
from navi_memory.errors import ConfigurationError
from navi_memory.pipeline.extract import parse_reply
from navi_memory.pipeline.llm import ChatClient, RetryPolicy, is_transient, resolve_chat_model, strip_reasoning

from .chat_fakes import ScriptedChat
from .fakes import FakeEmbeddings
from .test_pipeline_extraction import U, chat, facts, purposes, reply, talk


class RateLimitError(Exception):
    """Shaped like the SDKs' errors: a class name and an HTTP status."""

    status_code = 429


class StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


class _Response:
    status_code = 503


class WrappedHTTPError(Exception):
    response = _Response()


@pytest.mark.parametrize("exc, transient", [
    (TimeoutError("read timed out"), True),
    (ConnectionError("refused"), True),
    (RateLimitError("slow down"), True),
    (StatusError(429), True),
    (StatusError(503), True),
    (WrappedHTTPError("bad gateway"), True),
    (StatusError(400), False),
    (StatusError(401), False),
    (ValueError("bad request body"), False),
    (KeyError("x"), False),
])
def test_transient_failures_are_told_apart(exc, transient):
    assert is_transient(exc) is transient


@pytest.mark.parametrize("text, expected", [
    ('<think>maybe {"facts": []}</think>{"facts": [1]}', '{"facts": [1]}'),
    ("<THINKING>\nlong\nthoughts\n</THINKING>\nanswer", "answer"),
    ("<reasoning>cut off before the answer", ""),
    ("no reasoning here", "no reasoning here"),
    ("a < b and c > d", "a < b and c > d"),
])
def test_reasoning_blocks_are_not_the_answer(text, expected):
    assert strip_reasoning(text) == expected


def test_a_transient_failure_is_retried_and_booked_as_one_call(store):
    model = chat(store, RateLimitError("429 Too Many Requests"), TimeoutError("timed out"),
                 reply(("profile", "name", "Eugene", "user_explicit")), "Eugene.")
    talk(store, "s1", "I'm Eugene.", "Hi Eugene.")
    report = store.extract_session("s1", user_id=U)
    assert report.state == "extracted" and facts(store) == {("profile", "name"): "Eugene"}
    assert len(model.calls) == 4  # three tries of the extraction, one summary
    assert purposes(store) == {"extract": 1, "summary": 1}


def test_an_error_that_is_not_transient_is_not_retried(store):
    model = chat(store, ValueError("the request is malformed"))
    talk(store, "s1", "I'm Eugene.", "Hi Eugene.")
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and "ValueError: the request is malformed" in report.error
    assert len(model.calls) == 1


def test_after_the_last_attempt_the_providers_own_error_is_reported(store):
    model = chat(store, *[RateLimitError("429 Too Many Requests")] * 3)
    talk(store, "s1", "I'm Eugene.", "Hi Eugene.")
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and "RateLimitError: 429 Too Many Requests" in report.error
    # the provider failed for good: the rules still recorded the explicit introduction (issue 16.2)
    assert len(model.calls) == 3 and facts(store) == {("profile", "name"): "Eugene"}


async def test_the_async_store_retries_too(db_url):
    model = ScriptedChat(script=[StatusError(503), reply(("profile", "name", "Eugene", "user_explicit")), "Eugene."])
    astore = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), chat_model=model)
    try:
        await astore.add_messages("s1", [{"role": "user", "content": "I'm Eugene."},
                                         {"role": "assistant", "content": "Hi."}], user_id=U, background=False)
        report = await astore.extract_session("s1", user_id=U)
        assert report.state == "extracted" and len(model.calls) == 3
    finally:
        await astore.close()


def test_almost_json_is_mended_without_a_repair_request(store):
    chat(store, "{'facts': [{'category': 'profile', 'key': 'name', 'value': 'Eugene', 'source': 'user_explicit',},],"
                " 'notes': [],}", "Eugene.")
    talk(store, "s1", "I'm Eugene.", "Hi Eugene.")
    report = store.extract_session("s1", user_id=U)
    assert report.state == "extracted" and facts(store) == {("profile", "name"): "Eugene"}
    assert purposes(store) == {"extract": 1, "summary": 1}


def test_a_cut_off_reply_is_not_mended_but_asked_again():
    result, problem = parse_reply('{"facts": [{"category": "profile", "key": "name", "value": "Eug')
    assert result is None and "cut off" in problem


def test_a_reasoning_models_draft_is_ignored(store):
    draft = json.dumps({"facts": [{"category": "profile", "key": "name", "value": "WRONG"}]})
    answer = json.dumps(reply(("profile", "name", "Eugene", "user_explicit")))
    chat(store, f"<think>First draft: {draft}. Hmm, no.</think>\n```json\n{answer}\n```",
         "<think>keep it short</think>Eugene.")
    talk(store, "s1", "I'm Eugene.", "Hi Eugene.")
    assert store.extract_session("s1", user_id=U).state == "extracted"
    assert facts(store) == {("profile", "name"): "Eugene"}
    assert store.get_summary(user_id=U) == "Eugene."


def test_retry_and_pacing_come_from_the_settings():
    settings = Settings.from_env({"NAVI_MEMORY_URL": "sqlite:////tmp/x.db", "NAVI_MEMORY_CHAT_ATTEMPTS": "5",
                                  "NAVI_MEMORY_CHAT_RETRY_WAIT": "0.5", "NAVI_MEMORY_CHAT_RATE_LIMIT": "2"})
    client = resolve_chat_model(ScriptedChat(script=["hello"]), settings)
    assert client is not None
    assert client.retry == RetryPolicy(attempts=5, initial_wait=0.5, max_wait=30.0, requests_per_second=2.0)
    assert client.invoke("summary", [("human", "hi")]).text == "hello"
    assert client._limiter is not None  # the calls of this client are paced


@pytest.mark.parametrize("fields", [{"attempts": 0}, {"attempts": 1.5}, {"initial_wait": -1.0},
                                    {"initial_wait": float("nan")}, {"requests_per_second": 0.0}])
def test_a_bad_retry_policy_is_refused(fields):
    with pytest.raises(ConfigurationError):
        RetryPolicy(**fields)


def test_one_attempt_means_no_retry():
    model = ScriptedChat(script=[TimeoutError("slow")])
    client = ChatClient.wrap(model, retry=RetryPolicy(attempts=1))
    with pytest.raises(Exception, match="TimeoutError: slow"):
        client.invoke("extract", [("human", "hi")])
    assert len(model.calls) == 1


def _sleeps(monkeypatch) -> list[float]:
    """The waits of the chat retry, recorded instead of slept (sync and async)."""
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("navi_memory.pipeline.llm.time.sleep", waits.append)
    monkeypatch.setattr("navi_memory.pipeline.llm.asyncio.sleep", asleep)
    return waits


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_retry_wait_of_zero_means_no_sleep(monkeypatch, asynchronous):
    """NAVI_MEMORY_CHAT_RETRY_WAIT=0 retries at once (LangChain's with_retry dropped the setting and
    slept about a second per retry, whatever it said)."""
    import asyncio

    waits = _sleeps(monkeypatch)
    settings = Settings.from_env({"NAVI_MEMORY_URL": "sqlite:////tmp/x.db", "NAVI_MEMORY_CHAT_RETRY_WAIT": "0"})
    model = ScriptedChat(script=[TimeoutError("slow"), RateLimitError("slow down"), "hello"])
    client = resolve_chat_model(model, settings)
    assert client is not None
    if asynchronous:
        text = asyncio.run(client.ainvoke("summary", [("human", "hi")])).text
    else:
        text = client.invoke("summary", [("human", "hi")]).text
    assert text == "hello" and len(model.calls) == 3 and waits == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_retry_waits_what_the_settings_say(monkeypatch, asynchronous):
    import asyncio

    waits = _sleeps(monkeypatch)
    settings = Settings.from_env({"NAVI_MEMORY_URL": "sqlite:////tmp/x.db", "NAVI_MEMORY_CHAT_RETRY_WAIT": "0.25",
                                  "NAVI_MEMORY_CHAT_ATTEMPTS": "4"})
    model = ScriptedChat(script=[TimeoutError("slow")] * 4)
    client = resolve_chat_model(model, settings)
    assert client is not None
    with pytest.raises(Exception, match="TimeoutError: slow"):
        if asynchronous:
            asyncio.run(client.ainvoke("summary", [("human", "hi")]))
        else:
            client.invoke("summary", [("human", "hi")])
    assert len(model.calls) == 4 and len(waits) == 3  # no wait after the last attempt
    for attempt, wait in enumerate(waits, 1):
        assert 0.25 * 2 ** (attempt - 1) <= wait <= 0.25 * 2 ** (attempt - 1) + 0.25


def test_the_retry_wait_is_capped():
    policy = RetryPolicy(attempts=100, initial_wait=2.0, max_wait=30.0)
    assert [policy.wait_before(n) for n in (5, 50, 5000)] == [30.0, 30.0, 30.0]
    assert RetryPolicy(initial_wait=0.0).wait_before(7) == 0.0
