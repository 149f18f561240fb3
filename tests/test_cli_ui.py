"""``navi-memory ui`` and ``navi-memory serve`` as real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from .ui_helpers import TOKEN


def command(*args: str, db: str) -> list[str]:
    return [sys.executable, "-m", "navi_memory.cli", *args, "--db", db, "--embeddings", "hashing"]


def run(*args: str, db: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args, db=db), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'cli.db'}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, env, message", [
    (("ui", "--host", "0.0.0.0"), {}, "a token is required (binding to 0.0.0.0"),
    (("ui", "--host", "0.0.0.0", "--token", "short"), {}, "at least 16 characters"),
    (("serve",), {}, "a token is required (the REST API always needs one)"),
    (("serve",), {"NAVI_MEMORY_API_TOKEN": "tiny"}, "at least 16 characters"),
])
def test_unsafe_setups_refuse_to_start(db, args, env, message):
    proc = run(*args, db=db, env=env)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0]


class Server:
    def __init__(self, args: list[str], env: dict) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **env})

    def wait(self, url: str, headers: dict | None = None) -> httpx.Response:
        deadline = time.monotonic() + 60  # readiness wait, not a timing assertion
        while True:
            try:
                return httpx.get(url, headers=headers, timeout=5)
            except httpx.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"server did not start: {self.proc.communicate()[1]}") from None
                time.sleep(0.1)

    def stop(self) -> str:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return out


def test_ui_serves_pages_on_loopback(db):
    assert run("add", "--user", "alice", "I drink green tea", db=db).returncode == 0
    port = free_port()
    server = Server(command("ui", "--port", str(port), db=db), {})
    try:
        page = server.wait(f"http://127.0.0.1:{port}/users/alice/items")
        assert page.status_code == 200 and "I drink green tea" in page.text
        assert httpx.post(f"http://127.0.0.1:{port}/users/alice/items").status_code == 405
    finally:
        out = server.stop()
    assert f"http://127.0.0.1:{port}/" in out and "read-only" in out


def test_serve_takes_its_token_from_the_environment_and_never_prints_it(db):
    port = free_port()
    server = Server(command("serve", "--port", str(port), db=db), {"NAVI_MEMORY_API_TOKEN": TOKEN})
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        assert server.wait(f"http://127.0.0.1:{port}/api/users").status_code == 401
        made = httpx.post(f"http://127.0.0.1:{port}/api/users/alice/items", json={"content": "via REST"},
                          headers=auth)
        assert made.status_code == 201
        listed = httpx.get(f"http://127.0.0.1:{port}/api/users/alice/items", headers=auth).json()
        assert [i["content"] for i in listed["items"]] == ["via REST"]
    finally:
        out = server.stop()
    assert "REST API" in out and TOKEN not in out


def test_serve_with_per_user_tokens_from_a_file(db, tmp_path):
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({alice: "alice", bob: "bob"}))
    tokens.chmod(0o600)
    port = free_port()
    server = Server(command("serve", "--port", str(port), db=db), {"NAVI_MEMORY_API_TOKENS": str(tokens)})
    base = f"http://127.0.0.1:{port}/api/users"
    try:
        assert server.wait(f"{base}/alice/items").status_code == 401
        made = httpx.post(f"{base}/alice/items", json={"content": "via REST"}, headers={"Authorization": f"Bearer {alice}"})
        assert made.status_code == 201
        assert httpx.get(f"{base}/alice/items", headers={"Authorization": f"Bearer {bob}"}).status_code == 403
        assert httpx.get(base, headers={"Authorization": f"Bearer {alice}"}).status_code == 403
    finally:
        out = server.stop()
    assert alice not in out and bob not in out


def test_ui_with_per_user_tokens_binds_beyond_loopback_without_an_admin_token(db, tmp_path):
    assert run("add", "--user", "alice", "I drink green tea", db=db).returncode == 0
    alice = "alice-token-0123456789"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({alice: "alice"}))
    tokens.chmod(0o600)
    port = free_port()
    server = Server(command("ui", "--host", "0.0.0.0", "--port", str(port), "--tokens", str(tokens), db=db), {})
    try:
        assert server.wait(f"http://127.0.0.1:{port}/users/alice/items").status_code == 401
        page = httpx.get(f"http://127.0.0.1:{port}/users/alice/items", headers={"Authorization": f"Bearer {alice}"})
        assert page.status_code == 200 and "I drink green tea" in page.text
    finally:
        out = server.stop()
    assert alice not in out


def test_token_command_makes_and_revokes_tokens_that_serve_accepts(db, tmp_path):
    tokens = tmp_path / "tokens.json"
    made = subprocess.run(command("token", "--user", "alice", "--file", str(tokens), db=db), capture_output=True,
                          text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    alice = made.stdout.strip()
    assert len(alice) >= 40 and "\n" not in alice and alice not in made.stderr
    assert oct(tokens.stat().st_mode & 0o777) == "0o600" and json.loads(tokens.read_text()) == {alice: "alice"}
    bob = subprocess.run(command("token", "--user", "bob", "--file", str(tokens), db=db), capture_output=True,
                         text=True, timeout=60).stdout.strip()
    assert json.loads(tokens.read_text()) == {alice: "alice", bob: "bob"}
    port = free_port()
    server = Server(command("serve", "--port", str(port), "--tokens", str(tokens), db=db), {})
    try:
        assert server.wait(f"http://127.0.0.1:{port}/api/users/alice/items").status_code == 401
        auth = {"Authorization": f"Bearer {alice}"}
        assert httpx.get(f"http://127.0.0.1:{port}/api/users/alice/items", headers=auth).status_code == 200
        gone = subprocess.run(command("token", "--user", "alice", "--file", str(tokens), "--revoke", db=db),
                              capture_output=True, text=True, timeout=60)
        assert gone.returncode == 0 and "removed 1 token(s) of alice" in gone.stdout
        assert json.loads(tokens.read_text()) == {bob: "bob"}
        carol = subprocess.run(command("token", "--user", "carol", "--file", str(tokens), "--expires-days", "7",
                                       db=db), capture_output=True, text=True, timeout=60).stdout.strip()
        assert json.loads(tokens.read_text())[carol]["user"] == "carol"
        time.sleep(1.1)  # the server looks at the file at most once a second: no restart
        assert httpx.get(f"http://127.0.0.1:{port}/api/users/alice/items", headers=auth).status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/api/users/carol/items",
                         headers={"Authorization": f"Bearer {carol}"}).status_code == 200
    finally:
        server.stop()
    revoked = subprocess.run(command("token", "--user", "carol", "--file", str(tokens), "--revoke", db=db),
                             capture_output=True, text=True, timeout=60)
    assert revoked.returncode == 0 and json.loads(tokens.read_text()) == {bob: "bob"}
    both = subprocess.run(command("token", "--user", "bob", "--file", str(tokens), "--revoke", "--expires-days", "1",
                                  db=db), capture_output=True, text=True, timeout=60)
    assert both.returncode == 2 and "--revoke" in both.stderr and json.loads(tokens.read_text()) == {bob: "bob"}
    bad = subprocess.run(command("token", "--user", "alice ", "--file", str(tokens), db=db), capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and json.loads(tokens.read_text()) == {bob: "bob"}
