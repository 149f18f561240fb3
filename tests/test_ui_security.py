"""Who may read the browser UI: loopback only without a token, the token on every request with one."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from navi_memory import ConfigurationError, MemoryStore
from navi_memory.ui.app import create_app
from navi_memory.tokens import TokenMap
from navi_memory.ui.security import COOKIE, check_token, is_loopback

from .ui_helpers import LOCAL, TOKEN


@pytest.fixture
def store(tmp_path, fake_embeddings):
    s = MemoryStore.open(f"sqlite:///{tmp_path}/ui.db", embeddings=fake_embeddings)
    s.add(user_id="alice", content="secret tea preference")
    yield s
    s.close()


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                            ("[::1]", True), ("127.0.0.2", True), ("0.0.0.0", False),
                                            ("192.168.1.5", False), ("example.org", False), ("::", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_binding_beyond_loopback_needs_a_token(store):
    with pytest.raises(ConfigurationError, match="token is required"):
        create_app(store, host="0.0.0.0")
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        create_app(store, host="0.0.0.0", token="short")
    with pytest.raises(ConfigurationError, match="printable ASCII"):
        create_app(store, token="a token with spaces in it")
    with pytest.raises(ConfigurationError, match="printable ASCII"):
        create_app(store, token="jeton-très-secret-0123456789")
    assert create_app(store, host="0.0.0.0", token=TOKEN) is not None
    assert check_token(None, "127.0.0.1", "X") is None
    assert check_token("", "localhost", "X") is None


def test_without_a_token_only_loopback_host_names_are_answered(store):
    app = create_app(store)
    assert TestClient(app, base_url=LOCAL).get("/").status_code == 200
    assert TestClient(app, base_url="http://localhost:8765").get("/").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8765").get("/").status_code == 200
    rebound = TestClient(app, base_url="http://attacker.example").get("/api/users")
    assert rebound.status_code == 403 and "alice" not in rebound.text


def test_with_a_token_every_route_requires_it(store):
    app = create_app(store, token=TOKEN, host="0.0.0.0")
    anonymous = TestClient(app, base_url="http://memory.example")
    for path in ("/", "/ui.css", "/api/users", "/users/alice/items", "/api/users/alice/items", "/pick?user=alice"):
        response = anonymous.get(path, follow_redirects=False)
        assert response.status_code == 401, path
        assert "alice" not in response.text and response.headers["www-authenticate"].startswith("Bearer")
    wrong = anonymous.get("/api/users", headers={"Authorization": f"Bearer {TOKEN}x"})
    assert wrong.status_code == 401
    ok = anonymous.get("/api/users", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.json()["users"][0]["id"] == "alice"


def test_token_in_the_address_sets_a_cookie_and_is_dropped_from_it(store):
    client = TestClient(create_app(store, token=TOKEN, host="0.0.0.0"), base_url="http://memory.example")
    response = client.get(f"/users/alice/items?theme=general&token={TOKEN}", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/users/alice/items?theme=general"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Secure" not in cookie  # over plain HTTP a browser would drop a Secure cookie
    page = client.get("/users/alice/items")  # the client now sends the cookie
    assert page.status_code == 200 and "secret tea preference" in page.text
    client.cookies.clear()
    assert client.get("/?token=wrong-token-wrong-token", follow_redirects=False).status_code == 401
    assert client.get("/users/alice/items").status_code == 401


def test_over_https_the_cookie_is_secure(store):
    client = TestClient(create_app(store, token=TOKEN, host="0.0.0.0"), base_url="https://memory.example")
    response = client.get(f"/?token={TOKEN}", follow_redirects=False)
    assert response.status_code == 303 and "; Secure" in response.headers["set-cookie"]
    assert client.get("/").status_code == 200


def test_a_wrong_cookie_is_refused(store):
    client = TestClient(create_app(store, token=TOKEN), base_url=LOCAL)
    client.cookies.set(COOKIE, "not-the-token-at-all")
    assert client.get("/").status_code == 401
    garbled = TestClient(create_app(store, token=TOKEN), base_url=LOCAL, headers={"Cookie": 'a="\\'})
    assert garbled.get("/").status_code == 401


@pytest.mark.parametrize("other", ['prefs={"theme":"dark"}', "msg=hello world", "x=a,b", "x=\\", "y=[1]"])
def test_another_apps_cookie_on_the_host_name_does_not_hide_the_token(store, other):
    """Cookies are shared by every port of a host name, and ``http.cookies`` drops a whole header
    it cannot parse: a JSON or spaced value of another app's cookie meant a 401 on every page."""
    app = create_app(store, token=TOKEN, host="0.0.0.0")
    for header in (f"{other}; {COOKIE}={TOKEN}", f"{COOKIE}={TOKEN}; {other}", f'{other}; {COOKIE}="{TOKEN}"'):
        assert TestClient(app, base_url=LOCAL, headers={"Cookie": header}).get("/").status_code == 200, header


def test_a_token_link_replaces_the_token_the_browser_holds(store):
    """A browser holding one user's cookie could not switch to the administrator's or another
    user's token: the cookie answered first and the link's token was ignored."""
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    store.add(user_id="bob", content="Bob keeps bees.")
    client = TestClient(create_app(store, token=TOKEN, host="0.0.0.0", tokens=TokenMap({alice: "alice", bob: "bob"})),
                        base_url=LOCAL)
    assert client.get(f"/?token={alice}").url.path == "/users/alice/items"  # followed: alice's pages
    assert client.get("/users/bob/items").status_code == 403
    switched = client.get(f"/users/bob/items?token={bob}", follow_redirects=False)
    assert switched.status_code == 303 and switched.headers["location"] == "/users/bob/items"
    assert bob in switched.headers["set-cookie"]
    assert "Bob keeps bees." in client.get("/users/bob/items").text
    assert client.get("/users/alice/items").status_code == 403  # bob's cookie now
    assert client.get(f"/?token={TOKEN}").status_code == 200  # the administrator's: the list of users
    assert client.get("/users/alice/items").status_code == 200
    assert client.get("/?token=not-a-token-at-all-here", follow_redirects=False).status_code == 200  # kept, unchanged


def test_security_headers_on_pages_json_and_errors(store):
    client = TestClient(create_app(store), base_url=LOCAL)
    for path in ("/", "/api/users", "/users/alice/items/424242", "/nowhere"):
        headers = client.get(path).headers
        assert "script-src" not in headers["content-security-policy"]  # default-src 'none' covers scripts
        assert "default-src 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-store"
        assert headers["x-frame-options"] == "DENY"


def test_pages_carry_no_script(store):
    client = TestClient(create_app(store), base_url=LOCAL)
    for path in ("/", "/users/alice/items", "/users/alice/facts", "/users/alice/summary", "/users/alice/search?q=tea",
                 "/users/alice/household", "/users/alice/sessions", "/users/alice/usage"):
        assert "<script" not in client.get(path).text


def test_a_raw_path_beyond_ascii_from_another_asgi_server_is_a_page_not_a_500(store):
    """h11 refuses such a request target, but another ASGI server may pass the bytes on in ``raw_path``:
    the page's own links were made by decoding them as ASCII."""
    import asyncio

    store.add(user_id="ü", content="Ü likes rye bread.")
    raw = "/users/ü/items".encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": raw.decode(), "raw_path": raw, "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(create_app(store)(scope, receive, send))
    assert sent[0]["status"] == 200
    page = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    assert "rye bread" in page and "/users/%C3%BC/items" in page
