"""``navi-memory mcp``, driven by the MCP SDK's own client: over stdio (the command as a real
subprocess), over streamable HTTP (the command listening on a free port, bearer tokens from a
token file) and in-process. The user comes from ``--user`` or the token, never from a tool argument."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from navi_memory import MemoryStore
from navi_memory.cli import main as cli_main
from navi_memory.errors import ConfigurationError
from navi_memory.integrations._tools import MULTI_TOOLS, TOOLS
from navi_memory.integrations.tools import output_schema
from navi_memory.integrations.mcp import HOUSEHOLD_URI, SUMMARY_URI, MemoryServer, TokenMap

ROOT = Path(__file__).resolve().parent.parent
ALICE_TOKEN, BOB_TOKEN = "alice-token-" + "a" * 20, "bob-token-" + "b" * 20
# the subprocesses import this checkout and embed with the built-in hashing embedder (no model, no network)
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "NAVI_MEMORY_EMBEDDINGS": "hashing"}


def stdio(db: str, user: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "navi_memory.cli", "mcp", "--user", user,
                                                                      "--db", db], env=ENV))


def payload(result) -> dict:
    assert result.content[0].type == "text"
    return json.loads(result.content[0].text)


async def test_stdio_server_serves_the_memory_tools_for_its_user(tmp_path):
    db = f"sqlite:///{tmp_path}/memory.db"
    with MemoryStore.open(db, embeddings="hashing") as store:
        store.set_summary("Alice lives in Berlin and keeps bees.", user_id="alice")
        bobs = store.add(user_id="bob", content="Bob's bank PIN hint: oat milk")
    async with stdio(db, "alice") as client:
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == list(TOOLS)
        for tool in listed:  # the framework tools' schemas; the user is not a parameter
            assert tool.input_schema == TOOLS[tool.name][0].model_json_schema()
            assert tool.output_schema == output_schema(tool.name)
            assert "user_id" not in json.dumps(tool.input_schema)
        added = payload(await client.call_tool("memory_add_note", {"content": "Alice drinks oat milk lattes",
                                                                     "theme": "food"}))
        assert added["status"] == "added"
        fact = payload(await client.call_tool("memory_save_fact", {"category": "profile", "key": "home_city",
                                                                    "value": "Berlin"}))
        assert fact["action"] == "added"
        summary = (await client.read_resource(SUMMARY_URI)).contents[0]
        assert "home city: Berlin" in summary.text  # a fact saved by a tool reaches the summary
        result = await client.call_tool("memory_search", {"query": "oat milk"})
        assert not result.is_error and result.structured_content == payload(result)
        ids = [r["id"] for r in payload(result)["results"]]
        assert added["id"] in ids and bobs not in ids
        assert payload(await client.call_tool("memory_get", {"item_id": added["id"]}))["theme"] == "food"
        themes = payload(await client.call_tool("memory_list_themes", {}))["themes"]
        assert {t["theme"] for t in themes} >= {"food", "profile"}
        # Bob's item is unknown to Alice's server: the framework tools' error text, flagged as an error
        denied = await client.call_tool("memory_get", {"item_id": bobs})
        assert denied.is_error and payload(denied) == {"error": f"no item {bobs} for this user"}
        # a user_id argument is not a parameter: ignored, the call stays Alice's
        sneaky = payload(await client.call_tool("memory_search", {"query": "oat milk", "user_id": "bob"}))
        assert bobs not in [r["id"] for r in sneaky["results"]]
        bad = await client.call_tool("memory_search", {"limit": 5})
        assert bad.is_error and payload(bad) == {"error": "invalid arguments: query: Field required"}
        assert payload(await client.call_tool("memory_archive", {"item_id": added["id"]}))["status"] == "archived"
        assert payload(await client.call_tool("memory_forget", {"key": "home_city"}))["deleted"] == 1
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == [SUMMARY_URI, HOUSEHOLD_URI]
        summary = (await client.read_resource(SUMMARY_URI)).contents[0]
        assert summary.text == ""  # the summary follows the facts: the only one was forgotten
    with MemoryStore.open(db, embeddings="hashing") as store:
        assert store.get(added["id"], user_id="alice").status == "archived"
        assert store.get_all_facts(user_id="alice") == []
        assert store.get(bobs, user_id="bob").status == "active"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(tmp_path):
    """``navi-memory mcp --transport http`` on a free loopback port, two tokens for two users."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE_TOKEN: "alice", BOB_TOKEN: "bob"}))
    tokens.chmod(0o600)
    db = f"sqlite:///{tmp_path}/memory.db"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "navi_memory.cli", "mcp", "--transport", "http", "--port",
                             str(port), "--tokens", str(tokens), "--db", db], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx2.get(url, timeout=5)
            break
        except httpx2.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"the MCP server did not start: {proc.communicate()[1]}") from None
            time.sleep(0.1)
    yield url, db
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert ALICE_TOKEN not in err and BOB_TOKEN not in err  # tokens never reach the log


def http_client(url: str, token: str) -> tuple:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return http, Client(streamable_http_client(url, http_client=http))


async def test_http_server_maps_each_token_to_its_own_user(http_server):
    url, db = http_server
    for token, text in ((ALICE_TOKEN, "Alice drinks oat milk"), (BOB_TOKEN, "Bob drinks oat milk too")):
        http, client = http_client(url, token)
        async with http, client:
            payload(await client.call_tool("memory_add_note", {"content": text}))
            await client.call_tool("memory_save_fact", {"category": "profile", "key": "name",
                                                        "value": text.split()[0]})
    seen = {}
    for token in (ALICE_TOKEN, BOB_TOKEN):
        http, client = http_client(url, token)
        async with http, client:
            hits = payload(await client.call_tool("memory_search", {"query": "oat milk"}))["results"]
            seen[token] = [h["content_snippet"] for h in hits]
    assert "Alice drinks oat milk" in seen[ALICE_TOKEN] and "Bob drinks oat milk too" in seen[BOB_TOKEN]
    assert not any("Bob" in s for s in seen[ALICE_TOKEN]) and not any("Alice" in s for s in seen[BOB_TOKEN])
    with MemoryStore.open(db, embeddings="hashing") as store:
        assert {u: store.get_fact("name", user_id=u).value for u in ("alice", "bob")} == \
            {"alice": "Alice", "bob": "Bob"}


async def test_http_server_refuses_requests_without_a_known_token(http_server):
    url, _ = http_server
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as http:
        for extra in ({}, {"Authorization": "Bearer not-a-known-token-at-all"}, {"Authorization": ALICE_TOKEN}):
            response = await http.post(url, json=init, headers={**headers, **extra})
            assert response.status_code == 401, extra
            assert "bearer" in response.headers["www-authenticate"].lower()
        # a session opened with Alice's token is not Bob's to use
        opened = await http.post(url, json=init, headers={**headers, "Authorization": f"Bearer {ALICE_TOKEN}"})
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        hijack = await http.post(url, json=call, headers={**headers, "Authorization": f"Bearer {BOB_TOKEN}",
                                                          "mcp-session-id": session,
                                                          "mcp-protocol-version": "2025-11-25"})
        assert hijack.status_code == 404
    http, client = http_client(url, "wrong-token-" + "x" * 20)
    with pytest.raises(Exception):  # the SDK client cannot even connect (its error does not say 401)
        async with http, client:
            pass


async def test_in_process_server_offers_household_tools_per_user(store):
    store.add_person("Tom", user_id="u1")
    store.set_household_mode("multi", user_id="u1")
    store.add_person("Sarah", user_id="u1", aliases=["mom"], role="spouse")
    async with Client(MemoryServer(store, user_id="u1").server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_find_person" in names
        assert payload(await client.call_tool("memory_find_person", {"ref": "mom"}))["person"]["display_name"] == \
            "Sarah"
        unknown = await client.call_tool("memory_nope", {})
        assert unknown.is_error and "unknown memory tool 'memory_nope'" in payload(unknown)["error"]
        assert (await client.read_resource(SUMMARY_URI)).contents[0].text == ""
        household = json.loads((await client.read_resource(HOUSEHOLD_URI)).contents[0].text)
        assert (household["mode"], household["timezone"], household["in_effect"]) == ("multi", None, "UTC")
        assert household["persons"][1] == {"display_name": "Sarah", "role": "spouse", "pronouns": None,
                                           "aliases": ["mom"], "birth_date": None, "notes": None}
        assert (household["display_name"], household["locale"]) == (None, None)
        store.set_user_timezone("Europe/Lisbon", user_id="u1")
        store.put_household(user_id="u1", display_name="The Silvas", locale="pt_pt")
        household = json.loads((await client.read_resource(HOUSEHOLD_URI)).contents[0].text)
        assert household["timezone"] == household["in_effect"] == "Europe/Lisbon"
        assert (household["display_name"], household["locale"]) == ("The Silvas", "pt-PT")
        with pytest.raises(Exception, match="unknown resource"):
            await client.read_resource("navi-memory://secrets")
    async with Client(MemoryServer(store, user_id="u2").server) as client:
        assert "memory_find_person" not in [t.name for t in (await client.list_tools()).tools]


async def test_every_tool_declares_its_output_and_returns_it_as_structured_content(store):
    """MCP 2025-06-18: a tool's outputSchema, and its result as structuredContent beside the text.
    The SDK's client checks each result against the schema itself; checked here once more."""
    store.add_person("Tom", user_id="u1")
    store.set_household_mode("multi", user_id="u1")
    store.add_person("Sarah", user_id="u1", aliases=["mom"], role="spouse")
    calls = [("memory_add_note", {"content": "Sarah plays the cello", "person": "mom", "theme": None}),
             ("memory_save_fact", {"category": "profile", "key": "home_city", "value": "Porto", "source": None}),
             ("memory_search", {"query": "cello Porto", "limit": None}), ("memory_get", {"item_id": 1}),
             ("memory_archive", {"item_id": 1}), ("memory_list_themes", {}), ("memory_find_person", {"ref": "mom"}),
             ("memory_find_person", {"ref": "nobody"}), ("memory_forget", {"key": "home_city"})]
    assert {name for name, _ in calls} == set(MULTI_TOOLS)
    async with Client(MemoryServer(store, user_id="u1").server) as client:
        declared = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        assert declared == {name: output_schema(name) for name in MULTI_TOOLS}
        for name, args in calls:
            result = await client.call_tool(name, args)
            assert not result.is_error, payload(result)
            assert result.structured_content == payload(result)
            jsonschema.validate(result.structured_content, declared[name])
        failed = await client.call_tool("memory_get", {"item_id": 999})  # an error: text only, flagged
        assert failed.is_error and failed.structured_content is None


@pytest.mark.parametrize("args, message", [
    (["mcp"], "the stdio server acts for one user: pass --user"),
    (["mcp", "--transport", "http"], "needs a token file mapping tokens to users"),
    (["mcp", "--transport", "http", "--user", "alice"], "over HTTP the user comes from the bearer token"),
])
def test_mcp_command_refuses_an_unsafe_setup(tmp_path, capsys, args, message):
    assert cli_main([*args, "--db", f"sqlite:///{tmp_path}/m.db", "--embeddings", "none"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    ('{"short": "alice"}', "at least 16 characters"),
    (json.dumps({ALICE_TOKEN: " alice"}), "invalid user id"),
    ("{}", "maps no tokens"),
    (f'["{ALICE_TOKEN}"]', "must hold a JSON object"),
    (f'{{"{ALICE_TOKEN}": ', r"is not JSON \(line 1\)"),
])
def test_token_file_errors_never_show_the_tokens(tmp_path, content, message):
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message) as raised:
        TokenMap.load(path)
    assert ALICE_TOKEN not in str(raised.value)


def test_token_map_lookup_and_repr(tmp_path):
    tokens = TokenMap({ALICE_TOKEN: "alice", BOB_TOKEN: "bob"})
    assert (tokens.user_for(ALICE_TOKEN), tokens.user_for(BOB_TOKEN), tokens.user_for("x" * 30)) == \
        ("alice", "bob", None)
    assert repr(tokens) == "TokenMap(2 tokens)"


@pytest.mark.postgres
async def test_stdio_server_on_postgres(postgres_server):
    url = postgres_server.fresh_schema_url()
    try:
        async with stdio(url, "alice") as client:
            added = payload(await client.call_tool("memory_add_note", {"content": "Alice grows tomatoes"}))
            hits = payload(await client.call_tool("memory_search", {"query": "tomatoes"}))["results"]
            assert [h["id"] for h in hits] == [added["id"]]
        async with stdio(url, "bob") as client:
            assert payload(await client.call_tool("memory_search", {"query": "tomatoes"})) == {"results": [], "hidden": 0}
    finally:
        postgres_server.drop_schema(url)
