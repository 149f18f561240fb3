"""Secrets stay secret and nothing phones home.

Database passwords and API keys must not appear in reprs, exception messages (with their chained
causes), log records, stored error columns or CLI output. A demo run and the imports of every
module make no network connection at all (no telemetry).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from navi_memory import BackendUnavailableError, MemoryStore, NaviMemoryError, Settings
from navi_memory.cli import main
from navi_memory.config import mask_password, parse_url

from .ollama_server import FakeOllama

DB_PASSWORD = "s3cr3t-db-pw"
API_KEY = "sk-test-4f9a-never-log-me"
HOST_PASSWORD = "h0st-pw"
SECRETS = (DB_PASSWORD, API_KEY, HOST_PASSWORD)
ROOT = Path(__file__).resolve().parent.parent


def assert_clean(*texts: object) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in str(text), f"secret leaked: {str(text)[:300]}"


def full_text(exc: BaseException) -> str:
    """The message, repr and the whole formatted traceback with chained causes."""
    return "".join([str(exc), repr(exc), *traceback.format_exception(exc)])


@pytest.mark.parametrize("url", [f"postgresql://navi:{DB_PASSWORD}@db.example/memory",
                                 f"postgresql://db.example/memory?user=navi&password={DB_PASSWORD}",
                                 f"postgres://navi:{DB_PASSWORD}@db.example:6543/memory?sslmode=require"])
def test_urls_and_settings_never_show_the_password(url):
    settings = Settings(url=url, ollama_host=f"http://user:{HOST_PASSWORD}@ollama.example:11434",
                        chat_host=f"http://user:{HOST_PASSWORD}@ollama.example", ollama_api_key=API_KEY,
                        chat_api_key=API_KEY)
    assert_clean(repr(settings), str(settings), repr(parse_url(url)), str(parse_url(url)), mask_password(url))
    assert "***" in str(parse_url(url)) and "db.example" in str(parse_url(url))


def test_settings_from_the_environment_never_show_keys():
    env = {"NAVI_MEMORY_URL": f"postgresql://navi:{DB_PASSWORD}@db/m", "OLLAMA_API_KEY": API_KEY,
           "EMBEDDING_OLLAMA_API_KEY": API_KEY, "OLLAMA_HOST": f"http://u:{HOST_PASSWORD}@h:11434"}
    settings = Settings.from_env(env)
    assert settings.chat_api_key == API_KEY  # kept for use, only hidden from display
    assert_clean(repr(settings))


def test_store_repr_never_shows_the_password(db_url):
    settings = Settings(url=f"postgresql://navi:{DB_PASSWORD}@db.example/memory", ollama_api_key=API_KEY)
    with MemoryStore.open(db_url, embeddings=False) as opened:
        store = MemoryStore(opened.backend, None, settings=settings)
        assert_clean(repr(store), repr(store.settings))


@pytest.mark.parametrize("url", [f"postgresql://navi:{DB_PASSWORD}@127.0.0.1:1/memorydb",
                                 f"postgresql://127.0.0.1:1/memorydb?user=navi&password={DB_PASSWORD}"])
def test_unreachable_postgres_errors_and_logs_never_show_the_password(url, caplog):
    pytest.importorskip("psycopg")
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(BackendUnavailableError) as info:
            MemoryStore.open(url, embeddings=False, backend_options={"connect_timeout": 1})
    assert "127.0.0.1" in str(info.value)
    assert_clean(full_text(info.value), caplog.text, *[r.getMessage() for r in caplog.records])


def test_cli_verbose_never_prints_the_password(capsys, caplog):
    pytest.importorskip("psycopg")
    with caplog.at_level(logging.DEBUG):
        code = main(["list", "--user", "u", "--db", f"postgresql://navi:{DB_PASSWORD}@127.0.0.1:1/memorydb",
                     "--embeddings", "none", "-v"])
    out, err = capsys.readouterr()
    assert code == 2 and "127.0.0.1" in err
    assert_clean(out, err, caplog.text)


@pytest.fixture
def failing_ollama():
    server = FakeOllama()
    server.mode = "error"
    yield server
    server.close()


def test_provider_failures_never_show_api_keys_or_host_passwords(db_url, dump, failing_ollama, caplog, clock):
    pytest.importorskip("langchain_ollama")
    host = failing_ollama.url.replace("http://", f"http://user:{HOST_PASSWORD}@")
    settings = Settings(url=db_url, ollama_host=host, ollama_api_key=API_KEY, chat_host=host, chat_api_key=API_KEY,
                        embedding_model="embed", embedding_timeout=2, chat_timeout=2)
    with caplog.at_level(logging.DEBUG):
        with MemoryStore.open(db_url, embeddings="ollama", settings=settings, chat_model="chat",
                              clock=clock) as store:
            item = store.add(user_id="u", content="I moved to Lisbon.")
            store.add_messages("s1", [{"role": "user", "content": "I live in Lisbon now, remember that."},
                                      {"role": "assistant", "content": "Noted."}], user_id="u", triggers=False)
            report = store.extract_session("s1", user_id="u")
            assert report.state == "error"
            errors = [store.get(item, user_id="u").embedding.error, report.error,
                      store.get_session("s1", user_id="u").error, repr(store), repr(store.embedder),
                      repr(store.chat_model)]
            try:
                store.embedder.reset_backoff()
                store.embedder.embed_query("x")
            except NaviMemoryError as exc:
                errors.append(full_text(exc))
    assert failing_ollama.requests.get("/api/embed") and failing_ollama.requests.get("/api/chat")
    assert_clean(*errors, caplog.text, json.dumps(dump(), default=str))


NETWORK_PROBE = r"""
import socket, sys
calls = []
def record(kind):
    def probe(*args, **kwargs):
        calls.append((kind, repr(args[1:] if kind == "connect" else args[:2])))
        raise OSError("network disabled by the test")
    return probe
socket.socket.connect = record("connect")
socket.socket.connect_ex = record("connect")
socket.create_connection = record("create_connection")
socket.getaddrinfo = record("getaddrinfo")
import io, tempfile, importlib, pkgutil
import navi_memory
for module in pkgutil.walk_packages(navi_memory.__path__, "navi_memory."):
    if ".bench" not in module.name:
        importlib.import_module(module.name)
from navi_memory import MemoryStore
from navi_memory.demo import run_demo
with tempfile.TemporaryDirectory() as folder, \
        MemoryStore.open(f"sqlite:///{folder}/demo.db", embeddings=sys.argv[1]) as store:
    out = io.StringIO()
    run_demo(store, out)
    assert "Relevant Memory" in out.getvalue()
print(calls)
"""


@pytest.mark.parametrize("embeddings", ["hashing", "none"])
def test_no_network_calls_on_import_or_use(embeddings):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NAVI_MEMORY_", "OLLAMA"))}
    proc = subprocess.run([sys.executable, "-c", NETWORK_PROBE, embeddings], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


# -- the web UI, the REST API and export -----------------------------------------------------------

WEB_TOKEN = "web-t0ken-never-print-me-42"


def test_web_apps_never_show_the_token_in_reprs_or_error_bodies(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app
    from navi_memory.ui.app import create_app

    for app in (create_api_app(store, token=WEB_TOKEN), create_app(store, token=WEB_TOKEN, host="0.0.0.0")):
        shown = [repr(app), repr(app.user_middleware), str(app.user_middleware), repr(app.routes)]
        assert not [text for text in shown if WEB_TOKEN in text], shown  # (Middleware's repr showed it)
        bodies = []
        for headers in ({}, {"Authorization": f"Bearer {WEB_TOKEN}x"}, {"Authorization": f"Bearer {WEB_TOKEN}"}):
            client = TestClient(app, base_url="http://127.0.0.1", headers=headers)
            for path in ("/api/users", f"/api/users/u/items?token={WEB_TOKEN[:-1]}", "/api/users/u/items/999999",
                         "/api/users/u/items?limit=0", "/api/elsewhere"):
                response = client.get(path, follow_redirects=False)
                assert response.status_code in (200, 303, 400, 401, 404, 422), (path, response.status_code)
                bodies.append(response.text + repr(dict(response.headers)))
        assert not [b for b in bodies if WEB_TOKEN in b or WEB_TOKEN[:-1] in b]


@pytest.fixture
def pg_url_with_password(postgres_server):
    """The test server's URL with a password (the server trusts local connections and ignores it)."""
    url = postgres_server.fresh_schema_url()
    yield f"{url}&password={DB_PASSWORD}"
    postgres_server.drop_schema(url)


@pytest.mark.parametrize("command, env", [("ui", "NAVI_MEMORY_UI_TOKEN"), ("serve", "NAVI_MEMORY_API_TOKEN")])
def test_web_start_lines_never_show_the_token_or_the_password(pg_url_with_password, monkeypatch, capsys, caplog,
                                                              command, env):
    import uvicorn

    started = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append((app, kwargs)))
    MemoryStore.open(pg_url_with_password, embeddings=False).close()  # the read-only browser needs a schema
    for args, environ in (([ "--token", WEB_TOKEN], {}), ([], {env: WEB_TOKEN})):
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        with caplog.at_level(logging.DEBUG):
            code = main([command, "--db", pg_url_with_password, "--embeddings", "none", "--host", "0.0.0.0",
                         "-v", *args])
        out, err = capsys.readouterr()
        assert code in (0, None) and "http://0.0.0.0:" in out
        assert_clean(out, err, caplog.text, repr(started[-1]))
        assert WEB_TOKEN not in out + err + caplog.text + repr(started[-1])
    unreachable = f"postgresql://navi:{DB_PASSWORD}@127.0.0.1:1/memorydb"
    assert main([command, "--db", unreachable, "--embeddings", "none", "--token", WEB_TOKEN]) == 2
    out, err = capsys.readouterr()
    assert_clean(out, err) and WEB_TOKEN not in out + err


def test_export_header_and_records_hold_no_database_url_or_password(pg_url_with_password, capsys, tmp_path):
    with MemoryStore.open(pg_url_with_password, embeddings="hashing") as store:
        store.add(user_id="u", content="a note")
        store.upsert_fact(user_id="u", category="profile", key="city", value="Lisbon")
    target = tmp_path / "export.jsonl"
    for extra in ([], ["--with-vectors"], ["--output", str(target)]):
        assert main(["export", "--db", pg_url_with_password, "--embeddings", "hashing", "--user", "u", *extra]) == 0
        out, err = capsys.readouterr()
        text = out + err + (target.read_text(encoding="utf-8") if target.exists() else "")
        header = json.loads(text.splitlines()[0] if out else target.read_text(encoding="utf-8").splitlines()[0])
        assert set(header) == {"format", "version", "embedding_model", "exported_at", "with_vectors", "record_types",
                               "users"}
        assert_clean(text)
        assert "postgresql" not in text and "search_path" not in text
