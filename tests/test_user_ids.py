"""User ids are exact or refused (validation.user_id): never trimmed, so "alice " is not alice."""

from __future__ import annotations

import sqlite3
from urllib.parse import quote

import pytest

from navi_memory import ValidationError
from navi_memory.cli import main

from .bad_input_support import U, seed, unchanged_after

ALICE = U  # "alice", seeded with an item, facts and a summary
LOOK_ALIKES = ["alice ", " alice", "alice\u00a0", "alice\u3000", "\x85alice", "alice\t\n", "alice\u200b",
               "\ufeffalice", "ali\x07ce", "ali\u202ece"]
EXACT = ["Alice", "ålice", "a b", "%41", "alice\u0301", "用户", "a/b", "a?b#c"]


@pytest.mark.parametrize("uid", LOOK_ALIKES)
def test_a_look_alike_of_a_user_id_is_refused_everywhere(store, dump, uid):
    seed(store)
    for call in (lambda: store.add(user_id=uid, content="planted"),
                 lambda: store.upsert_fact(user_id=uid, category="profile", key="name", value="Mallory"),
                 lambda: store.set_summary("planted", user_id=uid),
                 lambda: store.forget(user_id=uid)):
        error = unchanged_after(dump, call, ValidationError)
        assert "user_id" in str(error)
    for read in (lambda: store.search("coffee", user_id=uid), lambda: store.list_items(user_id=uid),
                 lambda: store.get_all_facts(user_id=uid), lambda: store.get_summary(user_id=uid)):
        with pytest.raises(ValidationError, match="user_id"):
            read()


def test_odd_but_exact_user_ids_are_separate_users(store):
    for uid in [ALICE, *EXACT]:
        store.add(user_id=uid, content=f"note of {uid!r}")
    for uid in [ALICE, *EXACT]:
        assert [i.content for i in store.list_items(user_id=uid)] == [f"note of {uid!r}"]
    assert {u["id"] for u in store.list_users()} == {ALICE, *EXACT}


@pytest.mark.parametrize("uid", ["alice ", "alice\t", "\u200balice"])
def test_the_cli_refuses_a_look_alike_in_one_line(store, db_url, dump, capsys, uid):
    seed(store)
    before = dump()
    code = main(["--db", db_url, "--embeddings", "hashing", "add", "--user", uid, "planted"])
    out, err = capsys.readouterr()
    assert code == 2 and "user_id" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert dump() == before


@pytest.mark.parametrize("uid", ["alice ", "alice\u00a0", "alice\u3000", "\x85alice", "alice\u200b"])
def test_the_rest_api_refuses_a_look_alike(store, dump, uid):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    seed(store)
    before = dump()
    client = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL,
                        headers={"Authorization": f"Bearer {TOKEN}"})
    path = f"/api/users/{quote(uid, safe='')}"
    for method, url, body in (("POST", f"{path}/items", {"content": "planted"}), ("GET", f"{path}/items", None),
                              ("GET", f"{path}/facts", None)):
        reply = client.request(method, url, json=body)
        assert reply.status_code == 422 and "user_id" in reply.json()["error"], (method, url, reply.text)
    assert dump() == before


SURFACE_LOOK_ALIKES = ["alice ", "alice\u00a0", "\x85alice", "alice\t\n"]


@pytest.mark.parametrize("pair", [f"{uid}=bob" for uid in SURFACE_LOOK_ALIKES] + [f"bob={uid}" for uid in SURFACE_LOOK_ALIKES]
                         + ["alice= bob", " alice=bob"])
def test_the_cli_user_map_refuses_a_look_alike_instead_of_trimming_it(store, db_url, dump, capsys, tmp_path, pair):
    seed(store)
    backup = tmp_path / "backup.jsonl"
    assert main(["--db", db_url, "--embeddings", "hashing", "export", "--user", ALICE, "-o", str(backup)]) == 0
    capsys.readouterr()
    store.forget(user_id=ALICE)
    before = dump()
    code = main(["--db", db_url, "--embeddings", "hashing", "import", str(backup), "--user-map", pair])
    err = capsys.readouterr().err
    assert code == 2 and "--user-map" in err and "user_id" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    assert dump() == before


def _web(store, api: bool):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app
    from navi_memory.ui.app import create_app

    from .ui_helpers import LOCAL, TOKEN

    if api:
        return TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL,
                          headers={"Authorization": f"Bearer {TOKEN}"})
    return TestClient(create_app(store), base_url=LOCAL, follow_redirects=False)


@pytest.mark.parametrize("uid", SURFACE_LOOK_ALIKES)
def test_every_user_path_of_the_web_ui_and_rest_api_refuses_a_look_alike(store, dump, uid):
    seed(store)
    before = dump()
    path = quote(uid, safe="")
    api = _web(store, api=True)
    for method, url in (("GET", "search"), ("GET", "search?q=coffee"), ("GET", "summary"), ("GET", "household"),
                        ("GET", "items/1"), ("GET", "chunks"), ("DELETE", "facts?key=drink"), ("DELETE", "items/1")):
        reply = api.request(method, f"/api/users/{path}/{url}")
        assert reply.status_code == 422 and "user_id" in reply.json()["error"], (method, url, reply.text)
    reply = api.post(f"/api/users/{path}/facts", json={"category": "profile", "key": "name", "value": "Mallory"})
    assert reply.status_code == 422 and "user_id" in reply.json()["error"]
    ui = _web(store, api=False)
    for url in ("items", "facts", "summary", "search", "search?q=coffee", "items/1"):
        for prefix in ("/users", "/api/users"):
            reply = ui.get(f"{prefix}/{path}/{url}")
            assert reply.status_code == 400 and "user_id" in reply.text, (prefix, url, reply.text[:200])
    assert dump() == before


@pytest.mark.parametrize("uid", SURFACE_LOOK_ALIKES)
def test_the_web_ui_user_picker_refuses_a_look_alike_instead_of_trimming_it(store, uid):
    seed(store)
    reply = _web(store, api=False).get("/pick", params={"user": uid})
    assert reply.status_code == 400 and "user_id" in reply.text, (reply.status_code, reply.headers.get("location"))


def test_the_web_ui_user_picker_keeps_an_exact_id_exact(store):
    for uid in EXACT:
        reply = _web(store, api=False).get("/pick", params={"user": uid})
        assert reply.status_code == 303 and reply.headers["location"] == f"/users/{quote(uid, safe='')}/items"
    assert _web(store, api=False).get("/pick", params={"user": ""}).status_code == 303


def _adapters(store, uid):
    """Every constructor of the LangChain and LlamaIndex adapters that binds a user id."""
    from navi_memory.integrations import langchain as lc
    from navi_memory.integrations import llamaindex as li
    from navi_memory.integrations._tools import MemoryTools

    return [lambda: MemoryTools(store, uid),
            lambda: lc.NaviMemoryRetriever(store=store, user_id=uid),
            lambda: lc.NaviMemoryToolkit(store=store, user_id=uid),
            lambda: lc.NaviChatMessageHistory(store, "s1", user_id=uid),
            lambda: lc.NaviMemoryRunnable(store=store, user_id=uid),
            lambda: lc.NaviMemoryMiddleware(store=store, user_id=uid),
            lambda: li.NaviMemoryRetriever(store, user_id=uid),
            lambda: li.NaviMemoryBlock(store=store, user_id=uid),
            lambda: li.NaviMemoryToolSpec(store, user_id=uid)]


@pytest.mark.parametrize("uid", SURFACE_LOOK_ALIKES)
def test_the_framework_adapters_refuse_a_look_alike_when_built(store, uid):
    for make in _adapters(store, uid):
        with pytest.raises(ValueError, match="user_id") as info:
            make()
        assert "whitespace" in str(info.value) or "control character" in str(info.value)


def test_the_framework_adapters_keep_an_exact_id_exact(store):
    for make in _adapters(store, "a b"):
        made = make()
        bound = made._tools if hasattr(made, "_tools") and not hasattr(made, "user_id") else made
        assert bound.user_id == "a b"


@pytest.mark.parametrize("uid", SURFACE_LOOK_ALIKES)
def test_the_navi_migration_user_is_exact_or_refused(store, dump, db_url, capsys, tmp_path, uid):
    from navi_memory.navi_source import NaviSource

    navi = tmp_path / "navi.db"
    with sqlite3.connect(navi) as conn:
        conn.execute("CREATE TABLE memory_facts (id INTEGER PRIMARY KEY, category, key, value)")
        conn.execute("INSERT INTO memory_facts VALUES (1, 'profile', 'name', 'Mallory')")
    conn.close()
    seed(store)
    before = dump()
    with pytest.raises(ValidationError, match="user_id"):
        NaviSource(str(navi), user=uid)
    code = main(["--db", db_url, "--embeddings", "hashing", "import", "--from-navi", str(navi), "--navi-user", uid])
    err = capsys.readouterr().err
    assert code == 2 and "user_id" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert dump() == before
