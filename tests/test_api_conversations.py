"""The REST API's conversation routes on every backend: a host in any language records turns,
memory is extracted from them (a scripted chat model stands in for the LLM), and a turn's prompt
context comes back as the adapters build it."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from navi_memory import prompt
from navi_memory.ui.api import create_api_app

from .chat_fakes import ScriptedChat
from .ui_helpers import LOCAL, TOKEN

U = "/api/users/alice"


@pytest.fixture
def api(store):
    return TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL,
                      headers={"Authorization": f"Bearer {TOKEN}"})


def facts_reply(*facts):
    return {"facts": [dict(zip(("category", "key", "value", "source"), f)) for f in facts], "notes": []}


def test_record_a_conversation_and_its_memory_is_extracted(api, store):
    chat = ScriptedChat(script=[facts_reply(("profile", "allergy", "peanuts", "user_explicit")),
                                "Alice is allergic to peanuts."])
    store.set_chat_model(chat)
    started = api.post(f"{U}/sessions", json={"session_id": "s/1"})
    assert started.status_code == 201 and started.json()["session"]["session_id"] == "s/1"
    sent = api.post(f"{U}/messages", json={"session_id": "s/1", "messages": [
        {"role": "user", "content": "Remember that I'm allergic to peanuts."},
        {"role": "assistant", "content": "Noted!"}]})
    assert sent.status_code == 200, sent.text
    result = sent.json()["result"]
    assert result["added"] == 2 and "remember" in " ".join(result["triggers"])
    store.wait_for_background(30)
    assert store.get_fact("allergy", user_id="alice").value == "peanuts"
    one = api.get(f"{U}/sessions", params={"id": "s/1"}).json()["session"]
    assert one["state"] == "extracted" and [m["content"] for m in one["messages"]][1] == "Noted!"
    assert [s["session_id"] for s in api.get(f"{U}/sessions").json()["sessions"]] == ["s/1"]
    assert api.get("/api/users/bob/sessions", params={"id": "s/1"}).status_code == 404  # another user's


def test_extract_now_and_a_new_session_id_when_none_is_given(api, store):
    store.set_chat_model(ScriptedChat(script=[facts_reply(("profile", "city", "Lisbon", "user_explicit")),
                                              "Alice lives in Lisbon."]))
    sid = api.post(f"{U}/sessions", json={}).json()["session"]["session_id"]
    assert len(sid) == 32
    made = api.post(f"{U}/messages", json={"session_id": sid, "triggers": False, "agent_id": "helper",
                                           "messages": [{"role": "user", "content": "I live in Lisbon."}]})
    assert made.status_code == 200 and made.json()["result"]["triggers"] == []
    report = api.post(f"{U}/extract", json={"session_id": sid}).json()["report"]
    assert report["state"] == "extracted" and report["changes"][0]["action"] == "added"
    assert store.get_fact("city", user_id="alice").value == "Lisbon"
    created = api.post(f"{U}/messages", json={"session_id": "fresh", "triggers": False,
                                              "messages": [{"role": "user", "content": "hi"}]})
    assert created.status_code == 201 and created.json()["result"]["created"] is True


def test_bad_requests_are_refused_before_anything_is_written(api, store, dump):
    before = dump()
    for path, body, message in [
            ("messages", {"messages": []}, "give session_id"),
            ("messages", {"session_id": "s", "messages": "hi"}, "list"),
            ("messages", {"session_id": "s", "messages": [{"role": "wizard", "content": "x"}]}, "role"),
            ("messages", {"session_id": "s", "messages": [], "colour": 1}, "unknown field(s): colour"),
            ("messages", {"session_id": "s", "messages": [], "triggers": "no"}, "triggers must be true or false"),
            ("messages", {"session_id": "s", "messages": [], "user_id": "bob"}, "cannot be set in the body"),
            ("extract", {}, "give session_id"),
            ("extract", {"session_id": "s", "force": 1}, "force must be true or false"),
            ("sessions", {"session_id": ""}, "session_id")]:
        answer = api.post(f"{U}/{path}", json=body)
        assert answer.status_code == 422 and message in answer.json()["error"], (path, body, answer.text)
    assert api.post(f"{U}/extract", json={"session_id": "nope"}).status_code == 404
    assert dump() == before


def test_the_context_of_a_turn_is_what_the_adapters_inject(api, store, monkeypatch):
    store.set_summary("Alice is a beekeeper in Lisbon.", user_id="alice")
    store.add(user_id="alice", content="Alice's hives are on the roof.")
    # the fake embedder maps equal texts to equal vectors: above the store's relevance floor
    answer = api.get(f"{U}/context", params={"q": "Alice's hives are on the roof.", "first": "1"}).json()
    assert answer["enabled"] and answer["available"]
    assert answer["stable"].startswith(prompt.SUMMARY_HEADING) and "beekeeper" in answer["stable"]
    # what a host puts next to the user message
    assert answer["volatile"].startswith(prompt.RELEVANT_HEADING) and "hives are on the roof" in answer["volatile"]
    assert [r["content"] for r in answer["results"]] == ["Alice's hives are on the roof."]
    assert api.get(f"{U}/context", params={"q": "Alice's hives are on the roof.", "k": "1"}).json()["volatile"]
    assert api.get(f"{U}/context", params={"q": "x", "k": "0"}).status_code == 422
    assert api.get("/api/users/bob/context", params={"q": "hives"}).json()["stable"] is None
    monkeypatch.setenv("NAVI_MEMORY_INJECTION_DISABLED", "1")
    off = api.get(f"{U}/context", params={"q": "hives"}).json()
    assert off["enabled"] is False and off["stable"] is None
