"""Per-user bearer tokens on the REST API (``serve --tokens FILE``): a token reaches only its own
user's routes, the administrator's token every user and the list of users; on every backend."""

from __future__ import annotations

import json

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from navi_memory import ConfigurationError
from navi_memory.tokens import TokenMap
from navi_memory.ui.api import create_api_app

from .ui_helpers import LOCAL, TOKEN

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"


def client(app, token: str | None) -> TestClient:
    return TestClient(app, base_url=LOCAL, headers={"Authorization": f"Bearer {token}"} if token else {})


@pytest.fixture
def app(store):
    return create_api_app(store, token=TOKEN, tokens=TokenMap({ALICE: "alice", BOB: "bob"}))


def test_a_user_token_reaches_its_own_routes_only(app, store):
    alice, bob = client(app, ALICE), client(app, BOB)
    made = alice.post("/api/users/alice/items", json={"content": "Alice keeps bees."})
    assert made.status_code == 201
    item = made.json()["item"]["id"]
    assert alice.get(f"/api/users/alice/items/{item}").json()["item"]["content"] == "Alice keeps bees."
    assert alice.put("/api/users/alice/facts", json={"category": "profile", "key": "city", "value": "Lyon"}).status_code == 201
    # every route of another user: refused before the store is read or written
    paths = {r.path.replace("{item_id:int}", str(item)): r.methods for r in app.routes
             if isinstance(r, Route) and "{user:path}" in r.path}
    assert len(paths) >= 8
    for path, methods in paths.items():
        for method in methods - {"HEAD"}:
            answer = bob.request(method, path.replace("{user:path}", "alice"), json={"content": "x", "timezone": None})
            assert answer.status_code == 403, (method, path)
            assert answer.json() == {"error": "this token acts for another user", "type": "HTTPException"}
    assert sorted(i.content for i in store.list_items(user_id="alice")) == ["Alice keeps bees.", "city: Lyon"]
    assert store.list_items(user_id="bob") == [] and store.user_timezone(user_id="alice") is None
    # the list of users and any route outside /api/users/<user>/ is the administrator's
    assert bob.get("/api/users").status_code == 403 and alice.get("/api/users").status_code == 403
    assert bob.get("/api/users/").status_code in (403, 404)
    # a look-alike is another user (ids are exact), or no user id at all
    assert alice.get("/api/users/Alice/items").status_code == 403
    assert alice.get("/api/users/alice%2Fx/items").status_code == 403
    assert alice.get("/api/users/alice%20/items").status_code == 422
    admin = client(app, TOKEN)
    assert {u["id"] for u in admin.get("/api/users").json()["users"]} == {"alice"}
    assert admin.get("/api/users/alice/facts").status_code == 200 and admin.get("/api/users/bob/items").status_code == 200


def test_unknown_and_malformed_tokens_are_401(app):
    for token in (ALICE[:-1], ALICE + "x", "Bearer", "x" * 40):
        assert client(app, token).get("/api/users/alice/items").status_code == 401
    assert client(app, None).get("/api/users/alice/items").status_code == 401
    cookie = TestClient(app, base_url=LOCAL, cookies={"navi_memory_token": ALICE})
    assert cookie.get("/api/users/alice/items").status_code == 401  # the header only


def test_per_user_tokens_alone_are_enough_and_bind_anywhere(store):
    app = create_api_app(store, token=None, tokens=TokenMap({ALICE: "alice"}), host="0.0.0.0")
    assert client(app, ALICE).get("/api/users/alice/items").status_code == 200
    assert client(app, ALICE).get("/api/users").status_code == 403  # no administrator at all
    assert client(app, None).get("/api/users/alice/items").status_code == 401
    with pytest.raises(ConfigurationError, match="TokenMap"):
        create_api_app(store, token=TOKEN, tokens={ALICE: "alice"})  # a plain dict is not loaded and checked
    with pytest.raises(ConfigurationError, match="REST API always needs one"):
        create_api_app(store, token=None, tokens=None)


def test_the_token_file_is_checked_and_its_content_never_shown(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE: "alice"}))
    path.chmod(0o600)
    tokens = TokenMap.load(path)
    assert tokens.user_for(ALICE) == "alice" and tokens.user_for(BOB) is None
    assert ALICE not in repr(tokens)
    for content, message in (("{}", "maps no tokens"), ('{"short": "alice"}', "at least 16"),
                             (json.dumps({ALICE: " alice"}), "invalid user id"), ("[1]", "JSON object"),
                             ('{"' + ALICE + '": ', "not JSON")):
        path.write_text(content)
        with pytest.raises(ConfigurationError, match=message) as caught:
            TokenMap.load(path)
        assert ALICE not in str(caught.value)


def test_the_browser_shows_each_user_their_own_pages(store, clock):
    from navi_memory.ui.app import create_app

    from .ui_helpers import fill

    fill(store, clock)
    app = create_app(store, token=TOKEN, tokens=TokenMap({ALICE: "alice", BOB: "bob"}))
    browser = TestClient(app, base_url=LOCAL)
    # the link with ?token= sets the cookie once, then the start page is the user's own
    first = browser.get(f"/users/alice/items?token={ALICE}", follow_redirects=False)
    assert first.status_code == 303 and "navi_memory_token" in first.headers["set-cookie"]
    assert browser.get("/users/alice/items").status_code == 200
    home = browser.get("/", follow_redirects=False)
    assert home.status_code == 303 and home.headers["location"] == "/users/alice/items"
    page = browser.get("/users/alice/items").text
    assert "green tea" in page and "diary" not in page
    assert browser.get("/users/alice/facts").status_code == 200 and browser.get("/ui.css").status_code == 200
    for path in ("/users/bob/items", "/api/users/bob/items", f"/users/bob/items/1", "/api/users", "/pick?user=bob"):
        assert browser.get(path, follow_redirects=False).status_code == 403, path
    assert "Bob's private diary" not in browser.get("/api/users/bob/search?q=diary").text
    # a per-user token never reaches the administrator's pages, the administrator's reaches all
    admin = TestClient(app, base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert admin.get("/").status_code == 200 and admin.get("/users/bob/items").status_code == 200
    assert TestClient(app, base_url=LOCAL).get(f"/?token={BOB[:-1]}").status_code == 401
