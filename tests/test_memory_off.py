"""A user's memory turned off (``set_memory_enabled(False, ...)``), on every backend: nothing new is
stored about them, by any path; what is stored stays readable, deletable and exportable; the
adapters tell the model memory is off; on again, everything works as before."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from navi_memory import MemoryOffError, prompt
from navi_memory.integrations.langchain import NaviMemoryRunnable
from navi_memory.integrations.tools import MemoryTools

U = "u1"


def test_memory_off_refuses_every_write_and_keeps_what_is_stored(store, dump, clock):
    kept = store.add(user_id=U, content="Likes green tea.")
    store.upsert_fact(user_id=U, category="profile", key="city", value="Lisbon")
    assert store.memory_enabled(user_id=U) is True
    assert store.set_memory_enabled(False, user_id=U) is False
    assert store.memory_enabled(user_id=U) is False and store.memory_enabled(user_id="u2") is True
    before = dump()
    writes = [lambda: store.add(user_id=U, content="x"), lambda: store.add_note(user_id=U, content="x"),
              lambda: store.add_many([{"user_id": "u2", "content": "y"}, {"user_id": U, "content": "x"}]),
              lambda: store.upsert_fact(user_id=U, category="profile", key="name", value="Ann"),
              lambda: store.put_keyed(namespace=("prefs",), key="k", content="x", user_id=U), lambda: store.set_summary("x", user_id=U)]
    for write in writes:
        with pytest.raises(MemoryOffError, match="memory is off for this user"):
            write()
    # conversations are not recorded, extraction never runs for them
    result = store.add_messages("s1", [{"role": "user", "content": "Remember that I love jazz."}], user_id=U)
    assert (result.added, result.skipped, result.triggers) == (0, "memory is off for this user", [])
    assert store.start_session(user_id=U, session_id="s2") is None
    assert dump() == before  # nothing at all was written, the second user of add_many included
    # reads, search and export still work; deletes too
    assert store.get(kept, user_id=U).content == "Likes green tea."
    assert [r.id for r in store.search("green tea", user_id=U)][:1] == [kept]
    lines: list[dict] = []
    store.export(lines.append, user_id=U)
    assert any(r.get("content") == "Likes green tea." for r in lines)
    assert store.delete_fact("city", user_id=U) == 1
    # turning it off again keeps the first time; on again, writes work
    clock.advance(days=1)
    store.set_memory_enabled(False, user_id=U)
    assert [u["memory_off_since"] for u in store.list_users() if u["id"] == U][0] < clock.now
    assert store.set_memory_enabled(True, user_id=U) is True
    assert store.add(user_id=U, content="Plays the cello.") > kept
    assert store.add_messages("s1", [{"role": "user", "content": "hi"}], user_id=U, triggers=False).added == 1
    with pytest.raises(Exception, match="enabled must be true or false"):
        store.set_memory_enabled("no", user_id=U)


def test_a_session_recorded_before_memory_went_off_is_not_extracted(store):
    store.add_messages("s1", [{"role": "user", "content": "Remember that I love jazz."}], user_id=U,
                       triggers=False)
    store.set_memory_enabled(False, user_id=U)
    report = store.extract_session("s1", user_id=U)
    assert (report.state, report.reason) == ("skipped", "memory is off for this user")
    assert store.get_all_facts(user_id=U) == [] and store.get_session("s1", user_id=U).state == "error"
    later = store.process_stale_sessions(user_id=U, unextracted=True, stale_minutes=0)
    assert all(r.state == "skipped" for r in later) and store.get_all_facts(user_id=U) == []


def test_the_adapters_say_memory_is_off_and_the_tools_refuse(store):
    store.set_summary("The user lives in Lisbon.", user_id=U)
    store.set_memory_enabled(False, user_id=U)
    messages = [SystemMessage("You help."), HumanMessage("Where do I live?")]
    for mode in ("injection", "tools"):
        out = NaviMemoryRunnable(store=store, user_id=U, mode=mode).invoke(messages)
        assert out[1].content == prompt.MEMORY_OFF_NOTE and "Lisbon" not in " ".join(m.content for m in out)
    tools = MemoryTools(store, U)
    for name, args in (("memory_add_note", {"content": "x"}),
                       ("memory_save_fact", {"category": "profile", "key": "k", "value": "v"})):
        assert json.loads(tools.dispatch(name, args, errors="return")) == {
            "error": "memory is off for this user: nothing new is stored"
                     " (set_memory_enabled(True, user_id=...) turns it on)"}
    assert json.loads(tools.dispatch("memory_search", {"query": "Lisbon"}))["results"] == []
    store.set_memory_enabled(True, user_id=U)
    assert "Lisbon" in NaviMemoryRunnable(store=store, user_id=U).invoke(messages)[1].content


async def test_async_store(db_url, fake_embeddings):
    from navi_memory import AsyncMemoryStore

    async_store = await AsyncMemoryStore.open(db_url, embeddings=fake_embeddings)
    await async_store.set_memory_enabled(False, user_id=U)
    with pytest.raises(MemoryOffError):
        await async_store.add(user_id=U, content="x")
    assert (await async_store.add_messages("s", [{"role": "user", "content": "x"}], user_id=U)).added == 0
    assert await async_store.set_memory_enabled(True, user_id=U) is True
    assert await async_store.add(user_id=U, content="x") > 0
    await async_store.close()


def test_export_carries_memory_off_and_an_import_never_turns_it_on(store, db_url, fake_embeddings, tmp_path):
    from navi_memory import MemoryStore

    store.add(user_id=U, content="Likes green tea.")
    store.set_memory_enabled(False, user_id=U)
    lines: list[dict] = []
    store.export(lines.append, user_id=U)
    user = next(r for r in lines if r.get("type") == "user")
    assert user["memory_off_since"]
    target = MemoryStore.open(f"sqlite:///{tmp_path / 'copy.db'}", embeddings=fake_embeddings)
    try:
        target.add(user_id="u9", content="x")
        target.import_records(lines)
        assert target.memory_enabled(user_id=U) is False
        assert [i.content for i in target.list_items(user_id=U)] == ["Likes green tea."]
        # a stored user keeps "off"; an import of a file where the user is on does not turn it on
        on = [dict(r) for r in lines]
        next(r for r in on if r.get("type") == "user").pop("memory_off_since")
        target.import_records(on)
        assert target.memory_enabled(user_id=U) is False
        # and an imported "off" turns off a stored user who had memory on
        fresh = [dict(lines[0], users=["u9"])] + [dict(r, user_id="u9") for r in lines if r.get("type") == "user"]
        target.import_records(fresh)
        assert target.memory_enabled(user_id="u9") is False
    finally:
        target.close()


def test_rest_api_switch_and_refusals(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    api = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert api.get(f"/api/users/{U}/memory").json() == {"user": U, "memory_enabled": True}
    assert api.put(f"/api/users/{U}/memory", json={"memory_enabled": "no"}).status_code == 422
    assert api.put(f"/api/users/{U}/memory", json={"enabled": False}).status_code == 422
    assert api.put(f"/api/users/{U}/memory", json={"memory_enabled": False}).json()["memory_enabled"] is False
    refused = api.post(f"/api/users/{U}/items", json={"content": "x"})
    assert refused.status_code == 409 and refused.json()["type"] == "MemoryOffError"
    assert api.post(f"/api/users/{U}/facts", json={"category": "profile", "key": "k", "value": "v"}).status_code == 409
    sent = api.post(f"/api/users/{U}/messages", json={"session_id": "s", "messages": [{"role": "user", "content": "x"}]})
    assert sent.status_code == 200 and sent.json()["result"]["skipped"] == "memory is off for this user"
    context = api.get(f"/api/users/{U}/context", params={"q": "x"}).json()
    assert context["stable"] == prompt.MEMORY_OFF_NOTE and context["available"] is False
    assert api.get(f"/api/users/{U}/household").json()["memory_enabled"] is False
    assert api.put(f"/api/users/{U}/memory", json={"memory_enabled": True}).json()["memory_enabled"] is True
    assert api.post(f"/api/users/{U}/items", json={"content": "x"}).status_code == 201
