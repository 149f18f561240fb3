"""Bad input through the other two doors: the CLI (``navi_memory.cli.main``, in-process) and the
memory tools a model calls. The CLI exits 2 with one line on stderr (argparse's own usage error
for an invalid choice); a tool answers ``{"error": ...}``. Stored data is unchanged either way."""

from __future__ import annotations

import json

import pytest

from navi_memory.cli import main
from navi_memory.integrations._tools import MemoryTools

from .bad_input_support import MAX, U, seed


@pytest.fixture
def cli_db(store, db_url, dump):
    """The seeded test database (either backend) and a CLI runner returning (exit code, stdout, stderr)."""
    ids = seed(store)

    def run(capsys, *argv: str) -> tuple[int, str, str]:
        try:
            code = main([*argv, "--db", db_url, "--embeddings", "hashing"])
        except SystemExit as exc:  # argparse rejects invalid choices itself
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run, ids


SURROGATE = b"caf\xe9 bytes".decode("utf-8", "surrogateescape")  # how Python hands over a non-UTF-8 argv

CLI_BAD = [
    pytest.param(("add", "--user", U, ""), "content is empty", id="empty-content"),
    pytest.param(("add", "--user", U, "x" * (MAX + 1)), "more than the maximum", id="huge-content"),
    pytest.param(("add", "--user", U, "a\x00b"), "NUL", id="NUL-content"),
    pytest.param(("add", "--user", U, SURROGATE), "UTF-8", id="invalid-utf8-argv"),
    pytest.param(("add", "--user", "", "x"), "user_id is empty", id="empty-user"),
    pytest.param(("add", "--user", U, "x", "--type", "diary"), "invalid choice", id="invalid-enum-type"),
    pytest.param(("add", "--user", U, "x", "--theme", "!!!"), "theme", id="theme-without-letters"),
    pytest.param(("add", "--user", U, "x", "--expires-days", "nan"), "expires_days", id="nan-expiry"),
    pytest.param(("search", "--user", U, "x", "--limit", "0"), "limit must be between", id="limit-0"),
    pytest.param(("search", "--user", U, "x", "--limit", "-1"), "limit must be between", id="limit-minus-1"),
    pytest.param(("search", "--user", U, "x", "--limit", str(10**9)), "limit must be between", id="limit-1e9"),
    pytest.param(("search", "--user", U, "x", "--recency-days", "inf"), "recency_days", id="inf-recency"),
    pytest.param(("search", "--user", U, "a\x00b"), "NUL", id="NUL-query"),
    pytest.param(("list", "--user", U, "--limit", str(10**9)), "limit must be between", id="list-limit-1e9"),
    pytest.param(("list", "--user", U, "--offset", "-1"), "offset", id="negative-offset"),
    pytest.param(("get", "--user", U, "999999"), "no item 999999", id="unknown-id"),
    pytest.param(("get", "--user", U, "0"), "invalid id 0", id="id-zero"),
    pytest.param(("fact", "set", "k", "v", "--user", U, "--category", "hobbies"), "invalid choice", id="bad-category"),
    pytest.param(("fact", "set", "k", "v", "--user", U, "--category", "other", "--confidence", "101"), "confidence",
                 id="confidence-101"),
    pytest.param(("fact", "delete", "nope", "--user", U), "no fact", id="unknown-fact"),
    pytest.param(("summary", "--user", U, "--set", " "), "empty", id="empty-summary"),
]


@pytest.mark.parametrize("argv, message", CLI_BAD)
def test_cli_bad_input_exits_2_and_changes_nothing(cli_db, dump, capsys, argv, message):
    run, _ = cli_db
    before = dump()
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    if "invalid choice" not in message:
        assert len([line for line in err.splitlines() if line.strip()]) == 1
    assert dump() == before


@pytest.mark.parametrize("command", ["get", "pin", "archive", "delete", "update"])
def test_cli_another_users_id_is_not_found(cli_db, dump, capsys, command):
    run, ids = cli_db
    before = dump()
    extra = ("--content", "taken over") if command == "update" else ()
    code, _, err = run(capsys, command, "--user", U, str(ids["bob_item"]), *extra)
    assert code == 2 and f"no item {ids['bob_item']}" in err and "bob" not in err
    assert dump() == before


@pytest.mark.parametrize("query", ['NOT', '"', '* -', 'NEAR(a b)', 'col:on', "' OR '1'='1", "'; DROP TABLE items;--"])
def test_cli_search_with_query_syntax_is_safe(cli_db, dump, capsys, query):
    run, _ = cli_db
    before = dump()
    code, out, _ = run(capsys, "search", "--user", U, query, "--json")
    assert code == 0 and isinstance(json.loads(out), list)
    assert dump() == before


@pytest.mark.parametrize("payload, message", [
    ('{"messages": [', "not JSON"),
    ('"just a string"', "list of messages"),
    ('[{"role": "robot", "content": "beep"}]', "unknown role"),
    ('[{"role": "user", "content": {"a": 1}}]', "message 0"),
    ('[{"role": "user", "content": "a\\u0000b"}]', "NUL"),
])
def test_cli_ingest_of_a_malformed_transcript(cli_db, dump, capsys, tmp_path, payload, message):
    run, _ = cli_db
    path = tmp_path / "transcript.json"
    path.write_text(payload, encoding="utf-8")
    before = dump()
    code, _, err = run(capsys, "ingest", "--user", U, str(path))
    assert code == 2 and message in err
    assert dump() == before


def test_cli_bad_database_urls_exit_2_without_a_traceback(capsys):
    for url in ("mysql://u:pw@h/db", "not a url", "sqlite://relative"):
        assert main(["list", "--user", U, "--db", url, "--embeddings", "none"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "pw" not in err


# -- tools --------------------------------------------------------------------------------------------

TOOL_BAD = [
    pytest.param("memory_add_note", {"content": ""}, id="add-empty"),
    pytest.param("memory_add_note", {"content": "a\x00b"}, id="add-NUL"),
    pytest.param("memory_add_note", {"content": "x" * (MAX + 1)}, id="add-huge"),
    pytest.param("memory_add_note", {"content": "lone \ud800"}, id="add-surrogate"),
    pytest.param("memory_add_note", {"content": "ok", "type": "diary"}, id="add-invalid-type"),
    pytest.param("memory_add_note", {"content": "ok", "theme": "!!!"}, id="add-theme-without-letters"),
    pytest.param("memory_add_note", {}, id="add-missing-content"),
    pytest.param("memory_save_fact", {"category": "hobbies", "key": "k", "value": "v"}, id="fact-invalid-category"),
    pytest.param("memory_save_fact", {"category": "other", "key": "", "value": "v"}, id="fact-empty-key"),
    pytest.param("memory_save_fact", {"category": "other", "key": "k", "value": None}, id="fact-null-value"),
    pytest.param("memory_search", {"query": "x", "limit": 0}, id="search-limit-0"),
    pytest.param("memory_search", {"query": "x", "limit": -1}, id="search-limit-minus-1"),
    pytest.param("memory_search", {"query": "x", "limit": 10**9}, id="search-limit-1e9"),
    pytest.param("memory_search", {"query": "x", "status": "deleted"}, id="search-invalid-status"),
    pytest.param("memory_search", {"query": "x", "types": ["diary"]}, id="search-invalid-type"),
    pytest.param("memory_search", {"query": "a\x00b"}, id="search-NUL"),
    pytest.param("memory_search", {"query": "x", "recency_days": 0}, id="search-recency-0"),
    pytest.param("memory_get", {"item_id": 999_999}, id="get-unknown-id"),
    pytest.param("memory_get", {"item_id": "abc"}, id="get-non-integer-id"),
    pytest.param("memory_get", {"item_id": -1}, id="get-negative-id"),
    pytest.param("memory_get", {"item_id": 2**63}, id="get-id-over-64-bits"),
    pytest.param("memory_archive", {"item_id": 999_999}, id="archive-unknown-id"),
    pytest.param("memory_forget", {"key": "never-stored"}, id="forget-unknown-key"),
    pytest.param("memory_forget", {"key": "drink", "category": "bogus"}, id="forget-invalid-category"),
]


@pytest.mark.parametrize("name, args", TOOL_BAD)
@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_tools_answer_bad_arguments_with_an_error_and_change_nothing(store, dump, name, args, flavour):
    seed(store)
    tools = MemoryTools(store, U)
    before = dump()
    out = tools.run(name, **args) if flavour == "sync" else await tools.arun(name, **args)
    reply = json.loads(out)
    assert set(reply) == {"error"} and reply["error"] and len(reply["error"]) < 400
    assert dump() == before


def test_tools_reach_another_users_ids_only_as_not_found(store, dump):
    ids = seed(store)
    tools = MemoryTools(store, U)
    before = dump()
    for name in ("memory_get", "memory_archive"):
        reply = json.loads(tools.run(name, item_id=ids["bob_item"]))
        assert reply == {"error": f"no item {ids['bob_item']} for this user"}
    assert dump() == before


@pytest.mark.parametrize("query", ['NOT', '"', '*', '-x', 'NEAR(a b)', 'a:b', "' OR '1'='1"])
def test_tool_search_with_query_syntax_is_safe(store, dump, query):
    seed(store)
    before = dump()
    reply = json.loads(MemoryTools(store, U).run("memory_search", query=query))
    assert isinstance(reply["results"], list)
    assert all("bob" not in r["content_snippet"] for r in reply["results"])
    assert dump() == before


def test_framework_tools_return_schema_errors_to_the_model(store):
    from navi_memory.integrations.langchain import NaviMemoryToolkit
    from navi_memory.integrations.llamaindex import NaviMemoryToolSpec

    lc = {t.name: t for t in NaviMemoryToolkit(store=store, user_id=U).get_tools()}
    li = {t.metadata.name: t for t in NaviMemoryToolSpec(store, user_id=U).to_tool_list()}
    assert "limit" in json.loads(lc["memory_search"].invoke({"query": "x", "limit": 0}))["error"]
    assert "item_id" in json.loads(lc["memory_get"].invoke({"item_id": "abc"}))["error"]
    assert "limit" in json.loads(str(li["memory_search"].call(query="x", limit=0)))["error"]


# -- REST API and the browser UI's JSON ---------------------------------------------------------------

API = "/api/users/alice"
FACT = {"category": "profile", "key": "k", "value": "v"}
API_BAD = [  # method, path (after /api/users/alice unless it starts with /), query, JSON body, status, message
    pytest.param("POST", "/items", None, {"content": ""}, 422, "content is empty", id="empty-content"),
    pytest.param("POST", "/items", None, {"content": "   "}, 422, "content is empty", id="whitespace-content"),
    pytest.param("POST", "/items", None, {"content": "x" * (MAX + 1)}, 422, "more than the maximum", id="huge-content"),
    pytest.param("POST", "/items", None, {"content": "a\x00b"}, 422, "NUL", id="NUL-content"),
    pytest.param("POST", "/items", None, {"content": "lone \ud800"}, 422, "UTF-8", id="lone-surrogate-content"),
    pytest.param("POST", "/items", None, {"content": "x", "title": "\udfff"}, 422, "UTF-8", id="lone-surrogate-title"),
    pytest.param("POST", "/items", None, {"content": None}, 422, "must be a string", id="null-content"),
    pytest.param("POST", "/items", None, {"content": "x", "type": "diary"}, 422, "invalid type", id="invalid-type"),
    pytest.param("POST", "/items", None, {"content": "x", "theme": "!!!"}, 422, "no letters", id="theme-!!!"),
    pytest.param("POST", "/items", None, {"content": "x", "tags": 5}, 422, "tags", id="tags-not-a-list"),
    pytest.param("POST", "/items", None, {"content": "x", "embedding": [float("nan")]}, 422, "NaN", id="nan-vector"),
    pytest.param("POST", "/items", None, {"content": "x", "user_id": "bob"}, 422, "path says", id="user-in-body"),
    pytest.param("PATCH", "/items/{item}", None, {"status": "deleted"}, 422, "status", id="update-invalid-status"),
    pytest.param("PATCH", "/items/{item}", None, {"content": "a\x00b"}, 422, "NUL", id="update-NUL"),
    pytest.param("PATCH", "/items/{item}", None, {"id": 5}, 422, "cannot be set", id="update-id"),
    pytest.param("PATCH", "/items/{bob_item}", None, {"content": "taken over"}, 404, "no item", id="update-bobs-item"),
    pytest.param("DELETE", "/items/{bob_item}", None, None, 404, "no item", id="delete-bobs-item"),
    pytest.param("GET", "/items/{bob_item}", None, None, 404, "no item", id="get-bobs-item"),
    pytest.param("DELETE", "/items/999999", None, None, 404, "no item 999999", id="delete-unknown-id"),
    pytest.param("GET", "/items/0", None, None, 422, "invalid id 0", id="id-zero"),
    pytest.param("GET", f"/items/{2**63}", None, None, 422, "invalid id", id="id-over-64-bits"),
    pytest.param("GET", "/items/abc", None, None, 404, "Not Found", id="id-not-a-number"),
    pytest.param("POST", "/facts", None, {**FACT, "category": "hobbies"}, 422, "invalid category", id="fact-category"),
    pytest.param("POST", "/facts", None, {**FACT, "key": ""}, 422, "key", id="fact-empty-key"),
    pytest.param("POST", "/facts", None, {**FACT, "value": "a\x00b"}, 422, "NUL", id="fact-NUL-value"),
    pytest.param("POST", "/facts", None, {**FACT, "confidence": float("nan")}, 422, "confidence", id="fact-nan"),
    pytest.param("POST", "/facts", None, {**FACT, "confidence": "high"}, 422, "confidence", id="fact-confidence-text"),
    pytest.param("POST", "/facts", None, {**FACT, "source": "rumour"}, 422, "source", id="fact-invalid-source"),
    pytest.param("POST", "/facts", None, {**FACT, "expires_days": -1}, 422, "expires_days", id="fact-expiry"),
    pytest.param("DELETE", "/facts", {"key": "never-stored"}, None, 404, "no fact", id="delete-unknown-fact"),
    pytest.param("DELETE", "/facts", {"key": "drink", "category": "bogus"}, None, 422, "category",
                 id="delete-fact-invalid-category"),
    pytest.param("PUT", "/household", None, {"mode": "crowd"}, 422, "invalid mode", id="household-mode"),
    pytest.param("PUT", "/household", None, {"members": [{"display_name": "a\x00b"}]}, 422, "NUL",
                 id="household-NUL-name"),
    pytest.param("PUT", "/household", None, {"members": [{"display_name": "Ann", "birth_date": "yesterday"}]}, 422,
                 "birth_date", id="household-bad-date"),
    pytest.param("PUT", "/household", None, {"timezone": "localtime"}, 422, "unknown time zone",
                 id="household-machine-zone"),
    pytest.param("PUT", "/timezone", None, {"timezone": "x" * 5000}, 422, "unknown time zone", id="timezone-long"),
    pytest.param("PUT", "/timezone", None, {"timezone": "Europe/" + "x" * 5000}, 422, "unknown time zone",
                 id="timezone-long-in-a-folder"),  # tzdata reads it as a file name: was OSError, a 500
    pytest.param("PUT", "/timezone", None, {"timezone": "Europe"}, 422, "unknown time zone", id="timezone-a-folder"),
    pytest.param("PUT", "/household", None, {"timezone": "y" * 5000}, 422, "unknown time zone",
                 id="household-timezone-long"),
    pytest.param("PUT", "/timezone", None, {"timezone": ["UTC"]}, 422, "timezone", id="timezone-list"),
    pytest.param("PUT", "/timezone", None, {"timezone": "Europe/Lisbon\x00"}, 422, "unknown time zone",
                 id="timezone-NUL"),
    pytest.param("GET", "/items", {"limit": "0"}, None, 422, "limit must be between", id="list-limit-0"),
    pytest.param("GET", "/items", {"limit": "-1"}, None, 422, "limit must be between", id="list-limit-minus-1"),
    pytest.param("GET", "/items", {"limit": str(10**9)}, None, 422, "limit must be between", id="list-limit-1e9"),
    pytest.param("GET", "/items", {"limit": "1.5"}, None, 422, "limit must be an integer", id="list-limit-float"),
    pytest.param("GET", "/items", {"limit": "1_0"}, None, 422, "limit must be an integer", id="list-limit-1_0"),
    pytest.param("GET", "/items", {"limit": "\uff11\uff10"}, None, 422, "limit must be an integer",
                 id="list-limit-fullwidth-digits"),
    pytest.param("GET", "/items", {"offset": "9" * 5000}, None, 422, "offset must be an integer", id="offset-5000-digits"),
    pytest.param("GET", "/items", {"offset": "-1"}, None, 422, "offset", id="list-offset-minus-1"),
    pytest.param("GET", "/items", {"offset": str(2**63)}, None, 422, "offset", id="list-offset-2**63"),
    pytest.param("GET", "/items", {"type": "diary"}, None, 422, "invalid type", id="list-invalid-type"),
    pytest.param("GET", "/items", {"status": "gone"}, None, 422, "invalid status", id="list-invalid-status"),
    pytest.param("GET", "/search", {"q": "x", "limit": str(10**9)}, None, 422, "limit", id="search-limit-1e9"),
    pytest.param("GET", "/search", {"q": "a\x00b"}, None, 422, "NUL", id="search-NUL"),
    pytest.param("GET", "/facts", {"sort": "value; DROP TABLE facts"}, None, 422, "invalid sort", id="facts-sort"),
    pytest.param("GET", "/facts", {"category": "' OR '1'='1"}, None, 422, "invalid category", id="facts-category"),
    pytest.param("GET", "/summary", {"limit": "0"}, None, 422, "limit", id="summary-limit-0"),
    pytest.param("GET", "/api/users/%00/items", None, None, 422, "NUL", id="user-NUL"),
    pytest.param("GET", "/api/users/%20%20/items", None, None, 422, "user_id is empty", id="user-blank"),
    pytest.param("GET", f"/api/users/{'u' * 257}/facts", None, None, 422, "user_id", id="user-257-chars"),
]


@pytest.fixture
def api_client(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    return TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})


def _json_reply(response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    reply = response.json()
    assert set(reply) == {"error", "type"} and reply["error"] and len(reply["error"]) < 400
    assert "Traceback" not in response.text and "bob" not in response.text
    return reply["error"]


@pytest.mark.parametrize("method, path, query, body, status, message", API_BAD)
def test_api_bad_input_is_a_4xx_json_error_and_changes_nothing(store, dump, api_client, method, path, query, body,
                                                               status, message):
    ids = seed(store)
    url = (path if path.startswith("/api/") else API + path).format(**ids)
    before = dump()
    payload = {} if body is None else {"content": json.dumps(body).encode(),  # json.dumps keeps NaN and \\ud800
                                       "headers": {"content-type": "application/json"}}
    assert message in _json_reply(api_client.request(method, url, params=query, **payload), status)
    assert dump() == before


@pytest.mark.parametrize("raw, message", [
    pytest.param(b"{not json", "not JSON", id="malformed-json"),
    pytest.param(b'{"content": "caf\xe9"}', "not JSON", id="invalid-utf8-bytes"),
    pytest.param(b"\xff\xfe\x00", "not JSON", id="binary-body"),
    pytest.param(b'["content"]', "JSON object", id="json-list"),
    pytest.param(b'"just text"', "JSON object", id="json-string"),
    pytest.param(b"", "JSON object", id="empty-body"),
    pytest.param(b"[" * 100_000, "nested too deeply", id="deeply-nested-list"),  # was a 500 (RecursionError)
    pytest.param(b'{"a":' * 50_000, "nested too deeply", id="deeply-nested-object"),
    # which one counts differs between parsers (a proxy may check the first): neither is taken
    pytest.param(b'{"content": "a", "content": "b"}', "the key 'content' appears twice", id="repeated-key"),
    pytest.param(b'{"content": "a", "metadata": {"k": 1, "k": 2}}', "the key 'k' appears twice", id="repeated-inner-key"),
])
def test_api_bodies_that_are_not_a_json_object(store, dump, api_client, raw, message):
    seed(store)
    before = dump()
    response = api_client.post(f"{API}/items", content=raw, headers={"content-type": "application/json"})
    assert message in _json_reply(response, 400 if "JSON object" not in message else 422)
    assert dump() == before


def test_api_refuses_a_body_over_the_size_limit_with_413(store, dump, api_client, monkeypatch):
    from navi_memory.ui import api

    monkeypatch.setattr(api, "MAX_BODY_BYTES", 1000)
    seed(store)
    before = dump()
    body = json.dumps({"content": "x" * 600, "title": "y" * 600}).encode()
    for headers in ({"content-type": "application/json"}, {"content-length": "10"}):  # the header is not trusted
        response = api_client.post(f"{API}/items", content=body, headers=headers)
        assert "larger than 1000 bytes" in _json_reply(response, 413)
    assert dump() == before
    assert api_client.post(f"{API}/items", json={"content": "small enough"}).status_code == 201


@pytest.mark.parametrize("query", ['NOT', '"', '* -', 'NEAR(a b)', 'col:on', "' OR '1'='1", "'; DROP TABLE items;--",
                                   "%", "_", "$1", "%s", "\\"])
def test_api_search_and_fact_search_with_query_syntax_are_safe(store, dump, api_client, query):
    seed(store)
    before = dump()
    for path, rows in (("/search", "results"), ("/items", "results"), ("/facts", "facts")):
        response = api_client.get(API + path, params={"q": query})
        assert response.status_code == 200, response.text
        assert isinstance(response.json()[rows], list) and "bob's note" not in response.text
    assert api_client.get(f"/api/users/{query.replace('%', '%25')}/items").status_code in (200, 422)
    assert dump() == before


@pytest.mark.parametrize("app", ["api", "ui"])
@pytest.mark.parametrize("method, path", [("GET", "/api/users/%ff/items"), ("POST", "/api/users/%fe%ff/items"),
                                          ("GET", "/api/users/alice/search?q=caf%e9"), ("GET", "/users/%ed%a0%80/facts"),
                                          ("GET", "/api/users/alice/items?theme=%c3")])
def test_addresses_that_are_not_utf8_are_400_for_every_route(store, dump, api_client, app, method, path):
    """The server would decode them with U+FFFD: %ff and %fe would both be the user "\ufffd"."""
    from starlette.testclient import TestClient

    from navi_memory.ui.app import create_app

    from .ui_helpers import LOCAL

    seed(store)
    client = api_client if app == "api" else TestClient(create_app(store), base_url=LOCAL)
    before = dump()
    response = client.request(method, path, json={"content": "written under a mangled user"})
    assert response.status_code == 400 and "not valid UTF-8" in response.json()["error"], response.text
    assert dump() == before


def test_browser_ui_json_answers_bad_parameters_with_400(store, dump):
    from starlette.testclient import TestClient

    from navi_memory.ui.app import create_app

    from .ui_helpers import LOCAL

    ids = seed(store)
    ui = TestClient(create_app(store), base_url=LOCAL)
    before = dump()
    for path, params, status, message in [(f"/api/users/{U}/items", {"limit": "0"}, 400, "limit"),
                                          (f"/api/users/{U}/items", {"offset": str(2**63)}, 400, "offset"),
                                          (f"/api/users/{U}/search", {"q": "a\x00b"}, 400, "NUL"),
                                          (f"/api/users/{U}/facts", {"category": "x"}, 400, "invalid category"),
                                          (f"/api/users/{U}/items/{ids['bob_item']}", None, 404, "no item"),
                                          ("/api/users/%00/facts", None, 400, "NUL")]:
        assert message in _json_reply(ui.get(path, params=params), status), path
    assert dump() == before


LONG_ZONES = ["x" * 5000, "Europe/" + "x" * 300, "America/" + "x" * 5000, "Europe", "Europe/"]


@pytest.mark.parametrize("name", LONG_ZONES, ids=["5000", "folder-300", "folder-5000", "a-folder", "folder-slash"])
def test_a_zone_name_no_file_can_have_is_a_validation_error_everywhere(store, cli_db, dump, capsys, name):
    """With the ``tzdata`` package installed (as users have it), ZoneInfo reads a zone name as a
    path: a 5,000-character name raised OSError (a traceback, a REST 500), a folder IsADirectoryError."""
    import importlib.util

    from navi_memory import ConfigurationError, Settings, ValidationError

    assert importlib.util.find_spec("tzdata") is not None  # the case users have (the dev extra installs it)
    run, _ = cli_db
    before = dump()
    with pytest.raises(ValidationError, match="unknown time zone"):
        store.set_user_timezone(name, user_id=U)
    with pytest.raises(ValidationError, match="unknown time zone"):
        store.search("coffee", user_id=U, timezone=name)
    with pytest.raises(ValidationError, match="unknown time zone"):
        store.put_household(user_id=U, timezone=name)
    with pytest.raises(ConfigurationError, match="NAVI_MEMORY_TIMEZONE"):
        Settings.from_env({"NAVI_MEMORY_URL": "sqlite:////tmp/x.db", "NAVI_MEMORY_TIMEZONE": name})
    code, _, err = run(capsys, "timezone", "--user", U, name)
    assert code == 2 and "unknown time zone" in err and len(err) < 400
    assert dump() == before


def test_unknown_sqlite_backend_options_are_rejected_by_name(tmp_path):
    from navi_memory import MemoryStore, ValidationError

    with pytest.raises(ValidationError, match=r"unknown SQLite backend options \['replica_urls'\]"):
        MemoryStore.open(f"sqlite:///{tmp_path}/m.db", embeddings=False, backend_options={"replica_urls": ["x"]})
    assert not (tmp_path / "m.db").exists()
