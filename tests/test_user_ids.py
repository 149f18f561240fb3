"""User ids are exact or refused (validation.user_id): never trimmed, so "alice " is not alice."""

from __future__ import annotations

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
