"""Web apps: links keep odd user ids intact, the token redirect stays on the site, and the server
drops clients that take too long to send a request head."""

from __future__ import annotations

import re
import socket
from contextlib import contextmanager
import threading
import time
from html import escape, unescape
from urllib.parse import quote

import pytest

from .ui_helpers import LOCAL, TOKEN

ODD_USERS = ["%41", "a?b", "a#b", "a/b", "ü x", "100%"]


@contextmanager
def running(app, protocol=None):
    """The app served by a real uvicorn on loopback (the test client decodes paths twice)."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    extra = {"http": protocol} if protocol is not None else {}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **extra))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(400):
            if server.started:
                break
            time.sleep(0.05)
        assert server.started
        yield port
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def ui_port(tmp_path_factory):
    from navi_memory import MemoryStore
    from navi_memory.ui.app import create_app

    store = MemoryStore.open(f"sqlite:///{tmp_path_factory.mktemp('ui')}/memory.db", embeddings=False)
    for uid in ODD_USERS + ["A", "a"]:
        store.add_many([{"user_id": uid, "content": f"note {n} of {uid}", "theme": "travel" if n % 2 else "food"}
                        for n in range(60)])  # two pages of items, and two themes
    with running(create_app(store)) as port:
        yield port
    store.close()


def links(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="([^"]+)"', html)]


@pytest.mark.parametrize("uid", ODD_USERS)
def test_every_link_of_a_users_pages_stays_with_that_user(ui_port, uid):
    import httpx

    with httpx.Client(base_url=f"http://127.0.0.1:{ui_port}") as ui:
        page = ui.get(f"/users/{quote(uid, safe='')}/items")
        assert page.status_code == 200 and f"of {uid}" in unescape(page.text)
        followed = [href for href in links(page.text) if "/users/" in href]
        assert any("offset=" in h for h in followed) and any("theme=" in h for h in followed)
        assert any(h.startswith("/api/") for h in followed)
        for href in followed:
            reply = ui.get(href)
            assert reply.status_code == 200, href
            body = unescape(reply.text)
            assert f"of {uid}" in body or f"<strong>{escape(uid)}</strong>" in reply.text, href  # contents or header
            for other in {"A", "a"} - {uid}:
                assert f"of {other}<" not in body and f'of {other}"' not in body, (href, other)


@pytest.mark.parametrize("path", ["//evil.example/x", "/\\evil.example/x", "//evil.example"])
def test_the_token_redirect_never_leaves_the_site(store, path):
    from starlette.testclient import TestClient

    from navi_memory.ui.app import create_app

    client = TestClient(create_app(store, token=TOKEN), base_url=LOCAL, follow_redirects=False)
    reply = client.get(f"{LOCAL}{path}?token={TOKEN}")  # absolute: the path itself starts with //
    assert reply.status_code == 303
    location = reply.headers["location"]
    assert location.startswith("/") and not location.startswith("//") and not location.startswith("/\\")


def test_the_server_drops_a_client_that_is_slow_to_send_its_request(store):
    from navi_memory.ui.app import create_app
    from navi_memory.ui.serving import header_timeout_protocol

    with running(create_app(store), header_timeout_protocol(0.5)) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finishes its headers
            assert slow.recv(1024) == b""  # closed by the server (the 30 s socket timeout would raise)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as normal:
            normal.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert normal.recv(1024).startswith(b"HTTP/1.1 200")
